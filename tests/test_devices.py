"""Loop images, formatting safety and the journal that lets `fslab cleanup` undo a killed run."""

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import fslab
from fslab.devices.loop import devices_backed_by, direct_io_enabled, loop_image
from fslab.filesystems import FILESYSTEMS


def blkid_type(device: str) -> str:
    return subprocess.run(["blkid", "-o", "value", "-s", "TYPE", device], capture_output=True, text=True).stdout.strip()


def test_loop_image_is_sparse_direct_and_gone_afterwards(workdir):
    with loop_image(workdir.journal, workdir.images, "t", 256 * 2**20) as loop:
        assert loop.device.startswith("/dev/loop")
        assert direct_io_enabled(loop.device) and loop.direct_io
        assert loop.image.stat().st_size == 256 * 2**20
        assert loop.image.stat().st_blocks == 0, "a new image takes no space until written"
        assert devices_backed_by(loop.image) == [loop.device]
    assert not loop.image.exists() and devices_backed_by(loop.image) == []
    assert workdir.journal.outstanding() == []


def test_refuses_to_format_a_device_that_is_not_its_image(workdir):
    with loop_image(workdir.journal, workdir.images, "mine", 64 * 2**20) as loop:
        for device in ("/dev/zero", "/dev/loop-control"):
            impostor = replace(loop, device=device)
            with pytest.raises(PermissionError, match=f"refusing to format {device}"):
                with FILESYSTEMS["ext4"].provision(workdir.journal, impostor, workdir.mounts / "x", [], ""):
                    pass
        elsewhere = replace(loop, image=workdir.root / "someone-elses.img")
        with pytest.raises(PermissionError, match="not the loop device of fslab's image"):
            with FILESYSTEMS["xfs"].provision(workdir.journal, elsewhere, workdir.mounts / "x", [], ""):
                pass
        assert blkid_type(loop.device) == "", "nothing was formatted"


KILLED_MIDWAY = """
import os, sys
from pathlib import Path
from fslab.runner import Workdir
from fslab.devices.loop import loop_image
from fslab.filesystems import FILESYSTEMS
wd = Workdir(Path(sys.argv[1]))
with loop_image(wd.journal, wd.images, "killed", 320 * 2**20) as loop:
    with FILESYSTEMS["xfs"].provision(wd.journal, loop, wd.mounts / "killed", [], "noatime"):
        os._exit(9)  # dies holding a loop device and a mount, as a killed fslab would
"""


def test_cleanup_releases_what_a_killed_run_held(workdir):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(KILLED_MIDWAY), str(workdir.root)])
    assert proc.returncode == 9
    image, mountpoint = workdir.images / "killed.img", workdir.mounts / "killed"
    assert devices_backed_by(image), "the killed process left its loop device"
    assert str(mountpoint) in Path("/proc/mounts").read_text()
    assert workdir.journal.outstanding() == [("mount", str(mountpoint)), ("image", str(image))]

    result = fslab("cleanup", "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stderr
    assert f"mount {mountpoint}: released" in result.stdout and f"image {image}: released" in result.stdout
    assert not devices_backed_by(image) and not image.exists()
    assert str(mountpoint) not in Path("/proc/mounts").read_text()
    assert workdir.journal.outstanding() == []
    again = fslab("cleanup", "--workdir", str(workdir.root))
    assert "nothing to clean up" in again.stdout
