"""The host's secrets masked from a lab guest, which sees the host's root over 9p: QEMU runs in a
mount namespace of its own where every masked directory is covered by an empty read-only tmpfs
and every masked file by /dev/null, and what fslab runs from (its interpreter, environment and
package, the command's directory, the boot's files) is bound back visible even under a masked
directory (users keep checkouts in /root). QEMU exports not / but a copy of it (the export, a
directory of the boot's) without the host's pseudo filesystems: a guest that binds its root
elsewhere, under its own /proc and /sys, would otherwise read the host's processes (their
environments: PGPASSWORD), /proc/kcore, /sys, /dev and /run — QEMU runs as root.

Run by vm.py (`wrap`) as

    unshare --mount --propagation private -- PYTHON -I -m fslab.lab.masking PLAN_JSON -- qemu-system-x86_64 ARG...

The trampoline (main) refuses unless its mount namespace differs from its parent's, makes every
mount there private again (nothing it mounts propagates out), lets go of its copies of the host's
device and FUSE mounts that hold nothing QEMU needs (as the tracer's namespace does,
tracing/namespace.py: a copy would keep another run's target mounted, and its loop device busy,
for as long as the VM runs — and would show it to the guest), stages each kept path under a
private tmpfs (a bind, taken before anything is covered), covers, binds the kept paths back,
makes the covers read-only, unmounts the staging area, binds / (covers and all) at the export,
lets go of the export's pseudo filesystems (proc, sysfs, devtmpfs, cgroup, …, tmpfs under /run
and /dev: host_state_mounts; its own /proc stays, QEMU needs it), checks none is left and execs
QEMU: same pid and start time as the journal recorded. The namespace ends when QEMU does. Standard library only.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from fslab.tracing.namespace import holding_devices, mounts

# Directories no guest reads: users' homes and root's (ssh keys, ~/.pgpass, shell histories), the
# machine's ssh keys, PostgreSQL's data, fslab's own settings, private TLS keys, backups of the
# password files, mail and crontabs.
MASKED_DIRECTORIES = (
    "/root", "/home", "/etc/ssh", "/var/lib/postgresql", "/etc/fslab", "/etc/ssl/private", "/var/backups",
    "/var/mail", "/var/spool/cron", "/var/spool/mail", "/var/lib/sss", "/etc/sudoers.d",
)  # fmt: skip
MASKED_FILES = (
    "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/security/opasswd", "/etc/krb5.keytab",
    "/etc/sudoers",
)  # fmt: skip
DB_SUFFIXES = ("", "-wal", "-shm", "-journal")

# The kernel's view of itself and of the host's processes, not files: none is exported (the guest
# mounts its own /proc, /sys, /dev and /run). tmpfs is a file system, but under these directories
# it holds the host's run-time state (sockets, shared memory, session keys).
PSEUDO_FILESYSTEMS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "bpf",
    "configfs", "fusectl", "mqueue", "hugetlbfs", "pstore", "efivarfs", "binfmt_misc", "autofs", "rpc_pipefs",
    "nfsd", "nsfs", "selinuxfs", "smackfs", "ramfs",
})  # fmt: skip
RUNTIME_DIRECTORIES = ("/proc", "/sys", "/dev", "/run")

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 0x4000, 1 << 18
_MNT_DETACH, _UMOUNT_NOFOLLOW = 2, 8


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def databases(extra: Sequence[Path] = (), *, cwd: Path | None = None) -> list[str]:
    """fslab's SQLite databases the guest must not read: $FSLAB_DB or fslab.db (in fslab's
    directory and the command's), those named, and their WAL, shared-memory and journal files."""
    from fslab.results.location import resolve_location

    default = resolve_location(None)
    named = [Path(p) for p in extra]
    if "://" not in default:
        named += [Path.cwd() / default] + ([cwd / default] if cwd is not None else [])
    return [f"{os.path.realpath(p)}{suffix}" for p in named for suffix in DB_SUFFIXES]


def plan(
    *,
    keep: Sequence[Path],
    masked_directories: Sequence[str] = MASKED_DIRECTORIES,
    masked_files: Sequence[str] = MASKED_FILES,
) -> dict[str, list[str]]:
    """What the trampoline does, from paths as they are on the host now: directories to cover
    (existing, resolved, none inside another), files to cover (existing, not already covered
    unless bound back), and kept paths to bind back (strictly inside a covered directory: a kept
    path holding a masked one — the command run in /root itself — is not kept; the mask wins)."""
    directories: list[str] = []
    for name in sorted({os.path.realpath(d) for d in masked_directories if os.path.isdir(d)}):
        if name != "/" and not any(_inside(name, d) for d in directories):
            directories.append(name)
    kept: list[str] = []
    for name in sorted({os.path.realpath(k) for k in keep if os.path.exists(k)}):
        if any(_inside(name, d) and name != d for d in directories) and not any(_inside(name, k) for k in kept):
            kept.append(name)
    files: list[str] = []
    for name in sorted({os.path.realpath(f) for f in masked_files}):
        if not os.path.isfile(name) or name in files:
            continue
        covered = any(_inside(name, d) for d in directories) and not any(_inside(name, k) for k in kept)
        if not covered:
            files.append(name)
    return {"directories": directories, "keep": kept, "files": files}


def host_state_mounts(mountinfo: str, export: str, *, covers: Sequence[str] = ()) -> list[str]:
    """The mount points under `export` (a copy of /) in /proc/self/mountinfo's text that show the
    host's processes and kernel rather than files: a pseudo filesystem, or a tmpfs or ramfs under
    /proc, /sys, /dev or /run; not `covers` (the masked files under /dev/null: a devtmpfs's). The
    outermost alone: those mounted on them go with them."""
    spared = {os.path.join(export, c.lstrip("/")) for c in covers}
    found = []
    for point, fstype, _ in mounts(mountinfo):
        if point == export or not _inside(point, export) or point in spared:
            continue
        runtime = fstype == "tmpfs" and any(_inside(point, export + d) for d in RUNTIME_DIRECTORIES)
        if fstype in PSEUDO_FILESYSTEMS or runtime:
            found.append(point)
    return [point for point in found if not any(_inside(point, other) and point != other for other in found)]


def wrap(
    argv: Sequence[str], *, keep: Sequence[Path], stage: Path, export: Path, mask_files: Sequence[str] = ()
) -> list[str]:
    """The argument list that runs `argv` (QEMU) in a mount namespace with the host's secrets masked.
    `stage`: an empty directory of the boot's, where the namespace stages what it binds back;
    `export`: another, where it binds the root QEMU exports (argv's -virtfs path=)."""
    fslab_dir = Path(__file__).resolve().parent.parent
    visible = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent, fslab_dir, *keep]
    steps = plan(keep=visible, masked_files=(*MASKED_FILES, *mask_files))
    steps["stage"] = [str(stage)]
    steps["export"] = [os.path.realpath(export)]
    # every path QEMU and the guest reach, masked or not: the mounts holding them stay
    steps["needed"] = sorted({os.path.realpath(p) for p in (*visible, stage, export) if os.path.exists(p)})
    # (both checked installed before a boot: vm.unavailable_reason)
    unshare, program = shutil.which("unshare") or "unshare", shutil.which(argv[0]) or argv[0]
    return [unshare, "--mount", "--propagation", "private", "--",
            sys.executable, "-I", "-m", "fslab.lab.masking", json.dumps(steps), "--", program, *argv[1:]]  # fmt: skip


# ---- the trampoline, in the new namespace ---------------------------------------------------------


def _fail(why: str) -> None:
    sys.stderr.write(f"fslab.lab.masking: {why}\n")
    sys.exit(2)


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    def b(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    if libc.mount(b(source), b(target), b(fstype), flags, b(data)) != 0:
        _fail(f"cannot mount {fstype or source or ''} at {target}: {os.strerror(ctypes.get_errno())}")


def _make_like(original: str, path: str) -> None:
    """An empty directory or file at `path` (in a cover's tmpfs) to bind `original` onto."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.isdir(original):
        os.makedirs(path, exist_ok=True)
    elif not os.path.exists(path):
        with open(path, "w"):
            pass


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--" or os.path.basename(argv[3]) != "qemu-system-x86_64":
        _fail("runs QEMU alone: usage: masking.py PLAN_JSON -- qemu-system-x86_64 ARG...")
    try:
        own = os.readlink("/proc/self/ns/mnt") == os.readlink(f"/proc/{os.getppid()}/ns/mnt")
    except OSError as exc:  # its parent gone (fslab killed meanwhile: init's is not for it to read)
        _fail(f"cannot compare its mount namespace with its parent's ({exc.strerror}): nothing mounted")
    if own:
        _fail("not in a mount namespace of its own (run it under `unshare --mount`): nothing mounted")
    steps = json.loads(argv[1])
    libc = ctypes.CDLL(None, use_errno=True)
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE, None)
    with open("/proc/self/mountinfo") as table:
        mounted = table.read()
    for point in holding_devices(mounted):  # this namespace's copies alone: the host's are untouched
        if not any(_inside(path, point) for path in steps["needed"]):
            libc.umount2(os.fsencode(point), _MNT_DETACH)  # one already gone with its parent: nothing to do
    stage = steps["stage"][0]
    _mount(libc, "fslab-stage", stage, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0700,size=1m")
    staged = []
    for number, path in enumerate(steps["keep"]):
        copy = os.path.join(stage, str(number))
        _make_like(path, copy)
        _mount(libc, path, copy, None, _MS_BIND | _MS_REC, None)
        staged.append((path, copy))
    for directory in steps["directories"]:
        _mount(libc, "fslab-masked", directory, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
    for path, copy in staged:
        _make_like(copy, path)
        _mount(libc, copy, path, None, _MS_BIND | _MS_REC, None)
    for directory in steps["directories"]:
        flags = _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
        _mount(libc, None, directory, None, flags, None)
    for path in steps["files"]:
        _mount(libc, "/dev/null", path, None, _MS_BIND, None)
    if libc.umount2(os.fsencode(stage), _MNT_DETACH) != 0:
        _fail(f"cannot unmount the staging area {stage}: {os.strerror(ctypes.get_errno())}")
    export = steps["export"][0]
    _mount(libc, "/", export, None, _MS_BIND | _MS_REC, None)
    for point in _host_state(export, steps["files"]):
        libc.umount2(os.fsencode(point), _MNT_DETACH | _UMOUNT_NOFOLLOW)  # a failure: found just below
    left = _host_state(export, steps["files"])
    if left:
        _fail(f"cannot let go of the host's {left[0]} in the guest's root: QEMU not started")
    os.execvp(argv[3], argv[3:])


def _host_state(export: str, covers: Sequence[str]) -> list[str]:
    with open("/proc/self/mountinfo") as table:
        return host_state_mounts(table.read(), export, covers=covers)


if __name__ == "__main__":
    main(sys.argv)
