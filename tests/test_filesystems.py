"""What a filesystem offers beyond mkfs and mount: snapshots where it has them, a clear refusal
where it has none, and the devices a provisioned target is made of, named structurally."""

import subprocess
from contextlib import ExitStack, contextmanager

import pytest

from conftest import ZFS_FUSE
from fslab.core.errors import Refused
from fslab.core.names import snapshot_name
from fslab.devices.layers import Stack
from fslab.devices.loop import attached, image_file, on_loops
from fslab.filesystems import FILESYSTEMS, Provisioned
from fslab.filesystems.base import NoSnapshots
from fslab.filesystems.zfs_engine import engine
from fslab.model import Target

pytestmark = ZFS_FUSE  # zfs-fuse: one daemon on the machine (conftest)


@contextmanager
def loops(workdir, count: int, size: int):
    with ExitStack() as stack:
        made = [
            stack.enter_context(image_file(workdir.journal, workdir.images, f"img-{i}", size, fill=None))
            for i in range(count)
        ]
        yield [stack.enter_context(attached(workdir.journal, image)) for image in made]


@pytest.mark.root
def test_btrfs_on_two_devices_names_them_and_takes_a_read_only_snapshot(workdir):
    target = Target("b", "btrfs", ("-d", "raid1", "-m", "raid1"), "", 160 * 2**20, "sparse", devices=2)
    with loops(workdir, 2, target.image_size) as (first, second):
        with FILESYSTEMS["btrfs"].provision(
            workdir.journal, Stack.on(on_loops([first, second])), workdir.mounts / "b", target
        ) as ready:
            assert (ready.top, ready.bottom, ready.between) == (first.device, (first.device, second.device), ())
            assert ready.top in ready.bottom, "Btrfs is mounted from the first of its own devices"
            assert ready.filesystem == "btrfs", "what made it says so itself: its snapshots are its own"
            assert ready.described == f"{first.device} {second.device}", "runs.device keeps its text"
            (ready.directory / "data").write_text("before\n")
            taken = FILESYSTEMS["btrfs"].snapshot(ready, snapshot_name(1))
            (ready.directory / "data").write_text("after\n")
            assert taken == str(ready.directory / ".snapshots" / "fslab-1")
            shown = subprocess.run(
                ["btrfs", "subvolume", "show", taken], capture_output=True, text=True, check=True
            ).stdout
            assert "readonly" in shown.split("Flags:")[1].splitlines()[0]
            assert (ready.directory / ".snapshots" / "fslab-1" / "data").read_text() == "before\n"
            with pytest.raises(Refused, match="not a snapshot name fslab gives"):
                FILESYSTEMS["btrfs"].snapshot(ready, "../escape")


@pytest.mark.root
def test_zfs_takes_a_snapshot_of_its_dataset_destroyed_with_the_pool(workdir):
    if engine() is None:
        pytest.fail("this test needs ZFS: make test installs zfs-fuse")
    target = Target("z", "zfs", (), "", 256 * 2**20, "sparse")
    with loops(workdir, 1, target.image_size) as (loop,):
        with FILESYSTEMS["zfs"].provision(
            workdir.journal, Stack.on(on_loops([loop])), workdir.mounts / "z", target
        ) as ready:
            assert (ready.top, ready.bottom, ready.described) == (loop.device, (loop.device,), loop.device)
            assert ready.filesystem == "zfs"
            taken = FILESYSTEMS["zfs"].snapshot(ready, snapshot_name(7))
            assert taken == f"{ready.dataset}@fslab-7"
            listed = subprocess.run(
                ["zfs", "list", "-H", "-t", "snapshot", "-o", "name"], capture_output=True, text=True, check=True
            ).stdout
            assert taken in listed.split()
    assert workdir.journal.outstanding() == [], "the pool, and its snapshot with it, are gone"


@pytest.mark.parametrize(
    ("dataset", "name", "message"),
    [
        ("fslab_0a1b2_0123abcd/data", "../escape", "not a snapshot name fslab gives"),
        ("fslab_0a1b2_0123abcd/data", "fslab-1@other", "not a snapshot name fslab gives"),
        ("tank/home", snapshot_name(1), "'tank/home' is not a dataset fslab made"),
        ("fslab_0a1b2_0123abcd/data@x", snapshot_name(1), "is not a dataset fslab made"),
        (None, snapshot_name(1), "None is not a dataset fslab made"),
    ],
)
def test_zfs_refuses_a_snapshot_fslab_would_not_name_before_any_command(monkeypatch, dataset, name, message):
    import fslab.core.system
    import fslab.filesystems.zfs as zfs

    def no_command(*args, **kwargs):
        pytest.fail(f"a command ran: {args}")

    monkeypatch.setattr(zfs, "run", no_command)
    monkeypatch.setattr(fslab.core.system, "run", no_command)
    with pytest.raises(Refused, match=message):
        FILESYSTEMS["zfs"].snapshot(Provisioned(top="/dev/null", directory=None, dataset=dataset), name)


def test_an_encrypted_datasets_key_is_fresh_on_zfss_standard_input_and_wiped_after(monkeypatch):
    """zfs_create hands `zfs create` 32 random bytes on its standard input, a new key each time,
    in no argument; fslab's copy is overwritten once zfs has it, and when zfs fails too. An
    unencrypted dataset gets no standard input."""
    from fslab.filesystems import zfs

    given: list[tuple[list[str], bytearray | None, bytes | None]] = []

    def zfs_command(argv, stdin=None, **kwargs):
        given.append((argv, stdin, None if stdin is None else bytes(stdin)))
        if "fail" in argv:
            raise zfs.CommandError(argv, 1, "", "cannot create")

    monkeypatch.setattr(zfs, "run", zfs_command)
    encrypted = {"encryption": "aes-256-gcm"}
    zfs.zfs_create(["zfs", "create", "pool/data"], encrypted)
    zfs.zfs_create(["zfs", "create", "pool/data"], encrypted)
    with pytest.raises(zfs.CommandError):
        zfs.zfs_create(["zfs", "create", "fail"], encrypted)
    zfs.zfs_create(["zfs", "create", "pool/data"], {"encryption": "off"})
    keys = [seen for _, _, seen in given[:3]]
    assert all(seen is not None and len(seen) == 32 for seen in keys) and len(set(keys)) == 3, (
        "a fresh 32-byte key each time"
    )
    assert all(buffer == bytes(32) for _, buffer, _ in given[:3]), "fslab's copy overwritten, the failed one's too"
    assert all(str(seen) not in " ".join(argv) for argv, _, seen in given[:3])
    assert given[3][1] is None, "no key for a dataset that is not encrypted"


@pytest.mark.parametrize("kind", ["ext4", "xfs", "raw"])
def test_a_filesystem_without_snapshots_says_so_before_anything_is_made(kind):
    fs = FILESYSTEMS[kind]
    assert not fs.supports_snapshots
    with pytest.raises(NoSnapshots, match=f"{kind} targets have no snapshots: btrfs and zfs targets do"):
        fs.snapshot(Provisioned(top="/dev/null", directory=None), snapshot_name(1))
    assert FILESYSTEMS["btrfs"].supports_snapshots and FILESYSTEMS["zfs"].supports_snapshots


def test_a_layered_stack_names_its_bottom_devices_and_the_layers_between():
    # md and dm are missing from this kernel: the stack the layers build is written out here.
    stack = Stack(
        devices=["/dev/mapper/x_crypt"],
        owned=None,
        bottom=["/dev/loop3", "/dev/loop4"],
        between=["/dev/md127", "/dev/mapper/x_crypt"],
    )
    ready = Provisioned.on("raw", stack, "/dev/mapper/x_crypt", None)
    assert ready.bottom == ("/dev/loop3", "/dev/loop4") and ready.between == ("/dev/md127",)
    assert ready.top not in (*ready.bottom, *ready.between), "the top is named once, as top"
    assert ready.described == "/dev/mapper/x_crypt on /dev/loop3 /dev/loop4"
    assert ready.fio_location == {"directory": None, "device": "/dev/mapper/x_crypt"}
    assert ready.filesystem == "raw"


@pytest.mark.parametrize(
    ("kind", "arguments", "devices", "step"),
    [
        ("ext4", (), 1, 2**10),
        ("xfs", (), 1, 2**20),
        ("btrfs", (), 1, 2**20),
        ("btrfs", ("-d", "dup"), 1, 2**20),
        ("btrfs", ("-d", "raid1", "-m", "raid1"), 2, 2**20),
        ("btrfs", ("-d", "raid0"), 2, 2**20),
    ],
)
def test_each_mkfs_floor_is_where_the_real_mkfs_starts_to_work(tmp_path, kind, arguments, devices, step):
    """The floors fslab refuses a study by are the tools' own: mkfs, as fslab runs it, formats
    sparse images of the floor's size and fails on images a step smaller (so fslab refuses
    nothing mkfs would make, and lets through nothing it would not)."""
    fs = FILESYSTEMS[kind]
    floor = fs.size_floor(list(arguments), devices)
    assert floor is not None

    def formats(size: int) -> bool:
        images = [tmp_path / f"{kind}-{i}.img" for i in range(devices)]
        for image in images:
            with image.open("wb") as sparse:
                sparse.truncate(size)
        return (
            subprocess.run(
                fs.mkfs_command([str(i) for i in images], list(arguments)), capture_output=True, check=False
            ).returncode
            == 0
        )

    assert formats(floor.size), f"{fs.mkfs_command(['…'], list(arguments))} on {floor.size} bytes"
    assert not formats(floor.size - step), (
        f"mkfs made a {kind} under the floor ({floor.size - step} bytes): the floor is too high"
    )


@pytest.mark.root
def test_the_zfs_floor_is_where_zpool_create_starts_to_work(workdir):
    """ZFS's floor is zpool's own (SPA_MINDEVSIZE): a pool is made, and its dataset mounted, on a
    device of the floor's size, and zpool refuses one a MiB smaller, in the engine here."""
    if engine() is None:
        pytest.fail("this test needs ZFS: make test installs zfs-fuse")
    from fslab.core.system import CommandError

    floor = FILESYSTEMS["zfs"].size_floor([], 1)
    assert floor is not None

    def provisions(size: int) -> bool:
        target = Target("z", "zfs", (), "", size, "sparse")
        try:
            with (
                loops(workdir, 1, size) as (loop,),
                FILESYSTEMS["zfs"].provision(
                    workdir.journal, Stack.on(on_loops([loop])), workdir.mounts / "z", target
                ) as ready,
            ):
                return ready.directory is not None and ready.directory.is_dir()
        except CommandError as exc:
            assert "zpool create" in str(exc), exc
            return False

    assert provisions(floor.size), f"no pool on {floor.size} bytes"
    assert not provisions(floor.size - 2**20), (
        f"zpool made a pool under the floor ({floor.size - 2**20} bytes): the floor is too high"
    )
    assert workdir.journal.outstanding() == []
