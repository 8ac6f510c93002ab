"""A QEMU guest running Debian's own kernel over this machine's root filesystem.

What this machine's kernel lacks (md RAID, device-mapper: LUKS, LVM) Debian's kernel has as
modules, so the tests of those layers boot it under QEMU (software emulation is enough) and
run fslab inside. The guest sees the host's root read-only through 9p with a RAM overlay on
top, so it has every tool and the same fslab checkout; a shared directory carries the
command in and its output, exit status and results database out; a scratch disk of the
host's, mounted at SCRATCH, holds its work directories (loop images on tmpfs would have no
direct I/O).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

# Modules the guest needs before it can reach its root filesystem; the rest it modprobes itself.
EARLY_MODULES = ("virtio_pci", "9pnet_virtio", "9p", "overlay")

INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc && mount -t sysfs sys /sys && mount -t devtmpfs dev /dev
for module in $(cat /modules.order); do insmod "/modules/$module" || echo "fslab-guest: insmod $module failed"; done
mkdir -p /lower /upper /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /lower || exec sh
mount -t tmpfs -o size=75% tmpfs /upper && mkdir /upper/data /upper/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work /newroot || exec sh
mkdir -p /newroot/fslab-share
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 share /newroot/fslab-share
for fs in dev proc sys; do mount --move /$fs /newroot/$fs; done
exec switch_root /newroot /bin/bash /fslab-share/init.sh
"""

# The guest's scratch disk: its work directories and databases go there (loop images need a
# disk for direct I/O; SQLite's WAL does not work over 9p).
SCRATCH = "/fslab-scratch"

# Runs as the guest's init on the host's tools; powers the guest off when the command ends.
# Nothing of the host's tree is mounted over (the checkout may live in /tmp or /var/tmp), but
# /run starts empty, as at boot.
GUEST_INIT = """#!/bin/bash
mount -t tmpfs tmpfs /run
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
for m in loop virtio_blk ext4; do modprobe -q $m; done
mkdir -p {scratch} && mkfs.ext4 -q -F /dev/vda && mount /dev/vda {scratch}
cd {cwd}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
# fslab drops the page cache before each measured run, and the root is the host's over 9p: the
# tools it runs next (fio, the gate's python) and their libraries were read over 9p again, ~9 s a
# run under emulation. A touched file is copied up into the RAM overlay, which no drop evicts.
keep_in_ram() {{
    for tool in "$@"; do
        binary=$(realpath "$(command -v "$tool")") || continue
        touch -c "$binary" $(ldd "$binary" 2>/dev/null |
            awk '{{for (i = 1; i <= NF; i++) if (substr($i, 1, 1) == "/") print $i}}')
    done
}}
export -f keep_in_ram
keep_in_ram fio {cwd}/.venv/bin/python sync
bash -c {command} > /fslab-share/output.log 2>&1
echo $? > /fslab-share/status
umount {scratch}; sync
echo o > /proc/sysrq-trigger
sleep 60
"""


class GuestUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class GuestResult:
    status: int | None  # the command's exit status; None when the guest never reported one
    output: str  # what the command printed
    console: str  # what the guest's kernel printed on its serial console
    share: Path  # the shared directory: what the command left for the host


def guest_kernel() -> tuple[Path, Path]:
    """The newest installed Debian kernel and its module directory."""
    kernels = sorted(Path("/boot").glob("vmlinuz-*"), key=lambda k: [int(n) for n in re.findall(r"\d+", k.name)])
    for kernel in reversed(kernels):
        modules = Path("/lib/modules") / kernel.name.removeprefix("vmlinuz-")
        if (modules / "modules.dep").exists():
            return kernel, modules
    raise GuestUnavailable("no kernel in /boot with modules in /lib/modules (apt-get install linux-image-amd64)")


def unavailable_reason() -> str | None:
    """Why no guest can boot here, or None when one can."""
    if not shutil.which("qemu-system-x86_64"):
        return "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
    if not Path("/bin/busybox").exists():
        return "busybox is not installed (apt-get install busybox-static)"
    try:
        guest_kernel()
    except GuestUnavailable as exc:
        return str(exc)
    return None


def _load_order(modules_dir: Path, names: tuple[str, ...]) -> list[str]:
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
        for dependency in deps[module]:
            visit(dependency)
        order.append(module)

    for name in names:
        if name in by_name:  # absent: built into the kernel
            visit(by_name[name])
    return order


def _initramfs(directory: Path, modules_dir: Path) -> Path:
    root = directory / "initramfs"
    for sub in ("bin", "modules", "proc", "sys", "dev"):
        (root / sub).mkdir(parents=True)
    shutil.copy("/bin/busybox", root / "bin" / "busybox")
    order = _load_order(modules_dir, EARLY_MODULES)
    for module in order:
        shutil.copy(modules_dir / module, root / "modules" / Path(module).name)
    (root / "modules.order").write_text("\n".join(Path(m).name for m in order) + "\n")
    (root / "init").write_text(INIT)
    (root / "init").chmod(0o755)
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, text=True, check=True).stdout
    image = directory / "initramfs.cpio"
    with open(image, "wb") as out:
        subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], cwd=root, input=files.encode(), stdout=out, check=True)
    return image


def run_in_guest(
    command: str, *, cwd: Path, share: Path, memory_mib: int = 2048, scratch_gib: int = 4, timeout: float = 900
) -> GuestResult:
    """Boot the guest, run `command` (bash) in `cwd` as root, power off; `share` is the guest's
    /fslab-share. Raises GuestUnavailable when this machine cannot boot one."""
    reason = unavailable_reason()
    if reason:
        raise GuestUnavailable(reason)
    kernel, modules_dir = guest_kernel()
    share.mkdir(parents=True, exist_ok=True)
    (share / "init.sh").write_text(
        GUEST_INIT.format(cwd=shlex.quote(str(cwd)), command=shlex.quote(command), scratch=SCRATCH)
    )
    (share / "status").unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="fslab-guest-", dir="/var/tmp") as scratch:
        directory = Path(scratch)
        initramfs = _initramfs(directory, modules_dir)
        # One virtual CPU: what a guest runs is one command after another, and a second CPU under
        # software emulation costs the host about a third more CPU time for the same work.
        disk = directory / "scratch.img"
        with open(disk, "wb") as f:
            f.truncate(scratch_gib * 2**30)
        console = directory / "console.log"
        qemu = [
            "qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-smp", "1", "-m", str(memory_mib),
            "-display", "none", "-monitor", "none", "-no-reboot", "-serial", f"file:{console}",
            "-kernel", str(kernel), "-initrd", str(initramfs),
            "-append", "console=ttyS0 panic=-1 loglevel=4",
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", f"local,path={share},mount_tag=share,security_model=none,multidevs=remap",
            "-drive", f"file={disk},format=raw,if=virtio,cache=unsafe",
        ]  # fmt: skip
        try:
            subprocess.run(qemu, timeout=timeout, capture_output=True, check=False)
        except subprocess.TimeoutExpired:
            pass  # subprocess.run has killed QEMU; the missing status says so
        status_file = share / "status"
        output_file = share / "output.log"
        return GuestResult(
            status=int(status_file.read_text()) if status_file.exists() else None,
            output=output_file.read_text(errors="replace") if output_file.exists() else "",
            console=console.read_text(errors="replace") if console.exists() else "",
            share=share,
        )


@dataclass(frozen=True)
class GuestJob:
    """One boot a test module needs: its command, run in `cwd`, and the files it shares (name →
    text, written into the guest's /fslab-share)."""

    name: str
    command: str
    cwd: Path
    files: dict[str, str] = field(default_factory=dict)


# A guest takes minutes of emulated CPU. conftest boots every selected module's guest when the
# test run starts (`boot_meanwhile`), one at a time in a background thread, and the host's own
# tests run meanwhile; each module's fixture then waits for its guest's result (`result_of`).
# In a parallel run (pytest-xdist) the first worker to start claims the boots, and the result
# lands in a directory every worker of the run shares, so whichever worker is handed a guest's
# tests reads it there.
_BACKGROUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fslab-guest")
_BOOTING: dict[str, Future[None]] = {}
WAIT_PER_BOOT = 1200.0  # seconds: a boot's own limit (run_in_guest) and then some


def _shared(tmp_path_factory) -> Path:  # noqa: ANN001
    """The directory of this test run's guests: the same for every worker of a parallel run."""
    base = tmp_path_factory.getbasetemp()
    directory = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "guests"
    directory.mkdir(exist_ok=True)
    return directory


def _claim(path: Path) -> bool:
    try:
        path.mkdir()
    except FileExistsError:
        return False
    return True


def _boot(job: GuestJob, directory: Path) -> None:
    """Runs the job's guest and leaves its result in `directory`/result.json, whatever happens."""
    share = directory / "share"
    try:
        share.mkdir()
        for name, text in job.files.items():
            (share / name).write_text(text)
        result = run_in_guest(job.command, cwd=job.cwd, share=share)
        record = {"status": result.status, "output": result.output, "console": result.console}
    except Exception as exc:  # noqa: BLE001 - the test waiting for it reports it
        record = {"error": f"{type(exc).__name__}: {exc}"}
    partial = directory / "result.json.partial"
    partial.write_text(json.dumps(record))
    partial.replace(directory / "result.json")


def keep_fio_options() -> None:
    """fslab in a guest checks fio options against the fio table the host keeps in its
    /var/cache/fslab (the guest's root is the host's): asking fio itself, ~250 runs of it, would
    take minutes under emulation. The guest's fio is the host's file copied up into its RAM
    overlay (keep_in_ram), known by its bytes (fio/table.py)."""
    from fslab.core.system import executable
    from fslab.fio.options import ENGINES
    from fslab.fio.table import CACHE_DIR, load_table

    fio = executable("fio")
    if fio is not None:
        load_table(fio, tuple(ENGINES), CACHE_DIR)


def boot_meanwhile(jobs: list[GuestJob], tmp_path_factory) -> None:  # noqa: ANN001
    """Boots the jobs' guests in the background, one after another, unless another worker of
    this test run already does."""
    shared = _shared(tmp_path_factory)
    if not jobs or not _claim(shared / "booter"):
        return
    for job in jobs:
        if _claim(shared / job.name):
            _BOOTING[job.name] = _BACKGROUND.submit(_boot, job, shared / job.name)


def result_of(job: GuestJob, tmp_path_factory) -> GuestResult:  # noqa: ANN001
    """The job's guest's result: waits for the boot (this process's or another worker's), or
    boots it now if nobody has."""
    directory = _shared(tmp_path_factory) / job.name
    if _claim(directory):
        _boot(job, directory)
    elif job.name in _BOOTING:
        _BOOTING[job.name].result()
    result = directory / "result.json"
    deadline = time.monotonic() + WAIT_PER_BOOT * 2  # at most one boot queued before it
    while not result.exists():
        if time.monotonic() > deadline:
            raise GuestUnavailable(f"no result of the {job.name} guest in {directory} after {WAIT_PER_BOOT * 2:.0f} s")
        time.sleep(1)
    record = json.loads(result.read_text())
    if "error" in record:
        raise GuestUnavailable(f"the {job.name} guest could not run: {record['error']}")
    return GuestResult(
        status=record["status"], output=record["output"], console=record["console"], share=directory / "share"
    )


def stop_waiting() -> None:
    """At the session's end. A parallel run's worker finishes the boots it claimed (another worker
    may be waiting for them); a serial run leaves the guests not booted yet (one booting runs to
    its end)."""
    _BACKGROUND.shutdown(
        wait=bool(os.environ.get("PYTEST_XDIST_WORKER")), cancel_futures=not os.environ.get("PYTEST_XDIST_WORKER")
    )
