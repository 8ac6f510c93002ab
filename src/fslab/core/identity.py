"""Proof that a file, a loop device, a mount or a process is the very one fslab made.

Names lie: a path can be swapped for a symlink, a loop device number reused, a pid recycled. So
fslab checks identity as the kernel records it, at the moment it acts:
- a file by its (device, inode), read with lstat or fstat, never through a symlink;
- a loop device by the kernel's own record of its backing file (LOOP_GET_STATUS64: the backing
  file's device and inode), read and acted on through one open descriptor;
- any block device by its device number, followed down sysfs `slaves/` to the loop devices or
  whole devices it rests on;
- a mount by the device number /proc/self/mountinfo gives for that exact path;
- a process by its pid and its start time (/proc/PID/stat), which a recycled pid cannot match.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import re
import stat
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fslab.core.errors import Refused

LOOP_CLR_FD = 0x4C01
LOOP_GET_STATUS64 = 0x4C05
_LOOP_INFO64 = struct.Struct("=QQQQQIIII64s64s32sQQ")  # struct loop_info64 (linux/loop.h)
UMOUNT_NOFOLLOW = 0x8
MNT_DETACH = 0x2


@dataclass(frozen=True)
class FileId:
    """A file as the kernel knows it: the device it lives on and its inode number."""

    dev: tuple[int, int]  # (major, minor)
    ino: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileId:
        return cls((os.major(st.st_dev), os.minor(st.st_dev)), st.st_ino)

    def proof(self) -> dict:
        return {"dev": f"{self.dev[0]}:{self.dev[1]}", "ino": self.ino}

    @classmethod
    def from_proof(cls, proof: dict) -> FileId:
        try:
            major, minor = (int(part) for part in str(proof["dev"]).split(":"))
            return cls((major, minor), int(proof["ino"]))
        except (KeyError, ValueError):
            raise Refused("no identity of a file is recorded for it") from None


def regular_file(path: Path) -> FileId | None:
    """The identity of the regular file at `path` itself (a symlink there is not followed), or
    None when nothing is there; Refused when something other than a regular file is."""
    return _found(path, stat.S_ISREG, "a regular file (a symlink, a directory or a device is there)")


def own_directory(path: Path, proof: dict, what: str) -> bool:
    """Whether the directory fslab made (its recorded `proof`) is at `path` itself (a symlink is
    not followed): False when nothing is there; Refused when anything else is."""
    found = _found(path, stat.S_ISDIR, f"the {what} fslab made (its identity differs: a symlink or a file is there)")
    if found is not None and found != FileId.from_proof(proof):
        raise Refused(f"{path} is not the {what} fslab made (its identity differs); left alone")
    return found is not None


def _found(path: Path, kind: Callable[[int], bool], expected: str) -> FileId | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not kind(st.st_mode):
        raise Refused(f"{path} is not {expected}: fslab leaves it alone")
    return FileId.of(st)


def open_own(path: Path, flags: int, mode: int = 0o600) -> int:
    """A descriptor on a file fslab keeps for itself (journal, lock, record, report), opened
    never through a symlink (O_NOFOLLOW); Refused, naming the path, when that cannot be."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Refused(f"{path}: {exc.strerror}; fslab opens its own files itself, never through a symlink") from None


# --- block devices ------------------------------------------------------------------------------


def device_number(path: str | Path) -> int | None:
    """The block device number of a device node (symlinks followed: /dev/disk/by-id names too)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_rdev if stat.S_ISBLK(st.st_mode) else None


def sysfs_of(number: int) -> Path | None:
    path = Path(f"/sys/dev/block/{os.major(number)}:{os.minor(number)}")
    return path.resolve() if path.exists() else None


def number_of(sysfs: Path) -> int | None:
    """The device number of a block device's sysfs directory."""
    try:
        major, minor = (int(x) for x in (sysfs / "dev").read_text().split(":"))
    except (OSError, ValueError):
        return None
    return os.makedev(major, minor)


@contextlib.contextmanager
def _opened(number: int) -> Iterator[int | None]:
    """A descriptor on the block device with this number, checked to be that device."""
    sysfs = sysfs_of(number)
    fd = None
    if sysfs is not None:
        with contextlib.suppress(OSError):
            fd = os.open(f"/dev/{sysfs.name}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        if fd is not None:
            try:
                same = os.fstat(fd).st_rdev == number
            except OSError:
                same = False
            if not same:
                os.close(fd)
                fd = None
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _backing_of_fd(fd: int) -> FileId | None:
    try:
        raw = fcntl.ioctl(fd, LOOP_GET_STATUS64, bytes(_LOOP_INFO64.size))
    except OSError:
        return None  # not a loop device, or one with nothing attached
    lo_device, lo_inode = _LOOP_INFO64.unpack(raw)[:2]
    # The kernel encodes lo_device as new_encode_dev(): minor's low byte, major, minor's rest.
    major, minor = (lo_device & 0xFFF00) >> 8, (lo_device & 0xFF) | ((lo_device >> 12) & 0xFFF00)
    return FileId((major, minor), lo_inode)


def disk_proof(number: int) -> dict:
    """What proves a block device is the very one seen now: its number and the disk's sequence
    number (`diskseq`), which the kernel gives every disk it creates or attaches anew, never twice
    while it runs: a device number reused by another zram or loop device has another one. A loop
    device's backing file too, as the kernel records it (`loop_backing`): a loop device detached
    keeps its diskseq until it is attached again, and a read-only one can change its file
    (LOOP_CHANGE_FD) keeping it."""
    proof: dict = {"dev": f"{os.major(number)}:{os.minor(number)}", "diskseq": _diskseq(number)}
    if _is_loop(number):
        with _opened(number) as fd:
            proof["backing"] = _backing_text(None if fd is None else _backing_of_fd(fd))
    return proof


def same_disk(proof: dict) -> int | None:
    """The number of the block device a proof names, if that very device is still there."""
    number = _proof_number(proof)
    if number is None or sysfs_of(number) is None:
        return None
    if "backing" not in proof:  # no loop device's (or a proof from before fslab recorded one)
        return number if _same_diskseq(number, proof) else None
    with _opened(number) as fd:
        return number if fd is not None and is_disk(fd, proof) else None


def is_disk(fd: int, proof: dict) -> bool:
    """Whether the block device open on `fd` is the very one a proof names, asked of the
    descriptor itself — its number, its diskseq (read after it was opened: a diskseq never
    returns, so that disk was there all along) and a loop device's backing file through it — so
    that what is handed on (to QEMU) is what was proven, whatever a path names by then."""
    number = _proof_number(proof)
    try:
        if number is None or os.fstat(fd).st_rdev != number or not _same_diskseq(number, proof):
            return False
    except OSError:
        return False
    if "backing" in proof or _is_loop(number):
        return proof.get("backing") == _backing_text(_backing_of_fd(fd))
    return True


def _proof_number(proof: dict) -> int | None:
    try:
        major, minor = (int(x) for x in str(proof["dev"]).split(":"))
    except (KeyError, ValueError):
        return None
    return os.makedev(major, minor)


def _same_diskseq(number: int, proof: dict) -> bool:
    try:
        return _diskseq(number) == int(proof["diskseq"])
    except (KeyError, ValueError):
        return False


def _is_loop(number: int) -> bool:
    sysfs = sysfs_of(number)
    disk = sysfs.parent if sysfs is not None and (sysfs / "partition").exists() else sysfs
    return disk is not None and disk.name.startswith("loop")


def _backing_text(file: FileId | None) -> str:
    return f"{file.dev[0]}:{file.dev[1]}:{file.ino}" if file is not None else "none"


def _diskseq(number: int) -> int:
    sysfs = sysfs_of(number)
    if sysfs is None:
        return -1
    disk = sysfs.parent if (sysfs / "partition").exists() else sysfs  # a partition has its disk's
    try:
        return int((disk / "diskseq").read_text())
    except (OSError, ValueError):
        return -1


def backing_file(sysfs: Path) -> str:
    """The path of the file a loop device is attached to, as sysfs gives it (loop/backing_file):
    the path's bytes as they are, unescaped, and a newline after them; " (deleted)" ends it when
    the file is gone. Empty when the device is no loop device or has nothing attached. (A name to
    show and record: what proves the file is `loop_backing`.)"""
    try:
        raw = (sysfs / "loop" / "backing_file").read_bytes()
    except OSError:
        return ""
    return os.fsdecode(raw.removesuffix(b"\n"))


def loop_backing(number: int) -> FileId | None:
    """The kernel's record of the file a loop device is attached to, or None."""
    with _opened(number) as fd:
        return None if fd is None else _backing_of_fd(fd)


@dataclass(frozen=True)
class Owned:
    """What fslab may format, and the proof it asks of a device: its images (as files) and the
    whole block devices it made (zram) or the user confirmed on the command line."""

    files: frozenset[FileId] = frozenset()
    devices: frozenset[int] = frozenset()

    def __or__(self, other: Owned) -> Owned:
        return Owned(self.files | other.files, self.devices | other.devices)


def rests_on(number: int, owned: Owned) -> bool:
    """Whether the kernel says this device rests only on what fslab owns: a loop device backed by
    one of its files, one of its whole devices, or a device (md, dm) built solely on such."""
    if number in owned.devices:
        return True
    sysfs = sysfs_of(number)
    if sysfs is None:
        return False
    below = sorted((sysfs / "slaves").iterdir()) if (sysfs / "slaves").is_dir() else []
    if below:
        return all((n := number_of(member.resolve())) is not None and rests_on(n, owned) for member in below)
    backing = loop_backing(number) if (sysfs / "loop").is_dir() else None
    return backing is not None and backing in owned.files


def assert_ours(device: str, owned: Owned, action: str = "format") -> int:
    """The device's number, or Refused unless it rests on what fslab owns only."""
    number = device_number(device)
    if number is None or not rests_on(number, owned):
        raise Refused(
            f"refusing to {action} {device}: the kernel does not show it resting on fslab's own images or devices only"
        )
    return number


def loops_backed_by(file: FileId) -> list[str]:
    """Loop devices the kernel says are attached to this very file."""
    found = []
    for sysfs in sorted(Path("/sys/block").glob("loop[0-9]*")):
        number = number_of(sysfs)
        if number is not None and (sysfs / "loop").is_dir() and loop_backing(number) == file:
            found.append(f"/dev/{sysfs.name}")
    return found


def detach_loop(device: str, file: FileId) -> None:
    """Detach the loop device only if, on the very descriptor that detaches it, the kernel says it
    is attached to `file`. (Held open elsewhere, it detaches when the last user closes it.)"""
    number = device_number(device)
    if number is None:
        return
    with _opened(number) as fd:
        if fd is None or _backing_of_fd(fd) != file:
            return
        try:
            fcntl.ioctl(fd, LOOP_CLR_FD, 0)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: already detached
                raise


# --- mounts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    mountpoint: str
    dev: str  # "major:minor" of the mounted filesystem
    fstype: str
    source: str


_OCTAL = re.compile(rb"\\([0-7]{3})")


def unescape(field: bytes) -> str:
    """A path as the kernel writes it in /proc/self/mountinfo, /proc/mounts and /proc/swaps: its
    space, tab, newline and backslash as octal escapes (\\040, \\011, \\012, \\134), every other
    byte as it is. The escapes are undone on the bytes, and the bytes read as any path is
    (os.fsdecode: UTF-8, with bytes that are not UTF-8 kept as they were), so the path compares
    equal to a Path naming it: `café\\040x` is `café x`."""
    return os.fsdecode(_OCTAL.sub(lambda m: bytes([int(m.group(1), 8) & 0xFF]), field))


def kernel_table(path: str) -> list[list[bytes]]:
    """The rows of a table the kernel writes a line per entry, its fields apart by spaces or
    tabs (/proc/self/mountinfo, /proc/self/mounts, /proc/swaps): as bytes, for `unescape`. Read
    as bytes and split only where the kernel separates fields (a path's own blanks are escaped;
    other whitespace, a carriage return or a non-breaking space, belongs to the path)."""
    try:
        with open(path, "rb") as table:
            text = table.read()
    except OSError:
        return []
    return [
        [field for field in re.split(rb"[ \t]+", line) if field] for line in text.split(b"\n") if line.strip(b" \t")
    ]


def mounts() -> list[Mount]:
    """Every mount the kernel shows this process, in mount order (/proc/self/mountinfo)."""
    found = []
    for row in kernel_table("/proc/self/mountinfo"):
        if b"-" not in row[6:]:
            continue
        tail = row[row.index(b"-", 6) + 1 :]  # after the optional fields and their separator
        if len(row) >= 5 and len(tail) >= 2:
            found.append(Mount(unescape(row[4]), row[2].decode(), tail[0].decode(), unescape(tail[1])))
    return found


def mounts_at(path: Path) -> list[Mount]:
    """What is mounted at exactly this path, bottom first (the last one is what the path shows)."""
    return [mount for mount in mounts() if mount.mountpoint == str(path)]


def unmount(path: Path, dev: str, mount: str | None = None) -> None:
    """Unmount the filesystem at `path` if it is the one with device number `dev` (and, where
    `mount` is given, that very mount: mount_id); the kernel is told not to follow a symlink at
    `path`. Retries briefly while the filesystem is busy."""
    libc = ctypes.CDLL(None, use_errno=True)
    for attempt in range(20):
        mounted = mounts_at(path)
        if not mounted:
            return
        if mounted[-1].dev != dev:
            raise Refused(
                f"{path}: the filesystem mounted there ({mounted[-1].source}, "
                f"{mounted[-1].dev}) is not the one fslab mounted ({dev}); left mounted"
            )
        if mount is not None and (found := mount_id(path)) != mount:
            raise Refused(
                f"{path}: the mount there ({mounted[-1].source}, mount {found}) is not the one fslab "
                f"made (mount {mount}); left mounted"
            )
        # A mount proven by its id is detached with what the kernel automounted below it since
        # (debugfs's tracing/, mounted by anything that walks into it): that stops no unmount.
        flags = UMOUNT_NOFOLLOW | (MNT_DETACH if mount is not None else 0)
        if libc.umount2(str(path).encode(), flags) == 0:
            continue
        code = ctypes.get_errno()
        if code != errno.EBUSY or attempt == 19:
            raise OSError(code, f"cannot unmount {path}: {os.strerror(code)}")
        time.sleep(0.3)


_STATX_MNT_ID, _STATX_MNT_ID_UNIQUE = 0x1000, 0x4000
_AT_FDCWD, _AT_SYMLINK_NOFOLLOW = -100, 0x100
_STATX_SIZE, _STATX_MNT_ID_AT = 256, 0x90  # struct statx's size (with room) and stx_mnt_id's offset


def mount_id(path: Path) -> str | None:
    """Which mount `path` shows, as the kernel numbers mounts: "u<id>", the unique id no other
    mount gets while the kernel runs (statx STATX_MNT_ID_UNIQUE, Linux 6.8), else "r<id>", the id
    /proc/self/mountinfo shows, which a later mount may reuse once this one is gone; None where
    statx says neither. What tells two mounts of one superblock apart (every debugfs mount has
    the same device number)."""
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(_STATX_SIZE)
    for wanted, tag in ((_STATX_MNT_ID_UNIQUE, "u"), (_STATX_MNT_ID, "r")):
        if libc.statx(_AT_FDCWD, os.fsencode(path), _AT_SYMLINK_NOFOLLOW, wanted, buffer) != 0:
            return None
        mask = struct.unpack_from("=I", buffer.raw, 0)[0]
        if mask & wanted:
            return f"{tag}{struct.unpack_from('=Q', buffer.raw, _STATX_MNT_ID_AT)[0]}"
    return None


def mount_proof(path: Path) -> dict:
    """What proves the mount fslab just made at `path`: its device number, type and source."""
    mounted = mounts_at(path)
    if not mounted:
        raise Refused(f"nothing is mounted at {path} after mounting it")
    top = mounted[-1]
    return {"dev": top.dev, "fstype": top.fstype, "source": top.source}


# --- processes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessId:
    pid: int
    start: int  # clock ticks after boot (/proc/PID/stat field 22): a recycled pid differs here
    comm: str

    def proof(self) -> dict:
        return {"pid": self.pid, "start": self.start, "comm": self.comm}


def process(pid: int) -> ProcessId | None:
    """The living process with this pid, or None: gone, or a zombie whose threads have all
    exited. A process whose main thread has exited while others work on (zfs-fuse's, for
    seconds after SIGTERM) still lives, and holds what it held."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X") and not _threads_besides_main(pid):
        return None
    return ProcessId(pid, int(fields[19]), comm)


def _threads_besides_main(pid: int) -> bool:
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def same_process(proof: dict) -> ProcessId | None:
    """The process a proof names, if that very process still lives."""
    found = process(int(proof["pid"]))
    if found and found.start == int(proof["start"]) and found.comm == str(proof["comm"]):
        return found
    return None
