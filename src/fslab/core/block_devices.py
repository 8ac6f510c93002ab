"""A user's own block device as a target: confirmed on the command line, refused while in use,
its signatures shown before they are wiped, its facts recorded with every run.

fslab runs as root and study files travel between people, so a device named in a study is never
enough: the user must also name that very device (by device number, whatever path or symlink
either names it by) with `--destroy-data` on the command line. Even then fslab refuses a device
that anything uses: a mount, a holder (md, dm), a ZFS pool, a loop device, the root filesystem,
swap. Every check asks the kernel (device numbers in /proc and /sys), never a name.
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import shutil
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from fslab.core import DESTROY_FLAG
from fslab.core.errors import Refused
from fslab.core.identity import (
    backing_file,
    device_number,
    disk_proof,
    is_disk,
    kernel_table,
    loop_backing,
    mounts,
    number_of,
    same_disk,
    sysfs_of,
    unescape,
)
from fslab.core.system import run


@dataclass(frozen=True)
class BlockDevice:
    """A block device as the kernel knows it: its number, and its node in /dev."""

    named: str  # as the study (or a flag) names it: /dev/sdb, /dev/disk/by-id/…
    node: str  # /dev/<kernel name>
    number: int
    proof: dict | None = field(default=None, compare=False)  # disk_proof() when the user confirmed it

    def still_confirmed(self) -> bool:
        """Whether the device at its number is still the very disk the user confirmed (not
        another one given that number since: a disk replugged, a loop device attached anew)."""
        return self.proof is not None and same_disk(self.proof) == self.number

    @property
    def sysfs(self) -> Path:
        return Path(f"/sys/class/block/{Path(self.node).name}").resolve()

    @property
    def is_partition(self) -> bool:
        return (self.sysfs / "partition").exists()

    @property
    def disk(self) -> Path:
        """The whole disk's sysfs directory (its own for a whole disk)."""
        return self.sysfs.parent if self.is_partition else self.sysfs

    def partitions(self) -> list[int]:
        """The device numbers of its partitions (none for a partition)."""
        found = [number_of(entry) for entry in self.sysfs.iterdir() if (entry / "partition").exists()]
        return [n for n in found if n is not None]

    def numbers(self) -> set[int]:
        """It and its partitions: a use of any of them is a use of the device."""
        return {self.number, *self.partitions()}


def resolve(path: str) -> BlockDevice:
    """The block device a path names (symlinks such as /dev/disk/by-id/… followed)."""
    number = device_number(path)
    sysfs = sysfs_of(number) if number is not None else None
    if number is None or sysfs is None:
        raise Refused(f"{path} is not a block device")
    node = f"/dev/{sysfs.name}"
    if device_number(node) != number:
        raise Refused(f"{path} is block device {os.major(number)}:{os.minor(number)}, but {node} is not that device")
    return BlockDevice(path, node, number)


def confirm(path: str, destroy_flags: Sequence[str]) -> BlockDevice:
    """The device a study names, if a --destroy-data flag names that very device (by number: a
    flag naming its disk does not confirm a partition, nor a partition its disk)."""
    device = resolve(path)
    confirmed = {device_number(flag) for flag in destroy_flags}
    if device.number in confirmed:
        return replace(device, proof=disk_proof(device.number))
    alias = f" (named {path} in the study)" if path != device.node else ""
    near = [
        flag
        for flag in destroy_flags
        if (n := device_number(flag)) is not None
        and (n in device.partitions() or device.is_partition and n == number_of(device.disk))
    ]
    hint = (
        f"; {', '.join(near)} names {'its disk' if device.is_partition else 'a partition of it'}, not it"
        if near
        else ""
    )
    raise Refused(
        f"{device.node}{alias}: fslab would destroy all data on it; it formats a device of yours only when "
        f"you confirm that very device: {DESTROY_FLAG} {device.node}{hint}"
    )


# --- what uses a device -------------------------------------------------------------------------


def refusals(device: BlockDevice) -> list[str]:
    """Everything that uses the device or one of its partitions now; empty when fslab may take it."""
    numbers, mounted = device.numbers(), _mountinfo()
    found = [
        *_mounted(numbers, mounted),
        *_holders(device),
        *_pools(numbers),
        *_loops_on(numbers, device),
        *_root(numbers, mounted),
        *_swap(numbers),
    ]
    return [f"{device.node}: {problem}" for problem in found]


def _name(number: int) -> str:
    sysfs = sysfs_of(number)
    return f"/dev/{sysfs.name}" if sysfs else f"{os.major(number)}:{os.minor(number)}"


def _mountinfo() -> list[tuple[int | None, str]]:
    """(device number, mount point) of every mount; a source path is resolved too, since Btrfs
    reports an anonymous device number."""
    found: list[tuple[int | None, str]] = []
    for mount in mounts():
        major, minor = (int(x) for x in mount.dev.split(":"))
        found.append((os.makedev(major, minor), mount.mountpoint))
        if mount.source.startswith("/"):
            found.append((device_number(mount.source), mount.mountpoint))
    return found


def _mounted(numbers: set[int], mounted: list[tuple[int | None, str]]) -> list[str]:
    places = sorted({(mountpoint, number) for number, mountpoint in mounted if number in numbers})
    return [f"{_name(number)} is mounted at {mountpoint}" for mountpoint, number in places]


def _holders(device: BlockDevice) -> list[str]:
    found = []
    for sysfs in [device.sysfs, *(entry for entry in device.sysfs.iterdir() if (entry / "partition").exists())]:
        holders = sysfs / "holders"
        for holder in sorted(holders.iterdir()) if holders.is_dir() else []:
            found.append(f"/dev/{sysfs.name} is held by /dev/{holder.name}{_mapped_name(holder)} (md or device-mapper)")
    return found


def _mapped_name(holder: Path) -> str:
    for name_file in (holder / "dm" / "name", holder / "md" / "array_state"):
        if name_file.exists():
            return f" ({name_file.read_text().strip()})"
    return ""


def _pools(numbers: set[int]) -> list[str]:
    """ZFS pools with a vdev on the device, where ZFS answers: `zpool status -P` names vdev paths;
    zfs-fuse's zpool knows no -P, and its `zpool status` names a vdev under /dev without "/dev/"."""
    if shutil.which("zpool") is None:
        return []
    status = run(["zpool", "status", "-P"], check=False, timeout=20)
    if status.returncode != 0 and "invalid option" in status.stderr:
        status = run(["zpool", "status"], check=False, timeout=20)
    found, pool = [], ""
    for line in status.stdout.splitlines():
        words = line.split()
        if words[:1] == ["pool:"] and len(words) > 1:
            pool = words[1]
        elif words and (words[0].startswith("/") or line.startswith("\t  ")):  # a path, or a row under the pool's
            path = words[0] if words[0].startswith("/") else f"/dev/{words[0]}"
            if device_number(path) in numbers:
                found.append(f"{path} is in ZFS pool {pool}")
    return found


def _loops_on(numbers: set[int], device: BlockDevice) -> list[str]:
    """Loop devices attached to the device itself, or to a file on it."""
    found = []
    for sysfs in sorted(Path("/sys/block").glob("loop[0-9]*")):
        number = number_of(sysfs)
        if number is None or number == device.number or not (sysfs / "loop").is_dir():
            continue
        backing = loop_backing(number)
        backing_path = backing_file(sysfs)
        if backing_path.startswith("/dev/") and device_number(backing_path) in numbers:
            found.append(f"it backs /dev/{sysfs.name}")
        elif backing is not None and os.makedev(*backing.dev) in numbers:
            found.append(f"/dev/{sysfs.name} is attached to a file on it ({backing_path or 'deleted'})")
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _root(numbers: set[int], mounted: list[tuple[int | None, str]]) -> list[str]:
    """The root filesystem's device and every device under it (dm, md, partitions, disks)."""
    under: set[int] = set()
    queue = [number for number, mountpoint in mounted if mountpoint == "/" and number is not None]
    while queue:
        number = queue.pop()
        sysfs = sysfs_of(number)
        if number in under or sysfs is None:
            continue
        under.add(number)
        below = [*(sysfs / "slaves").iterdir()] if (sysfs / "slaves").is_dir() else []
        queue += [n for n in (number_of(entry.resolve()) for entry in below) if n is not None]
        if (sysfs / "partition").exists() and (disk := number_of(sysfs.parent)) is not None:
            queue.append(disk)
    return [f"{_name(number)} holds the root filesystem" for number in sorted(numbers & under)]


def _swap(numbers: set[int]) -> list[str]:
    found = []
    for row in kernel_table("/proc/swaps")[1:]:
        name = unescape(row[0])
        try:
            st = os.stat(name)
        except OSError:
            continue
        if (st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev) in numbers:
            found.append(f"swap is on it ({name})")
    return found


@contextlib.contextmanager
def opened_for_guest(device: BlockDevice) -> Iterator[tuple[int, int]]:
    """The confirmed device opened for a lab VM's QEMU, which opens nothing by name: a read-only
    and a read-write descriptor (O_DIRECT, as QEMU's cache=none opens a disk), the read-write one
    exclusive (O_EXCL: while QEMU holds it the kernel lets nothing mount or claim the device or
    its partitions). Proven still there first (`still_confirmed`), nothing using it (`refusals`),
    and again on the descriptors themselves once open — still the very device the user confirmed
    (number, diskseq, a loop device's backing file: identity.is_disk); Refused otherwise, naming
    the device and what to do. Closed when the block ends."""
    confirmed = f"{DESTROY_FLAG} {device.named}"
    if device.proof is None:
        raise Refused(f"{device.node}: not confirmed; it is passed to a VM only when you confirm it: {confirmed}")
    if not device.still_confirmed():  # gone since (detached, unplugged): `refusals` would read a sysfs no more there
        raise Refused(
            f"{device.node} is no longer the device you confirmed with {confirmed} (detached, unplugged or "
            "replaced since); it was not passed to the VM and nothing was written to it: check what it is now "
            "and run again"
        )
    problems = refusals(device)
    if problems:
        raise Refused(
            f"refusing to pass {device.node} to the VM, which would destroy all data on it: "
            + "; ".join(problem.removeprefix(f"{device.node}: ") for problem in problems)
            + ". Unmount it or stop what uses it, then run again"
        )
    with contextlib.ExitStack() as opened:
        fds = []
        for flags in (os.O_RDWR | os.O_EXCL, os.O_RDONLY):
            try:
                fd = os.open(device.node, flags | os.O_DIRECT | os.O_CLOEXEC)
            except OSError as exc:
                busy = (
                    " (something holds it exclusively: a mount, md, device-mapper)" if exc.errno == errno.EBUSY else ""
                )
                raise Refused(
                    f"{device.node}: cannot open it for the VM: {exc.strerror}{busy}; nothing was written "
                    "to it: free it and run again"
                ) from None
            opened.callback(os.close, fd)
            fds.append(fd)
            if not is_disk(fd, device.proof):
                raise Refused(
                    f"{device.node} is no longer the device you confirmed with {confirmed} (detached, replaced "
                    "or attached to another file since); it was not passed to the VM and nothing was written "
                    "to it: check what it is now and run again"
                )
        yield fds[0], fds[1]


# Zeroed at each end of a device a guest had: every layer's label or header a host would find and
# assemble — md's superblocks (1.1 at 0, 1.2 at 4 KiB, 0.90 and 1.0 in the last 128 KiB), LVM's label
# (its first 4 sectors) and metadata (first MiB), LUKS2's two headers (the second at most at 4 MiB),
# bcache's (4 KiB), ZFS's labels (the first and last 512 KiB), the partition tables (MBR, both GPTs)
# and filesystems' superblocks — also within a partition starting in the first MiB or ending in the
# last 8 MiB (as parted aligns them, and zpool's whole-disk partitions 1 and 9).
GUEST_LAYERS = 16 * 2**20


def wipe_guest_layers(device: BlockDevice, read_write: int) -> None:
    """Zero the device's first and last GUEST_LAYERS bytes through `read_write`, opened_for_guest's
    proven descriptor (O_DIRECT: a page-aligned buffer), before it is closed: once the exclusive
    hold goes, the host's udev reads the device and would assemble what a guest built there."""
    chunk = mmap.mmap(-1, 2**20)  # zeros, page-aligned
    try:
        with memoryview(chunk) as zeros:
            size = os.lseek(read_write, 0, os.SEEK_END)
            head = min(GUEST_LAYERS, size)
            for start, end in ((0, head), (max(head, size - GUEST_LAYERS), size)):
                for offset in range(start, end, len(zeros)):
                    os.pwrite(read_write, zeros[: min(len(zeros), end - offset)], offset)
            os.fsync(read_write)
    except OSError as exc:
        raise Refused(
            f"{device.node}: could not wipe what the VM left on it ({exc.strerror}): before this host reads it, "
            f"wipe it yourself (wipefs --all {device.node})"
        ) from None
    finally:
        chunk.close()


# --- what is on a device ------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """One thing wipefs finds: a filesystem, partition table, RAID or LVM member, pool label."""

    device: str
    type: str
    uuid: str = ""
    label: str = ""

    def __str__(self) -> str:
        named = ", ".join(
            part
            for part in (f"UUID {self.uuid}" if self.uuid else "", f"label {self.label}" if self.label else "")
            if part
        )
        kind = f"{self.type} partition table" if self.type in ("gpt", "dos", "PMBR") else self.type
        return f"{kind} ({named})" if named else kind

    def key(self) -> list[str]:
        return [self.type, self.uuid]


def signatures(device: BlockDevice) -> list[Signature]:
    """What wipefs finds on the device and on each of its partitions (listing only: no-act)."""
    found = []
    for node in [device.node, *partition_nodes(device)]:
        listing = run(["wipefs", "--json", "--output", "DEVICE,TYPE,UUID,LABEL", node], check=False).stdout
        for entry in json.loads(listing).get("signatures", []) if listing.strip() else []:
            found.append(
                Signature(
                    node,
                    str(entry.get("type") or "unknown"),
                    str(entry.get("uuid") or ""),
                    str(entry.get("label") or ""),
                )
            )
    return list(dict.fromkeys(found))  # wipefs lists one signature at each of its copies


def partition_nodes(device: BlockDevice) -> list[str]:
    return [_name(n) for n in sorted(device.partitions())]


def describe(signatures_found: Iterable[Signature]) -> str:
    return ", ".join(str(s) for s in signatures_found)


# --- what a device is ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceFacts:
    """What the kernel reports of a device, recorded with every run (None: not reported)."""

    device: str
    kind: str  # disk, partition, loop, zram
    size: int  # bytes
    diskseq: int | None  # the kernel's sequence number of the disk: which attachment of it this was
    model: str | None
    serial: str | None
    wwn: str | None
    firmware: str | None
    rotational: bool | None
    logical_sector: int | None
    physical_sector: int | None
    scheduler: str | None  # the one in use
    nr_requests: int | None  # the block layer's queue
    queue_depth: int | None  # the device's own (SCSI/SATA)
    discard: bool | None  # whether it accepts discards (TRIM, UNMAP)
    backing_file: str | None = None  # loop devices

    def as_dict(self) -> dict:
        return asdict(self)

    def identity(self) -> str | None:
        """What names this device across attachments and reboots (WWN, serial, a loop device's
        backing file), with its size; None when nothing does."""
        name = self.wwn or self.serial or (f"file:{self.backing_file}" if self.backing_file else None)
        return f"{name}/{self.size}" if name else None


def facts(device: BlockDevice) -> DeviceFacts:
    """The device's facts from /sys (a partition's queue and model are its disk's)."""
    disk, own = device.disk, device.sysfs
    value = lambda *names: next((text for name in names if (text := _read(disk / name))), None)  # noqa: E731
    number = lambda *names: int(text) if (text := value(*names)) and text.isdigit() else None  # noqa: E731
    rotational = value("queue/rotational")
    scheduler = value("queue/scheduler") or ""
    in_use = scheduler[scheduler.find("[") + 1 : scheduler.find("]")] if "[" in scheduler else scheduler or None
    kind = (
        "partition"
        if device.is_partition
        else "loop"
        if disk.name.startswith("loop")
        else "zram"
        if disk.name.startswith("zram")
        else "disk"
    )
    size = _read(own / "size")
    return DeviceFacts(
        device=device.node,
        kind=kind,
        size=int(size) * 512 if size.isdigit() else 0,
        diskseq=number("diskseq"),
        model=value("device/model"),
        serial=value("device/serial", "serial"),
        wwn=value("wwid", "device/wwid"),
        firmware=value("device/rev", "device/firmware_rev"),
        rotational=None if rotational is None else rotational == "1",
        logical_sector=number("queue/logical_block_size"),
        physical_sector=number("queue/physical_block_size"),
        scheduler=in_use,
        nr_requests=number("queue/nr_requests"),
        queue_depth=number("device/queue_depth"),
        discard=None if (most := number("queue/discard_max_bytes")) is None else most > 0,
        backing_file=backing_file(disk) or None,
    )
