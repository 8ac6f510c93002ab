"""Each filesystem's model of what is free right after mkfs and mount (Filesystem.room), against
the real mkfs and mount at small sizes: never above what statfs reports (a study it accepts
fits), and not far below it (a study that fits is not refused)."""

import os

import pytest

from conftest import ZFS_FUSE
from fslab.devices.layers import Stack
from fslab.devices.loop import on_loops
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.zfs_engine import engine
from fslab.model import Target
from test_filesystems import loops

pytestmark = ZFS_FUSE  # zfs-fuse: one daemon on the machine (conftest)

MiB = 2**20


def free_for_real(workdir, target: Target) -> int:  # noqa: ANN001
    with loops(workdir, target.devices, target.image_size) as attached:
        with FILESYSTEMS[target.filesystem].provision(
            workdir.journal, Stack.on(on_loops(attached)), workdir.mounts / "t", target
        ) as ready:
            assert ready.directory is not None, "a filesystem mounted"
            found = os.statvfs(ready.directory)
            return found.f_bavail * found.f_frsize


@pytest.mark.parametrize(
    ("filesystem", "mkfs_options", "devices", "sizes"),
    [
        ("ext4", (), 1, (64, 300, 1024)),
        ("ext4", ("-m", "0", "-i", "8192"), 1, (600,)),
        ("ext4", ("-T", "default"), 1, (64, 300)),  # as a scaled image is made (Ext4.scaled)
        ("xfs", (), 1, (300, 1024, 4096)),
        ("xfs", ("-l", "size=128m"), 1, (1024,)),
        ("btrfs", (), 1, (128, 1024, 3072)),
        ("btrfs", ("-m", "single"), 1, (1024,)),
        ("btrfs", ("-d", "raid1", "-m", "raid1"), 2, (512,)),
        ("btrfs", ("-d", "raid0", "-m", "raid1"), 2, (1024,)),
        ("zfs", (), 1, (128, 512, 1024)),
    ],
)
@pytest.mark.root
def test_the_model_errs_low_and_close_to_what_mkfs_and_mount_leave_free(
    workdir, filesystem, mkfs_options, devices, sizes
):  # noqa: ANN001
    if filesystem == "zfs" and engine() is None:
        pytest.fail("this test needs ZFS: make test installs zfs-fuse")
    for size in sizes:
        target = Target("t", filesystem, mkfs_options, "", size * MiB, "sparse", devices=devices)
        model = FILESYSTEMS[filesystem].room(target).usable
        real = free_for_real(workdir, target)
        print(filesystem, mkfs_options, size, model / MiB, real / MiB)
        assert model <= real, (
            f"{filesystem} {' '.join(mkfs_options)} on {size}MiB: the model says "
            f"{model / MiB:.1f}MiB free, mkfs and mount leave {real / MiB:.1f}MiB"
        )
        assert model >= real - max(devices * size * MiB * 6 // 100, 4 * MiB), (
            f"{filesystem} {' '.join(mkfs_options)} on {size}MiB: the model says "
            f"{model / MiB:.1f}MiB free, far below the {real / MiB:.1f}MiB mkfs and mount leave"
        )
    assert workdir.journal.outstanding() == []
