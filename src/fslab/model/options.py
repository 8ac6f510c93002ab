"""The allow-lists through which a study file's options reach mkfs, mount, zpool/zfs, mdadm,
cryptsetup and lvcreate: the checking machinery, pure (no tool runs, nothing is read).

A tool's accepted options are a small typed description (`ToolOptions`: flag → the `ValueForm` of its value);
the lists themselves live with what they belong to, one place each:
- filesystems/ext4.py, xfs.py, btrfs.py: `MKFS_OPTIONS` and `MOUNT_OPTIONS` (with `VFS_MOUNT_OPTIONS` below)
- filesystems/zfs.py: `POOL_OPTIONS` (zpool create -o) and `DATASET_PROPERTIES` (zfs create -o)
- devices/layers/md.py, luks.py, lvm.py: `MDADM_OPTIONS`, `CRYPTSETUP_OPTIONS`, `LVCREATE_OPTIONS` (each
  layer's `options`)
Every module that declares one imports this one: `grep -rl guard.options src/` lists them all.

Whatever is not on a list is refused; so is any value holding a path (`/`), a control character
(a newline would split a command or a mount-option string) or anything but plain letters,
digits and `_ . : + - = , ^ @ %`, and any value starting with `-` (another option, read as a
value by getopt). Positional arguments are refused outright: they are devices, and those are
fslab's to give. Options fslab passes itself (-F, -q, -K, …) are not on the lists: they are
added where the command is built, after the user's options are checked.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fslab.core.errors import Refused
from fslab.core.names import CONTROL
from fslab.core.toml_errors import unknown


class OptionRefused(Refused, ValueError):
    """An option refused by an allow-list. A ValueError too, so that pydantic reports it as a
    study-file error at its file, line and field."""


# Every message below is "<subject> <reason>": "-b 4097 is not a power of two …",
# "xfs mount option logdev=/dev/sdb is refused: it names another device".
_PLAIN = re.compile(r"[A-Za-z0-9_.:+=,^@%-]")


def shown(text: str) -> str:
    """A value as it may be printed: quoted with escapes when it holds anything unprintable."""
    return text if text.isprintable() else repr(text)


def value_text(value: str | int | float | bool, true: str, false: str) -> str:
    """A study file's TOML value as a tool is given it: a boolean as the tool's own words for it
    (sysbench on/off, dd's `direct` true/false), anything else as written."""
    return (true if value else false) if isinstance(value, bool) else str(value)


def plain_value_problem(value: str) -> str | None:
    """Why a value is unfit for any tool (None when it is not): the rule every value obeys
    before its own form is checked."""
    if value == "":
        return "is empty"
    if CONTROL.search(value):
        return "holds a control character (a newline?)"
    if "/" in value:
        return "holds '/': options name no path and no device"
    if value.startswith("-"):
        return "starts with '-': a value is expected here, not another option"
    bad = next((c for c in value if not _PLAIN.fullmatch(c)), None)
    if bad is not None:
        return f"holds {bad!r}: values are letters, digits and _ . : + - = , ^ @ % only"
    return None


class ValueForm:
    """What an option's value may be."""

    takes_value = True
    describe = "a value"

    def problem(self, value: str) -> str | None:
        """Why `value` is not accepted ("is not …", "is refused: …"), or None when it is."""
        raise NotImplementedError


@dataclass(frozen=True)
class Flag(ValueForm):
    """An option without a value."""

    takes_value = False
    describe = "no value"

    def problem(self, value: str) -> str | None:
        return "takes no value"


_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


@dataclass(frozen=True)
class Number(ValueForm):
    """A whole number from `low` to `high`; with `units` (e.g. "kmg"), a size such as 64k or 1M
    (binary multiples, either case, as the tools read them)."""

    low: int
    high: int
    units: str = ""
    power_of_two: bool = False

    @property
    def describe(self) -> str:  # type: ignore[override]
        what = "a power of two" if self.power_of_two else "a whole number"
        suffix = f" (a number of bytes, or with a unit: {', '.join(self.units)})" if self.units else ""
        return f"{what} from {self.low} to {self.high}{suffix}"

    def problem(self, value: str) -> str | None:
        units = self.units + self.units.upper()
        match = re.fullmatch(rf"(\d{{1,20}})([{units}]?)" if units else r"(\d{1,20})()", value)
        number = int(match.group(1)) * _UNITS[match.group(2).lower()] if match else None
        if number is None or not self.low <= number <= self.high or (self.power_of_two and number & (number - 1)):
            return f"is not {self.describe}"
        return None


def Integer(low: int, high: int) -> Number:  # noqa: N802  (reads as a form, like the classes)
    return Number(low, high)


def Size(low: int, high: int, units: str = "kmg", power_of_two: bool = True) -> Number:  # noqa: N802
    return Number(low, high, units, power_of_two)


@dataclass(frozen=True)
class OneOf(ValueForm):
    """One of a few words; `refused` names values that are harmful, with why."""

    values: tuple[str, ...]
    refused: Mapping[str, str] = field(default_factory=dict)

    @property
    def describe(self) -> str:  # type: ignore[override]
        return "one of " + ", ".join(self.values)

    def problem(self, value: str) -> str | None:
        if value in self.refused:
            return f"is refused: {self.refused[value]}"
        return None if value in self.values else f"is not {self.describe}"


ON_OFF = OneOf(("on", "off"))
ZERO_ONE = OneOf(("0", "1"))


@dataclass(frozen=True)
class Matches(ValueForm):
    """A word of a given shape (a cipher name, a compression level), described for the user."""

    pattern: str
    describe: str

    def problem(self, value: str) -> str | None:
        return None if re.fullmatch(self.pattern, value) else f"is not {self.describe}"


@dataclass(frozen=True)
class Maybe(ValueForm):
    """A key that may stand alone (`lazy_itable_init`) or carry a value (`lazy_itable_init=0`)."""

    form: ValueForm

    @property
    def describe(self) -> str:  # type: ignore[override]
        return f"nothing or {self.form.describe}"

    def problem(self, value: str) -> str | None:
        return self.form.problem(value)


@dataclass(frozen=True)
class Suboptions(ValueForm):
    """A `key,key=value,…` list (mkfs.ext4 -E, mkfs.xfs -d, a mount-option string) whose keys
    are allow-listed with their own forms; `refused` names harmful keys with why; `negatable`
    lets a flag be turned off with a leading ^ (feature lists: -O ^has_journal)."""

    keys: Mapping[str, ValueForm]
    refused: Mapping[str, str] = field(default_factory=dict)
    negatable: bool = False
    describe = "a comma-separated list"

    def problems(self, value: str, label: str, noun: str | None = None) -> list[str]:
        """Why each item of the list is refused; `label` ("mkfs.xfs -l", "xfs mount option")
        begins every message, `noun` names an unknown key ("mkfs.xfs -l suboption")."""
        if CONTROL.search(value):
            return [f"{label} {shown(value)} holds a control character (a newline?)"]
        return [p for p in (self.item_problem(*_split_item(item), label, noun) for item in value.split(",")) if p]

    def problem(self, value: str) -> str | None:
        return "; ".join(self.problems(value, "suboption")) or None

    def item_problem(self, key: str, value: str | None, label: str, noun: str | None = None) -> str | None:
        """Why one `key` or `key=value` of the list is refused, or None when it is accepted."""
        item = shown(key if value is None else f"{key}={value}")
        name = key[1:] if self.negatable and key.startswith("^") else key
        form = self.keys.get(name)
        if not name:
            return f"{label} list has an empty item (a stray comma?)"
        if name in self.refused:
            return f"{label} {item} is refused: {self.refused[name]}"
        if form is None:
            return unknown(noun or label, shown(key), self.keys)
        if name != key and not isinstance(form, Flag):
            return f"{label} {item}: only a feature can be turned off with ^"
        if value is None:
            return None if isinstance(form, (Flag, Maybe)) else f"{label} {item} needs a value: {form.describe}"
        reason = form.problem(value) if isinstance(form, Flag) else plain_value_problem(value) or form.problem(value)
        return f"{label} {item} {reason}" if reason else None


def accepted_values(options: Mapping[str, ValueForm], *, negatable: bool = False) -> dict[str, str]:
    """Every option an allow-list accepts → the form the guard checks its value against, as
    `fslab list` shows them: a list of suboptions (mkfs.ext4 -E) key by key ("-E stride")."""
    accepted: dict[str, str] = {}
    for name, form in options.items():
        if isinstance(form, Suboptions):
            accepted |= {
                f"{name} {key}": said for key, said in accepted_values(form.keys, negatable=form.negatable).items()
            }
        elif negatable and isinstance(form, Flag):
            accepted[name] = f"no value (^{name} turns it off)"
        else:
            accepted[name] = form.describe
    return accepted


def _split_item(item: str) -> tuple[str, str | None]:
    key, equals, value = item.partition("=")
    return key, (value if equals else None)


@dataclass(frozen=True)
class ToolOptions:
    """The options a study may give one tool: flag (e.g. "-b", "--chunk") → form of its value;
    `refused` names options met in the wild that are harmful or fslab's own, with why."""

    tool: str
    options: Mapping[str, ValueForm]
    refused: Mapping[str, str] = field(default_factory=dict)


def split_arguments(text: str) -> list[str]:
    """An option string split as a shell would (no shell runs); an unclosed quote is refused."""
    try:
        return shlex.split(text)
    except ValueError as exc:  # shlex says "No closing quotation" or "No escaped character"
        raise OptionRefused(
            f"{shown(text)} cannot be split into arguments: {str(exc).lower()} (an unclosed quote?)"
        ) from None


def check_arguments(allowed: ToolOptions, arguments: str | Sequence[str]) -> list[str]:
    """The argument list (a string is split first), when every argument is on the tool's
    allow-list with a fitting value; else OptionRefused naming every one that is not, and why."""
    args = split_arguments(arguments) if isinstance(arguments, str) else list(arguments)
    problems, i = [], 0
    while i < len(args):
        found, used = _argument_problems(allowed, args, i)
        problems += found
        i += used
    if problems:
        raise OptionRefused("; ".join(problems))
    return args


def _argument_problems(allowed: ToolOptions, args: list[str], i: int) -> tuple[list[str], int]:
    """Why the option at args[i] is refused (nothing when it is not), and how many arguments it used."""
    arg = args[i]
    if not arg.startswith("-") or arg in ("-", "--"):
        return [
            f"{shown(arg)} is refused: a positional argument names a device or a file, and those are fslab's to give"
        ], 1
    name, equals, attached = arg.partition("=") if arg.startswith("--") else (arg, "", "")
    following = args[i + 1] if i + 1 < len(args) and not equals else None
    used = 2 if following is not None and not following.startswith("-") else 1  # if it has a value
    if name in allowed.refused:
        return [f"{shown(arg if used == 1 else f'{arg} {following}')} is refused: {allowed.refused[name]}"], used
    form = allowed.options.get(name)
    if form is None:
        return [unknown(f"{allowed.tool} option", shown(name), allowed.options)], used
    if not form.takes_value:
        return ([f"{name} takes no value"] if equals else []), 1
    value = attached if equals else following
    if value is None:
        return [f"{name} needs a value: {form.describe}"], 1
    used = 1 if equals else 2
    if isinstance(form, Suboptions):
        return form.problems(value, f"{allowed.tool} {name}", f"{allowed.tool} {name} suboption"), used
    reason = plain_value_problem(value) or form.problem(value)
    return ([f"{name} {shown(value)} {reason}"] if reason else []), used


def option_value(arguments: Sequence[str], *names: str) -> str | None:
    """The value the last of `names` (e.g. "-d", "--data") is given in a checked argument list."""
    found = None
    for i, arg in enumerate(arguments):
        name, equals, attached = arg.partition("=")
        if name in names:
            found = attached if equals else (arguments[i + 1] if i + 1 < len(arguments) else None)
    return found


# Generic mount options the VFS (or mount(8)) understands for every filesystem.
VFS_MOUNT_OPTIONS: dict[str, ValueForm] = {
    name: Flag()
    for name in (
        "defaults",
        "rw",
        "atime",
        "noatime",
        "relatime",
        "norelatime",
        "strictatime",
        "nostrictatime",
        "diratime",
        "nodiratime",
        "lazytime",
        "nolazytime",
        "sync",
        "async",
        "dirsync",
        "dev",
        "nodev",
        "suid",
        "nosuid",
        "exec",
        "noexec",
    )
}
VFS_REFUSED_MOUNT_OPTIONS = {
    "ro": "a read-only mount fails every write workload, and fio lays out "
    "its files before it reads them; measure reads on a rw mount",
    "remount": "fslab mounts a fresh filesystem for each run",
    "bind": "it mounts another directory",
    "rbind": "it mounts another directory",
    "move": "it moves another mount",
    "loop": "it attaches a file of its own; fslab gives the device",
    "offset": "it goes with loop, which attaches a file of its own",
    "sizelimit": "it goes with loop, which attaches a file of its own",
}


def mount_options(keys: Mapping[str, ValueForm], refused: Mapping[str, str]) -> Suboptions:
    """A filesystem's mount options: its own and the generic ones, each with its value check."""
    return Suboptions({**VFS_MOUNT_OPTIONS, **keys}, {**VFS_REFUSED_MOUNT_OPTIONS, **refused})


def check_mount_options(allowed: Suboptions, kind: str, text: str) -> str:
    """The mount-option string, when every option is on the filesystem's list with a fitting
    value ("" is mount's defaults); else OptionRefused naming every option that is not."""
    problems = allowed.problems(text, f"{kind} mount option") if text else []
    if problems:
        raise OptionRefused("; ".join(problems))
    return text


def check_properties(
    allowed: Suboptions, label: str, properties: Mapping[str, str], noun: str | None = None
) -> dict[str, str]:
    """name → value (as the tool is given them: `zfs create -o name=value`, dd's `bs=1M`), when
    each is on the list with a fitting value; else OptionRefused naming every one that is not.
    `label` is e.g. "zfs property"; `noun` names an unknown one ("dd option"; else `label`)."""
    problems = [p for p in (allowed.item_problem(name, value, label, noun) for name, value in properties.items()) if p]
    if problems:
        raise OptionRefused("; ".join(problems))
    return dict(properties)
