"""Tunables and layouts on real targets: ZFS through zfs-fuse (or the kernel module), Btrfs over
two images, ext4 and XFS options read back, options the kernel does not apply, layers refused."""

import subprocess
from pathlib import Path

import pytest

from conftest import ZFS_FUSE, fslab, held_by, write_study
from fslab.devices import layers
from fslab.filesystems.zfs_engine import engine
from fslab.results import ResultsDB

pytestmark = ZFS_FUSE  # zfs-fuse: one daemon on the machine (conftest)

STUDY = """\
[study]
name = "layouts"
repetitions = 1
workloads = ["seq_write"]
image_size = "512MiB"
image_fill = "sparse"

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
name = "zfs"
filesystem = "zfs"
pool_options = { ashift = 12 }
properties = { recordsize = ["4k", "128k"], atime = "off", compression = "off", primarycache = "metadata" }

[[target]]
name = "zfs-mirror"
filesystem = "zfs"
devices = 2
arc_max = "64MiB"

[[target]]
name = "btrfs-raid1"
filesystem = "btrfs"
devices = 2
mkfs_options = "-d raid1 -m raid1"
mount_options = "nodatacow"
nocow = true

[[target]]
name = "btrfs-both"
filesystem = "btrfs"
mount_options = "nodatacow,compress=zstd"

[[target]]
name = "ext4-wb"
filesystem = "ext4"
mount_options = "noatime,data=writeback"

[[target]]
name = "xfs-log"
filesystem = "xfs"
mount_options = "noatime,logbsize=256k"

[[target]]
name = "xfs-sunit-alone"
filesystem = "xfs"
mount_options = "sunit=64"
"""


def zfs_fuse_running() -> bool:
    return subprocess.run(["pgrep", "-x", "zfs-fuse"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def layouts(tmp_path_factory, needs_root):
    from conftest import fresh_workdir

    if engine() is None:
        pytest.fail("these tests need ZFS: make test installs zfs-fuse")
    daemon_before = zfs_fuse_running()
    root = tmp_path_factory.mktemp("layouts")
    with fresh_workdir() as workdir:
        result = fslab(
            "run",
            str(write_study(root, STUDY)),
            "--no-ceiling",
            "--db",
            str(root / "r.db"),
            "--workdir",
            str(workdir.root),
        )
        db = ResultsDB(str(root / "r.db"))
        runs = {r["target"]: r for r in db.runs(db.study_run()["id"])}
        yield result, db, runs, root, workdir, daemon_before


@pytest.mark.root
def test_zfs_pool_and_dataset_properties_applied_and_read_back(layouts):
    _, db, runs, _, _, _ = layouts
    for recordsize in ("4k", "128k"):
        run = runs[f"zfs[recordsize={recordsize}]"]
        assert run["status"] == "ok", run["error"]
        details = run["fs_details"]
        assert f"recordsize\t{recordsize.upper()}\tlocal" in details
        for prop in ("atime\toff\tlocal", "compression\toff\tlocal", "primarycache\tmetadata\tlocal"):
            assert prop in details
        assert "ashift: 12" in details
        assert run["mkfs_command"][:5] == ["zpool", "create", "-f", "-o", "ashift=12"]
        if engine().fuse:
            assert "allow_other" in run["mount_options_effective"], "a FUSE mount's options"


@pytest.mark.root
def test_the_zfs_engine_is_recorded_with_every_result(layouts):
    _, db, runs, root, _, _ = layouts
    found = engine()
    assert runs["zfs-mirror"]["fs_details"].startswith(f"engine: {found.describe()}")
    versions = {t["name"]: t["tool_version"] for t in db.targets(db.study_run()["id"])}
    assert versions["zfs-mirror"] == found.describe()
    if found.fuse:
        assert "through FUSE" in versions["zfs-mirror"]
    report = next((root / "reports").glob("layouts-*/summary.md")).read_text()
    assert found.describe() in report


@pytest.mark.root
def test_zfs_mirror_of_two_images(layouts):
    _, _, runs, _, _, _ = layouts
    mirror = runs["zfs-mirror"]
    assert mirror["status"] == "ok", mirror["error"]
    assert "mirror-0" in mirror["fs_details"] and len(mirror["device"].split()) == 2
    assert "mirror" in mirror["mkfs_command"]


@pytest.mark.root
def test_the_arc_cap_is_applied_and_recorded(layouts):
    _, _, runs, _, _, _ = layouts
    expected = (
        "arc_max: 64 MiB (zfs-fuse --max-arc-size)" if engine().fuse else "arc_max: 64 MiB (zfs_arc_max = 67108864)"
    )
    assert expected in runs["zfs-mirror"]["fs_details"]


@pytest.mark.parametrize(
    ("asked", "refusal"),
    [
        (
            'zvol = true\nproperties = { volblocksize = "16k" }',
            "zvol targets are not supported by this ZFS engine (zfs-fuse",
        ),
        (
            'properties = { encryption = "aes-256-gcm" }',
            "ZFS native encryption is not supported by this ZFS engine (zfs-fuse's pool version 23",
        ),
    ],
    ids=["zvol", "encryption"],
)
@pytest.mark.slow
def test_what_the_zfs_engine_cannot_do_is_refused_before_anything_is_made(workdir, tmp_path, asked, refusal):
    if not engine().fuse:
        pytest.skip("the OpenZFS kernel module has zvols and encryption")
    study = write_study(
        tmp_path,
        '[study]\nname = "vol"\nworkloads = ["seq_write"]\nimage_size = '
        f'"2GiB"\n[[target]]\nname = "asks"\nfilesystem = "zfs"\n{asked}\n',
    )
    result = fslab("run", str(study), "--no-ceiling", "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root))
    assert result.returncode == 2
    assert f"target 'asks': {refusal}" in result.stderr.replace("\n", "")
    assert not any(workdir.images.glob("*.img"))


@pytest.mark.root
def test_nothing_of_zfs_is_left_behind(layouts):
    _, _, _, _, workdir, daemon_before = layouts
    if not daemon_before:
        assert not zfs_fuse_running(), "the zfs-fuse daemon fslab started is stopped"
    cache = Path("/var/lib/zfs/zpool.cache")
    assert not cache.exists() or b"fslab_" not in cache.read_bytes(), "no fslab pool left imported"
    assert held_by(workdir.root) == []


@pytest.mark.root
def test_btrfs_raid1_over_two_images_with_nodatacow(layouts):
    _, _, runs, _, _, _ = layouts
    raid = runs["btrfs-raid1"]
    assert raid["status"] == "ok", raid["error"]
    assert "Data, RAID1" in raid["fs_details"] and "Metadata, RAID1" in raid["fs_details"]
    assert "nodatacow" in raid["mount_options_effective"].split(",")
    assert "---C" in raid["fs_details"], "chattr +C on the workload's directory, read back with lsattr"
    assert raid["mkfs_command"][-2:] == raid["device"].split()


@pytest.mark.root
def test_ext4_and_xfs_options_read_back(layouts):
    _, _, runs, _, _, _ = layouts
    assert {"noatime", "data=writeback"} <= set(runs["ext4-wb"]["mount_options_effective"].split(","))
    assert {"noatime", "logbsize=256k"} <= set(runs["xfs-log"]["mount_options_effective"].split(","))


@pytest.mark.root
def test_an_option_the_kernel_does_not_apply_is_reported(layouts):
    _, _, runs, root, _, _ = layouts
    both = runs["btrfs-both"]
    assert both["status"] == "ok" and "compress=zstd:3" in both["mount_options_effective"]
    assert "nodatacow" not in both["mount_options_effective"], "this kernel lets compress override nodatacow"
    report = next((root / "reports").glob("layouts-*/summary.md")).read_text()
    assert "| btrfs-both | btrfs | 1 | – | nodatacow,compress=zstd |" in report and "| nodatacow |" in report


@pytest.mark.root
def test_a_refused_option_fails_its_run_and_the_study_goes_on(layouts):
    result, _, runs, _, _, _ = layouts
    refused = runs["xfs-sunit-alone"]  # allowed (with swidth), refused by the kernel alone
    assert refused["status"] == "failed" and "mount" in refused["error"]
    assert result.returncode == 1 and "1 run(s) failed" in result.stderr
    assert sum(r["status"] == "ok" for r in runs.values()) == len(runs) - 1


@pytest.mark.slow
def test_a_study_needing_dm_crypt_is_refused_before_anything_is_formatted(workdir, tmp_path):
    if layers.missing("luks") is None:
        pytest.skip("this kernel has dm-crypt: test_layers_guest.py builds the layers instead")
    study = write_study(
        tmp_path,
        '[study]\nname = "nas"\nworkloads = ["seq_write"]\n[[target]]\nname = "ext4-stack"\n'
        'filesystem = "ext4"\ndevices = 2\nlayers = ["md-raid1", "luks", "lvm"]\n',
    )
    result = fslab("run", str(study), "--no-ceiling", "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root))
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert message.count("target 'ext4-stack': ") == 1, "one entry per target, its reasons joined"
    assert (
        "it needs luks, and this kernel has no dm-crypt (CONFIG_BLK_DEV_DM, CONFIG_DM_CRYPT)"
        in message.split("target 'ext4-stack': ")[1]
    )
    assert not any(workdir.images.glob("*.img"))
