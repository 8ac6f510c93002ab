"""--tune-host on this machine's real /sys: every setting it changes is back as it was after the
run ends, after Ctrl-C to a real `fslab run`, and after a kill -9 followed by `fslab cleanup`;
QEMU's vCPU thread pinned. The machine's settings are put back in teardown whatever happens."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import fio_children, fslab, runs_stored, wait_for, write_study
from fslab.lab import hygiene
from fslab.results import ResultsDB
from short_studies import short_study

pytestmark = pytest.mark.xdist_group("host-hygiene")  # one tuning of this host at a time

STUDY = short_study("tuned", '[[target]]\nfilesystem = "ext4"\n', repetitions=3)


def _settings() -> dict[Path, str]:
    """The full text of every file --tune-host may write (a THP file's whole choice list)."""
    root = Path("/")
    paths = [root / hygiene.KSM_RUN, root / hygiene.THP_ENABLED, root / hygiene.THP_DEFRAG]
    paths += [root / hygiene.CPUS / cpu / hygiene.GOVERNOR for cpu in hygiene._cpufreq_cpus(root)]
    return {p: p.read_text() for p in paths if p.exists()}


@pytest.fixture
def settings_kept(needs_root):
    """This machine's settings as they were: checked after the test, and put back if they are
    not (then the test fails): no test leaves the host tuned."""
    before = _settings()
    changes, _ = hygiene.planned(hygiene.read(Path("/")), Path("/"))
    if not changes:
        pytest.skip("this host is tuned already: --tune-host would change nothing to restore")
    yield before
    after = _settings()
    for path, text in before.items():
        if after.get(path) != text:
            path.write_text(hygiene._chosen(text.strip()) + "\n")
    assert after == before, "the test left this host's settings changed"


def _tuned_now() -> bool:
    found = hygiene.read(Path("/"))
    return found.thp_enabled in ("never", hygiene.NOT_PRESENT) and found.ksm_run in ("0", hygiene.NOT_PRESENT)


def test_tuning_this_host_is_undone_when_the_block_ends(settings_kept, workdir):
    with hygiene.tuned(True, workdir.journal) as tuning:
        assert tuning.changes and _tuned_now()
        assert _settings() != settings_kept
        for change in tuning.changes:
            assert hygiene._current(Path("/") / change.path) == change.new
    assert _settings() == settings_kept and workdir.journal.read() == ([], [])


def _run(tmp_path: Path, workdir: Path) -> tuple[subprocess.Popen, Path]:
    db = tmp_path / "r.db"
    argv = [sys.executable, "-m", "fslab", "run", str(write_study(tmp_path, STUDY)), "--no-ceiling", "--tune-host"]
    argv += ["--db", str(db), "--workdir", str(workdir)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), db


def _running_tuned(proc: subprocess.Popen, db: Path) -> None:
    """Wait until the run is tuned and fio runs (the study run begun)."""
    wait_for(
        "fslab running fio on a tuned host",
        lambda: proc.poll() is None and runs_stored(db) >= 0 and fio_children(proc.pid) and _tuned_now(),
        deadline=180,
        every=0.05,
    )
    assert proc.poll() is None, proc.communicate()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_a_signalled_fslab_run_puts_the_host_back(settings_kept, workdir, tmp_path, signum):
    proc, db = _run(tmp_path, workdir.root)
    try:
        _running_tuned(proc, db)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum and "interrupted" in stderr, stderr
    assert _settings() == settings_kept and workdir.journal.read() == ([], [])
    assert stderr.count("host hygiene: ") == 1, stderr
    vm = ResultsDB(str(db)).study_run()["environment"]["vm_hygiene"]
    assert vm["tuned"] and vm["thp_enabled"] == "never"
    assert vm["as_found"]["thp_enabled"] == hygiene._chosen(settings_kept[Path("/") / hygiene.THP_ENABLED].strip())


def test_after_a_kill_9_fslab_cleanup_puts_the_host_back_and_says_so(settings_kept, workdir, tmp_path):
    proc, db = _run(tmp_path, workdir.root)
    try:
        _running_tuned(proc, db)
        fio = fio_children(proc.pid)
    finally:
        proc.kill()
        proc.communicate()
    assert _tuned_now(), "a kill -9 restores nothing"
    deadline = time.monotonic() + 60
    while any(Path(f"/proc/{pid}").exists() for pid in fio):  # the orphaned fio ends with its 1 s job
        assert time.monotonic() < deadline, "the orphaned fio should end with its job"
        time.sleep(0.1)
    cleaned = fslab("cleanup", "--workdir", str(workdir.root))
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    thp = hygiene._chosen(settings_kept[Path("/") / hygiene.THP_ENABLED].strip())
    said = f"host-setting /{hygiene.THP_ENABLED}: released: restored to {thp} (fslab had set never)"
    assert said in " ".join(cleaned.stdout.split()), cleaned.stdout
    assert _settings() == settings_kept


def test_qemus_vcpu_thread_is_pinned(needs_root):
    cpus = (max(os.sched_getaffinity(0)),)
    qemu = subprocess.Popen(
        [
            "qemu-system-x86_64",
            "-S",
            "-nodefaults",
            "-display",
            "none",
            "-accel",
            "tcg",
            "-m",
            "32",
            "-smp",
            "1",
            *hygiene.QEMU_THREAD_NAMES,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        pinned = hygiene.pin_vcpus(qemu.pid, cpus, 1)
        [(tid, cpu)] = pinned.items()
        assert cpu == cpus[0] and os.sched_getaffinity(tid) == {cpus[0]}
        assert Path(f"/proc/{qemu.pid}/task/{tid}/comm").read_text().strip() == "CPU 0/TCG"
        others = [int(t) for t in os.listdir(f"/proc/{qemu.pid}/task") if int(t) != tid]
        rest = os.sched_getaffinity(0) - set(cpus)
        assert all(os.sched_getaffinity(t) == rest for t in others if rest), "QEMU's other threads kept off it"
    finally:
        qemu.kill()
        qemu.wait()
