"""`fslab run --kernel … --boots N` (lab/study.py) with a stand-in VM (pure lane): each fake boot
"runs" the plan by writing a real guest database with fslab's own code (tests/synthetic.py), from
the very command and study file fslab gave the guest; the host stores each boot's runs as it ends.
The real thing, under QEMU, is tests/test_lab_study_guest.py."""

from __future__ import annotations

import json
import random
import shlex
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from fslab.core.errors import FslabError
from fslab.core.workdir import Workdir
from fslab.lab import hygiene, progress, study as lab_study, vm
from fslab.model import Host
from fslab.model.ceiling import with_ceiling
from fslab.results import ResultsDB
from fslab.running.plan import Repetitions
from fslab.running.resume import CannotResume, resumable
from fslab.study import load_study, parse_study
from synthetic import store_study_run
from test_hygiene import FakeSysfs

STUDY = """
[study]
name = "kernels"
repetitions = 2
image_size = "320MiB"
image_fill = "sparse"

[[workload]]
name = "seq_write"
rw = "write"
bs = "1m"
direct = 1
size = "32MiB"
runtime = "1s"

[[target]]
filesystem = "ext4"

[[target]]
filesystem = "btrfs"
"""

A, B, BAD = "6.1.0-55-amd64", "6.12.117+deb12-amd64", "6.1.0-47-amd64"
OOPS = "BUG: kernel NULL pointer dereference, address: 0000000000000000 in ext4_mb_load_buddy_gfp+0xbc/0x380 [ext4]"


class Refused(FslabError):
    pass


@dataclass
class FakeLab:
    """kernels.prepare and vm.boot stand-ins: what was asked, in order; a boot stores the plan its
    command asks for in the share, as fslab in the guest would."""

    tmp: Path
    unbootable: set[str] = field(default_factory=set)
    unpreparable: set[str] = field(default_factory=set)
    refusing: set[str] = field(default_factory=set)  # fslab in the guest refuses the study there
    damaging: set[str] = field(default_factory=set)  # its guest leaves a damaged database (a crash mid-copy)
    crashing: set[str] = field(default_factory=set)  # the guest's kernel oopses (vm.boot raises)
    interrupt_at: int | None = None  # the boot (1-based, over all kernels) at which Ctrl-C comes
    speed: dict[str, float] = field(default_factory=dict)  # each kernel's throughput factor
    emulated: set[str] = field(default_factory=set)  # kernels whose VM ran under TCG (else KVM)
    boot_noise: float = 0.0  # each boot's own level: a factor drawn once per boot
    calls: list[tuple[str, str]] = field(default_factory=list)
    booted: list[dict] = field(default_factory=list)
    options: list[dict] = field(default_factory=list)
    hygiene: list[dict] = field(default_factory=list)  # the host's settings as each boot found them
    told: Told | None = None  # the host's observer: each run's line waited for there before the next is written

    def _tell(self, path: Path, db: ResultsDB) -> None:
        """Each run's end written to the progress file as the guest's fslab writes it (GuestProgress),
        the host's line for it waited for before the next: told while the boot runs."""
        from conftest import wait_for

        writer = progress.GuestProgress(path, Quiet())
        told = self.told
        for run in db.runs(db.study_runs()[0]["id"]):
            before = len(told.lines) if told else 0
            fields = ("target", "workload", "warmup", "repetition", "status", "error")
            writer.finished(None, SimpleNamespace(**{k: run[k] for k in fields}))
            if told is not None:
                wait_for("the host to tell the run", lambda: len(told.lines) > before, deadline=30, every=0.01)  # noqa: B023

    def prepare(self, release: str, *, say=None):  # noqa: ANN001, ANN201
        self.calls.append(("prepare", release))
        if release in self.unpreparable:
            raise Refused(f"kernel {release}: the archive offers no linux-image-{release}")
        return SimpleNamespace(release=release, package_version="1.0")

    def boot(self, kernel, command: str, *, share: Path, **options):  # noqa: ANN001, ANN201
        self.options.append(options)  # vm.boot's setup and spec (lab/openzfs.py's for_guest)
        self.calls.append(("boot", kernel.release))
        journal = options.get("journal")
        self.hygiene.append(
            {
                "found": hygiene.read(),
                "pinned": hygiene.pin_cpus(1),
                "journal": journal.outstanding() if journal else None,
            }
        )
        if self.interrupt_at is not None and sum(c[0] == "boot" for c in self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        if kernel.release in self.crashing:
            raise vm.GuestCrashed(kernel.release, OOPS, console=f"[   10.6] {OOPS}\n[   10.7] {vm.OOPS_PANIC}\n")
        if kernel.release in self.unbootable:
            return SimpleNamespace(
                status=None, output="", console="Kernel panic - not syncing: VFS", share=share, seconds_to_command=None
            )
        if kernel.release in self.damaging:
            (share / "results.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 2000)
            host = Host(kernel.release, "m", kernel.release, "QEMU Virtual CPU", 1, 2**31, accelerator="tcg")
            return SimpleNamespace(status=0, output="", console="", share=share, host=host, boot_id="b")
        if kernel.release in self.refusing:  # as `fslab run` leaves it: its database opened, no study run
            ResultsDB(str(share / "results.db")).engine.dispose()
            said = "the study cannot run here; nothing was attached or formatted:\n  btrfs: no btrfs module"
            host = Host(kernel.release, "m", kernel.release, "QEMU Virtual CPU", 1, 2**31, accelerator="tcg")
            return SimpleNamespace(status=2, output=said, console="", share=share, host=host, boot_id="b")
        argv = shlex.split(command.split(";")[0])
        options = dict(zip(argv[5::2], argv[6::2])) | {"study": argv[4]}
        self.booted.append({"release": kernel.release, "argv": argv, "options": options, "command": command})
        study = load_study(share / "study.toml", scale=float(options.get("--scale", 1.0)))
        if "--lab-cell" in argv:  # as the guest's `fslab run` cuts it (fslab bisect's one cell)
            at = argv.index("--lab-cell")
            study = study.only(argv[at + 1], argv[at + 2])
        study = with_ceiling(study, "--no-ceiling" in argv, set())
        seed = int(options["--seed"])
        rng = random.Random(seed)
        level = self.speed.get(kernel.release, 1.0) * (1 + self.boot_noise * rng.uniform(-1, 1))
        db = ResultsDB(str(share / "results.db"))
        store_study_run(
            db, study, seed=seed, rng=rng, scale={"ext4": level, "btrfs": 0.5 * level, "(ceiling)": 1.5 * level},
            repetitions=Repetitions(int(options["--runs"]), int(options["--warmup"])),
            env={"kernel": kernel.release},
        )  # fmt: skip
        self._tell(share / Path(argv[argv.index("--lab-progress") + 1]).name, db)
        db.engine.dispose()
        # kvm: real figures of speed (emul's gate withholds an emulated host's), of one VM shape
        accelerator = "tcg" if kernel.release in self.emulated else "kvm"
        host = Host(kernel.release, "m", kernel.release, "QEMU Virtual CPU", 1, 2**31, accelerator=accelerator)
        return SimpleNamespace(status=0, output="", console="", share=share, host=host, boot_id=str(uuid.uuid4()))


class Quiet:
    """The guest fslab's own progress display: nothing, here."""

    def notice(self, message: str) -> None:
        pass

    def finished(self, planned, record) -> None:  # noqa: ANN001
        pass


class Told:
    """A RunObserver that keeps what it is told."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def announce(self, study, skipped) -> None:  # noqa: ANN001
        self.lines.append(f"announce {study.name}")

    def notice(self, message: str) -> None:
        self.lines.append(message)

    def starting(self, planned, index, total) -> None:  # noqa: ANN001
        pass

    def finished(self, planned, record) -> None:  # noqa: ANN001
        pass

    def already_stored(self, planned, index, total) -> None:  # noqa: ANN001
        pass


def _study(tmp_path: Path, text: str = STUDY):
    path = tmp_path / "kernels.toml"
    path.write_text(text)
    return with_ceiling(load_study(path), False, set())


def _run(tmp_path: Path, lab: FakeLab, kernels: list[str], boots: int, observer=None, **options):  # noqa: ANN001, ANN202
    db = ResultsDB(str(tmp_path / "host.db"))
    study_run = lab_study.run_on_kernels(
        _study(tmp_path), kernels, results=db, workdir=tmp_path / "wd", boots=boots, observer=observer,
        prepare=lab.prepare, boot=lab.boot, repetitions=Repetitions(2), seed=7, **options,
    )  # fmt: skip
    return db, study_run


def test_boots_interleave_over_kernels_and_each_boots_runs_are_stored_renumbered_with_its_host_and_boot(tmp_path):
    lab = FakeLab(tmp_path)
    told = Told()
    db, study_run = _run(tmp_path, lab, [A, B], boots=3, observer=told)
    assert [c for c in lab.calls if c[0] == "boot"] == [("boot", k) for _ in range(3) for k in (A, B)], (
        "K1 boot 1, K2 boot 1, K1 boot 2, …: drift spreads over the kernels"
    )
    assert [c for c in lab.calls if c[0] == "prepare"] == [("prepare", A), ("prepare", B)], "each prepared once"
    runs = db.runs(study_run)
    assert len(runs) == 2 * 3 * (2 + 2 + 4), "2 kernels × 3 boots × (ext4's 2, btrfs's 2, the ceiling's 4 runs)"
    for kernel in (A, B):
        mine = [r for r in runs if r["host"] == kernel]
        assert len({r["boot_id"] for r in mine}) == 3 and None not in {r["boot_id"] for r in mine}
        for target in ("ext4", "btrfs"):
            cell = [r for r in mine if r["target"] == target]
            assert sorted(r["repetition"] for r in cell) == [1, 2, 3, 4, 5, 6], "each boot's runs distinct"
            by_boot: dict[str, list[int]] = {}
            for r in cell:
                by_boot.setdefault(r["boot_id"], []).append(r["repetition"])
            assert sorted(by_boot.values()) == [[1, 2], [3, 4], [5, 6]], "a boot's repetitions together, in order"
        blocks = [r["block"] for r in mine]
        assert blocks == sorted(blocks) and max(blocks) == 3 * max(r["block"] for r in mine if r["repetition"] <= 2)
    assert {h.name: h.accelerator for h in db.hosts(study_run)} == {A: "kvm", B: "kvm"}
    groups = db.sample_groups(study_run)
    assert sum(len(v["write_iops"]) for v in groups.values.values()) == len(runs), "their metrics with them"
    assert db.outputs(runs[0]["id"]), "and their raw outputs"
    row = db.study_run(study_run)
    assert row["status"] == "finished" and row["settings"]["lab"] == {"kernels": [A, B], "boots": 3, "failed": []}
    assert f"{A}, boot 1 of 3: booting" in told.lines
    assert any(line.startswith(f"{B}, boot 3 of 3: 8 run(s) stored in ") for line in told.lines)
    assert f"{A}, boot 2 of 3: btrfs · seq_write · run 4: ok" in told.lines, "a line per run, renumbered"
    assert row["outcome"]["ext4 · seq_write @ " + A]["runs"] == 6


def test_the_guest_runs_fslab_on_the_study_fslab_wrote_with_the_same_options_each_boot_its_seed(tmp_path):
    lab = FakeLab(tmp_path)
    study = parse_study(STUDY, "kernels.toml", base_dir=tmp_path, scale=0.5)
    study = with_ceiling(study, False, set())
    db = ResultsDB(str(tmp_path / "host.db"))
    lab_study.run_on_kernels(
        study, [A], results=db, workdir=tmp_path / "wd", boots=2, prepare=lab.prepare, boot=lab.boot,
        repetitions=Repetitions(2, 1), seed=7, skip_unsupported=True, baseline="ext4",
    )  # fmt: skip
    first, second = lab.booted
    assert first["argv"][1:5] == ["-m", "fslab", "run", "/fslab-share/study.toml"]
    assert first["options"]["--db"] == "/fslab-scratch/results.db"
    assert first["options"]["--workdir"] == "/fslab-scratch/work"
    assert (first["options"]["--runs"], first["options"]["--warmup"], first["options"]["--scale"]) == ("2", "1", "0.5")
    assert "--skip-unsupported" in first["argv"] and first["options"]["--baseline"] == "ext4"
    assert first["argv"][-1] == "--no-summary", "the host summarises; the guest only stores"
    assert (first["options"]["--seed"], second["options"]["--seed"]) == ("7", "8"), "each boot its own order"
    assert first["command"].endswith(
        "; status=$?; cp /fslab-scratch/results.db /fslab-share/results.db && exit $status"
    )
    assert not list((tmp_path / "wd" / "lab").iterdir()), "each boot's share removed once stored"


def test_a_study_file_name_with_shell_text_reaches_the_guest_quoted(tmp_path):
    command = lab_study.guest_command(["--baseline", "ext4; rm -rf /", "--trace", "$(reboot)"])
    assert shlex.split(command.split("; status=")[0])[-5:-1] == ["--baseline", "ext4; rm -rf /", "--trace", "$(reboot)"]


def test_a_kernel_that_fails_to_boot_or_prepare_is_said_recorded_and_left_out_the_others_go_on(tmp_path):
    lab = FakeLab(tmp_path, unbootable={BAD}, unpreparable={"6.1.0-46-amd64"})
    told = Told()
    db, study_run = _run(tmp_path, lab, [BAD, A, "6.1.0-46-amd64"], boots=2, observer=told)
    assert [c for c in lab.calls if c[0] == "boot"] == [("boot", BAD), ("boot", A), ("boot", A)], (
        "a kernel left out after its failed boot"
    )
    assert {r["host"] for r in db.runs(study_run)} == {A}
    failed = db.study_run(study_run)["settings"]["lab"]["failed"]
    assert [(f["kernel"], f["boot"]) for f in failed] == [(BAD, 1), ("6.1.0-46-amd64", 1)]
    assert (
        "did not boot or hung before its command, and stored no results (Kernel panic - not syncing: VFS)"
        in failed[0]["why"]
    )
    assert "could not be prepared" in failed[1]["why"] and "offers no linux-image-6.1.0-46-amd64" in failed[1]["why"]
    skipped = [line for line in told.lines if "skipped" in line]
    assert len(skipped) == 2 and skipped[0].startswith(f"{BAD}, boot 1 of 2: skipped, its VM did not boot")


def test_a_kernel_whose_guest_crashes_is_said_by_its_crash_recorded_and_left_out_the_others_go_on(tmp_path):
    lab = FakeLab(tmp_path, crashing={A})
    told = Told()
    db, study_run = _run(tmp_path, lab, [A, B], boots=2, observer=told)
    assert [c for c in lab.calls if c[0] == "boot"] == [("boot", A), ("boot", B), ("boot", B)]
    assert {r["host"] for r in db.runs(study_run)} == {B}
    (failed,) = db.study_run(study_run)["settings"]["lab"]["failed"]
    assert (failed["kernel"], failed["boot"]) == (A, 1) and failed["why"] == f"the guest kernel {A} crashed: {OOPS}"
    assert f"{A}, boot 1 of 2: skipped, the guest kernel {A} crashed: {OOPS}" in told.lines


def test_a_kernel_whose_guest_refuses_the_study_is_left_out_with_what_the_guest_said(tmp_path):
    lab = FakeLab(tmp_path, refusing={B})
    db, study_run = _run(tmp_path, lab, [A, B], boots=2)
    (failed,) = db.study_run(study_run)["settings"]["lab"]["failed"]
    assert failed["kernel"] == B and "holds 0 study runs, not one" in failed["why"]
    assert "btrfs: no btrfs module" in failed["why"]
    assert {r["host"] for r in db.runs(study_run)} == {A} and len(db.runs(study_run)) == 16
    assert [h.name for h in db.hosts(study_run)] == [A], "no host of a kernel that stored nothing"


def test_a_kernel_whose_guest_leaves_a_damaged_database_is_left_out_and_the_others_go_on(tmp_path):
    """A boot's own database is the guest's (a crash mid-copy, a time-out): unusable, that kernel is
    a failed one, never the end of the study run."""
    lab = FakeLab(tmp_path, damaging={B})
    db, study_run = _run(tmp_path, lab, [A, B], boots=2)
    (failed,) = db.study_run(study_run)["settings"]["lab"]["failed"]
    assert failed["kernel"] == B and failed["why"].startswith("its database is unusable: "), failed
    assert {r["host"] for r in db.runs(study_run)} == {A} and len(db.runs(study_run)) == 16
    assert db.study_run(study_run)["status"] == "finished"


def test_no_kernel_running_it_is_an_error_naming_each(tmp_path):
    lab = FakeLab(tmp_path, unbootable={BAD})
    with pytest.raises(FslabError, match=f"no kernel ran it: {BAD}: its VM did not boot"):
        _run(tmp_path, lab, [BAD], boots=1)


def test_ctrl_c_in_a_boot_keeps_the_boots_that_ended_marks_the_study_run_interrupted_and_resume_refuses(tmp_path):
    lab = FakeLab(tmp_path, interrupt_at=3)
    db = ResultsDB(str(tmp_path / "host.db"))
    with pytest.raises(KeyboardInterrupt):
        lab_study.run_on_kernels(
            _study(tmp_path), [A, B], results=db, workdir=tmp_path / "wd", boots=2, prepare=lab.prepare,
            boot=lab.boot, repetitions=Repetitions(2), seed=7,
        )  # fmt: skip
    (row,) = db.study_runs()
    assert row["status"] == "interrupted"
    assert {r["host"] for r in db.runs(row["id"])} == {A, B} and len(db.runs(row["id"])) == 2 * 8, "boot 1 of each"
    assert not list((tmp_path / "wd" / "lab").iterdir()), "the interrupted boot's share removed"
    with pytest.raises(CannotResume, match=r"ran on kernels \(6.1.0-55-amd64, 6.12.117\+deb12-amd64"):
        resumable(db, str(row["id"]))


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"repetitions": Repetitions(2, target_ci=0.05)}, "--target-ci and --decide cannot go with --kernel"),
        ({"boots": 0}, "--boots 0: give 1 or more"),
    ],
)
def test_what_a_study_over_kernels_refuses_before_anything_begins(tmp_path, options, said):
    lab = FakeLab(tmp_path)
    boots = options.pop("boots", 1)
    with pytest.raises(FslabError, match=said):
        lab_study.run_on_kernels(
            _study(tmp_path), [A], results=ResultsDB(str(tmp_path / "h.db")), workdir=tmp_path, boots=boots,
            prepare=lab.prepare, boot=lab.boot, **options,
        )  # fmt: skip
    assert lab.calls == []


def test_a_study_naming_a_job_file_is_refused_its_text_alone_reaches_the_guest(tmp_path):
    (tmp_path / "job.fio").write_text("[j]\nrw=read\n")
    text = STUDY + '\n[[workload]]\nname = "mine"\njob_file = "job.fio"\n'
    with pytest.raises(FslabError, match="workload 'mine' names a job_file"):
        lab_study.check_kernel_study(_study(tmp_path, text), [A], 1, {})


# --- boots as the unit of replication (statistics/boots.py), on synthetic samples and stored runs ---


def test_boot_means_are_a_hosts_samples_once_its_runs_span_two_boots():
    from fslab.statistics.boots import boot_count, boot_means

    one = [("b1", 10.0), ("b1", 12.0), ("b1", 14.0)]
    assert boot_means(one) == [10.0, 12.0, 14.0] and boot_count(one) == 1, "one boot: its runs as they are"
    three = [("b1", 10.0), ("b2", 20.0), ("b1", 12.0), ("b3", 30.0), ("b2", 22.0), ("b3", 32.0)]
    assert boot_means(three) == [11.0, 21.0, 31.0] and boot_count(three) == 3, "in the order each boot first came"
    assert boot_count([(None, 1.0), (None, 2.0)]) == 1, "runs of no known boot (before schema 19): one boot"


def test_boot_to_boot_and_within_boot_cvs_are_computed_as_stated():
    import statistics

    from fslab.statistics.boots import spreads

    values = [("b1", 100.0), ("b1", 102.0), ("b2", 120.0), ("b2", 118.0), ("b3", 90.0)]
    found = spreads({("w", "ext4", A): {"iops": values, "lat": values}, ("w", "ext4", B): {"iops": values[:2]}},
                    lambda workload, metrics: ["iops"])  # fmt: skip
    (spread,) = found
    means = [101.0, 119.0, 90.0]
    assert (spread.host, spread.metric, spread.boots, spread.runs) == (A, "iops", 3, 5), "B's single boot: none"
    assert spread.between_cv == pytest.approx(statistics.stdev(means) / statistics.fmean(means))
    within = [statistics.stdev([100, 102]) / 101, statistics.stdev([120, 118]) / 119]
    assert spread.within_cv == pytest.approx(statistics.fmean(within)), "the boot of one run has no CV of its own"


def _compared(tmp_path: Path, boots: int, **lab_options):  # noqa: ANN202
    from fslab.report.summary import compare_hosts

    lab = FakeLab(tmp_path, speed={A: 1.0, B: 2.0}, **lab_options)
    db, study_run = _run(tmp_path, lab, [A, B], boots=boots)
    rows = compare_hosts(db, study_run, A, B).rows
    return db, study_run, {(r.target, r.metric): r.comparison for r in rows}


def test_between_kernels_of_one_boot_each_no_speed_verdict_is_given_saying_why(tmp_path):
    _, _, rows = _compared(tmp_path, boots=1)
    iops = rows[("ext4", "write_iops")]
    assert iops.ratio == pytest.approx(2.0, rel=0.1), "the ratio still shown"
    assert iops.verdict == "undecided" and iops.reason == "one boot: boots are the unit of replication"
    from fslab.statistics.timing import timing_of

    speed = {key: c for key, c in rows.items() if timing_of(key[1]) == "speed"}
    assert len(speed) >= 6 and {c.verdict for c in speed.values()} == {"undecided"}
    assert any(c.decided for key, c in rows.items() if key not in speed), "what the kernel did: one boot decides it"


def test_between_kernels_of_three_boots_each_the_samples_are_boot_means_and_a_verdict_is_given(tmp_path):
    db, study_run, rows = _compared(tmp_path, boots=3, boot_noise=0.02)
    iops = rows[("ext4", "write_iops")]
    assert (iops.n_baseline, iops.n_other) == (3, 3), "a sample per boot, not one per run (6)"
    assert iops.verdict == "faster" and iops.ratio == pytest.approx(2.0, rel=0.1)


def test_the_summary_says_each_kernels_boots_and_boot_to_boot_variation(tmp_path):
    import json

    from fslab.report.formats.markdown import to_markdown
    from fslab.report.formats.summary_json import to_json
    from fslab.report.summary import summarize_study_run

    lab = FakeLab(tmp_path, speed={A: 1.0, B: 2.0}, boot_noise=0.3, unbootable={BAD})
    db, study_run = _run(tmp_path, lab, [A, B, BAD], boots=2)
    summary = summarize_study_run(db, study_run)
    spreads = {(b.host, b.target): b for b in summary.boot_spreads if b.metric == "write_iops"}
    assert set(spreads) == {(k, t) for k in (A, B) for t in ("ext4", "btrfs", "(ceiling)")}
    assert all(b.boots == 2 and b.between_cv > 0 and b.within_cv is not None for b in spreads.values())
    text = to_markdown(summary)
    assert f"Kernels: {A} (2 boots), {B} (2 boots)" in text
    ext4 = spreads[(A, "ext4")]
    assert f"Boot to boot on {A} (CV of the boot means): " in text
    assert f"ext4 · seq_write write_iops {ext4.between_cv:.1%} (within a boot {ext4.within_cv:.1%})" in text
    assert f"Kernel {BAD} left out at boot 1: its VM did not boot" in text
    document = json.loads(to_json(summary))["kernels"]
    assert document["boots_asked"] == 2 and [f["kernel"] for f in document["failed"]] == [BAD]
    assert {(b["host"], b["target"]) for b in document["boot_spreads"] if b["metric"] == "write_iops"} == set(spreads)


# --- --tune-host across the rounds (lab/hygiene.py), on a fake sysfs tree ---


def _tuned_run(tmp_path: Path, lab: FakeLab, kernels: list[str], boots: int, said: list[str]):  # noqa: ANN202
    def hold(journal):  # noqa: ANN001, ANN202 - the CLI's (_host_hygiene with --tune-host and a VM)
        return hygiene.recorded(True, journal, say=said.append, vm=True)

    return _run(tmp_path, lab, kernels, boots, hold=hold)


def test_tune_host_holds_the_host_tuned_across_every_boot_journalled_vcpus_pinned_and_restores_it(
    tmp_path, monkeypatch
):
    """Fails on the old code: run_on_kernels took no hold, and gave vm.boot no journal."""
    sysfs = FakeSysfs(tmp_path / "root", monkeypatch).host()
    before = sysfs.texts()
    lab, said = FakeLab(tmp_path), []
    db, study_run = _tuned_run(tmp_path, lab, [A, B], 2, said)
    assert len(lab.hygiene) == 4
    for seen in lab.hygiene:
        assert (seen["found"].ksm_run, seen["found"].thp_enabled, seen["found"].thp_defrag) == ("0", "never", "never")
        assert seen["pinned"], "each VM's vCPU threads pinned"
        assert ("host-setting", str(sysfs.root / hygiene.KSM_RUN)) in seen["journal"], (
            "vm.boot given the work directory's journal, which holds the host's settings"
        )
    assert sysfs.texts() == before, "put back as found once the run ended"
    environment = db.study_run(study_run)["environment"]["vm_hygiene"]
    assert environment["tuned"] and environment["pinned"] and environment["as_found"]["ksm_run"] == "1"
    assert any(line.startswith("host hygiene: KSM on (may disturb VM figures)") for line in said), "said once"
    assert not Workdir(tmp_path / "wd").journal.outstanding(), "nothing left in the journal"


def test_tune_host_is_restored_when_a_boot_is_interrupted(tmp_path, monkeypatch):
    sysfs = FakeSysfs(tmp_path / "root", monkeypatch).host()
    before = sysfs.texts()
    lab = FakeLab(tmp_path, interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        _tuned_run(tmp_path, lab, [A, B], 2, [])
    assert lab.hygiene[-1]["found"].ksm_run == "0", "tuned while the boot ran"
    assert sysfs.texts() == before
    (row,) = ResultsDB(str(tmp_path / "host.db")).study_runs()
    assert row["status"] == "interrupted"


def test_the_work_directory_is_claimed_for_the_whole_run_over_kernels(tmp_path):
    """Another fslab on the same work directory waits or is refused while kernels run (the boots'
    QEMUs are journalled there)."""
    from fslab.core.workdir import WorkdirBusy

    seen: list[str] = []

    class Probing(FakeLab):
        def boot(self, kernel, command, *, share, **options):  # noqa: ANN001, ANN201
            try:
                with Workdir(tmp_path / "wd").claim():
                    seen.append("claimed")
            except WorkdirBusy:
                seen.append("busy")
            return super().boot(kernel, command, share=share, **options)

    _run(tmp_path, Probing(tmp_path), [A], 1)
    assert seen == ["busy"]


def test_fslab_run_gives_a_run_over_kernels_its_host_hygiene_tuned_with_tune_host(tmp_path, monkeypatch):
    """Fails on the old code: `--tune-host` with `--kernel` was refused."""
    from conftest import fslab_in_process

    sysfs = FakeSysfs(tmp_path / "root", monkeypatch).host()
    given: dict = {}

    def run_on_kernels(study, kernels, **options):  # noqa: ANN001, ANN202
        given.update(options)
        raise lab_study.LabStudyError("stopped by the test")

    monkeypatch.setattr(lab_study, "run_on_kernels", run_on_kernels)
    study = tmp_path / "kernels.toml"
    study.write_text(STUDY)
    result = fslab_in_process("run", str(study), "--kernel", A, "--tune-host", "--db", str(tmp_path / "r.db"))
    assert "stopped by the test" in result.stderr, result.stderr
    work = Workdir(tmp_path / "wd")
    work.prepare()
    with given["hold"](work.journal) as record:
        assert sysfs.text(hygiene.KSM_RUN) == "0" and record["vm_hygiene"]["tuned"]
        assert record["vm_hygiene"]["pinned"], "a VM's vCPUs pinned"
    assert sysfs.text(hygiene.KSM_RUN) == "1"


# --- a guest's progress, streamed (lab/progress.py) ---


def test_a_guests_runs_are_told_as_they_end_while_its_boot_runs_numbered_as_stored(tmp_path, monkeypatch):
    """Fails on the old code: a boot's runs were told only once it ended (the fake guest waits for
    the host's line of each run before it writes the next, and would time out)."""
    told = Told()
    lab = FakeLab(tmp_path, told=told)
    monkeypatch.setattr(progress, "POLL_SECONDS", 0.01)  # the host's look for each of 32 runs: not 0.1 s idle each
    db, study_run = _run(tmp_path, lab, [A, B], boots=2, observer=told)
    assert f"{B}, boot 2 of 2: btrfs · seq_write · run 3: ok" in told.lines, "renumbered after the boot before"
    ran = [line for line in told.lines if " · run " in line]
    assert len(ran) == len(db.runs(study_run)) == 32, "each run told once"
    first_stored = next(i for i, line in enumerate(told.lines) if "stored in" in line)
    assert told.lines.index(f"{A}, boot 1 of 2: ext4 · seq_write · run 1: ok") < first_stored
    assert not [line for line in told.lines if "told only as it ended" in line]


def test_runs_a_guest_did_not_tell_are_told_once_its_boot_ended_and_said_so(tmp_path, monkeypatch):
    monkeypatch.setattr(progress.GuestProgress, "_write", lambda self, record: None)  # a guest that tells nothing
    told = Told()
    _run(tmp_path, FakeLab(tmp_path), [A], boots=1, observer=told)
    assert f"{A}, boot 1 of 1: btrfs · seq_write · run 2: ok" in told.lines
    late = " s; 8 told only as it ended (the guest's progress did not reach the host)"
    assert any(line.startswith(f"{A}, boot 1 of 1: 8 run(s) stored in ") and line.endswith(late) for line in told.lines)


def test_the_host_takes_only_whole_lines_of_the_file_it_made_and_of_the_fields_it_knows(tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    path = progress.make(share)
    got: list[progress.Progress] = []
    good = {"run": {"target": "ext4", "workload": "w", "warmup": False, "repetition": 1, "status": "ok", "error": ""}}
    with progress.tailing(path, got.append):
        with open(path, "a") as guest:
            guest.write("not json\n" + '{"run": {"target": 1}}\n' + '["a list"]\n')
            guest.write('{"notice": "' + "x" * 10_000 + '"}\n')  # longer than any line GuestProgress writes
            guest.write(json.dumps(good) + "\n" + json.dumps({"notice": "\x1b[2Jhello"}) + "\n" + '{"notice": "cut')
        path.unlink()  # the guest replaces it with a link to a host file: the host reads on the file it made
        path.symlink_to("/etc/hostname")
    assert got == [
        progress.Progress(run=progress.GuestRun("ext4", "w", False, 1, "ok", "")),
        progress.Progress(notice="\x1b[2Jhello"),  # the observer shows it as visible() makes it
    ], "a line cut short at the boot's end is not taken"
    with pytest.raises(progress.ProgressError, match="the lab's host makes that file"):
        progress.GuestProgress(path, Quiet())  # the guest's fslab follows no link either


# --- the CSV tables of a study run over kernels (report/tables.py) ---


def test_the_csv_tables_of_a_run_over_kernels_name_each_rows_kernel_and_whether_it_ran_emulated(tmp_path):
    """Fails on the old code: summary.csv, runs.csv, comparisons.csv and `fslab export`'s tables had
    no kernel or emulated column (a run's kernel was nowhere in runs.csv)."""
    import csv
    import io

    from fslab.report.files import export_tables
    from fslab.report.formats import table_form_named
    from fslab.report.formats.comparisons_csv import to_comparisons_csv
    from fslab.report.formats.runs import runs_csv
    from fslab.report.formats.summary_csv import to_csv
    from fslab.report.summary import summarize_study_run

    db, study_run = _run(tmp_path, FakeLab(tmp_path, emulated={B}), [A, B], boots=1)
    summary = summarize_study_run(db, study_run)

    def table(text: str) -> list[dict]:
        return list(csv.DictReader(io.StringIO(text)))

    expected = {A: "False", B: "True"}
    rows = table(to_csv(summary))
    assert list(rows[0])[:5] == ["study_run", "workload", "target", "kernel", "emulated"]
    assert {(r["target"], r["kernel"], r["emulated"]) for r in rows} == {
        (f"{t} @ {k}", k, expected[k]) for t in ("ext4", "btrfs", "(ceiling)") for k in (A, B)
    }
    runs = table(runs_csv(summary, db.run_metrics(study_run)))
    hosts = {r["id"]: r["host"] for r in db.runs(study_run)}
    assert list(runs[0])[2:5] == ["target", "kernel", "emulated"]
    assert all(r["kernel"] == hosts[int(r["run_id"])] and r["emulated"] == expected[r["kernel"]] for r in runs)
    compared = table(to_comparisons_csv(summary))
    assert compared and all(r["target"].endswith(f" @ {r['kernel']}") for r in compared)
    written = export_tables(db, summary, tmp_path / "export", table_form_named("csv"))
    for path in written:
        assert "kernel,emulated" in path.read_text().splitlines()[0], path.name


# --- `fslab run STUDY --plan --kernel …` (lab/preview.py) ---

ZFS_STUDY = STUDY + '\n[[target]]\nfilesystem = "zfs"\n'


def test_the_plan_over_kernels_says_per_kernel_what_a_run_would_fetch_build_and_boot_and_makes_nothing(
    tmp_path, monkeypatch
):
    """Fails on the old code: --plan with --kernel was refused."""
    from conftest import fslab_in_process
    from fslab.lab import kernels, openzfs, vm

    cache, zfs = tmp_path / "kernels", tmp_path / "openzfs"
    (cache / A).mkdir(parents=True)  # prepared, as kernels.prepare leaves one
    (cache / A / "ready.json").write_text(json.dumps({"release": A, "version": "6.1.158-1", "config_sha256": "x"}))
    (zfs / B).mkdir(parents=True)  # OpenZFS built for B, as openzfs.prepare leaves it
    (zfs / B / "ready").write_text(json.dumps({
        "release": B, "version": "2.3.2", "package_version": "2.3.2-2~bpo12+2", "suite": "bookworm-backports",
        "load_order": ["spl", "zfs"]}))  # fmt: skip
    monkeypatch.setattr(kernels, "KERNELS", cache)
    monkeypatch.setattr(openzfs, "OPENZFS", zfs)
    offered = [kernels.KernelPackage(B, f"linux-image-{B}", "6.12.117-1~deb12u1", False)]
    monkeypatch.setattr(kernels, "offered", lambda cache: offered)  # apt's lists, as read
    monkeypatch.setattr(kernels, "download_size", lambda package: 104_857_600)
    monkeypatch.setattr(vm, "known_accelerator", lambda: "tcg")
    study = tmp_path / "kz.toml"
    study.write_text(ZFS_STUDY)
    db, work = tmp_path / "r.db", tmp_path / "wd"
    result = fslab_in_process(
        "run", str(study), "--plan", "--kernel", A, "--kernel", B, "--kernel", "6.16.3+deb13-amd64",
        "--kernel", "host", "--boots", "2", "--runs", "2", "--db", str(db), "--workdir", str(work),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("kernels: the plan over kernels (nothing is fetched, built, booted")
    assert "runs: 3 cells × 2 + the ceiling's 1 cells × 4 = 10" in lines, "the study's plan, as --plan says it"
    assert "kernels (4), the plan in 2 boots each, interleaved over the kernels: 80 runs in all" in lines
    at = {line.strip().split(":")[0]: i for i, line in enumerate(lines) if line.startswith("  ") and ":" in line}
    assert lines[at[A]] == f"  {A}: prepared: linux-image-{A} 6.1.158-1 in {cache / A}"
    assert lines[at[A] + 1].startswith("    OpenZFS to build: bookworm's zfs-dkms 2.1, once, before its first boot")
    assert lines[at[A] + 2].startswith("    time: about ") and "2 boots × (10 runs + 40 s to boot)" in lines[at[A] + 2]
    assert "(a default: no run of 6.1.0-55-amd64 stored)" in lines[at[A] + 2]
    assert (
        lines[at[B]]
        == f"  {B}: to fetch: linux-image-{B} 6.12.117-1~deb12u1, 100MiB to download, from the archive apt knows"
    )
    assert lines[at[B] + 1] == "    OpenZFS 2.3.2 (2.3.2-2~bpo12+2, bookworm-backports) built for it"
    gone = "not offered by the configured archive (apt-get update?): the run would leave it out, said"
    assert f"  6.16.3+deb13-amd64: {gone}" in lines
    assert (
        lines[at["host"]].startswith("  host: this machine's own kernel (")
        and "once a round, 2 rounds" in lines[at["host"]]
    )
    assert any(
        line.startswith("accelerator: TCG, software emulation") and "no performance result" in line for line in lines
    )
    assert any(
        line.startswith("time: about ") and line.endswith(" in all, the kernels' boots one after another")
        for line in lines
    )
    assert not db.exists() and not work.exists(), "no database made, no work directory claimed"


def test_the_plan_over_kernels_of_a_kernel_no_openzfs_fits_says_so(tmp_path, monkeypatch):
    from fslab.lab import kernels, preview, vm

    monkeypatch.setattr(kernels, "KERNELS", tmp_path / "none")
    monkeypatch.setattr(kernels, "offered", lambda cache: [kernels.KernelPackage("6.14.1-1-rt-amd64", "p", "1", False)])
    monkeypatch.setattr(kernels, "download_size", lambda package: None)
    monkeypatch.setattr(vm, "known_accelerator", lambda: None)
    lines = preview.plan_lines(
        _study(tmp_path, ZFS_STUDY), ["6.14.1-1-rt-amd64"], 1, Repetitions(2), lambda host: preview.Overhead(2.0, 0),
        tmp_path / "wd", skip_unsupported=False,
    )  # fmt: skip
    assert "  6.14.1-1-rt-amd64: to fetch: linux-image-6.14.1-1-rt-amd64 1, from the archive apt knows" in lines
    assert any(
        line.startswith("    no OpenZFS fits this kernel: no OpenZFS in the archive supports 6.14.1-1-rt-amd64:")
        for line in lines
    )


def test_lab_progress_is_a_guests_own_and_goes_with_no_run_over_kernels(tmp_path):
    from conftest import fslab_in_process

    given = ("run", "quick", "--kernel", A, "--lab-progress", str(tmp_path / "p"), "--db", str(tmp_path / "r.db"))
    result = fslab_in_process(*given)
    assert result.returncode == 2 and "--lab-progress cannot go with --kernel" in result.stderr, result.stderr
    assert not (tmp_path / "r.db").exists()


def test_a_failure_to_tell_progress_neither_ends_the_boot_nor_masks_its_error(tmp_path):
    """Telling is best effort (a console piped to `head` gone, say): the boot's own exception is the
    one raised, and nothing more is told once telling failed."""
    share = tmp_path / "share"
    share.mkdir()
    path = progress.make(share)
    calls: list[progress.Progress] = []

    def told(said: progress.Progress) -> None:
        calls.append(said)
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(vm.GuestCrashed), progress.tailing(path, told):
        path.write_text('{"notice": "one"}\n{"notice": "two"}\n')
        raise vm.GuestCrashed("6.1.0-55-amd64", "BUG: …", console="")
    assert [c.notice for c in calls] == ["one"], calls
