"""The lab's masking namespace lets go of its copies of the host's device mounts: a copy would keep
another run's target mounted, and its loop device busy, for as long as a VM runs (seen in make
test: "/dev/loop0 detached but still attached after 30 s" beside a lab boot), and would show that
target to the guest. Real: a loop-mounted ext4 on the host, QEMU (paused, no machine) started
through the trampoline, its namespace's mount table read. And a real guest (TCG) that binds its
root elsewhere, from under its own /proc and /sys, finds the host's root without the host's
processes, /sys or /dev, and still masked."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import LAB_BOOTS
from fslab.lab import kernels, masking, vm
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


# The guest's own root (overlay over the 9p export) bound non-recursively at /mnt: what lies under its
# /proc, /sys and /dev there is the export's. Mounting hostroot again fails (its virtio channel is in
# use) but would show the same export.
PEEK = """
mount -t 9p -o trans=virtio,version=9p2000.L,ro hostroot /srv 2>/dev/null && echo "remounted=yes"
mount --bind / /mnt || exit 3
for top in /mnt /srv; do
    echo "${top}_processes=$(ls -A $top/proc 2>/dev/null | grep -c '^[0-9]')"
    echo "${top}_sys=$(ls -A $top/sys 2>/dev/null | wc -l)"
done
echo "dev=$(ls -A /mnt/dev | tr '\\n' ' ')"
echo "own_processes=$(ls /proc | grep -c '^[0-9]')"
echo "own_sys=$(ls /sys | grep -c '^block$')"
echo "shadow_bytes=$(cat /mnt/etc/shadow 2>/dev/null | wc -c)"
echo "root_entries=$(ls -A /mnt/root | tr '\\n' ' ')"
chroot /mnt /usr/bin/true && echo "tree=works"
"""


@pytest.mark.guest
@LAB_BOOTS
def test_a_guest_binding_its_root_elsewhere_finds_no_host_process_nor_sys_and_the_masks_still_on(tmp_path):
    if vm.unavailable_reason():
        pytest.fail(f"the lab's tests boot a guest: {vm.unavailable_reason()}")
    kernel = kernels.installed(kernels.installed_releases()[-1])
    marker = Path("/root") / f"fslab-lab-marker-{uuid.uuid4().hex[:8]}"
    marker.write_text("secret\n")
    try:
        boot = vm.boot(kernel, PEEK, share=tmp_path / "share", spec=vm.VmSpec(accelerator="tcg", measured=False))
    finally:
        marker.unlink()
    assert boot.status == 0, f"{boot.output[-3000:]}\n{boot.console[-3000:]}"
    said = dict(line.split("=", 1) for line in boot.output.splitlines() if "=" in line)
    assert said["/mnt_processes"] == "0" and said["/mnt_sys"] == "0", "the host's /proc and /sys exported"
    assert said["/srv_processes"] == "0" and said["/srv_sys"] == "0"
    assert "null" not in said["dev"].split() and "kmsg" not in said["dev"].split(), "the host's /dev exported"
    assert said["own_processes"] != "0" and said["own_sys"] == "1", "the guest's own /proc and /sys"
    assert said["shadow_bytes"] == "0" and marker.name not in said["root_entries"], "the masks"
    assert said["tree"] == "works"
