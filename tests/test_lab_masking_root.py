"""The lab's masking namespace lets go of its copies of the host's device mounts: a copy would keep
another run's target mounted, and its loop device busy, for as long as a VM runs (seen in make
test: "/dev/loop0 detached but still attached after 30 s" beside a lab boot), and would show that
target to the guest. Real: a loop-mounted ext4 on the host, QEMU (paused, no machine) started
through the trampoline, its namespace's mount table read. (A real guest binding its root elsewhere
is tests/test_lab_boot.py's: its one boot serves that test too.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from fslab.lab import masking
from fslab.tracing.namespace import holding_devices

pytestmark = pytest.mark.root


@pytest.fixture
def loop_mount(tmp_path):
    if os.geteuid() != 0 or not shutil.which("qemu-system-x86_64"):
        pytest.skip("needs root and QEMU")
    image, point = tmp_path / "target.img", tmp_path / "target"
    with open(image, "wb") as f:
        f.truncate(32 * 2**20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    device = subprocess.run(
        ["losetup", "--find", "--show", str(image)], check=True, capture_output=True, text=True
    ).stdout.strip()
    point.mkdir()
    try:
        subprocess.run(["mount", device, str(point)], check=True)
        try:
            yield str(point)
        finally:
            subprocess.run(["umount", str(point)], check=True)
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)


def test_the_vms_namespace_keeps_no_copy_of_a_device_mount_it_does_not_need(loop_mount, tmp_path):
    keep, stage, export = tmp_path / "boot", tmp_path / "stage", tmp_path / "root"
    keep.mkdir(), stage.mkdir(), export.mkdir()
    argv = ["qemu-system-x86_64", "-machine", "none", "-nodefaults", "-display", "none", "-monitor", "none", "-S"]
    qemu = subprocess.Popen(
        masking.wrap(argv, keep=[keep], stage=stage, export=export), stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not os.path.basename(os.readlink(f"/proc/{qemu.pid}/exe")).startswith("qemu-system"):
            assert qemu.poll() is None, f"the trampoline ended: {qemu.stderr.read() if qemu.stderr else ''}"
            assert time.monotonic() < deadline, "QEMU not started through the trampoline within 60 s"
            time.sleep(0.05)
        inside = Path(f"/proc/{qemu.pid}/mountinfo").read_text()
        outside = Path("/proc/self/mountinfo").read_text()
        assert loop_mount in holding_devices(outside), "the host still has the target mounted"
        assert loop_mount not in holding_devices(inside), "the VM's namespace kept the target's mount"
        assert " / / " in inside, "the root stays"
        assert f" / {export} " in inside, "the guest's 9p export: a copy of the root"
        assert f" {export}/proc " not in inside and " /proc " in inside, "QEMU's /proc alone"
    finally:
        qemu.kill()
        qemu.wait()
