"""Becomes bpftrace inside a private mount namespace with tracefs mounted: bpftrace finds
tracepoints only under /sys/kernel/tracing, and fslab never mounts anything on the host for it.

Run by fslab (bpftrace.py) as

    unshare --mount --propagation private -- PYTHON -I -m fslab.tracing.namespace /usr/bin/bpftrace ARG...

It refuses unless its mount namespace differs from its parent's (unshare made it a new one), makes
every mount there private again (nothing it mounts propagates out), lets go of every filesystem
on a device or FUSE but the root (detached: the namespace's copy of a mount would hold its device
busy after the host unmounts it — another run's target, a user's disk — while bpftrace lives), mounts tracefs at
/sys/kernel/tracing unless one is there, and execs bpftrace: same pid and start time as the journal
recorded. The namespace, and its tracefs with it, end when bpftrace does. Standard library only:
it runs for a few milliseconds before every trace."""

from __future__ import annotations

import ctypes
import os
import re
import sys

TRACING = "/sys/kernel/tracing"
_MS_REC, _MS_PRIVATE = 0x4000, 1 << 18
_MNT_DETACH = 2


def mounts(mountinfo: str) -> list[tuple[str, str, str]]:
    """(mount point, filesystem type, source) of each line of /proc/self/mountinfo's text, in its
    order (a mount before those on it). Paths as the kernel escapes them (\\040 for a space) are
    unescaped."""
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 7 or "-" not in fields[6:]:
            continue
        tail = fields[fields.index("-", 6) + 1 :]
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if len(tail) >= 2:
            found.append((point, tail[0], tail[1]))
    return found


def holding_devices(mountinfo: str) -> list[str]:
    """The mount points of /proc/self/mountinfo's text on a device (source under /dev/) or FUSE,
    but the root: what the namespace lets go of, deepest (latest mounted) first."""
    return [
        point
        for point, fstype, source in mounts(mountinfo)[::-1]
        if point != "/" and (source.startswith("/dev/") or fstype.startswith("fuse"))
    ]


def _fail(why: str) -> None:
    sys.stderr.write(f"fslab.tracing.namespace: {why}\n")
    sys.exit(2)


def tracefs_at(path: str, mountinfo: str) -> bool:
    """Whether /proc/self/mountinfo's text shows a tracefs mounted at `path`."""
    return any(point == path and fstype == "tracefs" for point, fstype, _ in mounts(mountinfo))


def main(argv: list[str]) -> None:
    if len(argv) < 2 or os.path.basename(argv[1]) != "bpftrace":
        _fail("runs bpftrace only: usage: namespace.py /path/to/bpftrace ARG...")
    if os.readlink("/proc/self/ns/mnt") == os.readlink(f"/proc/{os.getppid()}/ns/mnt"):
        _fail("not in a mount namespace of its own (run it under `unshare --mount`): nothing mounted")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        _fail(f"cannot make the namespace's mounts private: {os.strerror(ctypes.get_errno())}")
    with open("/proc/self/mountinfo") as table:
        text = table.read()
    for point in holding_devices(text):  # this namespace's copies alone: the host's mounts are untouched
        libc.umount2(point.encode(), _MNT_DETACH)  # one already gone with its parent: nothing to do
    mounted = tracefs_at(TRACING, text)
    if not mounted and libc.mount(b"nodev", TRACING.encode(), b"tracefs", 0, None) != 0:
        _fail(f"cannot mount tracefs at {TRACING}: {os.strerror(ctypes.get_errno())}")
    os.execv(argv[1], argv[1:])


if __name__ == "__main__":
    main(sys.argv)
