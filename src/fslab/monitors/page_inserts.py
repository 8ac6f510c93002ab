"""Bytes a filesystem added to the page cache, counted in the kernel: the tracepoint
filemap:mm_filemap_add_to_page_cache, filtered to the filesystem's superblock (its s_dev) and a
folio order, as perf counters (perf_event_open(2): counting, no ring buffer to overrun, nothing to
parse). One counter per order 0–MAX_ORDER and one for any larger order, on each online CPU,
grouped per CPU so that one read(2) gives a CPU's counters; bytes = Σ count × page size << order.

Nothing is created in the kernel that outlives fslab: the counters are file descriptors, closed
with the process however it ends (SIGKILL too), so there is nothing to journal or clean up. The
filter is fslab's own text, made of two numbers it computed (`insert_filter`). Reading a
tracepoint's id needs tracefs (its events/…/id); the caller says where it is mounted.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from pathlib import Path

from fslab.core.errors import FslabError

EVENT = ("filemap", "mm_filemap_add_to_page_cache")
MAX_ORDER = 10  # x86-64's and arm64's (4 KiB pages) largest buddy order; a larger one is counted apart
MINORBITS = 20  # the kernel's dev_t inside it (include/linux/kdev_t.h), not userspace's encoding

# perf_event_open's number and _IOW('$', 6, char *) where the asm-generic ioctl encoding holds
_SYSCALL = {"x86_64": 298, "aarch64": 241, "riscv64": 241}
_SET_FILTER = 0x40082406
_TYPE_TRACEPOINT, _FORMAT_GROUP, _FD_CLOEXEC, _DISABLED = 2, 8, 8, 1
_ENABLE, _FLAG_GROUP = 0x2400, 1  # PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP
_ATTR = struct.Struct("=IIQQQQQIIQ")  # perf_event_attr as first published (PERF_ATTR_SIZE_VER0: 64 bytes)


class NotCounted(FslabError):
    pass


def kernel_dev(major_minor: str) -> int:
    """The kernel's dev_t for "major:minor" (mountinfo's field: the superblock's s_dev), as the
    tracepoint's s_dev holds it: major << 20 | minor."""
    major, minor = (int(part) for part in major_minor.split(":"))
    if not (0 <= major < 1 << 12 and 0 <= minor < 1 << MINORBITS):
        raise ValueError(f"{major_minor!r} is not a device number the kernel gives")
    return major << MINORBITS | minor


def insert_filter(s_dev: int, order: int | None) -> str:
    """The tracepoint filter for one superblock and one folio order (None: above MAX_ORDER)."""
    if not isinstance(s_dev, int) or isinstance(s_dev, bool) or s_dev < 0:
        raise ValueError(f"s_dev must be a number, not {s_dev!r}")
    wanted = f"order > {MAX_ORDER}" if order is None else f"order == {int(order)}"
    return f"s_dev == {s_dev} && {wanted}"


def inserted_bytes(counts: list[int], page_size: int) -> int | None:
    """Bytes from one CPU group's (or their sum's) counts by order, the last being orders above
    MAX_ORDER: None when any such folio came (its size is not known)."""
    *by_order, larger = counts
    if larger:
        return None
    return sum(count * (page_size << order) for order, count in enumerate(by_order))


def online_cpus(text: str) -> list[int]:
    """CPUs from /sys/devices/system/cpu/online ("0-3,6")."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def missing() -> str | None:
    """What this machine lacks to count insertions (`fslab doctor`), None: nothing."""
    from fslab.core.checks import kernel_filesystems

    if platform.machine() not in _SYSCALL:
        return f"perf_event_open's number on {platform.machine()} is not known to fslab"
    if not Path("/proc/sys/kernel/perf_event_paranoid").exists():
        return "this kernel has no perf events (CONFIG_PERF_EVENTS)"
    if "tracefs" not in kernel_filesystems():
        return "this kernel has no tracefs (CONFIG_FTRACE), which numbers its tracepoints"
    return None


def tracepoint_id(tracefs: Path) -> int:
    return int((tracefs / "events" / EVENT[0] / EVENT[1] / "id").read_text())


class PageInserts:
    """The counters of one superblock's insertions, open from `open` to `close`."""

    def __init__(self, major_minor: str):
        self.s_dev = kernel_dev(major_minor)
        self.leaders: list[int] = []
        self.fds: list[int] = []
        self.page_size = os.sysconf("SC_PAGE_SIZE")

    def open(self, tracefs: Path) -> None:
        number = _SYSCALL.get(platform.machine())
        if number is None:
            raise NotCounted(f"perf_event_open's number on {platform.machine()} is not known to fslab")
        event = tracepoint_id(tracefs)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        try:
            for cpu in online_cpus(Path("/sys/devices/system/cpu/online").read_text()):
                leader = -1
                for order in [*range(MAX_ORDER + 1), None]:
                    # opened disabled: an unfiltered counter counts every filesystem's pages
                    fields = (_TYPE_TRACEPOINT, _ATTR.size, event, 0, 0, _FORMAT_GROUP, _DISABLED, 0, 0, 0)
                    attr = ctypes.create_string_buffer(_ATTR.pack(*fields))
                    fd = libc.syscall(number, attr, -1, cpu, leader, _FD_CLOEXEC)
                    if fd < 0:
                        code = ctypes.get_errno()
                        raise NotCounted(f"perf_event_open of {':'.join(EVENT)} on CPU {cpu}: {os.strerror(code)}")
                    self.fds.append(fd)
                    text = ctypes.create_string_buffer(insert_filter(self.s_dev, order).encode())
                    if libc.ioctl(fd, ctypes.c_ulong(_SET_FILTER), text) != 0:
                        code = ctypes.get_errno()
                        raise NotCounted(f"setting the filter of {':'.join(EVENT)}: {os.strerror(code)}")
                    if leader == -1:
                        leader = fd
                        self.leaders.append(fd)
            for leader in self.leaders:  # each CPU's group, every filter set
                if libc.ioctl(leader, ctypes.c_ulong(_ENABLE), _FLAG_GROUP) != 0:
                    raise NotCounted(f"enabling {':'.join(EVENT)}'s counters: {os.strerror(ctypes.get_errno())}")
        except BaseException:
            self.close()
            raise

    def read(self) -> list[int]:
        """The counts by order (the last: above MAX_ORDER), summed over the CPUs."""
        total = [0] * (MAX_ORDER + 2)
        for leader in self.leaders:
            raw = os.read(leader, 8 * (len(total) + 1))
            number, *values = struct.unpack(f"={len(raw) // 8}Q", raw)
            if number != len(total):
                raise NotCounted(f"a group of {len(total)} counters read {number}")
            total = [a + b for a, b in zip(total, values, strict=True)]
        return total

    def bytes(self) -> int | None:
        return inserted_bytes(self.read(), self.page_size)

    def close(self) -> None:
        for fd in reversed(self.fds):
            os.close(fd)
        self.fds, self.leaders = [], []
