"""LVM under a filesystem: the layer (LAYERS "lvm"), the lvcreate options a study may add, and how
fslab's volume groups are removed when a journal holds them ("lvm")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from fslab.core.errors import Refused
from fslab.core.journal import Entry, Journal, releaser
from fslab.core.system import run
from fslab.devices.layers.base import BY_FSLAB, LAYERS, Layer, running_ours
from fslab.model.options import Integer, Matches, OneOf, Size, ToolOptions

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir

READAHEAD = Matches(r"auto|none|\d{1,9}", "auto, none or a number of sectors")
YES_NO = OneOf(("y", "n"))
STRIPES = Integer(1, 128)
STRIPE_SIZE = Size(4096, 2**30, units="km")

# lvm lvcreate: fslab names the volume, gives it the whole group and shows LVM its device only.
LVCREATE_OPTIONS = ToolOptions(
    "lvcreate",
    {
        "--stripes": STRIPES,
        "-i": STRIPES,
        "--stripesize": STRIPE_SIZE,
        "-I": STRIPE_SIZE,
        "--type": OneOf(("linear", "striped")),
        "--readahead": READAHEAD,
        "-r": READAHEAD,
        "--contiguous": YES_NO,
        "-C": YES_NO,
        "--zero": YES_NO,
        "-Z": YES_NO,
        "--wipesignatures": YES_NO,
        "-W": YES_NO,
        "--alloc": OneOf(("contiguous", "cling", "normal", "anywhere", "inherit")),
    },
    refused={
        "--config": "fslab's configuration shows LVM its own device only; another could show it others",
        **{flag: "it names other devices or a file" for flag in ("--devices", "--devicesfile")},
        **{flag: "it names a profile file" for flag in ("--profile", "--commandprofile", "--metadataprofile")},
        **{flag: "fslab gives the volume the whole group" for flag in ("--extents", "-l", "--size", "-L")},
        "--name": "fslab names the volume",
        "-n": "fslab names the volume",
        "--yes": BY_FSLAB,
        "-y": BY_FSLAB,
    },
)

# LVM looks at fslab's own device only, and makes its device nodes itself where no udev runs.
_LVM_CONFIG = 'devices {{ filter = [ "a|^{device}$|", "r|.*|" ] }} activation {{ udev_sync = 0 udev_rules = 0 }}'


def _lvm_command(action: str, device: str, *args: str) -> list[str]:
    return ["lvm", action, "--config", _LVM_CONFIG.format(device=device), *args]


@releaser("lvm")
def remove_volume_group(entry: Entry, workdir: Workdir) -> None:
    """Remove fslab's volume group (ident "group on device") if its volume is still active."""
    group, _, device = entry.ident.partition(" on ")
    if not re.fullmatch(r"/dev/[a-z][a-z0-9]*|/dev/mapper/fslab_\w+", device):  # a kernel name: safe in LVM's filter
        raise Refused(f"{entry.ident}: {device} is not a device fslab builds a volume group on")
    if running_ours(entry, workdir, f"/dev/mapper/{group}-data"):
        run(_lvm_command("vgremove", device, "--force", group))


@contextmanager
def build(
    journal: Journal, devices: list[str], name: str, extra: list[str]
) -> Iterator[tuple[str, list[list[str]], str]]:
    device, group = devices[0], f"{name}_vg"
    commands = [
        _lvm_command("pvcreate", device, "--force", "--yes", device),
        _lvm_command("vgcreate", device, group, device),
        _lvm_command("lvcreate", device, "--yes", "--extents", "100%FREE", "--name", "data", *extra, group),
    ]
    with journal.holding("lvm", f"{group} on {device}", release_unproven=True):
        for command in commands:
            run(command)
        volumes = run(
            _lvm_command("lvs", device, "-o", "lv_name,vg_name,lv_size,seg_type,stripes,devices"), check=False
        ).stdout
        yield f"/dev/mapper/{group}-data", commands, f"lvs:\n{volumes}\n"


LAYERS.add(
    Layer(
        "lvm",
        "device-mapper (CONFIG_BLK_DEV_DM)",
        ("dm_mod",),
        ("lvm", "version"),
        "lvm2",
        LVCREATE_OPTIONS,
        build=build,
    ),
    own=True,
)
