"""zfs-fuse's daemon kept across a study run's ZFS runs: started once, started again only where a
run asks for another ARC cap, stopped when the study run ends, and stopped by `fslab cleanup`
when a killed fslab left it. (The kernel module has no daemon: these need zfs-fuse.)"""

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import fslab, held_by, write_study

# (its module registers the loop and image releasers: the journal reads only kinds it knows)
from fslab.devices.loop import devices_backed_by
from fslab.filesystems.zfs_engine import daemon_pidfile, engine
from fslab.guard.identity import process
from fslab.results import ResultsDB

STUDY = """\
[study]
name = "daemons"
repetitions = 2
workloads = ["seq_write"]
image_size = "256MiB"
image_fill = "sparse"

[fio]
size = "16MiB"
runtime = "1s"

[[target]]
name = "z1"
filesystem = "zfs"

[[target]]
name = "z2"
filesystem = "zfs"

[[target]]
name = "capped"
filesystem = "zfs"
arc_max = "64MiB"
"""


def zfs_fuse_pids() -> list[int]:
    """Living zfs-fuse processes (a stopped one may linger a moment as a zombie)."""
    pids = subprocess.run(["pgrep", "-x", "zfs-fuse"], capture_output=True, text=True, check=False).stdout.split()
    return [int(pid) for pid in pids if process(int(pid))]


@pytest.fixture
def fuse():
    found = engine()
    if found is None or not found.fuse:
        pytest.skip("the daemon is zfs-fuse's (the OpenZFS kernel module has none)")
    if zfs_fuse_pids():
        pytest.skip("a zfs-fuse daemon fslab did not start runs: fslab uses it and starts none")


def daemon_of(run: dict) -> str:
    """The daemon line fslab stores with each ZFS run (its pid and start time)."""
    lines = [line for line in run["fs_details"].splitlines() if line.startswith("daemon: ")]
    assert len(lines) == 1, run["fs_details"]
    return lines[0]


def test_a_study_run_keeps_one_daemon_and_restarts_it_for_another_arc_cap(fuse, workdir, tmp_path):
    result = fslab("run", str(write_study(tmp_path, STUDY)), "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root), "--seed", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    db = ResultsDB(str(tmp_path / "r.db"))
    runs = sorted(db.runs(db.study_run()["id"]), key=lambda r: r["started_at"])
    assert len(runs) == 6 and all(r["status"] == "ok" for r in runs), [r["error"] for r in runs]
    assert all(r["fs_details"].startswith(f"engine: {engine().describe()}") for r in runs), "the engine, recorded with every run as before"
    for before, after in itertools.pairwise(runs):
        same_cap = (before["target"] == "capped") == (after["target"] == "capped")
        assert (daemon_of(before) == daemon_of(after)) == same_cap, f"{before['target']} → {after['target']}: {daemon_of(before)} / {daemon_of(after)}"
    assert all("--max-arc-size 64" in daemon_of(r) for r in runs if r["target"] == "capped")
    assert len({daemon_of(r) for r in runs}) < len(runs), "four uncapped runs among six: at least two in a row share a daemon"
    # nothing left: no daemon, no pool in its cache, no loop device or mount, nothing in the journal
    assert zfs_fuse_pids() == [], "the daemon is stopped when the study run ends"
    cache = Path("/var/lib/zfs/zpool.cache")
    assert not cache.exists() or b"fslab_" not in cache.read_bytes(), "no fslab pool left imported"
    assert held_by(workdir.root) == [] and workdir.journal.outstanding() == []
    assert not daemon_pidfile(workdir).exists()


KILLED_BETWEEN_RUNS = """
import os, sys
from pathlib import Path
from fslab.workdir import Workdir
from fslab.devices.layers import Stack
from fslab.devices.loop import attached, image_file, on_loops
from fslab.filesystems import FILESYSTEMS
from fslab.study import Target
wd = Workdir(Path(sys.argv[1]))
zfs, target = FILESYSTEMS["zfs"], Target("killed", "zfs", (), "", 256 * 2**20, "sparse")
with zfs.across_runs(wd.journal), image_file(wd.journal, wd.images, "killed", target.image_size, fill=False) as image:
    for run in range(2):
        with attached(wd.journal, image) as loop, zfs.provision(wd.journal, Stack.on(on_loops([loop])), wd.mounts / "killed", target) as ready:
            print(ready.details.splitlines()[1], flush=True)
            if run == 1:
                os._exit(9)  # dies in its second run, holding the daemon both used, a pool, a mount, a loop device
"""


def test_cleanup_stops_the_kept_daemon_a_killed_fslab_left(fuse, workdir):
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(KILLED_BETWEEN_RUNS), str(workdir.root)], capture_output=True, text=True, check=False)
    assert killed.returncode == 9, killed.stderr
    first, second = killed.stdout.splitlines()
    assert first == second and first.startswith("daemon: zfs-fuse pid "), "both runs used the one daemon"
    assert len(zfs_fuse_pids()) == 1
    kinds = [kind for kind, _ in workdir.journal.outstanding()]
    assert kinds == ["mount", "zpool", "loop", "zfs-daemon", "image"], kinds
    result = fslab("cleanup", "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    for released in ("mount", "zpool", "loop", "zfs-daemon", "image"):
        assert f"\n{released} " in f"\n{result.stdout}" and ": released" in result.stdout, result.stdout
    assert "left alone" not in result.stdout and "failed" not in result.stdout, result.stdout
    assert zfs_fuse_pids() == [] and held_by(workdir.root) == [] and workdir.journal.outstanding() == []
    assert not daemon_pidfile(workdir).exists() and not devices_backed_by(workdir.images / "killed.img")
