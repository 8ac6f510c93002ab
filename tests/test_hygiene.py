"""Host hygiene (lab/hygiene.py) on a fake sysfs tree: reading and judging KSM, THP, the governor
and vCPU pinning; --tune-host's changes journalled before they are made, and restored however the
block ends or from the journal; values a file does not offer refused. (The real /sys: test_hygiene_root.py.)"""

import errno
import json
import os
import signal
from pathlib import Path

import pytest

from conftest import fslab_in_process, plant, wait_for
from fslab.core.errors import FslabError, Refused
from fslab.core.journal import Entry
from fslab.core.workdir import Workdir
from fslab.lab import hygiene
from fslab.lab.hygiene import KSM_RUN, KSM_SHARED, NOT_PRESENT, THP_DEFRAG, THP_ENABLED

GOVERNOR0 = "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
GOVERNOR1 = "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"


class FakeSysfs:
    """A sysfs tree in a directory, its writes answered as the kernel answers them: a THP file
    moves its brackets, a governor takes one its directory offers, KSM's run takes 0, 1 or 2;
    anything else is EINVAL and changes nothing."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch):
        self.root = root
        self.written: list[tuple[str, str]] = []
        monkeypatch.setattr(hygiene, "ROOT", root)
        monkeypatch.setattr(hygiene, "_write", self.write)

    def make(self, path: str, text: str) -> None:
        (self.root / path).parent.mkdir(parents=True, exist_ok=True)
        (self.root / path).write_text(text + "\n")

    def host(self, *, ksm="1", thp="[always] madvise never", defrag="always defer defer+madvise [madvise] never"):
        self.make(KSM_RUN, ksm)
        self.make(KSM_SHARED, "1234")
        self.make(THP_ENABLED, thp)
        self.make(THP_DEFRAG, defrag)
        for governor in (GOVERNOR0, GOVERNOR1):
            self.make(governor, "schedutil")
            self.make(governor.replace("scaling_governor", "scaling_available_governors"), "performance schedutil")
        return self

    def text(self, path: str) -> str:
        return (self.root / path).read_text().strip()

    def texts(self) -> dict[str, str]:
        return {p: self.text(p) for p in (KSM_RUN, THP_ENABLED, THP_DEFRAG, GOVERNOR0, GOVERNOR1)}

    def write(self, path: Path, value: str) -> None:
        self.written.append((str(path.relative_to(self.root)), value))
        offered = hygiene.choices(path)
        if value not in offered:
            raise FslabError(f"{path}: writing {value} failed: {os.strerror(errno.EINVAL)}")
        if path.parent.name == "transparent_hugepage":
            value = " ".join(f"[{c}]" if c == value else c for c in offered)
        with open(path, "r+") as f:  # the same inode, as sysfs keeps it
            f.truncate(0)
            f.write(value + "\n")


@pytest.fixture
def sysfs(tmp_path, monkeypatch):
    return FakeSysfs(tmp_path / "root", monkeypatch)


@pytest.fixture
def workdir(tmp_path):
    wd = Workdir(tmp_path / "wd")
    wd.prepare()
    return wd


def test_a_host_that_disturbs_vms_is_read_and_judged_so(sysfs):
    found = hygiene.read(sysfs.host().root)
    assert (found.ksm_run, found.ksm_pages_shared, found.thp_enabled, found.thp_defrag) == (
        "1",
        1234,
        "always",
        "madvise",
    )
    assert found.governors == {"cpu0": "schedutil", "cpu1": "schedutil"} and found.pinned == ()
    assert [j.name for j in found.disturbing()] == ["KSM", "THP", "THP defrag", "governor", "vCPU pinning"]
    assert found.line().startswith("host hygiene: KSM on (may disturb VM figures), THP always (may disturb")
    assert "governor schedutil (0,1) (may disturb VM figures)" in found.line()
    assert json.loads(json.dumps(found.as_json()))["disturbing"] == [j.name for j in found.disturbing()]


def test_a_quiet_host_is_judged_quiet(sysfs):
    sysfs.host(ksm="0", thp="always madvise [never]", defrag="always defer defer+madvise [madvise] never")
    for governor in (GOVERNOR0, GOVERNOR1):
        sysfs.make(governor, "performance")
    judged = {j.name: j for j in hygiene.read().judgements()}
    assert judged["KSM"].reading == "off" and not judged["KSM"].disturbs
    assert "1234 pages merged before" in judged["KSM"].why
    assert judged["THP"].reading == "never" and not judged["THP"].disturbs
    assert not judged["THP defrag"].disturbs, "no compaction is asked for while THP is never"
    assert judged["governor"].reading == "performance (0,1)" and not judged["governor"].disturbs


def test_settings_the_kernel_lacks_read_not_present_and_say_so(sysfs):
    sysfs.root.mkdir()  # nothing in it: no KSM, no THP, no cpufreq (as on this machine's governor)
    found = hygiene.read()
    assert (found.ksm_run, found.thp_enabled, found.thp_defrag, found.governors) == (NOT_PRESENT,) * 3 + ({},)
    judged = {j.name: j for j in found.judgements()}
    assert all(judged[n].disturbs is None for n in ("KSM", "THP", "THP defrag", "governor"))
    assert "governor not present" in found.line()
    assert hygiene.planned(found) == ([], []), "nothing to set"
    (sysfs.root / KSM_RUN).mkdir(parents=True)  # a file fslab cannot read (a container's masked /sys)
    assert hygiene.read().ksm_run == hygiene.UNREADABLE and hygiene.read().judgements()[0].disturbs is None


def test_without_tune_host_nothing_is_written(sysfs, workdir):
    sysfs.host()
    before = sysfs.texts()
    said: list[str] = []
    with hygiene.recorded(False, workdir.journal, say=said.append) as record:
        assert hygiene.pin_cpus() == (), "no pinning by default"
    assert sysfs.written == [] and sysfs.texts() == before
    assert not workdir.journal.path.exists(), "nothing journalled"
    assert record["vm_hygiene"]["tuned"] is False and record["vm_hygiene"]["thp_enabled"] == "always"
    assert said == [hygiene.read().line() + "; --tune-host sets them for the run"]


def test_cpus_of_one_cpufreq_policy_have_their_governor_set_once(sysfs, workdir):
    sysfs.host()
    (sysfs.root / GOVERNOR1).unlink()
    (sysfs.root / GOVERNOR1).hardlink_to(sysfs.root / GOVERNOR0)  # (sysfs: cpu1/cpufreq → policy0, as cpu0's)
    changes, _ = hygiene.planned(hygiene.read())
    assert [c.path for c in changes if c.path.endswith("scaling_governor")] == [GOVERNOR0]
    with hygiene.tuned(True, workdir.journal):
        assert hygiene.read().governors == {"cpu0": "performance", "cpu1": "performance"}
    assert sysfs.text(GOVERNOR1) == "schedutil"


def test_tuning_journals_each_change_before_making_it_and_restores_it_after(sysfs, workdir, monkeypatch):
    sysfs.host()
    before = sysfs.texts()
    write = sysfs.write

    def journalled_first(path: Path, value: str) -> None:
        held = {e.ident: e.proof for e in workdir.journal.read()[0]}
        assert str(path) in held, f"{path} written before it was journalled"
        if value == held[str(path)]["new"]:  # (the restore writes the old value after the entry)
            st = os.lstat(path)
            assert held[str(path)]["ino"] == st.st_ino and held[str(path)]["old"] == hygiene._current(path)
        write(path, value)

    monkeypatch.setattr(hygiene, "_write", journalled_first)
    said: list[str] = []
    with hygiene.recorded(True, workdir.journal, say=said.append) as record:
        during = hygiene.read()
        assert (during.ksm_run, during.thp_enabled, during.thp_defrag) == ("0", "never", "never")
        assert set(during.governors.values()) == {"performance"}
        assert len(workdir.journal.read()[0]) == 5
        assert not during.judgements()[-1].disturbs and during.pinned == hygiene.pin_cpus()
    assert sysfs.texts() == before, "every file as it was"
    assert workdir.journal.read() == ([], [])
    assert hygiene.pin_cpus() == (), "pinning ends with the block"
    assert said == [
        hygiene.HostHygiene("1", 1234, "always", "madvise", {"cpu0": "schedutil", "cpu1": "schedutil"}).line()
        + f"; --tune-host sets for the run: /{KSM_RUN} 0, /{THP_ENABLED} never, /{THP_DEFRAG} never, "
        f"/{GOVERNOR0} performance, /{GOVERNOR1} performance"
    ]
    vm = record["vm_hygiene"]
    assert vm["tuned"] and vm["thp_enabled"] == "never" and vm["as_found"]["thp_enabled"] == "always"
    assert {c["path"]: (c["old"], c["new"]) for c in vm["changed"]}[THP_ENABLED] == ("always", "never")


@pytest.mark.parametrize("ending", ["error", signal.SIGINT, signal.SIGTERM])
def test_tuning_is_restored_however_the_block_ends(sysfs, workdir, signals_interrupt, ending):
    sysfs.host()
    before = sysfs.texts()
    raised = RuntimeError if ending == "error" else KeyboardInterrupt
    with pytest.raises(raised), hygiene.tuned(True, workdir.journal):
        assert sysfs.text(THP_ENABLED) == "always madvise [never]"
        if ending == "error":
            raise RuntimeError("a run failed")
        os.kill(os.getpid(), ending)
        wait_for("the signal", lambda: False, deadline=30, every=0.01)  # the handler raises meanwhile
    assert sysfs.texts() == before and workdir.journal.read() == ([], [])


def test_after_a_kill_the_journal_restores_the_host_and_says_so(sysfs, workdir):
    """A block never left (its process killed): clean-up restores from the journal alone (it
    knows nothing else of the tuning)."""
    sysfs.host()
    before = sysfs.texts()
    killed = hygiene.tuned(True, workdir.journal)
    killed.__enter__()
    try:
        assert sysfs.texts() != before
        outcomes = {o.ident: o for o in workdir.journal.clean_up()}
        assert sysfs.texts() == before
        said = outcomes[str(sysfs.root / THP_ENABLED)]
        assert (said.status, said.detail) == ("released", "restored to always (fslab had set never)")
        assert {o.status for o in outcomes.values()} == {"released"} and len(outcomes) == 5
    finally:
        killed.__exit__(None, None, None)  # (finds each as it was: nothing written)
    assert sysfs.texts() == before


def test_a_setting_changed_meanwhile_is_left_as_set_and_said(sysfs, workdir):
    sysfs.host()
    said: list[str] = []
    with hygiene.tuned(True, workdir.journal, say=said.append):
        sysfs.write(sysfs.root / THP_ENABLED, "madvise")  # someone else, during the run
    assert sysfs.text(THP_ENABLED) == "always [madvise] never", "theirs, not put back"
    assert sysfs.text(KSM_RUN) == "1", "the rest restored"
    assert said == [f"--tune-host: /{THP_ENABLED} left at madvise: set since fslab set never (it was always)"]


def test_a_value_the_file_does_not_offer_is_never_written(sysfs, workdir):
    sysfs.host(thp="[always] madvise")  # a kernel offering no never
    found = hygiene.read()
    changes, cannot = hygiene.planned(found)
    assert THP_ENABLED not in [c.path for c in changes]
    assert cannot == [f"/{THP_ENABLED} offers no never (always madvise): left always"]
    with pytest.raises(Refused, match="not among the values it offers"):
        with hygiene._set(workdir.journal, sysfs.root, hygiene.Change(THP_ENABLED, "always", "never")):
            pass
    assert not workdir.journal.path.exists() and sysfs.written == [], "refused before anything was journalled"


def _entry(sysfs: FakeSysfs, path: str, **proof) -> Entry:
    st = os.lstat(sysfs.root / path)
    found = {"dev": f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", "ino": st.st_ino, "root": str(sysfs.root)}
    return Entry(hygiene.KIND, str(sysfs.root / path), found | proof)


def test_a_journal_entry_is_restored_only_when_all_its_proof_holds(sysfs, workdir):
    sysfs.host(thp="always madvise [never]")
    with pytest.raises(Refused, match="not among the values it offers"):
        hygiene.restore(_entry(sysfs, THP_ENABLED, old="bogus", new="never"), workdir)
    with pytest.raises(Refused, match="not a setting --tune-host changes"):
        hygiene.restore(_entry(sysfs, KSM_SHARED, old="0", new="1234"), workdir)
    planted = _entry(sysfs, THP_ENABLED, old="always", new="never")
    with pytest.raises(Refused, match="not one fslab writes"):
        hygiene.restore(Entry(planted.kind, planted.ident, planted.proof | {"root": "/elsewhere"}), workdir)
    anew = sysfs.root / "anew"  # the kernel made the file anew (made while the old one is there: another inode)
    anew.write_text("always madvise [never]\n")
    anew.rename(sysfs.root / THP_ENABLED)
    with pytest.raises(Refused, match="identity differs"):
        hygiene.restore(planted, workdir)
    assert sysfs.written == [] and sysfs.text(THP_ENABLED) == "always madvise [never]"


def test_clean_up_leaves_a_planted_entry_alone(sysfs, workdir):
    sysfs.host()
    plant(workdir.journal, hygiene.KIND, sysfs.root / KSM_SHARED, {"root": str(sysfs.root), "old": "0", "new": "1"})
    [outcome] = workdir.journal.clean_up()
    assert outcome.status == "left alone" and sysfs.written == []


def test_one_fslab_tunes_a_host_at_a_time(sysfs, workdir, tmp_path):
    sysfs.host()
    other = Workdir(tmp_path / "other")
    other.prepare()
    with hygiene.tuned(True, workdir.journal):
        with pytest.raises(FslabError, match=rf"another fslab \(pid {os.getpid()}\) holds this host tuned"):
            with hygiene.tuned(True, other.journal):
                pass
    assert sysfs.text(KSM_RUN) == "1"


def test_what_a_killed_fslab_left_tuned_elsewhere_is_not_taken_for_the_hosts_own(sysfs, workdir, tmp_path):
    """A fslab killed -9 while it held the host tuned, from another work directory: its lock is gone
    with it, its record and journal stay; a new tuning would take its values for the host's own."""
    sysfs.host()
    killed = Workdir(tmp_path / "killed")
    killed.prepare()
    entry = _entry(sysfs, KSM_RUN, old="1", new="0")
    killed.journal._append("acquire", hygiene.KIND, entry.ident, entry.proof)
    sysfs.write(sysfs.root / KSM_RUN, "0")
    (sysfs.root / hygiene.LOCK).parent.mkdir(parents=True)
    (sysfs.root / hygiene.LOCK).write_text(json.dumps({"pid": 2**22 + 1, "workdir": str(killed.root)}))
    with pytest.raises(FslabError, match=f"fslab cleanup --workdir {killed.root}"):
        with hygiene.tuned(True, workdir.journal):
            pass
    assert sysfs.text(KSM_RUN) == "0" and not workdir.journal.path.exists(), "nothing was changed"
    [restored] = killed.journal.clean_up()
    assert restored.detail == "restored to 1 (fslab had set 0)" and sysfs.text(KSM_RUN) == "1"
    with hygiene.tuned(True, workdir.journal):  # then tuning goes ahead, from the host's own values
        assert sysfs.text(KSM_RUN) == "0"
    assert sysfs.text(KSM_RUN) == "1"


def test_vcpus_are_pinned_only_while_tuned_and_never_to_cpu_0_when_there_are_others(sysfs, workdir, monkeypatch):
    sysfs.host()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert hygiene.pin_cpus(2) == ()
    with hygiene.tuned(True, workdir.journal) as tuning:
        assert tuning.cpus == (1, 2) and hygiene.pin_cpus(3) == (1, 2, 1)
        assert hygiene.read().pinned == (1, 2)
    with hygiene.tuned(True, workdir.journal, pin=False):
        assert hygiene.pin_cpus() == () and hygiene.read().pinned == (), "no VM: nothing to pin"
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    with hygiene.tuned(True, workdir.journal):
        assert hygiene.pin_cpus() == (0,), "a one-CPU machine: its CPU"


def test_only_a_qemu_of_fslabs_own_is_pinned():
    with pytest.raises(Refused, match="not a QEMU fslab started"):
        hygiene.pin_vcpus(os.getpid(), (0,))


def test_tune_host_tunes_this_machine_only_never_a_fleets(tmp_path):
    result = fslab_in_process("run", "quick", "--tune-host", "--on", "all", "--db", str(tmp_path / "r.db"))
    assert result.returncode != 0 and "--tune-host tunes this machine" in result.stderr, result.stderr
    assert not (tmp_path / "r.db").exists(), "refused before anything was opened"
