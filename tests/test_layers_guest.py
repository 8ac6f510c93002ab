"""md RAID1, LUKS and LVM layers, built for real in a QEMU guest running Debian's kernel
(this machine's kernel has neither md nor device-mapper; see guest.py).

One boot does three things: a process builds the whole stack and dies holding it, and
`fslab cleanup` must take it down; then a study runs seed 003's ext4-on-LVM-on-LUKS-on-RAID1
stack beside a raw baseline of each of its images; then the guest's state is listed.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fslab.lab import openzfs
from fslab.results import ResultsDB
from fslab.study import parse_study
from guest import SCRATCH, GuestJob, guest_kernel, result_of, unavailable_reason

REPO = Path(__file__).resolve().parent.parent

STUDY = """\
[study]
name = "nas-stack"
repetitions = 1
workloads = ["rand_read"]  # one run a target: each costs seconds of emulated CPU
image_size = "192MiB"
image_fill = "sparse"  # filling an image with random data costs the guest ~8 s of emulated CPU

[fio]
size = "8MiB"  # what a run reads is laid out first, through every layer: each MiB costs the guest emulated CPU
runtime = "1s"

[[target]]
name = "nas"
filesystem = "ext4"
mount_options = "noatime"
devices = 2
layers = ["md-raid1", "luks", "lvm"]
layer_options = { luks = "--key-size 256" }
raw_baseline = true

[[target]]
name = "crypt"
filesystem = "raw"
layers = ["luks"]
"""

KILLED_WITH_A_STACK = """
import os, sys
from contextlib import ExitStack
from pathlib import Path
from fslab.devices import layers
from fslab.devices.loop import attached, image_file, on_loops
from fslab.model import Target
from fslab.core.workdir import Workdir
wd = Workdir(Path(sys.argv[1]))
wd.prepare()
target = Target("killed", "ext4", (), "", 64 * 2**20, "sparse", devices=2, layers=("md-raid1", "luks", "lvm"))
with ExitStack() as held:
    loops = []
    for n in ("k1", "k2"):  # each image attached as it is made
        image = held.enter_context(image_file(wd.journal, wd.images, n, 64 * 2**20, fill=None))
        loops.append(held.enter_context(attached(wd.journal, image)))
    stack = held.enter_context(layers.built(wd.journal, on_loops(loops), target))
    print("built", stack.devices[0], flush=True)
    os._exit(9)
"""

# After the lab's setup (openzfs.setup_script), which loaded md's and device-mapper's modules.
IN_GUEST = """
for module in md_mod raid1 dm_mod dm_crypt; do [ -e /sys/module/$module ] && echo "module $module loaded"; done
set -x
.venv/bin/python /fslab-share/killed.py {scratch}/killed; echo "killed: $?"
ls /dev/mapper; cat /proc/mdstat
.venv/bin/fslab cleanup --workdir {scratch}/killed
echo "--- after cleanup"; ls /dev/mapper; cat /proc/mdstat; losetup -a
.venv/bin/fslab run /fslab-share/study.toml --db {scratch}/results.db --workdir {scratch}/fslab; echo "study: $?"
cp {scratch}/results.db* /fslab-share/
echo "--- after the study"; ls /dev/mapper; cat /proc/mdstat; losetup -a; ls {scratch}/fslab/images
"""


def guest_job() -> GuestJob:
    """The boot these tests need (conftest starts it early)."""
    setup = openzfs.setup_script(
        guest_kernel()[1].name, openzfs.needs_of(parse_study(STUDY, "study.toml", base_dir=REPO))
    )
    return GuestJob(
        "layers",
        setup + IN_GUEST.format(scratch=SCRATCH),
        REPO,
        {"study.toml": STUDY, "killed.py": textwrap.dedent(KILLED_WITH_A_STACK)},
    )


@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"the layer tests boot a guest kernel: {reason}; make test installs what they need")
    result = result_of(guest_job(), tmp_path_factory)
    assert result.status == 0, f"the guest did not finish:\n{result.output[-3000:]}\n{result.console[-3000:]}"
    sections = result.output.split("--- after ")
    return result, sections


def test_the_lab_setup_loaded_each_layer_s_modules(guest):
    result, sections = guest
    assert "fslab setup:" not in result.output
    for module in ("md_mod", "raid1", "dm_mod", "dm_crypt"):
        assert f"module {module} loaded" in sections[0], module


def test_cleanup_takes_down_the_stack_a_killed_run_left(guest):
    result, sections = guest
    before, after_cleanup = sections[0], sections[1]
    assert "built /dev/mapper/fslab_" in before and "killed: 9" in before
    assert "_vg-data" in before and "active raid1" in before, "the killed process held the whole stack"
    released = [
        line.split()[0] for line in before.split("fslab cleanup")[-1].splitlines() if line.endswith(": released")
    ]
    assert released == ["lvm", "luks", "md", "loop", "image", "loop", "image"], "top of the stack first"
    assert "fslab_" not in after_cleanup.split("fslab run")[0], "no mapping, array or loop device left"
    assert "active" not in after_cleanup.split("fslab run")[0]


def test_seed_003_stack_is_built_measured_and_recorded(guest):
    result, sections = guest
    assert "study: 0" in result.output, result.output[-3000:]
    db = ResultsDB(str(result.share / "results.db"))
    runs = db.runs(db.study_run()["id"])
    assert {r["target"] for r in runs} == {"nas", "nas/raw-1", "nas/raw-2", "crypt"}
    assert all(r["status"] == "ok" for r in runs), [r["error"] for r in runs if r["error"]]
    nas = next(r for r in runs if r["target"] == "nas")
    commands = " ".join(nas["mkfs_command"])
    for step in (
        "mdadm --create",
        "--level=1 --raid-devices=2",
        "cryptsetup luksFormat --type luks2",
        "--key-size 256",
        "lvm lvcreate",
        "mkfs.ext4",
    ):
        assert step in commands
    assert (
        commands.index("mdadm")
        < commands.index("luksFormat")
        < commands.index("lvcreate")
        < commands.index("mkfs.ext4")
    )
    details = nas["fs_details"]
    assert "Raid Level : raid1" in details and "Raid Devices : 2" in details
    assert "cipher:  aes-xts-plain64" in details and "keysize: 256 bits" in details
    assert "_vg" in details and "linear" in details
    assert "noatime" in nas["mount_options_effective"]
    assert nas["device"].startswith("/dev/mapper/fslab_") and nas["device"].count("/dev/loop") == 2, (
        "the volume, on two loop devices"
    )
    crypt = next(r for r in runs if r["target"] == "crypt")
    assert "cryptsetup open" in " ".join(crypt["mkfs_command"]) and "/dev/mapper/fslab_" in crypt["job_file"]
    samples = db.sample_groups(db.study_run()["id"]).values
    for target in ("nas", "nas/raw-1", "nas/raw-2", "crypt"):
        assert (
            len(samples[("rand_read", target)]["read_iops"]) == 1
            and min(samples[("rand_read", target)]["read_iops"]) > 0
        )


def test_nothing_is_left_in_the_guest_after_the_study(guest):
    result, sections = guest
    after_study = sections[2]
    assert "fslab_" not in after_study and "active" not in after_study and "/dev/loop" not in after_study
    assert ".img" not in after_study, "the images are deleted at the study's end"
