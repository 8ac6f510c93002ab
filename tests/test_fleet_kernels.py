"""A study run over kernels on a fleet (`fslab run STUDY --kernel K … --on HOSTS`), pure lane: the
unit's kernels as its study run's settings carry them (fleet/units.py), decoded or refused; the
one naming rule of a kernel's host (model/kernel_hosts.py) and `fslab compare --kernels`
reading it back; each worker's share run by lab/study.py's run_unit_on_kernels with a stand-in
VM (tests/test_lab_study.py's FakeLab) into one shared database, taken again after a stop; and a
worker of another fslab, or of another format of kernels, refusing the unit before anything runs.
The real thing, workers in namespaces booting a VM: tests/test_fleet_kernels_root.py."""

from __future__ import annotations

import re
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from conftest import fslab_in_process
from fslab import version
from fslab.core.errors import FslabError
from fslab.core.workdir import Workdir
from fslab.fleet import units, versions
from fslab.fleet.hostlock import HostLockLost
from fslab.fleet.steady import SteadyResults
from fslab.fleet.worker import Unit, run_unit
from fslab.lab import study as lab_study
from fslab.model import Host
from fslab.model.kernel_hosts import HOST, kernel_host, named_kernel
from fslab.report.summary import kernel_hosts
from fslab.results import ResultsDB
from fslab.results.schema import runs as runs_table, study_runs
from fslab.running.plan import Repetitions
from fslab.running.runner import study_run_settings
from fslab.statistics.analysis import AnalysisError
from test_lab_study import STUDY, A, B, FakeLab, _study


def test_a_kernels_host_is_named_by_its_release_here_and_by_release_at_worker_on_a_fleet():
    assert kernel_host(A, "box") == A and kernel_host(HOST, "box") == "box"
    assert kernel_host(A, "w1", worker=True) == f"{A}@w1" and kernel_host(HOST, "w1", worker=True) == "w1"
    assert named_kernel(f"{B}@w2") == (B, "w2") and named_kernel("host@w1") == ("host", "w1")
    assert named_kernel(A) == (A, None) and named_kernel("@w1") == ("@w1", None) and named_kernel("x@") == ("x@", None)


def test_a_units_kernels_are_encoded_in_its_settings_and_decoded_or_refused():
    share = units.KernelShare((A, HOST), 2)
    assert units.kernel_share({"lab": share.encoded()}, "here") == share
    assert units.kernel_share({"runs": 2}, "here") is None, "a plain unit of its host"
    with pytest.raises(versions.UnitRefused, match=r"study run 7 runs over kernels as format 2 says.*knows format 1"):
        units.kernel_share({"lab": share.encoded() | {"format": 2}}, "study run 7")
    with pytest.raises(versions.UnitRefused, match="format None"):  # a local run's, or an fslab's before this
        units.kernel_share({"lab": {"kernels": [A], "boots": 1, "failed": []}}, "study run 7")
    for bad, said in (
        ({"kernels": []}, "name no kernels"),
        ({"kernels": [A, 3]}, "name no kernels"),
        ({"boots": 0}, "boots 0 is not a number of boots"),
        ({"boots": True}, "boots True"),
    ):
        with pytest.raises(units.BadUnit, match=said):
            units.kernel_share({"lab": share.encoded() | bad}, "study run 7")
    with pytest.raises(units.BadUnit, match="not a table of kernels"):
        units.kernel_share({"lab": [A]}, "study run 7")


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ({"done": "w1"}, r"lab\.done is not a list"),
        (
            {"done": [{"host": "w1", "boot": 1}, {"host": "w1", "boot": "2"}]},
            r"lab\.done\[1\] is not a table of host \(str\), boot \(int\)",
        ),
        ({"done": [["w1", 1]]}, r"lab\.done\[0\] is not a table"),
        (
            {"failed": [{"kernel": A, "boot": 1, "why": "x"}]},
            r"lab\.failed\[0\] is not a table of host \(str\), kernel \(str\), boot \(int\), why \(str\)",
        ),
        ({"failed": [{"host": "w1", "kernel": A, "boot": True, "why": "x"}]}, r"lab\.failed\[0\]"),
        ({"failed": [{"host": "w1", "kernel": A, "boot": 1, "why": None}]}, r"lab\.failed\[0\]"),
    ],
)
def test_what_a_units_workers_recorded_is_checked_and_a_malformed_entry_refused_naming_it(bad, said):
    """The database is untrusted: an entry the rounds would read with .get or f["kernel"] is refused here."""
    share = units.KernelShare((A,), 2)
    good = {"done": [{"host": f"{A}@w1", "boot": 1}], "failed": [{"host": "w1", "kernel": A, "boot": 2, "why": "x"}]}
    assert units.kernel_share({"lab": share.encoded() | good}, "study run 7") == share
    with pytest.raises(units.BadUnit, match=f"study run 7: its settings' {said}"):
        units.kernel_share({"lab": share.encoded() | bad}, "study run 7")


def _fleet_run(db: SteadyResults, tmp_path: Path, kernels: list[str], boots: int) -> int:
    """A fleet's study run over kernels as dispatch.begin stores it (its queue aside)."""
    study = _study(tmp_path)
    settings = (
        Repetitions(2).describe()
        | study_run_settings(study, [])
        | {"lab": units.KernelShare(tuple(kernels), boots).encoded()}
    )
    return db.begin_study_run(study, 7, {"fslab": version()}, {}, settings, None)


def _unit(
    db: SteadyResults, tmp_path: Path, study_run_id: int, worker: str, lab: FakeLab, **given: Any
) -> tuple[dict, list]:
    """One worker's unit: its share of the study run, as the worker runs it (lab decoded from the
    database); `given`: run_unit_on_kernels' other arguments (a fence, a check, another boot)."""
    said: list[str] = []
    row = db.study_run(study_run_id)
    assert row is not None
    settings = row["settings"]
    machine = Host(worker, f"machine-{worker}", "6.18.0-test", "cpu", 2, 2**32)
    return lab_study.run_unit_on_kernels(
        _study(tmp_path), settings["lab"], results=db, study_run_id=study_run_id, plan_seed=7,
        repetitions=Repetitions(2), work=Workdir(tmp_path / f"wd-{worker}"), machine=machine, say=said.append,
        **({"prepare": lab.prepare, "boot": lab.boot} | given),
    )  # fmt: skip


def test_two_workers_booting_the_same_kernels_store_their_runs_as_hosts_of_their_own(tmp_path):
    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A, B], boots=2)
    for worker in ("w1", "w2"):
        lab = FakeLab(tmp_path)
        outcome, failed = _unit(db, tmp_path, study_run, worker, lab)
        assert [c for c in lab.calls if c[0] == "boot"] == [("boot", k) for _ in range(2) for k in (A, B)]
        assert failed == [] and f"ext4 · seq_write @ {A}@{worker}" in outcome
    runs = db.runs(study_run)
    hosts = {f"{k}@{w}" for k in (A, B) for w in ("w1", "w2")}
    assert {r["host"] for r in runs} == hosts and len(runs) == 4 * 2 * (2 + 2 + 4), "4 hosts × 2 boots × 8 runs"
    for host in hosts:
        ext4 = sorted(r["repetition"] for r in runs if r["host"] == host and r["target"] == "ext4")
        assert ext4 == [1, 2, 3, 4], "each host's boots numbered apart, never merged with another worker's"
    facts = {h.name: h for h in db.hosts(study_run)}
    assert set(facts) == hosts and facts[f"{A}@w1"].kernel == A and facts[f"{B}@w2"].accelerator == "kvm"
    lab_settings = db.study_run(study_run)["settings"]["lab"]
    assert sorted((d["host"], d["boot"]) for d in lab_settings["done"]) == sorted((h, b) for h in hosts for b in (1, 2))

    # `fslab compare --kernels` reads the names back: one worker's kernels, or refused naming the form
    assert kernel_hosts(db, study_run, (f"{A}@w1", f"{B}@w1")) == (f"{A}@w1", f"{B}@w1")
    with pytest.raises(AnalysisError, match=rf"kernel '{A}' ran on 2 hosts .* name one as KERNEL@WORKER \(e.g. {A}@w"):
        kernel_hosts(db, study_run, (A, f"{B}@w1"))
    with pytest.raises(AnalysisError, match=rf"no measured run .* ran kernel '{A}@w3'"):
        kernel_hosts(db, study_run, (f"{A}@w3", f"{B}@w1"))
    # and the progress table counts a kernel's runs as its worker's unit's
    units.queued(db.engine, study_run, ["w1", "w2"])
    assert {p.host: p.done for p in units.progress(db.engine, study_run)} == {"w1": 32, "w2": 32}


def test_a_unit_taken_again_runs_only_the_boots_not_recorded_done_and_keeps_failed_kernels_out(tmp_path):
    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A, B, "6.1.0-46-amd64"], boots=2)
    stopped = FakeLab(tmp_path, interrupt_at=3, unpreparable={"6.1.0-46-amd64"})  # Ctrl-C as A's boot 2 begins
    with pytest.raises(KeyboardInterrupt):
        _unit(db, tmp_path, study_run, "w1", stopped)
    assert [c[1] for c in stopped.calls if c[0] == "boot"] == [A, B, A]
    again = FakeLab(tmp_path)
    _, failed = _unit(db, tmp_path, study_run, "w1", again)
    assert [c[1] for c in again.calls if c[0] == "boot"] == [A, B], "boot 2 of each; boot 1 stored already"
    assert ("prepare", "6.1.0-46-amd64") not in again.calls, "a kernel failed before stays out"
    assert [(f["kernel"], f["host"]) for f in failed] == [("6.1.0-46-amd64", "6.1.0-46-amd64@w1")]
    runs = db.runs(study_run)
    for host in (f"{A}@w1", f"{B}@w1"):
        ext4 = sorted(r["repetition"] for r in runs if r["host"] == host and r["target"] == "ext4")
        assert ext4 == [1, 2, 3, 4] and len({r["boot_id"] for r in runs if r["host"] == host}) == 2


def test_a_units_release_is_checked_before_anything_runs(tmp_path):
    """The database's text: a release not of Debian's shape never reaches apt, nor any boot."""
    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A, "6.1; reboot"], boots=1)
    lab = FakeLab(tmp_path)
    with pytest.raises(FslabError, match="'6.1; reboot' is not a Debian kernel release"):
        _unit(db, tmp_path, study_run, "w1", lab)
    assert lab.calls == [] and db.runs(study_run) == []


def test_a_unit_whose_every_kernel_fails_fails_naming_each_why(tmp_path):
    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A], boots=1)
    with pytest.raises(lab_study.LabStudyError, match=rf"no kernel ran here: {A}: its VM did not boot or hung"):
        _unit(db, tmp_path, study_run, "w1", FakeLab(tmp_path, unbootable={A}))
    (failed,) = db.study_run(study_run)["settings"]["lab"]["failed"]
    assert failed["host"] == f"{A}@w1" and "stored no results" in failed["why"] and db.runs(study_run) == []


@pytest.mark.parametrize(
    ("made_by", "format_", "said"),
    [
        ("0.0.9", 1, "was made by fslab 0.0.9, and this worker runs fslab"),
        (None, 99, "runs over kernels as format 99 says, and this worker knows format 1"),
    ],
)
def test_a_worker_refuses_a_unit_over_kernels_of_another_fslab_or_format_before_anything_runs(
    tmp_path, made_by, format_, said
):
    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A], boots=1)
    settings = db.study_run(study_run)["settings"]
    with db.engine.begin() as conn:
        conn.execute(
            study_runs.update()
            .where(study_runs.c.id == study_run)
            .values(
                fslab_version=made_by or version(), settings=settings | {"lab": settings["lab"] | {"format": format_}}
            )
        )
    units.queued(db.engine, study_run, ["w1"])
    host = Host("w1", str(uuid.uuid4()), "6.18.0-test", "cpu", 2, 2**32)
    told: list[str] = []
    with pytest.raises(versions.UnitRefused, match=said):
        run_unit(Unit(study_run, "w1"), db, host, Workdir(tmp_path / "wd"), told.append)
    assert db.runs(study_run) == [] and not (tmp_path / "wd").exists(), "nothing ran, nothing was made"
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT state FROM fleet_units")).scalar() == "queued"


def test_what_cannot_go_with_kernels_on_a_fleet_is_refused_with_why_before_anything_is_stored(tmp_path):
    study = tmp_path / "kernels.toml"
    study.write_text(STUDY)
    location = str(tmp_path / "fslab.db")
    for extra, said in (
        (["--spread"], "--spread cannot go with --kernel: each worker boots its own kernels"),
        (["--target-ci", "5"], "--target-ci cannot go with --kernel"),
        (["--destroy-data", "/dev/sdz"], "--destroy-data cannot go with --on"),
    ):
        result = fslab_in_process("run", str(study), "--kernel", A, "--on", "w1", *extra, "--db", location)
        assert result.returncode == 2 and said in " ".join(result.stderr.split()), result.stderr
    on_sqlite = fslab_in_process("run", str(study), "--kernel", A, "--kernel", "host", "--on", "w1", "--db", location)
    assert on_sqlite.returncode == 2 and "postgresql" in on_sqlite.stderr.lower(), on_sqlite.stderr
    assert "Traceback" not in on_sqlite.stderr and not ResultsDB(location).study_runs()


_LOST = sa.exc.OperationalError("INSERT", {}, Exception("server closed the connection unexpectedly"))


@pytest.mark.parametrize("stop", ["right after a boot's runs were stored", "as its share was recorded done"])
def test_a_unit_taken_again_after_its_worker_stopped_between_storing_a_boot_and_recording_it_stores_it_once(
    tmp_path, monkeypatch, stop
):
    """A boot's runs and its share's record in `lab.done` are one transaction: a worker dying (or its
    connection dropping) at any point leaves both or neither, and its next worker never runs the
    boot again on top of runs stored."""
    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A], boots=2)
    if stop.startswith("right after"):
        storing = lab_study.append_runs

        def dies(*args: Any, **kwargs: Any) -> list[dict]:
            storing(*args, **kwargs)
            raise _LOST

        monkeypatch.setattr(lab_study, "append_runs", dies)
    else:  # the write recording a share done fails once, however it is written
        fired: list[str] = []

        def fails(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
            recording = statement.lstrip().upper().startswith("UPDATE STUDY_RUNS")
            if recording and re.search(r'"done":\s*\[\{', str(parameters)) and not fired:
                fired.append(statement)
                raise _LOST

        sa.event.listen(db.engine, "before_cursor_execute", fails)
    stopped = FakeLab(tmp_path)
    with pytest.raises(sa.exc.OperationalError):
        _unit(db, tmp_path, study_run, "w1", stopped)
    monkeypatch.undo()
    assert [c[1] for c in stopped.calls if c[0] == "boot"] == [A], "the worker stopped at its first boot"
    again = FakeLab(tmp_path)
    _unit(db, tmp_path, study_run, "w1", again)
    booted = [c[1] for c in again.calls if c[0] == "boot"]
    # stopped after the commit: boot 1 stored and recorded, boot 2 alone runs; within it: neither, both run
    assert booted == ([A] if stop.startswith("right after") else [A, A])
    runs = db.runs(study_run)
    assert (len(runs), len({r["boot_id"] for r in runs})) == (16, 2), "after retake: 16 runs in 2 boots"
    assert sorted(r["repetition"] for r in runs if r["target"] == "ext4") == [1, 2, 3, 4]
    done = db.study_run(study_run)["settings"]["lab"]["done"]
    assert sorted((d["host"], d["boot"]) for d in done) == [(f"{A}@w1", 1), (f"{A}@w1", 2)]


def test_a_boot_stored_after_its_units_lease_was_taken_stores_neither_its_runs_nor_its_record(tmp_path):
    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A], boots=1)

    def taken(conn: sa.Connection) -> None:
        raise lab_study.LabStudyError("study run's unit on w1 was taken by another worker")

    with pytest.raises(lab_study.LabStudyError, match="taken by another worker"):
        _unit(db, tmp_path, study_run, "w1", FakeLab(tmp_path), fence=taken)
    assert db.runs(study_run) == [] and db.study_run(study_run)["settings"]["lab"]["done"] == []


def test_a_kernel_failing_at_a_later_boot_after_earlier_boots_stored_runs_fails_its_share_not_the_unit(tmp_path):
    """docs/fleet.md: the unit fails only when none of its kernels ran (stored a share)."""
    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A], boots=2)
    lab = FakeLab(tmp_path)

    def boots_once(kernel: Any, command: str, **options: Any) -> Any:
        booted = lab.boot(kernel, command, **options)
        lab.unbootable.add(kernel.release)  # its next boot does not come up
        return booted

    _, failed = _unit(db, tmp_path, study_run, "w1", lab, boot=boots_once)
    assert [(f["kernel"], f["boot"], f["host"]) for f in failed] == [(A, 2, f"{A}@w1")]
    assert len(db.runs(study_run)) == 8, "boot 1's runs stored"
    again = FakeLab(tmp_path)  # taken again before it settled: boot 1 recorded done, A failed at boot 2
    _, failed = _unit(db, tmp_path, study_run, "w1", again)
    assert again.calls == [] and [f["boot"] for f in failed] == [2]


class _LosingHostLock:
    """fleet/hostlock.py's HostLock as a worker holds it: lost after `kept` checks (another worker
    of its name took it while this one's lock session was cut off)."""

    def __init__(self, kept: int):
        self.kept, self.checked = kept, 0

    @contextmanager
    def held(self, waiting: Any) -> Any:
        yield True

    def check(self, waiting: Any) -> None:
        self.checked += 1
        if self.checked > self.kept:
            raise HostLockLost("another worker named w1 holds its host lock now")


def test_a_unit_of_vm_kernels_checks_its_host_lock_before_each_boot(tmp_path):
    """No run on the host itself ever asks (_UnitObserver.starting): each share does."""
    from functools import partial

    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A, B], boots=1)
    units.queued(db.engine, study_run, ["w1"])
    lab, lock = FakeLab(tmp_path), _LosingHostLock(kept=1)
    host = Host("w1", str(uuid.uuid4()), "6.18.0-test", "cpu", 2, 2**32)
    on_kernels = partial(lab_study.run_unit_on_kernels, prepare=lab.prepare, boot=lab.boot)
    with pytest.raises(HostLockLost):
        run_unit(Unit(study_run, "w1"), db, host, Workdir(tmp_path / "wd"), [].append, hostlock=lock,
                 on_kernels=on_kernels)  # fmt: skip
    assert [c[1] for c in lab.calls if c[0] == "boot"] == [A] and lock.checked == 2, "B never booted"
    assert {r["host"] for r in db.runs(study_run)} == {f"{A}@w1"}


def test_compare_kernels_at_a_worker_names_that_workers_vm_never_its_bare_metal(tmp_path):
    """Worker w1 ran A on bare metal (host "w1") and its VM of A stored nothing; w2 ran A in a VM."""
    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A, B], boots=1)
    _unit(db, tmp_path, study_run, "w1", FakeLab(tmp_path, unbootable={A}))
    with db.engine.begin() as conn:  # B@w1's runs, as if run by w1's own kernel, A, on bare metal
        conn.execute(runs_table.update().where(runs_table.c.host == f"{B}@w1").values(host="w1"))
    db.record_host(study_run, Host("w1", "machine-w1", A, "cpu", 2, 2**32, accelerator="host"))
    _unit(db, tmp_path, study_run, "w2", FakeLab(tmp_path))
    with pytest.raises(AnalysisError, match=rf"no measured run .* ran kernel '{A}@w1'"):
        kernel_hosts(db, study_run, (f"{A}@w1", f"{B}@w2"))
    assert kernel_hosts(db, study_run, ("host@w1", f"{A}@w2")) == ("w1", f"{A}@w2")
    assert kernel_hosts(db, study_run, (A, B)) == (f"{A}@w2", f"{B}@w2"), "a release: its VM's host first"


def test_a_kernel_left_out_on_two_workers_is_said_once_for_each(tmp_path):
    from fslab.report.formats.markdown import to_markdown
    from fslab.report.summary import summarize_study_run

    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A, B], boots=1)
    for worker in ("w1", "w2"):
        _unit(db, tmp_path, study_run, worker, FakeLab(tmp_path, unbootable={B}))
    text = " ".join(to_markdown(summarize_study_run(db, study_run)).split())
    for worker in ("w1", "w2"):
        assert f"Kernel {B} left out at boot 1 on host {B}@{worker}: its VM did not boot" in text, text


DEVICE_STUDY = (
    '[study]\nname = "mine"\n\n[[workload]]\nname = "w"\nrw = "write"\nbs = "1m"\nsize = "32MiB"\n\n'
    '[[target]]\nname = "disk"\nfilesystem = "ext4"\ndevice = "/dev/sdz"\n'
)


def test_a_study_a_fleets_workers_would_all_fail_is_refused_before_anything_is_stored(tmp_path):
    """A release not of Debian's shape, or a study on the user's devices (never told to add
    --destroy-data, which --on refuses): refused before the study run is stored, its units queued."""
    study, devices = tmp_path / "kernels.toml", tmp_path / "mine.toml"
    study.write_text(STUDY)
    devices.write_text(DEVICE_STUDY)
    location = str(tmp_path / "fslab.db")
    for given, said in (
        ([str(study), "--kernel", "6.1;x"], "--kernel: kernel '6.1;x' is not a Debian kernel release"),
        ([str(study), "--kernel", A, "--kernel", "host", "--kernel", "x"], "kernel 'x' is not a Debian kernel"),
        ([str(devices), "--kernel", A], "names the user's device(s) /dev/sdz: a study on a user's devices cannot go"),
    ):
        result = fslab_in_process("run", *given, "--on", "w1", "--db", location)
        told = " ".join(result.stderr.split())
        assert result.returncode == 2 and said in told, result.stderr
        assert "Traceback" not in told and "--destroy-data DEVICE" not in told and "postgresql" not in told.lower()
    assert not Path(location).exists() or not ResultsDB(location).study_runs()


def test_fslab_status_shows_a_kernel_units_lab_line_while_its_vm_boots(tmp_path):
    """A VM's runs are told as its boot ends: without the lab's own lines the progress table showed
    no run under way for the whole boot."""
    from functools import partial

    db = SteadyResults(str(tmp_path / "fleet.db"), lambda line: None)
    study_run = _fleet_run(db, tmp_path, [A, B], boots=1)
    units.queued(db.engine, study_run, ["w1"])
    lab = FakeLab(tmp_path)
    shown: list[str] = []

    def boot(kernel, command, **options):  # noqa: ANN001, ANN202
        shown.extend(p.current for p in units.progress(db.engine, study_run))
        return lab.boot(kernel, command, **options)

    host = Host("w1", str(uuid.uuid4()), "6.18.0-test", "cpu", 2, 2**32)
    on_kernels = partial(lab_study.run_unit_on_kernels, prepare=lab.prepare, boot=boot)
    run_unit(Unit(study_run, "w1"), db, host, Workdir(tmp_path / "wd"), [].append, on_kernels=on_kernels)
    assert len(shown) == 2 and all("booting" in line for line in shown), shown
    assert A in shown[0] and B in shown[1], shown
    assert [p.current for p in units.progress(db.engine, study_run)] == [""], "the unit done: nothing under way"
