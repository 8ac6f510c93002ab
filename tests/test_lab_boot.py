"""The kernel lab for real (root): a kernel package fetched from the configured archive and
unpacked, booted under TCG with its own modules; what the guest cannot read of the host; QEMU
killed and its files gone however a boot ends; the accelerator probe. Each boot costs seconds
of emulated CPU: one boot serves the tests of what it showed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import LAB_BOOTS, wait_for
from fslab.core.identity import process
from fslab.core.workdir import Workdir
from fslab.lab import kernels, vm

pytestmark = [pytest.mark.root, pytest.mark.guest, LAB_BOOTS]

RELEASE = "6.1.0-55-amd64"  # not this machine's installed kernel: its modules exist only in the package
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Iterator[kernels.PreparedKernel]:
    """6.1.0-55 fetched from the archive into a cache of the test's own (a real download)."""
    if vm.unavailable_reason():
        pytest.fail(f"the lab's tests boot a guest: {vm.unavailable_reason()}")
    cache = Path("/var/tmp") / f"fslab-test-kernels-{uuid.uuid4().hex[:8]}"
    said: list[str] = []
    try:
        yield kernels.prepare(RELEASE, cache=cache, say=said.append)
        assert any("downloading" in line for line in said)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_a_prepared_kernel_is_the_archives_package_unpacked_with_its_module_index(prepared):
    assert prepared.release == RELEASE and prepared.vmlinuz.name == f"vmlinuz-{RELEASE}"
    assert (prepared.modules / "modules.dep").stat().st_size > 0
    assert prepared.package_version == kernels._offered_one(RELEASE, kernels.KERNELS).version
    assert len(prepared.config_sha256) == 64
    again = kernels.prepare(RELEASE, cache=prepared.modules.parents[3].parent)
    assert again == prepared


# The guest's own root (overlay over the 9p export) bound non-recursively at /mnt: what lies under its
# /proc, /sys and /dev there is the export's. Mounting hostroot again fails (its virtio channel is in
# use) but would show the same export. Run last in `booted`'s guest (a boot of its own would cost
# a TCG boot), its keys apart from the lines before it; its outcome said, not the boot's status.
PEEK = """
mount -t 9p -o trans=virtio,version=9p2000.L,ro hostroot /srv 2>/dev/null && echo "remounted=yes"
mount --bind / /mnt && echo "bound=yes"
for top in /mnt /srv; do
    echo "${top}_processes=$(ls -A $top/proc 2>/dev/null | grep -c '^[0-9]')"
    echo "${top}_sys=$(ls -A $top/sys 2>/dev/null | wc -l)"
done
echo "dev=$(ls -A /mnt/dev | tr '\\n' ' ')"
echo "own_processes=$(ls /proc | grep -c '^[0-9]')"
echo "own_sys=$(ls /sys | grep -c '^block$')"
echo "bound_shadow_bytes=$(cat /mnt/etc/shadow 2>/dev/null | wc -c)"
echo "bound_root_entries=$(ls -A /mnt/root | tr '\\n' ' ')"
chroot /mnt /usr/bin/true && echo "tree=works" || echo "tree=fails"
"""


@pytest.fixture(scope="module")
def booted(prepared, tmp_path_factory):
    """One boot of 6.1.0-55 under TCG: its release, a module of its own loaded, and what of the host it reads."""
    share = tmp_path_factory.mktemp("lab-share")
    marker = Path("/root") / f"fslab-lab-marker-{uuid.uuid4().hex[:8]}"  # beside users' checkouts, not in one
    checkout = Path("/root") / f"fslab-lab-checkout-{uuid.uuid4().hex[:8]}"  # a user's directory under /root
    marker.write_text("secret\n")
    checkout.mkdir()
    (checkout / "notes.txt").write_text("kept\n")
    command = f"""
echo "release=$(uname -r)"
modprobe raid1 && echo "raid1=$(grep -c '^raid1 ' /proc/modules)"
cat {marker} > /dev/null 2>&1 && echo "marker=read" || echo "marker=unreadable"
echo "shadow_bytes=$(cat /etc/shadow 2>/dev/null | wc -c)"
echo "root_entries=$(ls -A /root | tr '\\n' ' ')"
echo "checkout=$(cat {checkout}/notes.txt)"
{REPO}/.venv/bin/python -m fslab --help > /dev/null && echo "fslab=runs"
echo "scratch=$(findmnt -n -o FSTYPE {vm.SCRATCH})"
{PEEK}"""
    try:
        boot = vm.boot(prepared, command, share=share, spec=vm.VmSpec(accelerator="tcg"), cwd=checkout, timeout=600)
    finally:
        marker.unlink()
        shutil.rmtree(checkout)
    said = dict(line.split("=", 1) for line in boot.output.splitlines() if "=" in line)
    assert boot.status == 0, f"{boot.output[-3000:]}\n{boot.console[-3000:]}"
    return boot, said, marker, checkout


def test_the_guest_runs_the_prepared_kernel_and_loads_its_own_modules(booted):
    boot, said, _, _ = booted
    assert said["release"] == RELEASE
    assert said["raid1"] == "1"  # 6.1.0-55's raid1.ko: the host has only 6.1.0-56's modules
    assert said["scratch"] == "ext4"


def test_the_guest_cannot_read_roots_files_nor_the_shadow_file_while_fslab_runs_there(booted):
    _, said, marker, checkout = booted
    assert said["marker"] == "unreadable"
    assert said["shadow_bytes"] == "0"
    assert marker.name not in said["root_entries"] and checkout.name in said["root_entries"]
    assert said["checkout"] == "kept"  # the directory the command runs in, under /root, bound back
    assert said["fslab"] == "runs"  # fslab's interpreter (pyenv's, in /root here) and package, bound back


def test_a_guest_binding_its_root_elsewhere_finds_no_host_process_nor_sys_and_the_masks_still_on(booted):
    """The lab's masking (fslab/lab/masking.py) seen from inside: the host's root, bound again from
    under the guest's own /proc and /sys, shows none of the host's processes, /sys or /dev."""
    _, said, marker, _ = booted
    assert said.get("bound") == "yes", "the guest could not bind its root at /mnt"
    assert said["/mnt_processes"] == "0" and said["/mnt_sys"] == "0", "the host's /proc and /sys exported"
    assert said["/srv_processes"] == "0" and said["/srv_sys"] == "0"
    assert "null" not in said["dev"].split() and "kmsg" not in said["dev"].split(), "the host's /dev exported"
    assert said["own_processes"] != "0" and said["own_sys"] == "1", "the guest's own /proc and /sys"
    assert said["bound_shadow_bytes"] == "0" and marker.name not in said["bound_root_entries"], "the masks"
    assert said["tree"] == "works"


def test_the_boot_is_a_host_named_by_its_release_with_every_lab_field(booted):
    boot, _, _, _ = booted
    host = boot.host
    assert host.name == RELEASE and host.kernel == RELEASE and host.accelerator == "tcg" and host.emulated
    assert host.kernel_package and host.kernel_config_sha256 and host.qemu_version.startswith("QEMU emulator")
    assert (host.disk_cache, host.disk_aio) == ("none", "io_uring" if vm.io_uring_works() else "native")
    assert host.cpu_count == 1 and 1.5 * 2**30 < host.memory_bytes <= 2 * 2**30 and host.cpu_model
    host_boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert boot.boot_id and boot.boot_id != host_boot


def test_a_boot_past_its_time_is_killed_by_its_proof_and_leaves_nothing(tmp_path):
    kernel = kernels.installed(kernels.installed_releases()[-1])
    workdir = Workdir(tmp_path / "work")
    workdir.root.mkdir()
    before = set(Path(vm.BOOT_TEMP).glob("fslab-boot-*"))
    boot = vm.boot(kernel, "sleep 600", share=tmp_path / "share", spec=vm.VmSpec(accelerator="tcg"), timeout=3,
                   journal=workdir.journal)  # fmt: skip
    assert boot.status is None
    lines = [json.loads(line) for line in (workdir.root / "journal.jsonl").read_text().splitlines()]
    assert [(e["event"], e["kind"]) for e in lines] == [
        ("acquire", "lab-boot"), ("proof", "lab-boot"), ("acquire", "process"), ("proof", "process"),
        ("release", "process"), ("release", "lab-boot"),
    ]  # fmt: skip
    proof = lines[3]["proof"]
    assert proof["comm"] == vm.QEMU_COMM
    living = process(proof["pid"])
    assert living is None or living.start != proof["start"]  # that very QEMU is gone
    assert not workdir.journal.outstanding()
    assert set(Path(vm.BOOT_TEMP).glob("fslab-boot-*")) <= before  # its directory removed


def test_a_guest_kernel_that_crashes_ends_its_boot_within_seconds_saying_how(tmp_path):
    """sysrq's "c" panics the guest's kernel as its command starts: the boot ends then, not at its
    time-out, naming the kernel and the crash; QEMU and the boot's directory gone as ever."""
    kernel = kernels.installed(kernels.installed_releases()[-1])
    workdir = Workdir(tmp_path / "work")
    workdir.root.mkdir()
    share = tmp_path / "share"
    with ThreadPoolExecutor(max_workers=1) as pool:
        booting = pool.submit(
            vm.boot, kernel, "echo c > /proc/sysrq-trigger; sleep 600", share=share,
            spec=vm.VmSpec(accelerator="tcg"), timeout=600, journal=workdir.journal,
        )  # fmt: skip
        wait_for("the guest's command", lambda: (share / "started").exists() or booting.done(), deadline=600)
        crashed_at = time.monotonic()  # within the poll's 0.2 s
        with pytest.raises(vm.GuestCrashed) as crashed:
            booting.result(timeout=600)
        seconds = time.monotonic() - crashed_at
    assert (
        str(crashed.value)
        == f"the guest kernel {kernel.release} crashed: Kernel panic - not syncing: sysrq triggered crash"
    )
    assert seconds < 60, f"the boot ended {seconds:.0f} s after its kernel crashed"
    assert "sysrq triggered crash" in crashed.value.console
    assert not workdir.journal.outstanding()
    journal = [json.loads(line) for line in (workdir.root / "journal.jsonl").read_text().splitlines()]
    (directory,) = {e["id"] for e in journal if e["kind"] == vm.BOOT_KIND}
    assert not Path(directory).exists(), "its boot's directory removed"


@pytest.mark.long  # a boot more in make test, for what the sysrq test and the stored console (test_lab) cover
def test_an_oops_panics_the_guest_and_ends_its_boot_saying_where(prepared, tmp_path):
    """6.1.0-55's ext4 (Debian's 6.1.192-1; fixed in 6.1.0-56, 6.1.192-2: "ext4: fix NULL folio
    dereference in mballoc") oopses at a mkdir after a drop of the page cache: oops=panic ends the
    boot there, said with the function it was in."""
    command = f"cd {vm.SCRATCH} && mkdir a && sync && echo 3 > /proc/sys/vm/drop_caches && mkdir b; sleep 600"
    started = time.monotonic()
    with pytest.raises(vm.GuestCrashed) as crashed:
        vm.boot(prepared, command, share=tmp_path / "share", spec=vm.VmSpec(accelerator="tcg"), timeout=600)
    said = str(crashed.value)
    assert said.startswith(f"the guest kernel {RELEASE} crashed: BUG: kernel NULL pointer dereference"), said
    assert " in ext4_mb_load_buddy_gfp+" in said and said.endswith(" [ext4]"), said
    assert time.monotonic() - started < 300, "not at its time-out (600 s)"


def test_this_machine_probes_to_tcg(tmp_path):
    """/dev/kvm is here, but KVM fails (nested): a real boot probe says so."""
    assert os.path.exists("/dev/kvm")
    assert vm.accelerator(cache=tmp_path) == "tcg"
    assert [p.name for p in tmp_path.iterdir()] == [
        f"accelerator-{Path('/proc/sys/kernel/random/boot_id').read_text().strip()}.json"
    ]


# fslab's own handlers, as its commands install them (fslab.__main__): without them, a process
# started with SIGINT ignored (a background job of a non-interactive shell: `make test &`) keeps
# ignoring it, and the Ctrl-C went unheard while QEMU ran its 600 s.
INTERRUPTED = """
import sys
from pathlib import Path
from fslab.core.interruption import interrupt_on_signals
from fslab.core.workdir import Workdir
from fslab.lab import kernels, vm
interrupt_on_signals()
kernel = kernels.installed(kernels.installed_releases()[-1])
try:
    vm.boot(kernel, "sleep 600", share=Path(sys.argv[1]), spec=vm.VmSpec(accelerator="tcg"), timeout=600,
            journal=Workdir(Path(sys.argv[2])).journal)
except KeyboardInterrupt:
    sys.exit(130)
"""


def _signal_state(pid: int) -> str:
    """The signal masks the kernel holds for a process (blocked, ignored, caught, pending) and
    each of its threads' state, from /proc: what tells a signal ignored from one never handled."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        threads = [
            (Path(t) / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in Path(f"/proc/{pid}/task").iterdir()
        ]
    except OSError as exc:
        return f"unreadable: {exc}"
    masks = [line for line in status if line.startswith(("SigQ", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))]
    return f"{'; '.join(masks)}; threads' states {threads}"


def test_ctrl_c_during_a_boot_kills_that_qemu_and_removes_its_directory(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    journal = workdir / "journal.jsonl"
    before = set(Path(vm.BOOT_TEMP).glob("fslab-boot-*"))
    proof: dict = {}
    fslab = subprocess.Popen([sys.executable, "-c", INTERRUPTED, str(tmp_path / "share"), str(workdir)])
    try:
        deadline = time.monotonic() + 120
        while not (journal.exists() and '"proof", "kind": "process"' in journal.read_text()):  # QEMU is running
            assert fslab.poll() is None and time.monotonic() < deadline, "no QEMU started"
            time.sleep(0.1)
        proof = next(
            e["proof"]
            for e in map(json.loads, journal.read_text().splitlines())
            if e["kind"] == "process" and e["event"] == "proof"
        )
        assert process(proof["pid"]) is not None
        fslab.send_signal(signal.SIGINT)
        try:
            assert fslab.wait(timeout=60) == 130
        except subprocess.TimeoutExpired:  # say how fslab held its signals: ignored, blocked, or never handled
            raise AssertionError(f"the Ctrl-C not acted on in 60 s: {_signal_state(fslab.pid)}") from None
    finally:
        if fslab.poll() is None:  # the test failed before its Ctrl-C: one now, for fslab to release what it holds
            fslab.send_signal(signal.SIGINT)
            try:
                fslab.wait(timeout=60)
            except subprocess.TimeoutExpired:
                fslab.kill()
                fslab.wait()
                qemu = process(proof["pid"]) if proof else None
                if qemu is not None and qemu.start == proof["start"]:  # that very QEMU, left by the killed fslab
                    os.kill(qemu.pid, signal.SIGKILL)
    living = process(proof["pid"])
    assert living is None or living.start != proof["start"]
    events = [(e["event"], e["kind"]) for e in map(json.loads, journal.read_text().splitlines())]
    assert events == [
        ("acquire", "lab-boot"), ("proof", "lab-boot"), ("acquire", "process"), ("proof", "process"),
        ("release", "process"), ("release", "lab-boot"),
    ]  # fmt: skip
    assert set(Path(vm.BOOT_TEMP).glob("fslab-boot-*")) <= before
