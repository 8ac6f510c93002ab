"""zfs-fuse's ARC emptied between a workload's layout and its measured reads: drop_caches does not
reach the daemon's memory, so the pool is exported and imported again (Zfs.empty_cache), and the
measured reads come from the pool's devices — a fact the devices' own counters show, not a time."""

import subprocess
import time
from contextlib import ExitStack, contextmanager

import pytest

from conftest import ZFS_FUSE, held_by, ran_study
from fslab.core.block_devices import refusals, resolve
from fslab.core.errors import Refused
from fslab.core.journal import Held
from fslab.core.names import kernel_name
from fslab.devices.layers import Stack
from fslab.devices.loop import attached, image_file, on_loops
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.zfs import EMPTIED, MadePool, reimport_pool
from fslab.filesystems.zfs_engine import engine
from fslab.model import Target

pytestmark = ZFS_FUSE  # zfs-fuse: one daemon on the machine (conftest)

# A file the ARC holds whole (32MiB under a 64MiB cap), read once after its layout wrote it.
STUDY = """\
[study]
name = "zfs-cache"
repetitions = 2
warmup = 0
image_size = "256MiB"
image_fill = "sparse"

[[target]]
name = "z"
filesystem = "zfs"
arc_max = "64MiB"

[[workload]]
name = "reread"
rw = "read"
bs = "1M"
size = "32MiB"
runtime = "0s"
"""


@pytest.mark.root
def test_the_measured_reads_come_from_the_devices_after_the_pool_was_imported_again(workdir, tmp_path):
    found = engine()
    if found is None or not found.fuse:
        pytest.skip("the kernel module's ARC is left to drop_caches: this is zfs-fuse's")
    _, db, study_run = ran_study(tmp_path, STUDY, workdir, "--no-ceiling")
    runs = db.runs(study_run)
    assert len(runs) == 2 and all(r["status"] == "ok" for r in runs), [r["error"] for r in runs]
    ratios = db.metric_values(study_run, ["device_read_ratio"])
    assert len(ratios) == len(runs), ratios
    for (run_id, _, _), ratio in ratios.items():  # an ARC holding the file: ~0; counted from fio's epoch, known to
        # one log window under load (as the scenario's below): 0.86 seen beside other tests' runs
        assert ratio >= 0.75, f"run {run_id}: the devices read {ratio:.0%} of what fio read: the ARC served the rest"
    for run in runs:
        assert not [n for n in run["notes"] or [] if "served by a cache" in str(n)], run["notes"]
        assert EMPTIED in run["fs_details"], "how the ARC was emptied, stored with the run"
    assert held_by(workdir.root) == [], "the pool, its mount and the links to its devices all gone"


# A scenario's own drop_caches phase empties it too: the file its fill phase wrote is read back
# from the devices.
SCENARIO = """\
[study]
name = "zfs-cache-scenario"
repetitions = 1
warmup = 0
image_size = "256MiB"
image_fill = "sparse"

[[target]]
name = "z"
filesystem = "zfs"
arc_max = "64MiB"

[[workload]]
name = "fill-then-read"
kind = "scenario"
size = "32MiB"

[[workload.phase]]
name = "fill"
fio = { rw = "write", bs = "1m" }
measured = false

[[workload.phase]]
name = "drop"
action = "drop_caches"
measured = false

[[workload.phase]]
name = "read"
fio = { rw = "read", bs = "1m" }
"""


@pytest.mark.root
def test_a_scenarios_drop_caches_phase_empties_zfs_fuses_arc(workdir, tmp_path):
    found = engine()
    if found is None or not found.fuse:
        pytest.skip("the kernel module's ARC is left to drop_caches: this is zfs-fuse's")
    _, db, study_run = ran_study(tmp_path, SCENARIO, workdir)
    runs = db.runs(study_run)
    assert len(runs) == 1 and runs[0]["status"] == "ok", runs[0]["error"]
    ratios = {phase: ratio for (_, phase, _), ratio in db.metric_values(study_run, ["device_read_ratio"]).items()}
    # An ARC still holding the file would leave the devices almost nothing (it fits twice
    # over: ~0). The devices are counted from fio's epoch, known to one log window (100 ms) under
    # load, a tenth of this short read: 1.01 on a quiet machine, 0.91 seen in CI beside other tests.
    assert ratios.keys() == {"read"} and ratios["read"] >= 0.75, (
        f"the devices read {ratios} of what fio read after the drop: the ARC served the rest"
    )
    assert held_by(workdir.root) == []


@pytest.mark.root
def test_a_pool_fslab_did_not_make_here_is_neither_exported_nor_imported(workdir):
    """What reimport_pool is given is proven before zpool is asked anything: a name this work
    directory does not give, or a guid that is not zpool's number, refuses."""
    journal = workdir.journal
    ours = kernel_name(workdir.root, "z")
    refused = (
        ("tank", "123", "not a pool name fslab gives"),
        (ours, "-f", "recorded no guid"),
        (ours, "", "recorded no guid"),
    )
    for name, guid, why in refused:
        with pytest.raises(Refused, match=why):
            reimport_pool(journal, MadePool(Held(journal, "zpool", name, {"guid": guid}), None))


@pytest.mark.root
def test_a_pool_another_work_directory_named_is_neither_exported_nor_imported(workdir, tmp_path, monkeypatch):
    """A pool name of fslab's form, with a guid recorded, but given for another work directory
    (another fslab's run), refuses by its name alone: no zpool is on PATH to be asked."""
    monkeypatch.setenv("PATH", str(tmp_path))
    journal = workdir.journal
    theirs = kernel_name(tmp_path / "another-workdir", "z")
    assert theirs != kernel_name(workdir.root, "z")
    with pytest.raises(Refused, match="not a pool name fslab gives in"):
        reimport_pool(journal, MadePool(Held(journal, "zpool", theirs, {"guid": "1234567890"}), None))


def _leaf_vdevs(pool: str) -> list[str]:
    """The leaf vdevs `zpool status` names in the pool's config (zfs-fuse's zpool knows no -P:
    it names a device under /dev without "/dev/"): the rows beneath the mirror's."""
    status = subprocess.run(["zpool", "status", pool], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in status.splitlines() if line.startswith("\t    ")]


@contextmanager
def _mirror(workdir):
    """A zfs-fuse pool fslab made, a mirror of two loop devices: (what provision gave, the pool,
    the devices)."""
    found = engine()
    if found is None or not found.fuse:
        pytest.skip("the pool is imported again under zfs-fuse alone")
    target = Target("z", "zfs", (), "", 256 * 2**20, "sparse", devices=2, vdev="mirror")
    with ExitStack() as stack:
        journal = workdir.journal
        made = [image_file(journal, workdir.images, name, target.image_size, fill=None) for name in ("a", "b")]
        loops = [stack.enter_context(attached(journal, stack.enter_context(image))) for image in made]
        made_pool = FILESYSTEMS["zfs"].provision(journal, Stack.on(on_loops(loops)), workdir.mounts / "z", target)
        ready = stack.enter_context(made_pool)
        yield ready, ready.dataset.partition("/")[0], [loop.device for loop in loops]
    assert held_by(workdir.root) == [], "the pool, its mount, its devices and the scratch directory gone"


def _guard_refuses(device: str, pool: str) -> bool:
    return f"{device}: {device} is in ZFS pool {pool}" in refusals(resolve(device))


@pytest.mark.root
def test_the_guard_refuses_to_format_a_member_of_a_zfs_fuse_pool(workdir):
    """zfs-fuse's zpool knows no `status -P`: the guard reads its `zpool status`, which names a
    device under /dev without "/dev/". Fails on the guard that asked `-P` alone (it saw no pool)."""
    with _mirror(workdir) as (_, pool, devices):
        assert _leaf_vdevs(pool) == [device.removeprefix("/dev/") for device in devices]
        assert all(_guard_refuses(device, pool) for device in devices), [refusals(resolve(d)) for d in devices]


@pytest.mark.root
def test_after_a_reimport_the_pool_names_its_own_devices_and_the_guard_still_refuses_them(workdir):
    """zpool import records each device at the path it found it by: the pool imported again still
    names its own devices (not links removed since), so the guard against formatting a pool member
    refuses each of them, and zfs-fuse opens a device again (zpool offline, then online).
    Fails on the import from a scan of links (the pool then named /dev/shm/…/device0)."""
    with _mirror(workdir) as (ready, pool, devices):
        FILESYSTEMS["zfs"].empty_cache(workdir.journal, ready)
        assert _leaf_vdevs(pool) == [device.removeprefix("/dev/") for device in devices], "its own devices"
        assert all(_guard_refuses(device, pool) for device in devices), [refusals(resolve(d)) for d in devices]
        subprocess.run(["zpool", "offline", pool, devices[1]], capture_output=True, text=True, check=True)
        online = subprocess.run(["zpool", "online", pool, devices[1]], capture_output=True, text=True)
        assert online.returncode == 0, online.stderr
        health = _resilvered(pool)
        assert "is healthy" in health, health


def _resilvered(pool: str, within: float = 120.0) -> str:
    """`zpool status -x` once the pool's resilver is over: a device brought online catches up on
    what it missed, and the pool calls itself healthy only then (seen under load: 1.38 % done)."""
    deadline = time.monotonic() + within
    while True:
        health = subprocess.run(["zpool", "status", "-x", pool], capture_output=True, text=True).stdout
        if "resilver in progress" not in health or time.monotonic() > deadline:
            return health
        time.sleep(0.1)  # a poll of the event, not a wait for a guessed time
