"""A throwaway QEMU guest booted from a prepared kernel over this machine's root filesystem.

The guest sees the host's root read-only through 9p with a RAM overlay on top, so it has every
tool and the same fslab; the prepared kernel's own modules at /lib/modules/RELEASE (a 9p share
of their own: the host has only its installed kernels' modules); a shared directory (`share`,
the guest's /fslab-share) that carries the command in and its output, exit status and results
out; and virtio-blk disks backed by image files (cache=none: no host page cache between the
guest and the file), the first of them the scratch disk at SCRATCH for its work directory and
SQLite database (loop images on tmpfs have no direct I/O; SQLite's WAL does not work over 9p),
or by a user's device, which QEMU gets as descriptors fslab opened and proved
(lab/passthrough.py), with a serial the guest names it by (/dev/disk/by-id/virtio-SERIAL).

QEMU runs in a mount namespace of its own (masking.py) where the host's secrets — /root, /home,
/etc/shadow, fslab's databases, … — are covered, so the guest cannot read them; what it exports
as the host's root is a copy of / there without the host's /proc, /sys, /dev and /run. It is fslab's
child, journalled with its pid and start time before it runs, and killed by that proof however
the boot ends (time-out, error, Ctrl-C); the boot's temporary directory goes with it.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import itertools
import json
import lzma
import os
import re
import shlex
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fslab.core.errors import FslabError, Refused
from fslab.core.identity import FileId, own_directory
from fslab.core.journal import Entry, Journal, releaser
from fslab.core.names import visible
from fslab.core.system import running_held
from fslab.core.workdir import Workdir
from fslab.lab import hygiene, masking
from fslab.lab.kernels import PreparedKernel, installed, installed_releases
from fslab.model import Host
from fslab.running.environment import machine_id

QEMU = "qemu-system-x86_64"
QEMU_COMM = "qemu-system-x86"  # its process name (15 characters)
SCRATCH = "/fslab-scratch"
SHARE = "/fslab-share"
LAB_CACHE = Path("/var/cache/fslab/lab")
BOOT_TEMP = Path("/var/tmp")
SCRATCH_BYTES = 4 * 2**30

# Modules the guest needs before it can reach its root filesystem; the rest it modprobes itself.
# (loop and ext4 too: the scratch disk's filesystem, mounted by the initramfs, and fslab's loop
# images; insmod from the initramfs is quicker than modprobe over 9p. ext4 asks the crypto API for
# crc32c as it mounts, which the initramfs cannot modprobe: both of the modules modprobe loads for
# it, as it would, the kernel choosing between them as ever)
EARLY_MODULES = (
    "virtio_pci",
    "virtio_blk",
    "9pnet_virtio",
    "9p",
    "overlay",
    "loop",
    "crc32c_intel",
    "crc32c_generic",
    "ext4",
)
CACHES = ("none", "directsync", "writethrough", "writeback", "unsafe")
MEASURED_CACHES = ("none", "directsync")  # the guest's I/O reaches the image file, not the host's page cache
AIOS = ("io_uring", "native", "threads")
# The guest kernel's command line. A panic reboots at once (panic=-1), which -no-reboot makes
# QEMU's exit; an oops panics (oops=panic): an oopsed kernel goes on with the dead task's locks
# held and its state suspect, so a boot would hang to its time-out and nothing measured after the
# oops could be trusted. A warning (WARN_ON, a non-fatal "BUG: sleeping function called…") does
# not panic.
KERNEL_ARGS = "console=ttyS0 panic=-1 oops=panic loglevel=4"


class VmError(FslabError):
    pass


class GuestCrashed(VmError):
    """The guest's kernel panicked (an oops panics: KERNEL_ARGS): the boot ended there, whatever
    its command did. Its message names the kernel and the crash's first line."""

    def __init__(self, release: str, crash: str, console: str):
        super().__init__(f"the guest kernel {release} crashed: {crash}")
        self.release, self.crash, self.console = release, crash, console


SERIAL = re.compile(r"[A-Za-z0-9-]{1,20}")  # virtio-blk's serial: 20 bytes; plain, for a path in /dev


@dataclass(frozen=True)
class Disk:
    """A virtio-blk disk: an image file, or a user's block device given as descriptors `fds`
    (read-only and read-write, opened and proven by fslab: core/block_devices.opened_for_guest),
    `image` then the device's node, for messages. `serial`: what the guest names it by."""

    image: Path
    cache: str = "none"
    aio: str = "io_uring"
    serial: str = ""
    fds: tuple[int, ...] = ()


@dataclass(frozen=True)
class VmSpec:
    memory_mib: int = 2048
    cpus: int = 1
    disks: tuple[Disk, ...] = ()
    accelerator: str | None = None  # None: accelerator()'s probe
    measured: bool = True  # False: a scratch boot, whose disks may be cached by the host


@dataclass(frozen=True)
class Boot:
    status: int | None  # the command's exit status; None when the guest never reported one
    output: str  # what the command printed
    console: str  # what the guest's kernel printed on its serial console
    share: Path
    host: Host  # the VM as a host of a study run: named by the kernel release
    boot_id: str  # the guest's /proc/sys/kernel/random/boot_id ("" when it never said)
    seconds_to_command: float | None = None  # the guest's uptime when the command started


# The initramfs's init: early modules, the host's root over 9p read-only with a RAM overlay, the
# kernel's own modules over it, the share, the scratch disk and the guest's own small filesystems
# (mounted by busybox, already in RAM: the host's mount and mkdir would each be loaded over 9p
# first, a tenth of a second or more each under emulation); then the host's bash runs init.sh.
INIT = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc && mount -t sysfs sys /sys && mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
for module in $(cat /modules.order); do insmod "/modules/$module" || echo "fslab-guest: insmod $module failed"; done
mkdir -p /lower /upper /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /lower || exec sh
mount -t tmpfs -o size=75% tmpfs /upper && mkdir /upper/data /upper/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work /newroot || exec sh
release=$(uname -r)
mkdir -p "/newroot/lib/modules/$release" /newroot/fslab-share /newroot{SCRATCH} /newroot/run
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 modules "/newroot/lib/modules/$release"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 share /newroot/fslab-share
mount -t tmpfs tmpfs /newroot/run
# the scratch disk, made by the host (mkfs.ext4 of its image)
mount -t ext4 /dev/vda /newroot{SCRATCH} || echo "fslab-guest: cannot mount the scratch disk at {SCRATCH}"
for fs in dev proc sys; do mount --move /$fs /newroot/$fs; done
exec switch_root /newroot /bin/bash /fslab-share/init.sh
"""

# The boot's init.sh, run by the host's bash as the guest's init; powers the guest off at the end.
GUEST_INIT = """#!/bin/bash
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
mark() {{ read -r up _ < /proc/uptime; echo "$1 $up" >> {share}/boot-times; }}
mark init
read -r boot_id < /proc/sys/kernel/random/boot_id
cpus=0 model=
while IFS=: read -r key value; do
    case $key in "model name"*) cpus=$((cpus + 1)); [ -z "$model" ] && model=${{value# }};; esac
done < /proc/cpuinfo
while read -r key value _; do [ "$key" = MemTotal: ] && memory=$value && break; done < /proc/meminfo
printf '%s\n' "release=$(uname -r)" "boot_id=$boot_id" "cpu_model=$model" "cpu_count=$cpus" "memory_kib=$memory" \
    > {share}/guest-facts
mark facts
for serial in /sys/block/vd*/serial; do  # udev's names of the disks with a serial: no udev runs here
    {{ id=$(< "$serial"); }} 2>/dev/null  # (the kernel ends it with no newline: `read` would fail)
    [ -n "$id" ] || continue
    disk=${{serial%/serial}}; mkdir -p /dev/disk/by-id && ln -sfn "../../${{disk##*/}}" "/dev/disk/by-id/virtio-$id"
done
# fslab drops the page cache before each measured run, and the root is the host's over 9p: the
# tools it runs next and their libraries would be read over 9p again, seconds a run under
# emulation. A touched file is copied up into the RAM overlay, which no drop evicts.
keep_in_ram() {{
    for tool in "$@"; do
        binary=$(realpath "$(command -v "$tool")") || continue
        touch -c "$binary" $(ldd "$binary" 2>/dev/null |
            awk '{{for (i = 1; i <= NF; i++) if (substr($i, 1, 1) == "/") print $i}}')
    done
}}
export -f keep_in_ram
# What fslab runs most (~100 MB: fio's libraries, the interpreter), found by the host (ldd under
# emulation takes seconds), is copied up meanwhile: it ends while fslab starts, before any run.
touch -c {keep_in_ram} &
mark keep_in_ram
{setup}
mark setup
cd {cwd} || echo "fslab-guest: no directory {cwd}" >&2
read -r up _ < /proc/uptime; echo "$up" > {share}/started
bash -c {command} > {share}/output.log 2>&1
echo $? > {share}/status
mark command
cd /; umount {scratch}; sync
# The kernel powers off within this call, init still in it. (sysrq's "o" powers off from a work
# queue: init's bash went on and at times exited first, a panic at the end of a good boot.)
/bin/busybox poweroff -f
sleep 60
"""


def check_disk(disk: Disk, *, measured: bool) -> None:
    """Refuse a disk whose cache a measured run may not have, or an unknown cache or aio."""
    if disk.cache not in CACHES:
        raise VmError(f"disk {disk.image}: cache={disk.cache!r} is not one of {', '.join(CACHES)}")
    if disk.aio not in AIOS:
        raise VmError(f"disk {disk.image}: aio={disk.aio!r} is not one of {', '.join(AIOS)}")
    if measured and disk.cache not in MEASURED_CACHES:
        raise VmError(
            f"disk {disk.image}: cache={disk.cache} lets the host's page cache answer the guest's I/O, "
            "which no measured run may have; use cache=none (or VmSpec(measured=False) for a scratch boot)"
        )
    if disk.aio == "native" and disk.cache not in MEASURED_CACHES:
        raise VmError(f"disk {disk.image}: aio=native needs cache=none or directsync (QEMU's rule)")
    if disk.serial and not SERIAL.fullmatch(disk.serial):
        raise VmError(f"disk {disk.image}: serial {disk.serial!r} is not 1 to 20 letters, digits or hyphens")
    if disk.fds and disk.cache not in MEASURED_CACHES:
        raise VmError(f"disk {disk.image}: a device is passed with cache=none or directsync (opened O_DIRECT)")


def disk_options(disk: Disk, index: int, aio: str) -> list[str]:
    """QEMU's options for one disk: its -drive (a device: the descriptor set QEMU takes it from)
    and its virtio-blk-pci -device, so that the guest finds the disks in the order given (the
    first, vda, its scratch disk), a serial where it has one."""
    common = f"format=raw,if=none,id=disk{index},cache={disk.cache},aio={aio}"
    device = f"virtio-blk-pci,drive=disk{index}" + (f",serial={disk.serial}" if disk.serial else "")
    if disk.fds:
        fdset = index + 1
        added = [option for fd in disk.fds for option in ("-add-fd", f"fd={fd},set={fdset}")]
        return [
            *added,
            "-drive",
            f"file.driver=host_device,file.filename=/dev/fdset/{fdset},{common}",
            "-device",
            device,
        ]
    path = str(disk.image).replace(",", ",,")  # QEMU's option syntax doubles a comma in a value
    return ["-drive", f"file={path},{common}", "-device", device]


def qemu_argv(
    kernel: PreparedKernel,
    *,
    root: Path,
    initramfs: Path,
    console: Path,
    share: Path,
    disks: tuple[Disk, ...],
    spec: VmSpec,
    accelerator: str,
    aio_fallback: str | None = None,
    image: Path | None = None,
) -> list[str]:
    """QEMU's argument list for a boot (every disk checked: check_disk). `root`: what the guest
    gets as the host's root (masking's export); `image`: the kernel file QEMU loads
    (elf_kernel's), else the package's vmlinuz."""
    for disk in disks:
        check_disk(disk, measured=spec.measured)
    for path in (root, share, kernel.modules):
        if "," in str(path):
            raise VmError(f"{path}: QEMU's -virtfs takes no path with a comma; choose another directory")
    argv = [
        QEMU, "-accel", accelerator, "-cpu", "max" if accelerator == "tcg" else "host",
        "-smp", str(spec.cpus), "-m", str(spec.memory_mib),
        "-nodefaults", "-display", "none", "-monitor", "none", "-no-reboot", "-serial", f"file:{console}",
        *hygiene.QEMU_THREAD_NAMES,
        "-kernel", str(image or kernel.vmlinuz), "-initrd", str(initramfs),
        "-append", KERNEL_ARGS,
        "-virtfs", f"local,path={root},mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        "-virtfs", f"local,path={kernel.modules},mount_tag=modules,security_model=none,readonly=on,multidevs=remap",
        "-virtfs", f"local,path={share},mount_tag=share,security_model=none,multidevs=remap",
    ]  # fmt: skip
    for index, disk in enumerate(disks):
        aio = aio_fallback if disk.aio == "io_uring" and aio_fallback else disk.aio
        argv += disk_options(disk, index, aio)
    return argv


@functools.cache
def io_uring_works() -> bool:
    """Whether this QEMU opens a disk with aio=io_uring (built with it, and the kernel lets it)."""
    with tempfile.TemporaryDirectory(prefix="fslab-aio-", dir=BOOT_TEMP) as directory:
        image = Path(directory) / "probe.img"
        with open(image, "wb") as f:
            f.truncate(1 << 20)
        argv = [QEMU, "-M", "none", "-nodefaults", "-display", "none", "-monitor", "stdio",
                "-drive", f"if=none,id=probe,format=raw,cache=none,aio=io_uring,file={image}"]  # fmt: skip
        try:
            done = subprocess.run(argv, input="quit\n", capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0


@functools.cache
def qemu_version() -> str:
    try:
        text = subprocess.run([QEMU, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return text.splitlines()[0].strip() if text.strip() else "unknown"


def unavailable_reason() -> str | None:
    """Why no guest can boot here, or None when one can."""
    if not shutil.which(QEMU):
        return f"{QEMU} is not installed (apt-get install qemu-system-x86)"
    if not Path("/bin/busybox").exists():
        return "busybox is not installed (apt-get install busybox-static)"
    if not shutil.which("unshare"):
        return "unshare is not installed (apt-get install util-linux)"
    if os.geteuid() != 0:
        return "the lab boots guests as root (it masks the host's secrets in a mount namespace)"
    return None


# ---- the kernel as QEMU loads it -----------------------------------------------------------------

XZ_MAGIC = b"\xfd7zXZ\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def whole_elf(data: bytes) -> bool:
    """Whether `data` starts with a 64-bit ELF image whose every loaded segment lies within it
    (a decompression cut short is not booted)."""
    if len(data) < 64 or not data.startswith(b"\x7fELF\x02\x01"):
        return False
    (phoff,) = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for n in range(phnum):
        at = phoff + n * phentsize
        if at + 56 > len(data):
            return False
        kind, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", data, at)
        if kind == 1 and offset + filesz > len(data):  # PT_LOAD
            return False
    return phnum > 0


def _unpack_vmlinuz(data: bytes) -> bytes | None:
    """The ELF image inside a bzImage compressed with xz (lzma) or zstd (the zstd tool), or None."""
    start = data.find(XZ_MAGIC)
    if start >= 0:
        try:
            return lzma.LZMADecompressor().decompress(data[start:])
        except lzma.LZMAError:
            return None
    start = data.find(ZSTD_MAGIC)
    if start >= 0 and shutil.which("zstd"):
        try:  # exits 1 at the bzImage's trailing size field after the whole frame: whole_elf judges
            done = subprocess.run(["zstd", "-dcq"], input=data[start:], capture_output=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout
    return None


def elf_kernel(kernel: PreparedKernel, *, cache: Path = LAB_CACHE) -> Path:
    """The kernel to boot: its uncompressed ELF image (vmlinux, booted through its PVH entry),
    unpacked once from the package's vmlinuz and kept in `cache` — under emulation the guest's
    own decompression and the firmware's bzImage loading take half a bare boot's CPU time. The
    vmlinuz itself when the kernel has no PVH entry or cannot be unpacked here."""
    config = kernel.vmlinuz.parent / f"config-{kernel.release}"
    try:
        if "CONFIG_PVH=y" not in config.read_text().splitlines():
            return kernel.vmlinuz
        data = kernel.vmlinuz.read_bytes()
    except OSError:
        return kernel.vmlinuz
    digest = hashlib.sha256(data).hexdigest()[:16]
    unpacked = cache / f"vmlinux-{kernel.release}-{digest}"
    if unpacked.is_file():
        return unpacked
    elf = _unpack_vmlinuz(data)
    if elf is None or not whole_elf(elf):
        return kernel.vmlinuz
    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob(f"vmlinux-{kernel.release}-*"):
        old.unlink(missing_ok=True)  # of a package rebuilt under the same release
    partial = cache / f".{unpacked.name}.{os.getpid()}"
    partial.write_bytes(elf)
    os.replace(partial, unpacked)
    return unpacked


# ---- the initramfs -------------------------------------------------------------------------------


def load_order(modules_dir: Path, names: tuple[str, ...]) -> list[str]:
    """Module files (relative to modules_dir) for `names`, every dependency before its users."""
    deps: dict[str, list[str]] = {}
    for line in (modules_dir / "modules.dep").read_text().splitlines():
        module, _, needs = line.partition(":")
        deps[module] = needs.split()
    by_name = {Path(m).name.split(".ko")[0].replace("-", "_"): m for m in deps}
    order: list[str] = []

    def visit(module: str) -> None:
        if module in order:
            return
        for dependency in deps.get(module, []):
            visit(dependency)
        order.append(module)

    for name in names:
        if name in by_name:  # absent: built into the kernel
            visit(by_name[name])
    return order


def _module_bytes(path: Path) -> bytes:
    """A module file's ELF bytes: busybox's insmod takes no compressed module."""
    data = path.read_bytes()
    if path.name.endswith(".ko.xz"):
        return lzma.decompress(data)
    if path.name.endswith(".ko.gz"):
        return gzip.decompress(data)
    if path.name.endswith(".ko"):
        return data
    raise VmError(f"{path}: a module compressed in a way the lab cannot unpack (xz and gzip only)")


def build_initramfs(directory: Path, modules_dir: Path) -> Path:
    root = directory / "initramfs"
    for sub in ("bin", "modules", "proc", "sys", "dev"):
        (root / sub).mkdir(parents=True)
    shutil.copy("/bin/busybox", root / "bin" / "busybox")
    names = []
    for module in load_order(modules_dir, EARLY_MODULES):
        name = Path(module).name.split(".ko")[0] + ".ko"
        (root / "modules" / name).write_bytes(_module_bytes(modules_dir / module))
        names.append(name)
    (root / "modules.order").write_text("\n".join(names) + "\n")
    (root / "init").write_text(INIT)
    (root / "init").chmod(0o755)
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, text=True, check=True).stdout
    image = directory / "initramfs.cpio"
    with open(image, "wb") as out:
        subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], cwd=root, input=files.encode(), stdout=out, check=True)
    shutil.rmtree(root)
    return image


# ---- what the guest said -------------------------------------------------------------------------


def parse_facts(text: str) -> dict[str, str]:
    facts = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            facts[key.strip()] = value.strip()
    return facts


def vm_host(kernel: PreparedKernel, facts: dict[str, str], *, spec: VmSpec, accelerator: str, disks: tuple[Disk, ...],
            aio_fallback: str | None) -> Host:  # fmt: skip
    """The VM as a host of a study run: named by its kernel release, as the guest saw itself."""

    def number(key: str, default: int) -> int:
        try:
            return int(facts.get(key, ""))
        except ValueError:
            return default

    first = disks[0] if disks else Disk(Path("-"))
    aio = aio_fallback if first.aio == "io_uring" and aio_fallback else first.aio
    return Host(
        name=kernel.release,
        machine_id=machine_id(),
        kernel=facts.get("release") or kernel.release,
        cpu_model=facts.get("cpu_model") or "unknown",
        cpu_count=number("cpu_count", spec.cpus),
        memory_bytes=number("memory_kib", 0) * 1024 or spec.memory_mib * 2**20,
        accelerator=accelerator,
        kernel_package=kernel.package_version,
        kernel_config_sha256=kernel.config_sha256,
        qemu_version=qemu_version(),
        disk_cache=first.cache,
        disk_aio=aio,
    )


PANIC = "Kernel panic - not syncing"
OOPS_PANIC = f"{PANIC}: Fatal exception"  # an oops's panic (oops=panic); any other is its own cause
# How the report of an oops begins (a fault, a BUG_ON), after printk's time; "Oops: …" follows
# the first line of some (within REPORT_HEAD lines).
CRASH_STARTS = ("BUG:", "kernel BUG at", "Oops:", "general protection fault", "Unable to handle")
REPORT_HEAD = 8  # lines: how far before an "Oops:" line its report's first line may be
TOLD = 300  # characters of a console line said
_PRINTK_TIME = re.compile(r"^\[\s*[0-9]+\.[0-9]+\]\s*")
_RIP = re.compile(r"RIP: (?:[0-9a-f]{4}:)?(\S+(?: \[\S+\])?)")  # "RIP: 0010:function+0x4a/0x3a0 [module]"


def crash_of(console: str) -> str | None:
    """The guest kernel's crash as its console said it, in a line, or None when it did not panic:
    an oops's panic is said by its report's first line and the function it was in (RIP); any other
    panic by its own line."""
    lines = [_PRINTK_TIME.sub("", line).strip() for line in console.splitlines()]
    panic = next((n for n, line in enumerate(lines) if line.startswith(PANIC)), None)
    if panic is None:
        return None
    starts = [n for n, line in enumerate(lines[:panic]) if line.startswith(CRASH_STARTS)]
    if not lines[panic].startswith(OOPS_PANIC) or not starts:
        return visible(lines[panic])[:TOLD]
    start = starts[-1]  # the report that panicked, from its first line
    if lines[start].startswith("Oops:") and len(starts) > 1 and starts[-2] >= start - REPORT_HEAD:
        start = starts[-2]
    rip = next((found for line in lines[start:panic] if (found := _RIP.match(line))), None)
    return visible(lines[start])[:TOLD] + (f" in {visible(rip.group(1))[:TOLD]}" if rip else "")


# ---- the accelerator -----------------------------------------------------------------------------

PROBE_INIT = """#!/bin/busybox sh
/bin/busybox echo fslab-accelerator-probe-ok > /dev/ttyS0
/bin/busybox poweroff -f
"""
PROBE_SECONDS = 30.0


def _host_boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def probe_kvm(kernel: PreparedKernel, *, timeout: float = PROBE_SECONDS) -> bool:
    """Whether a KVM guest boots this kernel to its init and powers off within `timeout`."""
    if not os.path.exists("/dev/kvm"):
        return False
    with tempfile.TemporaryDirectory(prefix="fslab-kvm-probe-", dir=BOOT_TEMP) as directory:
        root = Path(directory) / "initramfs"
        (root / "bin").mkdir(parents=True)
        (root / "dev").mkdir()
        shutil.copy("/bin/busybox", root / "bin" / "busybox")
        (root / "init").write_text(PROBE_INIT)
        (root / "init").chmod(0o755)
        image = Path(directory) / "probe.cpio"
        with open(image, "wb") as out:
            subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], cwd=root, input=b"init\nbin\nbin/busybox\ndev\n",
                           stdout=out, check=True)  # fmt: skip
        console = Path(directory) / "console.log"
        argv = [QEMU, "-accel", "kvm", "-cpu", "host", "-m", "256", "-nodefaults", "-display", "none",
                "-monitor", "none", "-no-reboot", "-serial", f"file:{console}", "-kernel", str(kernel.vmlinuz),
                "-initrd", str(image), "-append", "console=ttyS0 panic=-1 loglevel=1"]  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False  # subprocess.run killed it
        said = console.read_text(errors="replace") if console.exists() else ""
        return done.returncode == 0 and "fslab-accelerator-probe-ok" in said


def known_accelerator(*, cache: Path = LAB_CACHE) -> str | None:
    """The accelerator as this host boot's probe found it ("kvm" or "tcg"), or None when no probe
    has run since the host booted (nothing is booted or written: `fslab run --plan`)."""
    try:
        answer = json.loads((cache / f"accelerator-{_host_boot_id()}.json").read_text()).get("accelerator")
    except (OSError, ValueError, AttributeError):
        return None
    return str(answer) if answer in ("kvm", "tcg") else None


def accelerator(*, kernel: PreparedKernel | None = None, cache: Path = LAB_CACHE) -> str:
    """ "kvm" when a real KVM boot probe succeeds on this host boot, else "tcg"; the answer is kept
    per host boot (a reboot may change it: a module, a BIOS setting, another hypervisor)."""
    known = known_accelerator(cache=cache)
    if known is not None:
        return known
    boot_id = _host_boot_id()
    kept = cache / f"accelerator-{boot_id}.json"
    if kernel is None:
        releases = installed_releases()
        kernel = installed(releases[-1]) if releases else None
    answer = "kvm" if kernel is not None and probe_kvm(kernel) else "tcg"
    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob("accelerator-*.json"):
        old.unlink(missing_ok=True)
    partial = cache / f".{kept.name}.{os.getpid()}"
    partial.write_text(json.dumps({"accelerator": answer, "boot_id": boot_id}) + "\n")
    os.replace(partial, kept)  # whole, for another fslab reading it meanwhile
    return answer


# ---- the boot ------------------------------------------------------------------------------------


KEEP_IN_RAM = ("fio", "sync")  # and fslab's own interpreter


@functools.cache
def files_to_keep(tools: tuple[str, ...]) -> tuple[str, ...]:
    """The executables of `tools` and the shared libraries they load, as the host resolves them
    (the guest's root is the host's)."""
    found: list[str] = []
    for tool in tools:
        where = shutil.which(tool)
        if where is None:
            continue
        binary = os.path.realpath(where)
        try:
            said = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            said = ""
        libraries = [os.path.realpath(w) for w in said.split() if w.startswith("/") and os.path.exists(w)]
        found += [p for p in (binary, *libraries) if p not in found]
    return tuple(found)


def guest_init(command: str, *, setup: str, cwd: Path, python: str) -> str:
    keep = files_to_keep((*KEEP_IN_RAM, python))
    return GUEST_INIT.format(
        share=SHARE, scratch=SCRATCH, setup=setup, cwd=shlex.quote(str(cwd)), command=shlex.quote(command),
        keep_in_ram=" ".join(shlex.quote(p) for p in keep) or "/",
    )  # fmt: skip


def _make_scratch_filesystem(image: Path) -> None:
    """ext4 on the scratch disk's image, made on the host: seconds faster than in an emulated guest."""
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", "--", str(image)], capture_output=True, timeout=120, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise VmError(f"cannot make the guest's scratch filesystem on {image}: {exc}") from exc


def _read(path: Path, limit: int = 64 * 2**20) -> str:
    """A file the guest wrote in the share: its text, or "" when there is none. The guest writes
    there as root: a symlink or a device it made there is not followed or opened as a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return f.read(limit).decode(errors="replace")


def _write_own(path: Path, text: str) -> None:
    """fslab's file in the share, made afresh: whatever the guest left at that name (a symlink
    to a host file) is unlinked, never written through."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)


BOOT_KIND = "lab-boot"  # a boot's directory, journalled when the boot is given a work directory's journal
_BOOT_NUMBERS = itertools.count(1)


@contextmanager
def _boot_directory(journal: Journal | None) -> Iterator[Path]:
    """The boot's own directory (initramfs, console log, scratch image), removed when the boot
    ends; with a work directory's journal, journalled first and proven by its (device, inode), so
    that `fslab cleanup` removes one a killed fslab left."""
    if journal is None:
        directory = Path(tempfile.mkdtemp(prefix="fslab-boot-", dir=BOOT_TEMP))
        try:
            yield directory
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return
    path = BOOT_TEMP / f"fslab-boot-{os.getpid()}-{next(_BOOT_NUMBERS)}-{os.urandom(4).hex()}"
    with journal.holding(BOOT_KIND, str(path)) as held:
        os.mkdir(path, 0o700)
        held.prove(**FileId.of(os.lstat(path)).proof())
        yield path


@releaser("lab-boot")
def remove_boot_directory(entry: Entry, workdir: object) -> None:
    """Remove a boot's directory, if that very one is there: directly in BOOT_TEMP, named as fslab
    names them, a directory (not a symlink) with the recorded (device, inode)."""
    path = Path(entry.ident)
    if path.parent != BOOT_TEMP or not path.name.startswith("fslab-boot-") or path.name in (".", ".."):
        raise Refused(f"{path} is not a lab boot's directory fslab makes; left alone")
    if own_directory(path, entry.proof, "lab boot directory"):
        shutil.rmtree(path)


def boot(
    kernel: PreparedKernel,
    command: str,
    *,
    share: Path,
    spec: VmSpec = VmSpec(),  # noqa: B008 - frozen
    setup: str = "",
    timeout: float = 900,
    cwd: Path | None = None,
    journal: Journal | None = None,
    scratch_bytes: int = SCRATCH_BYTES,
    mask: Sequence[Path] = (),
) -> Boot:
    """Boot `kernel`, run `setup` (fslab's own shell text) then `command` (bash) in `cwd` as root,
    power off. `share` is the guest's /fslab-share. `journal`: the work directory's, where QEMU
    is recorded (else one in the boot's temporary directory, gone with it). `mask`: files the guest
    may not read beside masking's own (the results database in use: its WAL files go with it)."""
    reason = unavailable_reason()
    if reason:
        raise VmError(f"cannot boot kernel {kernel.release}: {reason}")
    chosen = spec.accelerator or accelerator(kernel=kernel)
    if chosen not in ("kvm", "tcg"):
        raise VmError(f"accelerator {chosen!r} is not kvm or tcg")
    share = Path(os.path.realpath(share))
    share.mkdir(parents=True, exist_ok=True)
    for stale in ("status", "output.log", "guest-facts", "started", "boot-times"):
        (share / stale).unlink(missing_ok=True)
    with _boot_directory(journal) as directory:
        scratch = Disk(directory / "scratch.img")
        with open(scratch.image, "wb") as f:
            f.truncate(scratch_bytes)
        _make_scratch_filesystem(scratch.image)
        disks = (scratch, *spec.disks)
        aio_fallback = None if io_uring_works() else "native"
        console, export, stage = directory / "console.log", directory / "root", directory / "stage"
        export.mkdir()
        stage.mkdir()
        argv = qemu_argv(
            kernel, root=export, initramfs=build_initramfs(directory, kernel.modules), console=console, share=share,
            disks=disks, spec=spec, accelerator=chosen, aio_fallback=aio_fallback, image=elf_kernel(kernel),
        )  # fmt: skip
        _write_own(share / "init.sh", guest_init(command, setup=setup, cwd=cwd or Path("/"), python=sys.executable))
        keep = [
            share,
            directory,
            kernel.vmlinuz.parent,
            LAB_CACHE,
            kernel.modules,
            *(d.image.parent for d in spec.disks if not d.fds),  # a device's: QEMU opens nothing by name
        ]
        if cwd is not None:
            keep.append(cwd)
        masked_files = masking.databases(mask, cwd=cwd)
        wrapped = masking.wrap(argv, keep=keep, stage=stage, export=export, mask_files=masked_files)
        held_journal = journal or Workdir(directory).journal
        pinned_to = hygiene.pin_cpus(spec.cpus)  # none unless --tune-host asked for it
        fds = [fd for disk in spec.disks for fd in disk.fds]
        with running_held(
            held_journal, wrapped, cwd=directory, log=directory / "qemu.log", name=QEMU_COMM, pass_fds=fds
        ) as proc:
            if pinned_to:
                hygiene.pin_vcpus(proc.pid, pinned_to, spec.cpus)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass  # leaving the block kills it; the missing status says so
        console_text = _read(console)
        crash = crash_of(console_text)
        if crash:
            raise GuestCrashed(kernel.release, crash, console_text)
        facts = parse_facts(_read(share / "guest-facts"))
        status_text = _read(share / "status").strip()
        started_text = _read(share / "started").strip()
        qemu_said = _read(directory / "qemu.log")
        if qemu_said.strip() and not facts:
            console_text += "\n[qemu] " + qemu_said
        return Boot(
            status=int(status_text) if status_text.lstrip("-").isdigit() else None,
            output=_read(share / "output.log"),
            console=console_text,
            share=share,
            host=vm_host(kernel, facts, spec=spec, accelerator=chosen, disks=disks, aio_fallback=aio_fallback),
            boot_id=facts.get("boot_id", ""),
            seconds_to_command=float(started_text) if _is_number(started_text) else None,
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
