"""The guard against harm to what is not fslab's: things found at fslab's own paths, a planted
journal, a killed fslab whose fio lives on. The user's things are real: a loop device the test
attaches over its own image, carrying a filesystem with a file on it, and a user's process."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import TEST_ROOT, ZFS_FUSE, fresh_workdir, fslab, fslab_in_process, held_by, write_study
from fslab.core.identity import FileId, kernel_table, loops_backed_by, mounts_at, regular_file, unescape
from fslab.core.names import workdir_tag
from fslab.core.workdir import MARKER, Workdir
from fslab.filesystems.zfs_engine import engine
from fslab.results import ResultsDB
from short_studies import short_study

pytestmark = ZFS_FUSE  # zfs-fuse: one daemon on the machine (conftest)

STUDY = """\
[study]
name = "guarded"
repetitions = 1
workloads = ["seq_write"]
image_size = "320MiB"
image_fill = "sparse"

[fio]
size = "16MiB"
runtime = "1s"

[[target]]
name = "victim"
filesystem = "xfs"
"""


@dataclass
class UsersDisk:
    image: Path
    device: str
    mountpoint: Path
    file: Path

    def intact(self) -> bool:
        image = regular_file(self.image)
        return image is not None and self.device in loops_backed_by(image) and self.file.read_text() == "precious\n"


@contextmanager
def users_disk(mounted: bool = True) -> Iterator[UsersDisk]:
    """A user's disk: their own image attached as a loop device, ext4 on it, a file on that."""
    TEST_ROOT.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="user-", dir=TEST_ROOT))
    image, mountpoint = home / "disk.img", home / "data"
    with open(image, "wb") as f:
        f.truncate(64 * 2**20)
    device = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()
    mountpoint.mkdir()
    try:
        subprocess.run(["mkfs.ext4", "-q", device], check=True)
        subprocess.run(["mount", device, str(mountpoint)], check=True)
        (mountpoint / "file.txt").write_text("precious\n")
        if not mounted:
            subprocess.run(["umount", str(mountpoint)], check=True)
            subprocess.run(["mount", "-o", "ro", device, str(mountpoint)], check=True)  # read the file, then let go
        disk = UsersDisk(image, device, mountpoint, mountpoint / "file.txt")
        assert disk.intact()
        yield disk
    finally:
        subprocess.run(["umount", str(mountpoint)], capture_output=True)
        subprocess.run(["losetup", "--detach", device], capture_output=True)
        subprocess.run(["rm", "-rf", str(home)])


def run_study(workdir, tmp_path, text: str = STUDY) -> subprocess.CompletedProcess[str]:
    return fslab(
        "run",
        str(write_study(tmp_path, text)),
        "--no-ceiling",
        "--db",
        str(tmp_path / "r.db"),
        "--workdir",
        str(workdir.root),
    )


@pytest.mark.slow
def test_a_file_at_an_image_path_is_never_deleted_or_used(workdir, tmp_path):
    workdir.images.mkdir()
    planted = workdir.images / "victim.img"
    planted.write_text("a user's file\n")
    result = run_study(workdir, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "already exists: fslab makes its images anew" in result.stdout
    assert planted.read_text() == "a user's file\n"
    assert held_by(workdir.root) == []


@pytest.mark.root
def test_a_symlink_at_an_image_path_does_not_reach_the_users_loop_device(workdir, tmp_path):
    with users_disk() as disk:
        workdir.images.mkdir()
        (workdir.images / "victim.img").symlink_to(disk.image)
        result = run_study(workdir, tmp_path)
        assert result.returncode == 1 and "already exists" in result.stdout
        assert disk.intact(), "the user's loop device stays attached, its file intact"
        assert os.path.islink(workdir.images / "victim.img")


@pytest.mark.root
def test_a_symlink_at_a_mount_point_mounts_nothing_over_the_users_directory(workdir, tmp_path):
    users_dir = tmp_path / "users-dir"
    users_dir.mkdir()
    (users_dir / "notes.txt").write_text("mine\n")
    workdir.mounts.mkdir()
    (workdir.mounts / "victim").symlink_to(users_dir)
    result = run_study(workdir, tmp_path)
    assert result.returncode == 1
    assert "is not a directory fslab made" in result.stdout
    assert mounts_at(users_dir) == [] and (users_dir / "notes.txt").read_text() == "mine\n"
    assert held_by(workdir.root) == []


@pytest.mark.root
def test_a_file_at_a_mount_point_is_neither_mounted_over_nor_removed(workdir, tmp_path):
    workdir.mounts.mkdir()
    (workdir.mounts / "victim").write_text("a user's file\n")
    result = run_study(workdir, tmp_path)
    assert result.returncode == 1 and "is not a directory fslab made" in result.stdout
    assert (workdir.mounts / "victim").read_text() == "a user's file\n"
    assert held_by(workdir.root) == []


def test_a_symlinked_lock_is_refused_and_its_target_untouched(workdir, tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("do not truncate\n")
    (workdir.root / "lock").symlink_to(precious)
    result = fslab_in_process("cleanup", "--workdir", str(workdir.root))
    assert result.returncode == 2 and "never through a symlink" in result.stderr
    assert precious.read_text() == "do not truncate\n"


def test_a_symlinked_journal_is_neither_read_nor_written_through(workdir, tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text('{"event": "acquire", "kind": "image", "id": "/etc/passwd"}\n')
    workdir.journal.path.symlink_to(precious)
    result = fslab_in_process("cleanup", "--workdir", str(workdir.root))
    assert result.returncode == 2 and "never through a symlink" in result.stderr and "Traceback" not in result.stderr
    assert precious.read_text().count("\n") == 1


def test_reports_are_not_written_through_a_symlink(workdir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "reports").symlink_to(elsewhere)
    result = run_study(workdir, tmp_path)
    assert result.returncode == 2 and "is a symlink" in result.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_study_file_that_is_not_text_is_refused_without_a_traceback(tmp_path):
    binary = tmp_path / "study.toml"
    binary.write_bytes(bytes(range(256)))
    result = fslab_in_process("run", str(binary), "--db", str(tmp_path / "r.db"))
    assert (
        result.returncode == 2
        and "cannot be read as a study file" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_a_work_directory_an_older_fslab_made_is_still_fslabs(tmp_path):
    """Before the marker: only fslab's names, and a journal whose every line fslab wrote."""
    older = tmp_path / "older"
    older.mkdir(mode=0o700)
    for made in ("images", "mnt"):
        (older / made).mkdir(mode=0o700)
    (older / "lock").write_text("1234")
    journal = Workdir(older).journal
    journal._append("acquire", "mount", str(older / "mnt" / "ext4"))
    journal._append("release", "mount", str(older / "mnt" / "ext4"))
    result = fslab_in_process("cleanup", "--workdir", str(older))
    assert result.returncode == 0 and "nothing to clean up" in result.stdout, result.stdout + result.stderr
    assert (older / MARKER).is_file()


def test_a_work_directory_fslab_marked_is_taken_over_and_an_absent_or_empty_one_made(tmp_path):
    marked = tmp_path / "marked"
    Workdir(marked).prepare()  # absent: made, and marked
    (marked / "lock").write_text("1234")
    (marked / "images").mkdir(mode=0o700)
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    for root in (marked, empty):
        result = fslab_in_process("cleanup", "--workdir", str(root))
        assert result.returncode == 0 and "nothing to clean up" in result.stdout and (root / MARKER).is_file(), (
            result.stdout + result.stderr
        )


def _snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file and directory under `root`: its bytes (a directory's: none), mtime and mode."""
    found = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = os.lstat(path)
        found[str(path)] = (path.read_bytes() if path.is_file() else b"", st.st_mtime_ns, st.st_mode)
    return found


@pytest.mark.root  # fslab run refuses any other user before it looks at the work directory
@pytest.mark.parametrize(
    "journal",
    ["my own journal\n", '{"event": "acquire", "kind": "mount", "id": "/mnt/x"}\nmy own line\n', ""],
    ids=["text", "partly-fslabs", "empty"],
)
def test_a_directory_of_the_users_files_named_as_fslabs_is_not_a_work_directory(tmp_path, journal):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "journal.jsonl").write_text(journal)
    (home / "lock").write_text("my own lock\n")
    for mine in ("images", "mnt"):
        (home / mine).mkdir(mode=0o700)
        (home / mine / "keep.txt").write_text(f"my {mine}\n")
    os.utime(home / "lock", ns=(10**18, 10**18))  # a past mtime: a write would change it
    before = _snapshot(home)
    result = fslab_in_process(
        "run", str(write_study(tmp_path, STUDY)), "--db", str(tmp_path / "r.db"), "--workdir", str(home)
    )
    assert result.returncode == 2 and f"{home} is not an fslab work directory" in result.stderr
    assert (
        "journal.jsonl" in result.stderr
        and "lock" in result.stderr
        and "images" in result.stderr
        and "mnt" in result.stderr
    )
    assert "Traceback" not in result.stderr
    assert _snapshot(home) == before, "nothing in the user's directory is changed, added or removed"
    cleanup = fslab_in_process("cleanup", "--workdir", str(home))
    assert cleanup.returncode == 2 and "is not an fslab work directory" in cleanup.stderr
    assert _snapshot(home) == before


def test_every_kind_fslab_journals_is_known_to_whichever_command_reads_the_journal():
    """journal.MAKERS names every kind with the module that registers its release function, and
    a fresh fslab that imported none of them (as `fslab cleanup` does not) knows every kind: a
    kind it did not know would be set aside as a line fslab never wrote, and what it names left
    behind. Reading a journal imports the makers of the kinds it holds alone."""
    source = Path(__file__).parent.parent / "src"
    registering = {}
    for path in (source / "fslab").rglob("*.py"):
        for kind in re.findall(r'^@releaser\("([^"]+)"\)', path.read_text(), flags=re.MULTILINE):
            registering[kind] = ".".join(path.relative_to(source).with_suffix("").parts)
    assert len(registering) >= 14, registering
    from fslab.core.journal import MAKERS

    assert MAKERS == registering
    fresh = subprocess.run(
        [
            sys.executable,
            "-c",
            "from fslab.core.journal import RELEASERS; "
            "print(' '.join(sorted(k for k in RELEASERS if callable(RELEASERS[k].release))))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert fresh.stdout.split() == sorted(registering)
    read = (
        "from fslab.core.journal import Entry, RELEASERS; import sys; RELEASERS['loop']; print(' '.join(m for "
        "m in ('fslab.devices.loop', 'fslab.filesystems.zfs', 'fslab.devices.named') if m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", read], capture_output=True, text=True, check=True).stdout.split() == [
        "fslab.devices.loop"
    ]


@pytest.mark.root
def test_a_planted_journal_harms_nothing(workdir, tmp_path):
    """Entries naming a user's image, loop device, mount, process, a pool and layers that are not
    fslab's, and lines that are not entries at all: all left alone and reported."""
    with users_disk() as disk:
        sleeper = subprocess.Popen(["sleep", "300"])
        fake_daemon = tmp_path / "zfs-fuse"  # a process named zfs-fuse that no work directory of fslab's started
        shutil.copy(shutil.which("sleep"), fake_daemon)
        daemon = subprocess.Popen([str(fake_daemon), "300"])
        try:
            identity = FileId.of(os.stat(disk.image)).proof()
            tag = workdir_tag(workdir.root)
            lines = [
                {"event": "acquire", "kind": "image", "id": str(disk.image), "proof": identity},
                {"event": "acquire", "kind": "loop", "id": str(disk.image), "proof": identity},
                {"event": "acquire", "kind": "image", "id": str(workdir.images / "../../etc.img"), "proof": identity},
                {"event": "acquire", "kind": "mount", "id": str(disk.mountpoint)},
                {
                    "event": "acquire",
                    "kind": "process",
                    "id": "sleep",
                    "proof": {"pid": sleeper.pid, "start": 1, "comm": "sleep"},
                },
                {"event": "acquire", "kind": "process", "id": "fio", "proof": _proof_of(sleeper.pid)},
                {
                    "event": "acquire",
                    "kind": "zfs-daemon",
                    "id": "zfs-fuse",
                    "proof": _proof_of(daemon.pid) | {"pidfile": f"/run/fslab/zfs-fuse-{workdir_tag(tmp_path)}pid"},
                },
                {
                    "event": "acquire",
                    "kind": "zfs-daemon",
                    "id": "zfs-fuse-2",
                    "proof": _proof_of(daemon.pid) | {"pidfile": f"/run/fslab/zfs-fuse-{tag}pid"},
                },
                {"event": "acquire", "kind": "zpool", "id": "tank"},
                {"event": "acquire", "kind": "md", "id": "md0"},
                {"event": "acquire", "kind": "luks", "id": "cryptroot"},
                {"event": "acquire", "kind": "lvm", "id": f"{tag}00000000_vg on /etc/passwd"},
                {
                    "event": "acquire",
                    "kind": "arc-max",
                    "id": "zfs_arc_max",
                    "proof": {"parameter": "1; reboot", "c_max": 1},
                },
            ]
            text = (
                "\n".join(json.dumps(line) for line in lines)
                + '\nnot json at all\n{"event": "acquire", "kind": "shell", "id": "rm -rf /"}\n'
            )
            workdir.journal.path.write_text(text)
            result = fslab("cleanup", "--workdir", str(workdir.root))
            assert result.returncode == 1, result.stdout + result.stderr
            out = result.stdout.replace("\n", " ")
            assert out.count("left alone") >= 10, result.stdout
            assert "released" not in out.replace("left alone", "")
            assert disk.intact() and mounts_at(disk.mountpoint), "the user's loop device and mount stay"
            assert sleeper.poll() is None, "the user's process was not signalled"
            assert daemon.poll() is None, "a zfs-fuse daemon not this work directory's was not signalled"
            assert disk.image.exists()
            aside = list(workdir.root.glob("journal-set-aside-*.jsonl"))
            assert (
                "set aside as journal-set-aside-" in out and len(aside) == 1 and aside[0].read_text().startswith(text)
            ), "kept, not deleted"
            again = fslab("cleanup", "--workdir", str(workdir.root))
            assert "nothing to clean up" in again.stdout, "left alone once, reported once"
        finally:
            for started in (sleeper, daemon):
                started.kill()
                started.wait()


def _proof_of(pid: int) -> dict:
    from fslab.core.identity import process

    found = process(pid)
    return found.proof() if found else {}


@pytest.mark.root
def test_kill_9_leaves_fio_running_and_cleanup_stops_it_before_unmounting(workdir, tmp_path):
    study = write_study(tmp_path, STUDY.replace('runtime = "1s"', 'runtime = "60s"'))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fslab",
            "run",
            str(study),
            "--no-ceiling",
            "--db",
            str(tmp_path / "r.db"),
            "--workdir",
            str(workdir.root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    fio = _wait_for_measured_fio(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()  # fslab gone: fio reparented, any signal its parent's death sends already sent
    assert _state(fio) not in ("Z", "X") and not _fatal_signal_pending(fio), (
        "fio outlives fslab's kill -9 (it runs in a session of its own)"
    )
    assert held_by(workdir.root), "the mount and loop device are still held"
    result = fslab("cleanup", "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("process fio: released"), "the workload is stopped first"
    assert any(line.startswith("mount ") and "released" in line for line in lines[1:])
    assert not Path(f"/proc/{fio}").exists() or _state(fio) == "Z"
    assert held_by(workdir.root) == []


def _wait_for_measured_fio(parent: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for pid in _children(parent):
            with contextlib.suppress(OSError):  # a short-lived child may be gone already
                if (
                    Path(f"/proc/{pid}/comm").read_text().strip() == "fio"
                    and "--output-format=json+" in Path(f"/proc/{pid}/cmdline").read_text()
                ):
                    return pid
        time.sleep(0.1)
    raise AssertionError("the measured fio never started")


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _fatal_signal_pending(pid: int) -> bool:
    """SIGHUP, SIGINT, SIGKILL or SIGTERM pending for the process (its own or its group's)."""
    status = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line
    )
    fatal = sum(1 << (signum - 1) for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGKILL, signal.SIGTERM))
    return any(int(status[field], 16) & fatal for field in ("SigPnd", "ShdPnd"))


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


ZFS_STUDY = short_study("zfs-turns", '[[target]]\nfilesystem = "zfs"\n')


@pytest.mark.root
@pytest.mark.skipif(engine() is None, reason="no ZFS engine")
def test_two_fslab_processes_on_zfs_do_not_stop_each_others_daemon_or_pools(tmp_path):
    with fresh_workdir() as first, fresh_workdir() as second:
        study = write_study(tmp_path, ZFS_STUDY)
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fslab",
                    "run",
                    str(study),
                    "--no-ceiling",
                    "--db",
                    str(tmp_path / f"{i}.db"),
                    "--workdir",
                    str(wd.root),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i, wd in enumerate((first, second))
        ]
        outputs = [proc.communicate(timeout=300)[0] for proc in procs]
        assert [proc.returncode for proc in procs] == [0, 0], outputs
        for i in range(2):
            results = ResultsDB(str(tmp_path / f"{i}.db"))
            runs = results.runs(results.study_run()["id"])
            assert [r["status"] for r in runs] == ["ok", "ok"], [r["error"] for r in runs]


def test_a_command_fslab_dies_before_journalling_never_runs(tmp_path):
    """fslab journals a workload's process before it runs the command: killed in between, the
    new process ends without running it, so nothing runs that clean-up would not know."""
    marker = tmp_path / "ran"
    script = (
        f"import os\nfrom fslab.core.system import run\nrun(['touch', {str(marker)!r}], "
        "on_start=lambda pid: (print(pid, flush=True), os._exit(9)))\n"
    )
    died = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert died.returncode == 9
    command = Path(f"/proc/{int(died.stdout)}")
    deadline = time.monotonic() + 30
    while command.exists():  # the command's process, orphaned, ends (and is reaped) without running touch
        assert time.monotonic() < deadline, "the command's process never ended"
        time.sleep(0.02)
    assert not marker.exists()
    script = f"from fslab.core.system import run\nrun(['touch', {str(marker)!r}], on_start=lambda pid: None)\n"
    assert subprocess.run([sys.executable, "-c", script]).returncode == 0 and marker.exists(), (
        "with the journal's go, it runs"
    )


def test_a_secret_given_on_standard_input_reaches_the_command_and_no_file(tmp_path):
    """How fslab hands zfs an encryption key: bytes on a pipe (any bytes, newlines and NULs too),
    read whole by the command, in no argument list; the command's standard input ends after them."""
    from fslab.core.system import run

    key = bytearray(range(256))[:32]
    copy = tmp_path / "copy"
    done = run(["sh", "-c", 'cat > "$1"; ls -l /proc/self/fd/0', "sh", str(copy)], stdin=key)
    assert copy.read_bytes() == bytes(key)
    assert "pipe:" in done.stdout, done.stdout
    assert str(bytes(key)) not in " ".join(done.args) and "sh" == done.args[0]
    assert run(["wc", "-c"], stdin=b"").stdout.strip() == "0", (
        "nothing given: the command reads an empty input, never fslab's"
    )


def test_the_kernels_octal_escapes_are_undone_on_the_bytes_of_a_path():
    assert unescape(b"/srv/caf\xc3\xa9\\040x") == "/srv/café x"
    assert unescape(b"/a\\011b\\012c\\134d\\134040") == "/a\tb\nc\\d\\040"
    assert os.fsencode(unescape(b"/not-utf8-\xff\\040")) == b"/not-utf8-\xff "  # round-trips to its bytes


def test_a_kernel_table_splits_only_where_the_kernel_separates_fields(tmp_path):
    table = tmp_path / "mountinfo"
    table.write_bytes(
        b"36 35 7:0 / /srv/x\\040y/b\xc3\xa4nch\r\xc2\xa0z rw,relatime shared:1 - ext4 /dev/loop0 rw\n"
        b"37 36 0:5 / /mnt/a\\011b\\012c\\134 rw - tmpfs tmp\\040fs rw,size=1k\n"
    )
    rows = kernel_table(str(table))
    assert [unescape(row[4]) for row in rows] == ["/srv/x y/bänch\r\xa0z", "/mnt/a\tb\nc\\"]
    assert unescape(rows[1][-2]) == "tmp fs" and len(rows[0]) == 11
