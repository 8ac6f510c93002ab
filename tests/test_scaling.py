"""--scale keeps what a study compares (Filesystem.scaled): mkfs makes the full size's filesystem
on the smaller image, the ARC keeps its share of the data, and what cannot be kept is said once
in the header."""

import json
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from fslab.devices.layers import Stack
from fslab.devices.loop import on_loops
from fslab.filesystems import FILESYSTEMS, zfs_engine
from fslab.filesystems.zfs_engine import arc_flag
from fslab.model import Study
from fslab.report.sections import header_lines
from fslab.report.summary import StudySummary
from fslab.statistics.analysis import analyse
from fslab.study import load_study, parse_study
from test_filesystems import loops

MiB = 2**20


def study(targets: str, scale: float, image_size: str = "1GiB") -> Study:
    text = (
        f'[study]\nname = "s"\nimage_size = "{image_size}"\nworkloads = ["seq_read"]\n[fio]\nsize = "8MiB"\n{targets}'
    )
    return parse_study(text, "s.toml", base_dir=Path("."), scale=scale)


def dumpe2fs(device: str) -> dict[str, str]:
    out = subprocess.run(["dumpe2fs", "-h", device], capture_output=True, text=True, check=True).stdout
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if v}


@pytest.mark.root
def test_a_scaled_ext4_has_the_full_sizes_4k_blocks_and_inode_ratio(workdir):
    # 1GiB × 0.25 = 256MiB: mke2fs alone would make its "small" type there (1KiB blocks, an inode every 4KiB)
    target = study('[[target]]\nfilesystem = "ext4"', 0.25).targets[0]
    assert target.image_size == 256 * MiB
    with loops(workdir, 1, target.image_size) as attached:
        with FILESYSTEMS["ext4"].provision(
            workdir.journal, Stack.on(on_loops(attached)), workdir.mounts / "t", target
        ) as ready:
            found = dumpe2fs(ready.top)
    assert found["Block size"] == "4096"
    assert int(found["Block count"]) * 4096 // int(found["Inode count"]) == 16384
    assert workdir.journal.outstanding() == []
    assert target.scaling_changed == (), "all kept: nothing to say"


def test_ext4_is_left_to_mke2fs_where_its_full_size_makes_the_same_or_the_study_chose():
    assert study('[[target]]\nfilesystem = "ext4"', 0.5, "400MiB").targets[0].mkfs_options == ()  # small at either size
    assert study('[[target]]\nfilesystem = "ext4"', 0.5, "4GiB").targets[0].mkfs_options == ()  # default at either size
    assert study('[[target]]\nfilesystem = "ext4"\nmkfs_options = "-T news"', 0.1).targets[0].mkfs_options == (
        "-T",
        "news",
    )
    assert study('[[target]]\nfilesystem = "ext4"\nmkfs_options = "-b 1024 -i 4096"', 0.1).targets[0].mkfs_options == (
        "-b",
        "1024",
        "-i",
        "4096",
    )
    assert study('[[target]]\nfilesystem = "ext4"\nmkfs_options = "-b 4096"', 0.1).targets[0].mkfs_options == (
        "-b",
        "4096",
        "-T",
        "default",
    )
    # the type is the one for the device the layers leave: 540MiB less their 32MiB is under 512MiB at full size too
    layered = '[[target]]\nfilesystem = "ext4"\ndevices = 2\nlayers = ["md-raid1"]'
    assert study(layered, 0.5, "540MiB").targets[0].mkfs_options == ()
    assert study(layered, 0.05, "8GiB").targets[0].mkfs_options == ("-T", "default")
    assert study('[[target]]\nfilesystem = "ext4"', 0.5, "1GiB").targets[0].scaling_changed == ()
    unscaled = study('[[target]]\nfilesystem = "ext4"', 1.0, "256MiB").targets[0]
    assert unscaled.mkfs_options == () and unscaled.scaling_changed == ()


def test_a_journal_scaling_leaves_out_is_said():
    tiny = study('[[target]]\nfilesystem = "ext4"', 0.0005, "8GiB").targets[0]  # 4MiB: 1024 blocks of 4KiB
    assert tiny.mkfs_options == ("-T", "default")
    assert tiny.scaling_changed == (
        "no journal: mkfs.ext4 makes none on 1024 blocks of 4KiB (under 2048), and the full size's 8GiB has one",
    )


def test_the_arc_cap_is_scaled_with_the_data():
    full, scaled = load_study("nas-stack"), load_study("nas-stack", scale=0.02)
    for name in ("zfs-mirror", "zfs-mirror-encrypted"):
        before, after = (next(t for t in s.targets if t.name == name) for s in (full, scaled))
        assert (before.arc_max, after.arc_max) == (4 * 2**30, 82 * MiB)
        assert round(after.arc_max / after.image_size, 3) == before.arc_max / before.image_size == 0.125
        assert after.scaling_changed == ()
        assert arc_flag(after.arc_max) == ("--max-arc-size", "82")  # what zfs-fuse is started with


def test_an_arc_cap_below_what_the_engines_take_is_kept_at_their_floor_and_said():
    target = study('[[target]]\nfilesystem = "zfs"\narc_max = "1GiB"', 0.05, "8GiB").targets[0]  # 1GiB × 0.05 = 51MiB
    assert target.arc_max == zfs_engine.SCALED_ARC_FLOOR == 64 * MiB
    assert target.scaling_changed == (
        "ARC cap 64MiB, the least both ZFS engines take, not 1GiB "
        "× 0.05 = 51MiB: 1.25× the full size's ARC for the data",
    )
    default = study('[[target]]\nfilesystem = "zfs"', 0.05, "8GiB").targets[0]
    assert default.arc_max is None and "the ARC is the engine's default, not scaled" in default.scaling_changed[0]
    # btrfs-vs-zfs's datasets: their ARC caches no file data, whatever its size (said there at 0.1 before)
    for cache in ("metadata", "none"):
        uncached = study(f'[[target]]\nfilesystem = "zfs"\nproperties = {{ primarycache = "{cache}" }}', 0.1, "8GiB")
        assert uncached.targets[0].scaling_changed == ()


def test_xfs_says_the_log_and_allocation_groups_a_large_full_size_had():
    assert (
        study('[[target]]\nfilesystem = "xfs"', 0.1, "100GiB").targets[0].scaling_changed == ()
    )  # a 64MiB log either way
    big = study('[[target]]\nfilesystem = "xfs"', 0.001, "8TiB").targets[0]
    assert big.scaling_changed == (
        "a log of 64MiB, not the full size's 2.0GiB",
        "4 allocation groups, not the full size's 8",
    )
    assert (
        study('[[target]]\nfilesystem = "xfs"\nmkfs_options = "-l size=64m -d agcount=4"', 0.001, "8TiB")
        .targets[0]
        .scaling_changed
        == ()
    )


def test_what_scaling_changed_is_said_once_in_the_header_naming_the_targets():
    targets = (
        '[[target]]\nname = "a"\nfilesystem = "zfs"\n[[target]]\nname = "b"\n'
        'filesystem = "zfs"\n[[target]]\nname = "e"\nfilesystem = "ext4"'
    )
    scaled = study(targets, 0.05, "8GiB")
    summary = StudySummary(
        study_run={
            "study": "s",
            "id": 1,
            "status": "finished",
            "started_at": datetime(2026, 1, 1),
            "plan_seed": 1,
            "scale": 0.05,
            "repetitions": 2,
            "settings": {},
            "environment": {"tools": {}, "image_directory": {}},
        },
        targets=[
            {"name": t.name, "filesystem": t.filesystem, "spec": json.loads(json.dumps(t.spec()))}
            for t in scaled.targets
        ],  # as stored
        workloads=[],
        cells=[],
        analysis=analyse({}, {}, ["a"], []),
    )
    said = [line for line in header_lines(summary) if "Scaling changed" in line]
    assert said == [
        "**Scaling changed the setup** (scale 0.05): a, b: the ARC is the engine's default, not "
        "scaled with the data: it holds more of it than at full size (arc_max scales with it)."
    ]
    summary.targets = [t for t in summary.targets if t["name"] == "e"]
    assert not [line for line in header_lines(summary) if "Scaling" in line], (
        "nothing said where scaling kept everything"
    )
