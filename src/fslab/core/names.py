"""Names from a study file, checked once, and the one place they become file or kernel names.

A name reaches fio (a workload's name is its job section and the stem of the files fio makes),
the work directory (images and mount points are named after targets) and the report folder (after
the study), so a name is refused unless it is plain: letters, digits and `_ . + -`, starting with
a letter or digit. Targets made by a sweep or a raw baseline get fslab's own decorations
(`ext4[noatime]`, `nas/raw-1`), and those become file names only through `file_name`.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from fslab.core.errors import Refused

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
NAME_RULE = "letters, digits and _ . + - (at most 64, starting with a letter or digit)"


def check_name(value: str) -> str:
    """A study, target or workload name as written in a study file, or ValueError saying why not."""
    if not NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a plain name: use {NAME_RULE}")
    return value


def swept_name(base: str, labels: list[str]) -> str:
    """The name of what a sweep makes — a target, a workload —: its table's name and the values
    that make it this one (`ext4[noatime]`, `mine[iodepth=8, numjobs=4]`); the name alone when
    nothing is swept."""
    return f"{base}[{', '.join(labels)}]" if labels else base


def image_names(target_name: str, devices: int) -> tuple[str, ...]:
    """The names of a target's own loop images: its name, or name-1, name-2, … for several."""
    return (target_name,) if devices == 1 else tuple(f"{target_name}-{i}" for i in range(1, devices + 1))


def file_name(name: str) -> str:
    """The file name for a name: a plain name as it is; any other (a sweep's `ext4[noatime]`)
    made plain, with a hash of the name to keep distinct names apart (`ext4_noatime-1a2b3c`)."""
    if NAME.fullmatch(name) and ".." not in name:
        return name
    readable = re.sub(r"[^A-Za-z0-9_.+-]+", "_", name).strip("_.")[:56] or "x"
    return f"{readable}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


KERNEL_NAME_PREFIX = "fslab_"


def workdir_tag(workdir: Path) -> str:
    """What every kernel name made for one work directory starts with: fslab's prefix and a
    hash of the directory, so fslab tells its own pools, arrays and mappings from another work
    directory's (and from a user's) by name before it checks them by identity."""
    return KERNEL_NAME_PREFIX + hashlib.sha1(os.fsencode(workdir)).hexdigest()[:5] + "_"


def kernel_name(workdir: Path, target_name: str) -> str:
    """The name of a target's pool, array, mapping or volume group: machine-wide, so scoped by
    the work directory; short and plain, as the kernel and the tools want them."""
    return workdir_tag(workdir) + hashlib.sha1(target_name.encode()).hexdigest()[:8]


SNAPSHOT_NAME = re.compile(r"fslab-[0-9]{1,6}")


def snapshot_name(number: int) -> str:
    """The name of a run's `number`th snapshot: fslab's own, since a study names no snapshot."""
    return check_snapshot_name(f"fslab-{number}")


def check_snapshot_name(name: str) -> str:
    """A snapshot name as `snapshot_name` makes them, or Refused: what reaches btrfs and zfs."""
    if not SNAPSHOT_NAME.fullmatch(name):
        raise Refused(f"{name!r} is not a snapshot name fslab gives (fslab-N)")
    return name


# Every control character, C0 and C1 (\x9b alone starts an escape sequence on some terminals).
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """Untrusted text (a value quoted in an error, a tool's error output) as a terminal may show
    it: control characters — an escape sequence could clear the screen or retitle the window —
    written out as \\x1b and the like; newlines and tabs kept."""
    return CONTROL.sub(lambda m: m.group() if m.group() in "\t\n" else f"\\x{ord(m.group()):02x}", text)
