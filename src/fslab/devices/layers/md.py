"""md RAID1 under a filesystem: the layer (LAYERS "md-raid1"), the mdadm --create options a study
may add, and how fslab's arrays are stopped when a journal holds them ("md")."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.journal import Entry, Journal, releaser
from fslab.core.system import run
from fslab.devices.layers.base import BY_FSLAB, LAYERS, NAMES_A_FILE, Layer, running_ours
from fslab.model.options import OneOf, Size, ToolOptions

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir

BITMAP = OneOf(("internal", "none"))  # a file name would put the bitmap outside the array

# mdadm --create … --level=1: fslab gives the level, the members and their count.
MDADM_OPTIONS = ToolOptions(
    "mdadm --create",
    {
        "--bitmap": BITMAP,
        "-b": BITMAP,
        "--bitmap-chunk": Size(4096, 2**30, units="kmg"),
        "--consistency-policy": OneOf(("resync", "bitmap")),
        "--data-offset": Size(0, 2**40, units="kmg", power_of_two=False),
    },
    refused={
        "--write-journal": "it names another device: a journal device",
        "--spare-devices": "it adds devices that are not the target's",
        "-x": "it adds devices that are not the target's",
        "--config": NAMES_A_FILE,
        "--backup-file": NAMES_A_FILE,
        "--chunk": "RAID1 has no chunks: mdadm refuses it at level 1",
        "-c": "RAID1 has no chunks: mdadm refuses it at level 1",
        "--layout": "RAID1 has no layout: mdadm refuses it at level 1",
        "-p": "RAID1 has no layout: mdadm refuses it at level 1",
        "--metadata": "fslab passes --metadata=1.2 itself",
        "-e": "fslab passes --metadata=1.2 itself",
        "--level": "the layer says the level",
        "-l": "the layer says the level",
        "--raid-devices": "the target's devices say how many",
        "-n": "the target's devices say how many",
        "--assume-clean": BY_FSLAB,
        "--run": BY_FSLAB,
    },
)


@releaser("md")
def stop_array(entry: Entry, workdir: Workdir) -> None:
    """Stop fslab's array and wipe its members' superblocks, so that nothing reassembles it."""
    link = Path("/dev/md") / entry.ident
    if running_ours(entry, workdir, str(link)):
        members = Path("/sys/block") / Path(os.path.realpath(link)).name / "slaves"
        devices = [f"/dev/{member.name}" for member in members.iterdir()]
        run(["mdadm", "--stop", str(link)])
        run(["mdadm", "--zero-superblock", *devices], check=False)
    if link.is_symlink():
        link.unlink()  # where no udev runs, mdadm made the link and leaves it


@contextmanager
def build(
    journal: Journal, devices: list[str], name: str, extra: list[str]
) -> Iterator[tuple[str, list[list[str]], str]]:
    # --assume-clean: no initial resync competing with the workload; the halves differ only
    # where nothing was ever written, which no benchmark reads back.
    command = [
        "mdadm",
        "--create",
        f"/dev/md/{name}",
        "--run",
        "--level=1",
        f"--raid-devices={len(devices)}",
        "--metadata=1.2",
        "--assume-clean",
        *extra,
        *devices,
    ]
    with journal.holding("md", name, release_unproven=True):
        run(command)
        device = os.path.realpath(f"/dev/md/{name}")
        yield device, [command], f"mdadm --detail {device}:\n{run(['mdadm', '--detail', device], check=False).stdout}\n"


LAYERS.add(
    Layer(
        "md-raid1",
        "md RAID1 (CONFIG_BLK_DEV_MD, CONFIG_MD_RAID1)",
        ("md_mod", "raid1"),
        ("mdadm", "--version"),
        "mdadm",
        MDADM_OPTIONS,
        build=build,
    ),
    own=True,
)
