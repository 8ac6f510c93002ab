"""A user's own devices and zram as targets, through the real `fslab` command. A user's disk is a
loop device the test attaches over its own image outside fslab's work directory, carrying ext4
with a file on it (or a partition table with ext4 in a partition)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import TEST_ROOT, fslab, fslab_in_process, held_by, wait_for, write_study
from fslab.results import ResultsDB
from fslab.study import StudyError, parse_study

DOCS = Path(__file__).parent.parent / "docs" / "study-format.md"
needs_zram = pytest.mark.skipif(
    not Path("/sys/class/zram-control").is_dir(), reason="this kernel has no zram (CONFIG_ZRAM)"
)


@dataclass
class UsersDisk:
    image: Path
    device: str  # the whole device
    filesystem: str  # where the ext4 with the file is: the device, or its first partition
    home: Path

    def read_file(self) -> str | None:
        """The user's file, read on a read-only mount made and undone here."""
        where = self.home / "look"
        where.mkdir(exist_ok=True)
        if subprocess.run(["mount", "-o", "ro", self.filesystem, str(where)], capture_output=True).returncode != 0:
            return None
        try:
            return (where / "file.txt").read_text() if (where / "file.txt").exists() else None
        finally:
            _unmount(where)

    def intact(self) -> bool:
        return self.read_file() == "precious\n"

    @contextmanager
    def mounted(self) -> Iterator[Path]:
        where = self.home / "data"
        where.mkdir(exist_ok=True)
        subprocess.run(["mount", self.filesystem, str(where)], check=True)
        try:
            yield where
        finally:
            _unmount(where)


def _unmount(where: Path) -> None:
    """The test's own mount undone. Another test's process may look into it a moment (a mount
    just made is busy to `umount` while anything has it open, in any namespace it reached):
    tried again until it is free, the holders named if it never is."""

    def unmounted() -> bool:
        return subprocess.run(["umount", str(where)], capture_output=True).returncode == 0 or not os.path.ismount(where)

    try:
        wait_for(f"{where} to unmount", unmounted, deadline=60, every=0.5)
    except AssertionError as exc:
        holders = (
            subprocess.run(["fuser", "-vm", str(where)], capture_output=True, text=True)
            if shutil.which("fuser")
            else None
        )
        raise AssertionError(
            f"{exc}; held by:\n{holders.stdout}{holders.stderr}" if holders else f"{exc} (fuser, psmisc, names holders)"
        ) from None


class NumberTaken(Exception):
    """Another test's `losetup --find` was handed a loop number while this test had it free."""


def unhanded_number() -> str:
    """A loop device no device has now. `losetup --find` hands out the lowest free device that
    exists, else makes one at the lowest unused number: a number made here is another test's only
    if it is free while every lower device is busy, and it is removed again after."""
    while Path(f"/sys/block/loop{(number := random.randrange(300, 1000))}").exists():
        pass
    return f"/dev/loop{number}"


@contextmanager
def users_disk(partitioned: bool = False, own_number: bool = False) -> Iterator[UsersDisk]:
    """The user's disk, unmounted, with ext4 and a file (in a partition when `partitioned`); at a
    loop number of its own made for it when `own_number` (for tests that unplug it and plug
    something else at its number), else the first free one."""
    TEST_ROOT.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="user-", dir=TEST_ROOT))
    image = home / "disk.img"
    with open(image, "wb") as f:
        f.truncate(320 * 2**20)
    if partitioned:
        subprocess.run(
            ["sfdisk", "--quiet", str(image)], input="label: gpt\n,,L\n", text=True, check=True, capture_output=True
        )
    for _ in range(5):  # a number made here can be handed to another test before it is attached
        attached = subprocess.run(
            ["losetup", unhanded_number() if own_number else "--find", "--show"]
            + (["--partscan"] if partitioned else [])
            + [str(image)],
            capture_output=True,
            text=True,
        )
        if attached.returncode == 0:
            break
    if attached.returncode != 0:
        shutil.rmtree(home)
        raise AssertionError(f"losetup: {attached.stderr}")
    device = attached.stdout.strip()
    disk = UsersDisk(image, device, f"{device}p1" if partitioned else device, home)
    try:
        if partitioned and not os.path.exists(
            disk.filesystem
        ):  # a kernel without partition parsers: libblkid reads the table
            subprocess.run(["partx", "--add", device], check=True)
        subprocess.run(["mkfs.ext4", "-q", disk.filesystem], check=True)
        with disk.mounted() as where:
            (where / "file.txt").write_text("precious\n")
        assert disk.intact()
        yield disk
    finally:
        for mounted in ("look", "data"):
            subprocess.run(["umount", str(home / mounted)], capture_output=True)
        if backing_of(device) == image:  # its number may be another test's by now
            subprocess.run(["losetup", "--detach", device], capture_output=True)
        if own_number and os.path.exists(device):
            remove_loop(device)
        subprocess.run(["rm", "-rf", str(home)])


def backing_of(device: str) -> Path | None:
    """The file a loop device is attached to, as the kernel says; None when it is free."""
    try:
        return Path(Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip())
    except OSError:
        return None


def plug(device: str, image: Path) -> None:
    """Attach `image` at the loop device `device` once the kernel has let go of what was there:
    `losetup --detach` returns before it has, and a busy machine lets go later."""
    deadline = time.monotonic() + 30
    while backing_of(device) is not None:
        assert time.monotonic() < deadline, (
            f"{device} still attached to {backing_of(device)} 30 s after it was detached"
        )
        time.sleep(0.02)
    if subprocess.run(["losetup", device, str(image)], capture_output=True).returncode != 0:
        if backing_of(device) not in (None, image):
            raise NumberTaken(f"{device} was handed to another test while it was free")
        subprocess.run(["losetup", device, str(image)], check=True)  # its own error, shown


def remove_loop(device: str) -> None:
    """Remove the loop device (LOOP_CTL_REMOVE, done when it returns) once the kernel has let go
    of its file: its /dev node and sysfs directory go, as a USB disk's do when unplugged. Left
    as it is if another test was handed it meanwhile."""
    minor = os.minor(os.stat(device).st_rdev)
    control = os.open("/dev/loop-control", os.O_RDWR)

    def removed() -> bool:
        try:
            fcntl.ioctl(control, 0x4C81, minor)  # LOOP_CTL_REMOVE
        except OSError as exc:
            if exc.errno != errno.EBUSY:  # still letting go of its file: again
                raise
            return backing_of(device) is not None  # another test's now: not this test's to remove
        return True

    try:
        wait_for(f"{device} removed", removed, deadline=30, every=0.05)
    finally:
        os.close(control)


@contextmanager
def alias(device: str) -> Iterator[Path]:
    """A symlink to the device in /dev, as /dev/disk/by-id/… names are."""
    link = Path(f"/dev/fslab-test-{os.getpid()}")
    link.symlink_to(device)
    try:
        yield link
    finally:
        link.unlink()


def study_on(devices: list[str], filesystem: str = "ext4") -> str:
    named = f'device = "{devices[0]}"' if len(devices) == 1 else f"devices = {json.dumps(devices)}"
    return f"""\
[study]
name = "users-disk"
repetitions = 1
workloads = ["seq_write"]

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
name = "mine"
filesystem = "{filesystem}"
{named}
"""


def run(workdir, tmp_path, text: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return fslab(*_run_args(workdir, tmp_path, text, flags))


def refused(workdir, tmp_path, text: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """`fslab run` where it is to refuse before anything is attached: in this process (what it
    says and how it ends are tested, not a process's start)."""
    return fslab_in_process(*_run_args(workdir, tmp_path, text, flags))


def _run_args(workdir, tmp_path, text: str, flags: tuple[str, ...]) -> list[str]:
    destroy = [arg for flag in flags for arg in ("--destroy-data", flag)]
    return [
        "run",
        str(write_study(tmp_path, text)),
        "--no-ceiling",
        "--db",
        str(tmp_path / "r.db"),
        "--workdir",
        str(workdir.root),
        *destroy,
    ]


@pytest.mark.root
def test_a_named_device_is_refused_without_the_flag_that_names_it(workdir, tmp_path):
    with users_disk() as disk, users_disk() as other:
        for flags in ([], [other.device], [str(disk.image)]):
            result = refused(workdir, tmp_path, study_on([disk.device]), *flags)
            assert result.returncode == 2, result.stdout + result.stderr
            said = " ".join(result.stderr.split())
            assert f"{disk.device}: fslab would destroy all data on it" in said
            assert f"--destroy-data {disk.device}" in said
        assert disk.intact() and other.intact()
        assert held_by(workdir.root) == []


@pytest.mark.root
def test_a_mounted_device_is_refused(workdir, tmp_path):
    with users_disk() as disk, disk.mounted() as where:
        result = refused(workdir, tmp_path, study_on([disk.device]), disk.device)
        assert result.returncode == 2
        assert f"{disk.device} is mounted at {where}" in " ".join(result.stderr.split())
        assert (where / "file.txt").read_text() == "precious\n"


@pytest.mark.root
def test_a_disk_with_a_mounted_partition_is_refused_and_a_flag_on_the_disk_confirms_no_partition(workdir, tmp_path):
    with users_disk(partitioned=True) as disk:
        with disk.mounted() as where:
            result = refused(workdir, tmp_path, study_on([disk.device]), disk.device)
            assert result.returncode == 2
            assert f"{disk.filesystem} is mounted at {where}" in " ".join(result.stderr.split())
        result = refused(workdir, tmp_path, study_on([disk.filesystem]), disk.device)
        assert result.returncode == 2
        said = " ".join(result.stderr.split())
        assert f"--destroy-data {disk.filesystem}" in said and "names its disk, not it" in said
        assert disk.intact()


@pytest.mark.root
def test_a_two_device_target_with_one_device_confirmed_is_refused(workdir, tmp_path):
    with users_disk() as first, users_disk() as second:
        result = refused(workdir, tmp_path, study_on([first.device, second.device], "btrfs"), first.device)
        assert result.returncode == 2
        said = " ".join(result.stderr.split())
        assert f"--destroy-data {second.device}" in said and f"--destroy-data {first.device}" not in said
        assert first.intact() and second.intact(), "nothing was formatted, not even the confirmed one"


@pytest.mark.root
def test_a_confirmed_device_runs_the_study_and_its_own_signatures_are_not_foreign_next_time(workdir, tmp_path):
    with users_disk() as disk, alias(disk.device) as by_id:
        uuid = subprocess.run(
            ["blkid", "-o", "value", "-s", "UUID", disk.device], capture_output=True, text=True
        ).stdout.strip()
        result = run(workdir, tmp_path, study_on([str(by_id)], "xfs"), disk.device)  # one device, two names
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"about to destroy on {disk.device}: ext4 (UUID {uuid})" in " ".join(result.stdout.split())
        db = ResultsDB(str(tmp_path / "r.db"))
        [record] = db.runs(db.study_run()["id"])
        assert record["status"] == "ok" and record["device"] == disk.device
        [facts] = record["device_facts"]
        assert facts["device"] == disk.device and facts["kind"] == "loop" and facts["size"] == 320 * 2**20
        assert facts["backing_file"] == str(disk.image) and facts["logical_sector"] == 512
        assert record["mkfs_command"][:3] == ["wipefs", "--all", disk.device]
        assert f"wiped from {disk.device}: ext4 (UUID {uuid})" in record["fs_details"]
        assert disk.device not in Path("/proc/mounts").read_text() and held_by(workdir.root) == []
        assert disk.read_file() is None, "the user's filesystem is gone: they confirmed it"

        again = run(workdir, tmp_path, study_on([str(by_id)], "xfs"), str(by_id))
        assert again.returncode == 0, again.stdout + again.stderr
        assert "about to destroy" not in again.stdout, "what fslab left there itself is not shown as foreign"
        assert not workdir.journal.path.exists()


def docs_example(name: str) -> str:
    """A study file from the docs, by the comment naming it on its first line."""
    blocks = re.findall(r"```toml\n(.*?)```", DOCS.read_text(), re.S)
    return next(block for block in blocks if block.startswith(f"# {name}\n"))


@pytest.mark.root
@needs_zram
def test_the_zram_example_runs_as_written_and_leaves_no_zram_device(workdir, tmp_path):
    study = write_study(tmp_path, docs_example("zram-ceiling.toml"))
    result = fslab(
        "run",
        str(study),
        "--no-ceiling",
        "--db",
        str(tmp_path / "r.db"),
        "--workdir",
        str(workdir.root),
        "--scale",
        "0.2",
        "--runs",
        "1",
    )  # 1 s runs
    assert result.returncode == 0, result.stdout + result.stderr
    db = ResultsDB(str(tmp_path / "r.db"))
    runs = db.runs(db.study_run()["id"])
    assert len(runs) == 3 * 2 and all(r["status"] == "ok" for r in runs)
    for record in runs:
        [facts] = record["device_facts"]
        assert (
            facts["kind"] == "zram" and facts["size"] == 410 * 2**20 and facts["rotational"] is False
        )  # 2GiB × 0.2, in whole MiB
        assert "blkdiscard" in record["mkfs_command"], "zram is discarded by default"
        sysfs = Path("/sys/block") / Path(facts["device"]).name
        assert not sysfs.exists() or int((sysfs / "diskseq").read_text()) != facts["diskseq"], (
            f"{facts['device']} was removed"
        )
    assert held_by(workdir.root) == [] and not workdir.journal.path.exists()


@pytest.mark.slow
@needs_zram
def test_a_planted_zram_entry_leaves_a_zram_device_fslab_did_not_make_alone(workdir):
    index = int(Path("/sys/class/zram-control/hot_add").read_text())
    device = Path(f"/sys/block/zram{index}")
    try:
        (device / "disksize").write_text(f"{64 * 2**20}\n")
        dev, diskseq = (device / "dev").read_text().strip(), int((device / "diskseq").read_text())
        planted = [
            {
                "device": f"/dev/zram{index}",
                "dev": dev,
                "diskseq": diskseq + 1,
                "disksize": 64 * 2**20,
            },  # another disk's sequence
            {"device": f"/dev/zram{index}", "dev": dev, "diskseq": diskseq, "disksize": 128 * 2**20},  # another size
        ]
        lines = [
            {"event": "acquire", "kind": "zram", "id": f"planted #{i}", "proof": proof}
            for i, proof in enumerate(planted)
        ]
        workdir.journal.path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        result = fslab("cleanup", "--workdir", str(workdir.root))
        assert result.returncode == 1, result.stdout + result.stderr
        assert result.stdout.count("left alone") == 2 and "is not the zram device fslab made" in result.stdout
        assert device.exists() and int((device / "diskseq").read_text()) == diskseq
    finally:
        Path("/sys/class/zram-control/hot_remove").write_text(str(index))


@pytest.mark.parametrize(
    ("target", "where", "message"),
    [
        ('device = "sdb"', "s.toml:6: target[0].device", "'sdb' is not a device path"),
        ('devices = ["/dev/sdb", "/etc/passwd"]', "s.toml:6: target[0].devices", "'/etc/passwd' is not a device path"),
        ('device = "/dev/sdb\\n"', "s.toml:6: target[0].device", "is not a device path"),
        ('devices = ["/dev/sdb", "/dev/sdb"]', "s.toml:6: target[0].devices", "each device can appear once"),
        (
            'device = "/dev/sdb"\ndevices = 2',
            "s.toml:4: target[0]",
            "name the target's devices once",
        ),  # the table: two fields disagree
        ('devices = ["/dev/sdb"]\nzram = true', "s.toml:4: target[0]", "it names no device of yours"),
        ('devices = ["/dev/sdb", "/dev/sdc"]', "s.toml:4: target[0]", "ext4 uses one device"),
    ],
)
def test_device_fields_are_checked_and_located(target, where, message):
    text = f'[study]\nname = "s"\nworkloads = ["seq_read"]\n[[target]]\nfilesystem = "ext4"\n{target}\n'
    with pytest.raises(StudyError) as error:
        parse_study(text, "s.toml", base_dir=Path("."))
    assert str(error.value).startswith(f"{where}: ") and message in str(error.value)


def test_a_raw_baseline_of_named_devices_is_on_those_devices():
    text = (
        '[study]\nname = "s"\nworkloads = ["seq_read"]\n[[target]]\nname = "m"\nfilesystem '
        '= "btrfs"\ndevices = ["/dev/sdb", "/dev/disk/by-id/x"]\nraw_baseline = true\n'
    )
    mirror, raw1, raw2 = parse_study(text, "s.toml", base_dir=Path(".")).targets
    assert mirror.named == ("/dev/sdb", "/dev/disk/by-id/x") and mirror.devices == 2
    assert (raw1.name, raw1.filesystem, raw1.named) == ("m/raw-1", "raw", ("/dev/sdb",))
    assert (raw2.name, raw2.named) == ("m/raw-2", ("/dev/disk/by-id/x",))


@pytest.mark.root
def test_a_workload_too_big_for_the_users_device_is_refused_once_its_size_is_known(workdir, tmp_path):
    with users_disk() as disk:
        result = refused(
            workdir, tmp_path, study_on([disk.device]).replace('size = "32MiB"', 'size = "1GiB"'), disk.device
        )
        assert result.returncode == 2, result.stdout + result.stderr
        said = " ".join(result.stderr.split())
        assert (
            "workload 'seq_write' needs 1GiB but target 'mine' has 268.4MiB free after "
            "ext4's mkfs and mount on a device of 320MiB; a device of 1156MiB would do"
            in said
            and "nothing was attached or formatted" in said
        )
        assert disk.intact() and held_by(workdir.root) == []


@pytest.mark.root
def test_a_symlink_at_the_record_of_what_fslab_wrote_is_not_written_through(workdir, tmp_path):
    precious = tmp_path / "precious.json"
    precious.write_text("mine\n")
    workdir.written_path.symlink_to(precious)
    with users_disk() as disk:
        result = run(workdir, tmp_path, study_on([disk.device]), disk.device)
        assert result.returncode == 1 and "never through a symlink" in " ".join(result.stdout.split()), (
            result.stdout + result.stderr
        )
        assert held_by(workdir.root) == []
    assert precious.read_text() == "mine\n" and workdir.written_path.is_symlink()


@pytest.mark.root
def test_a_confirmed_device_replaced_at_its_number_before_the_run_is_refused_and_not_wiped(workdir, tmp_path):
    from fslab.core.errors import Refused
    from fslab.devices.named import NamedSource, confirmed

    def replaced_at_its_number() -> None:
        # At a number of its own: unplugged and plugged again here, it must not be another test's
        # meanwhile (and if it was, this is tried again at another).
        with users_disk(own_number=True) as disk:
            devices, problems = confirmed([disk.device], [disk.device])
            assert problems == [] and devices[disk.device].proof is not None
            other = disk.home / "other.img"
            with open(other, "wb") as f:
                f.truncate(64 * 2**20)
            subprocess.run(["mkfs.ext4", "-q", "-L", "not-confirmed", str(other)], check=True)
            before = other.read_bytes()
            subprocess.run(["losetup", "--detach", disk.device], check=True)  # unplugged; another disk gets its number
            plug(disk.device, other)
            try:
                source = NamedSource(list(devices.values()), notice=lambda text: None)
                with pytest.raises(Refused, match=f"the device at {disk.device} is no longer the disk you confirmed"):
                    with source.attach(workdir.journal):
                        pass
            finally:
                if backing_of(disk.device) == other:
                    subprocess.run(["losetup", "--detach", disk.device], check=True)
            plug(disk.device, disk.image)  # the user's disk back, to check it
            assert other.read_bytes() == before, "nothing on the disk now at that number was touched"
            assert disk.intact() and held_by(workdir.root) == [] and not workdir.journal.path.exists()

    for _ in range(3):
        try:
            replaced_at_its_number()
            return
        except NumberTaken as exc:
            taken = exc
    pytest.fail(f"three times: {taken}")
