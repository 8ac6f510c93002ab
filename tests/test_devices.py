"""Loop images, formatting safety and the journal that lets `fslab cleanup` undo a killed run."""

import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import fresh_workdir, fslab, fslab_in_process
from fslab.core.errors import Refused
from fslab.core.identity import FileId
from fslab.devices.layers import Stack
from fslab.devices.loop import attached, devices_backed_by, direct_io_enabled, image_file, on_loops
from fslab.filesystems import FILESYSTEMS
from fslab.fio import fill_device
from fslab.model import Target

TARGET = Target("t", "ext4", (), "", 64 * 2**20, "sparse")


def blkid_type(device: str) -> str:
    return subprocess.run(["blkid", "-o", "value", "-s", "TYPE", device], capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("fill", [True, False], ids=["filled", "sparse"])
def test_image_attached_with_direct_io_and_gone_afterwards(workdir, fill):
    size = 256 * 2**20
    with image_file(workdir.journal, workdir.images, "t", size, fill=fill_device if fill else None) as made:
        image = made.path
        assert image.stat().st_size == size
        allocated = image.stat().st_blocks * 512
        assert allocated >= size if fill else allocated == 0, "filled: written whole; sparse: nothing allocated"
        assert devices_backed_by(image) == [], "attached only while a run uses it"
        with attached(workdir.journal, made) as loop:
            assert loop.device.startswith("/dev/loop") and loop.size == size
            assert direct_io_enabled(loop.device) and loop.direct_io
            assert devices_backed_by(image) == [loop.device]
        assert devices_backed_by(image) == []
    assert not image.exists()
    assert workdir.journal.outstanding() == []


def test_refuses_to_format_a_device_that_is_not_its_image(workdir):
    with (
        image_file(workdir.journal, workdir.images, "mine", 64 * 2**20, fill=None) as image,
        attached(workdir.journal, image) as loop,
    ):
        for device in ("/dev/zero", "/dev/loop-control"):
            impostor = Stack(devices=[device], owned=on_loops([loop]).owned)
            with pytest.raises(Refused, match=f"refusing to format {device}"):
                with FILESYSTEMS["ext4"].provision(workdir.journal, impostor, workdir.mounts / "x", TARGET):
                    pass
        elsewhere = replace(loop, image=replace(image, file=FileId((0, 0), 1)))  # another file's identity
        with pytest.raises(Refused, match="does not show it resting on fslab's own images"):
            with FILESYSTEMS["xfs"].provision(
                workdir.journal,
                Stack(devices=[loop.device], owned=on_loops([elsewhere]).owned),
                workdir.mounts / "x",
                TARGET,
            ):
                pass
        with pytest.raises(Refused, match=f"refusing to format {loop.device}"):
            with FILESYSTEMS["raw"].provision(
                workdir.journal,
                Stack(devices=[loop.device], owned=on_loops([elsewhere]).owned),
                workdir.mounts / "x",
                TARGET,
            ):
                pass
        assert blkid_type(loop.device) == "", "nothing was formatted"


KILLED_MIDWAY = """
import os, sys
from pathlib import Path
from fslab.core.workdir import Workdir
from fslab.devices.layers import Stack
from fslab.devices.loop import attached, image_file, on_loops
from fslab.core.errors import Refused
from fslab.filesystems import FILESYSTEMS
from fslab.core.identity import FileId
from fslab.model import Target
wd = Workdir(Path(sys.argv[1]))
with image_file(wd.journal, wd.images, "killed", 320 * 2**20, fill=None) as image, attached(wd.journal, image) as loop:
    target = Target("killed", "xfs", (), "noatime", 320 * 2**20, "sparse")
    with FILESYSTEMS["xfs"].provision(wd.journal, Stack.on(on_loops([loop])), wd.mounts / "killed", target):
        os._exit(9)  # dies holding a loop device and a mount, as a killed fslab would
"""


def kill_midway(workdir) -> None:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(KILLED_MIDWAY), str(workdir.root)])
    assert proc.returncode == 9


@pytest.mark.root
def test_cleanup_releases_what_a_killed_run_held(workdir):
    kill_midway(workdir)
    image, mountpoint = workdir.images / "killed.img", workdir.mounts / "killed"
    assert devices_backed_by(image), "the killed process left its loop device"
    assert str(mountpoint) in Path("/proc/mounts").read_text()
    assert workdir.journal.outstanding() == [("mount", str(mountpoint)), ("loop", str(image)), ("image", str(image))]

    result = fslab_in_process("cleanup", "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stderr
    for released in (f"mount {mountpoint}", f"loop {image}", f"image {image}"):
        assert f"{released}: released" in result.stdout
    assert not devices_backed_by(image) and not image.exists()
    assert str(mountpoint) not in Path("/proc/mounts").read_text()
    assert workdir.journal.outstanding() == []
    again = fslab_in_process("cleanup", "--workdir", str(workdir.root))
    assert "nothing to clean up" in again.stdout


@pytest.mark.root
def test_the_next_study_releases_what_a_killed_run_held(workdir, tmp_path):
    kill_midway(workdir)
    study = tmp_path / "s.toml"
    study.write_text(
        '[study]\nname = "after"\nrepetitions = 1\nworkloads = ["seq_write"]\nimage_size = "512MiB"\n'
        'image_fill = "sparse"\n[fio]\nsize = "32MiB"\nruntime = "1s"\n[[target]]\nfilesystem = "xfs"\n'
    )
    result = fslab("run", str(study), "--no-ceiling", "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"left by an interrupted fslab: mount {workdir.mounts / 'killed'}: released" in result.stdout
    assert workdir.journal.outstanding() == []


def test_cleanup_waits_its_turn_while_a_study_uses_the_workdir(workdir):
    with workdir.claim():  # flock: another open of the lock conflicts, in this process too
        result = fslab_in_process("cleanup", "--workdir", str(workdir.root))
    assert result.returncode == 2
    assert f"another fslab (pid {os.getpid()}) is using {workdir.root}" in result.stderr


def test_a_busy_workdir_is_waited_for_after_pauses_growing_to_a_bound_when_asked(tmp_path, monkeypatch):
    """Workdir.claim(waiting) (a fleet's unit, issue 33): busy, it is tried again, each pause
    told first, doubling up to BUSY_PAUSE_LONGEST; claimed once the other fslab has let go."""
    import types

    from fslab.core import workdir as workdirs

    workdir = workdirs.Workdir(tmp_path / "wd")  # its lock alone: nothing attached, any user

    slept: list[float] = []
    monkeypatch.setattr(workdirs, "time", types.SimpleNamespace(sleep=slept.append))  # the pauses, counted, not waited
    other = workdir.claim()
    other.__enter__()
    told: list[tuple[str, float]] = []

    def waiting(busy: Exception, pause: float) -> None:
        told.append((str(busy), pause))
        if len(told) == 7:
            other.__exit__(None, None, None)  # the other fslab ends

    with workdir.claim(waiting):
        with pytest.raises(workdirs.WorkdirBusy):  # now this one holds it
            with workdir.claim():
                pass
    assert [pause for _, pause in told] == slept == [1, 2, 4, 8, 16, 30, 30]
    busy = f"another fslab (pid {os.getpid()}) is using {workdir.root}; wait for it, or choose another --workdir"
    assert told[0][0] == busy


def test_a_luks_key_is_fresh_on_cryptsetups_standard_input_and_wiped_once_the_mapping_is_open(monkeypatch, workdir):
    """The LUKS layer's key: 64 random bytes given to luksFormat and to open on their standard
    input (`--key-file -`), in no file and no argument; fslab's copy is overwritten as soon as the
    mapping is open, not kept for the run. (The real cryptsetup reads it in the layers guest.)"""
    from fslab.core.names import kernel_name
    from fslab.devices.layers import luks

    given: list[tuple[list[str], bytearray | None, bytes | None]] = []

    def command(argv, stdin=None, **kwargs):
        given.append((argv, stdin, None if stdin is None else bytes(stdin)))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(luks, "run", command)
    keys = []
    for _ in range(2):
        given.clear()
        with luks.build(workdir.journal, ["/dev/loop9"], kernel_name(workdir.root, "t"), []):
            (format_argv, buffer, key), (open_argv, same_buffer, same_key) = given[:2]
            assert format_argv[:2] == ["cryptsetup", "luksFormat"] and open_argv[:2] == ["cryptsetup", "open"]
            assert key is not None and len(key) == 64 and same_key == key, "one key, to both"
            for argv in (format_argv, open_argv):
                assert argv[argv.index("--key-file") + 1] == "-" and str(key) not in " ".join(argv)
            assert buffer is same_buffer and buffer == bytes(64), "overwritten once the mapping is open"
        keys.append(key)
    assert keys[0] != keys[1], "a fresh key for each run"
    assert workdir.journal.outstanding() == []


@pytest.mark.root
@pytest.mark.skipif(not Path("/sys/class/zram-control").is_dir(), reason="this kernel has no zram (CONFIG_ZRAM)")
def test_a_zram_device_held_open_elsewhere_is_waited_for_and_then_said_to_be_still_there(workdir, monkeypatch):
    """A process that opened the device a moment (blkid, another fslab reading the machine's block
    devices) makes its removal busy: waited for while it holds it, said when it does not let go
    (make test: an ext4-on-zram run's teardown once failed with "Device or resource busy")."""
    import threading

    import fslab.devices.zram as zram

    def holding(device: str) -> subprocess.Popen[str]:
        program = "import sys; f = open(sys.argv[1], 'rb'); print('open', flush=True); sys.stdin.read()"
        holder = subprocess.Popen(
            [sys.executable, "-c", program, device], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert holder.stdout is not None and holder.stdin is not None and holder.stdout.readline() == "open\n"
        return holder

    monkeypatch.setattr(zram, "REMOVE_SECONDS", 0.5)
    with pytest.raises(zram.StillThere, match="still busy .* another process holds it open"):
        with zram.zram_device(workdir.journal, "held", 16 * 2**20) as (device, _):
            holder = holding(device)
    assert Path(device).exists(), "left while held, and the journal keeps it"
    monkeypatch.setattr(zram, "REMOVE_SECONDS", 30.0)
    done: list[object] = []
    waiting = threading.Thread(target=lambda: done.append(workdir.journal.clean_up()))
    waiting.start()
    waiting.join(timeout=1)
    assert waiting.is_alive(), "the removal waits while another process holds the device"
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=30)
    waiting.join(timeout=60)
    assert not waiting.is_alive() and not Path(device).exists(), "and removes it once it is let go"
    assert [(o.kind, o.status) for o in done[0]] == [("zram", "released")]


@pytest.mark.root
def test_a_loop_device_held_open_elsewhere_is_waited_for_and_then_said_to_be_still_attached(workdir, monkeypatch):
    """Detached while another process holds it open, a loop device stays attached until that
    process closes it (the kernel lets go from a worker thread of its own, late on a busy
    machine): its release waits for the kernel's word, and says so when it does not come."""
    import threading

    import fslab.devices.loop as loop_module

    monkeypatch.setattr(loop_module, "DETACH_SECONDS", 0.5)
    with image_file(workdir.journal, workdir.images, "held2", 16 * 2**20, fill=None) as made:
        done: list[BaseException | None] = []
        with pytest.raises(loop_module.StillAttached, match="another process holds it open"):
            with attached(workdir.journal, made) as loop:
                holder = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        "import sys; f = open(sys.argv[1], 'rb'); print('open', flush=True); sys.stdin.read()",
                        loop.device,
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                assert holder.stdout.readline() == "open\n"
        assert devices_backed_by(made.path) == [loop.device], "still attached while held"
        monkeypatch.setattr(loop_module, "DETACH_SECONDS", 30.0)
        waiting = threading.Thread(target=lambda: done.append(loop_module._detach_all(made.file)))
        waiting.start()
        waiting.join(timeout=1)
        assert waiting.is_alive(), "the release waits while another process holds the device"
        holder.stdin.close()
        holder.wait(timeout=30)
        waiting.join(timeout=60)
        assert not waiting.is_alive() and devices_backed_by(made.path) == [], "and returns once the kernel let go"
    assert [(o.kind, o.status) for o in workdir.journal.clean_up()] == [("loop", "released")], (
        "the journal kept it until then"
    )
    assert workdir.journal.outstanding() == []


@pytest.mark.root
def test_a_failed_tests_work_directory_is_removed_as_a_passed_ones_is():
    """The tests' own harness (conftest.fresh_workdir): nothing of a failed test stays in /var/tmp."""
    with pytest.raises(RuntimeError, match="the test failed"), fresh_workdir() as workdir:
        top = workdir.root
        raise RuntimeError("the test failed")
    assert not top.exists()
