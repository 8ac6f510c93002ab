"""A memory limit for a run's workload: a cgroup fslab makes for the measured run, so that the
page cache cannot hold what a buffered workload reads and writes (both cgroup versions charge a
page of cache to the cgroup of the process that brought it in, and reclaim within the limit).

Where: the cgroup v2 hierarchy when its memory controller is enabled there, else the v1 memory
controller's mount. In v2 fslab's group goes beneath the root (the one cgroup that may hold both
processes and children with controllers); in v1 beneath fslab's own memory cgroup, so that any
limit fslab itself runs under still bounds its workloads.

A group is named with this work directory's tag (core/names.workdir_tag), journalled before it
is made and proven by its (device, inode) once it is: `fslab cleanup` after a kill removes it
only when the directory there is that very cgroup, in a memory hierarchy, with fslab's name.

Every process `system.run_held` starts inside `memory_limited(...)` joins the group before it
runs its command: run_held's start gate writes its pid to the group's cgroup.procs while the
process still waits to exec (system._GATE), so nothing of the workload runs unlimited.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.errors import FslabError, Refused
from fslab.core.identity import FileId, kernel_table, own_directory, unescape
from fslab.core.journal import Entry, Journal, releaser
from fslab.core.names import workdir_tag

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir

# Below this fio, sysbench or dd itself (code, buffers, fio's shared memory) risks the OOM killer.
SMALLEST_LIMIT = 16 << 20


class CgroupError(FslabError):
    pass


@dataclass(frozen=True)
class Hierarchy:
    """Where fslab makes memory-limited groups, and the files that set and report their memory."""

    version: int  # 1 or 2
    mount: Path  # the hierarchy's mount point
    parent: Path  # the cgroup fslab's groups go beneath

    @property
    def limit_file(self) -> str:
        return "memory.max" if self.version == 2 else "memory.limit_in_bytes"

    @property
    def peak_file(self) -> str:
        """The kernel's high-water mark of the group's memory (page cache included); v2 has it
        since Linux 5.19."""
        return "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"

    def __str__(self) -> str:
        return f"cgroup v{self.version} memory controller at {self.mount}"


def _cgroup_mounts() -> list[tuple[Path, str, set[str]]]:
    """(mount point, fstype, options) of every cgroup and cgroup2 mount (/proc/self/mounts)."""
    found = []
    for row in kernel_table("/proc/self/mounts"):
        if len(row) >= 4 and row[2] in (b"cgroup", b"cgroup2"):
            found.append((Path(unescape(row[1])), row[2].decode(), set(os.fsdecode(row[3]).split(","))))
    return found


def _v2_has_memory(mount: Path) -> bool:
    try:
        return "memory" in (mount / "cgroup.controllers").read_text().split()
    except OSError:
        return False


def _own_v1_memory_group() -> str:
    """fslab's own cgroup in the v1 memory hierarchy (/proc/self/cgroup), "/" when unknown."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
    return "/"


def find_hierarchy() -> Hierarchy | str:
    """The hierarchy fslab limits memory with on this machine, or why there is none."""
    mounts = _cgroup_mounts()
    v2 = [mount for mount, fstype, _ in mounts if fstype == "cgroup2"]
    for mount in v2:
        if _v2_has_memory(mount):
            try:
                enabled = "memory" in (mount / "cgroup.subtree_control").read_text().split()
            except OSError:
                enabled = False
            if not enabled:
                return (
                    "the memory controller is not enabled for the children of "
                    f"{mount} (cgroup.subtree_control): enable it with +memory there"
                )
            return Hierarchy(2, mount, mount)
    for mount, fstype, options in mounts:
        if fstype == "cgroup" and "memory" in options:
            own = mount / _own_v1_memory_group().lstrip("/")
            return Hierarchy(1, mount, own if own.is_dir() else mount)
    where = f"cgroup2 at {', '.join(map(str, v2))} lists no memory controller, and " if v2 else ""
    return (
        f"{where}no cgroup v1 memory controller is mounted: memory_limit "
        "needs a kernel with CONFIG_MEMCG and a mounted memory controller"
    )


def missing() -> str | None:
    """Why memory limits cannot be set here, or None when they can (for doctor)."""
    found = find_hierarchy()
    return found if isinstance(found, str) else None


@dataclass(frozen=True)
class Group:
    """A memory-limited cgroup fslab made for one run."""

    hierarchy: Hierarchy
    path: Path
    limit: int

    def admit(self, pid: int) -> None:
        """Move a process (all its threads) into the group; its children are born there."""
        with open(self.path / "cgroup.procs", "w") as procs:
            procs.write(f"{pid}\n")

    def peak(self) -> int | None:
        """The most memory the group's processes held at once (page cache included), or None
        when the kernel does not say (v2 before Linux 5.19)."""
        return _read_int(self.path / self.hierarchy.peak_file)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


_GROUP: ContextVar[Group | None] = ContextVar("fslab_memory_group", default=None)
_NUMBERS = itertools.count(1)


def current() -> Group | None:
    """The group the processes run_held starts now join (None: no limit)."""
    return _GROUP.get()


@contextlib.contextmanager
def memory_limited(journal: Journal, limit: int | None) -> Iterator[Group | None]:
    """A fresh cgroup limited to `limit` bytes of memory for every process run_held starts
    inside; removed afterwards (its processes ended by then). None: no limit, nothing made."""
    if limit is None:
        yield None
        return
    hierarchy = find_hierarchy()
    if isinstance(hierarchy, str):
        raise CgroupError(f"memory_limit: {hierarchy}")
    path = hierarchy.parent / f"{workdir_tag(journal.workdir.root)}mem{os.getpid()}_{next(_NUMBERS)}"
    with journal.holding("cgroup", str(path)) as held:
        os.mkdir(path)
        held.prove(**FileId.of(os.lstat(path)).proof())
        group = Group(hierarchy, path, limit)
        (path / hierarchy.limit_file).write_text(f"{limit}\n")
        token = _GROUP.set(group)
        try:
            yield group
        finally:
            _GROUP.reset(token)


def _under_memory_hierarchy(path: Path) -> bool:
    """Whether `path` is beneath the mount of a memory hierarchy (v2 with memory, v1 memory)."""
    for mount, fstype, options in _cgroup_mounts():
        memory = _v2_has_memory(mount) if fstype == "cgroup2" else "memory" in options
        if memory and path.is_relative_to(mount) and path != mount:
            return True
    return False


@releaser("cgroup")
def remove_group(entry: Entry, workdir: Workdir) -> None:
    """Remove the cgroup fslab made, if that very one is there: fslab's name for this work
    directory, in a memory hierarchy, with the recorded (device, inode); and empty (the
    processes it held are released before it, being journalled after it)."""
    path = Path(entry.ident)
    if (
        not path.is_absolute()
        or ".." in path.parts
        or not path.name.startswith(workdir_tag(workdir.root))
        or not _under_memory_hierarchy(path)
    ):
        raise Refused(f"{path} is not a cgroup fslab names for this work directory; left alone")
    if not own_directory(path, entry.proof, "cgroup"):
        return  # removed already
    procs = (path / "cgroup.procs").read_text().split()
    if procs:
        raise Refused(
            f"cgroup {path} still holds processes {', '.join(procs[:10])}, which fslab did not end; left in place"
        )
    for attempt in range(50):  # an exited process leaves a cgroup a moment after it is reaped
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or attempt == 49:
                raise CgroupError(f"cannot remove cgroup {path}: {exc.strerror}") from None
            time.sleep(0.1)
