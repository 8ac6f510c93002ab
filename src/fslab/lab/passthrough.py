"""A user's own block devices in a lab VM: `fslab run STUDY --kernel K --destroy-data DEVICE`.

On the host a study's devices are confirmed and checked as a run here checks them
(devices/named.py's `confirmed_devices`: core/block_devices.py's confirmation by device number,
its refusals of a device in use, the workloads' room). Each device gets a serial fslab chooses
(fslab-1, fslab-2, … in the study's order) and reaches the guest as a virtio-blk disk with that
serial, which the guest names /dev/disk/by-id/virtio-fslab-N (vm.py's init makes the links udev
would). The guest's study file is the study with each device's path replaced by that name, and
the guest's fslab is given `--destroy-data` for each: its own guard confirms and checks them again.

Right before each boot the host proves each device again on the very descriptors QEMU gets, which
opens nothing by name (block_devices.opened_for_guest: still the confirmed device — number,
diskseq, a loop device's backing file — and unused), and says what it is about to destroy there,
unless it is what the boot before left. A device that fails is refused, and the study run stops.
After each boot, before those descriptors close, the host zeroes each device's first and last
16 MiB through them (block_devices.wipe_guest_layers): no md, LVM, LUKS or ZFS the guest built
there is assembled by this host's udev once the device is free.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fslab.core import DESTROY_FLAG
from fslab.core.block_devices import (
    GUEST_LAYERS,
    BlockDevice,
    Signature,
    describe,
    opened_for_guest,
    signatures,
    wipe_guest_layers,
)
from fslab.core.errors import FslabError
from fslab.devices.named import confirmed_devices
from fslab.lab import vm
from fslab.model import Study
from fslab.study import space_problem

BY_ID = "/dev/disk/by-id/virtio-"  # as udev names a virtio disk by its serial
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")  # a TOML key written as it is (others quoted)


@dataclass(frozen=True)
class Passed:
    """One of the user's devices as a lab VM gets it."""

    device: BlockDevice  # confirmed on the host: its proof
    serial: str

    @property
    def guest_path(self) -> str:
        return BY_ID + self.serial


@dataclass
class Passthrough:
    """The study's devices, by the path the study names each by; what the boots left on them."""

    by_path: dict[str, Passed] = field(default_factory=dict)
    left: dict[int, set[tuple[str, ...]]] = field(default_factory=dict)  # device number → signatures after a boot

    @property
    def devices(self) -> list[Passed]:
        return list({p.device.number: p for p in self.by_path.values()}.values())

    def guest_source(self, study: Study) -> str:
        """The study file the guest runs: the study's text, or, where it names devices, the same
        study with each path the guest's name of that device."""
        if not self.by_path:
            return study.source
        document = tomllib.loads(study.source)
        for table in document.get("target", []):
            if isinstance(table, dict) and isinstance(table.get("device"), str):
                table["device"] = self.by_path[table["device"]].guest_path
            if isinstance(table, dict) and isinstance(table.get("devices"), list):
                table["devices"] = [self.by_path[path].guest_path for path in table["devices"]]
        return toml_text(document)

    def guest_flags(self) -> list[str]:
        return [word for p in self.devices for word in (DESTROY_FLAG, p.guest_path)]

    def host_names(self) -> dict[str, str]:
        """The guest's name of each target that names a device (the ceiling's, model/ceiling.py)
        → the host's: the guest's runs are stored under the study's own names."""
        return {f"(ceiling: {p.guest_path})": f"(ceiling: {path})" for path, p in self.by_path.items()}

    @contextmanager
    def opened(self, say: Callable[[str], None]) -> Iterator[tuple[vm.Disk, ...]]:
        """The devices as the VM's disks, each proven again on the descriptors QEMU gets (Refused
        otherwise); what is on each said first, unless it is what the boot before left."""
        with ExitStack() as stack:
            disks = []
            for passed in self.devices:
                read_write, read_only = stack.enter_context(opened_for_guest(passed.device))
                found = signatures(passed.device)
                if {_key(s) for s in found} - self.left.get(passed.device.number, set()):
                    say(f"about to destroy on {passed.device.node} (the VM's {passed.guest_path}): {describe(found)}")
                disks.append(vm.Disk(Path(passed.device.node), serial=passed.serial, fds=(read_write, read_only)))
            try:
                yield tuple(disks)
            finally:  # a guest that crashed skipped its teardown: what it built goes, before the host can read it
                for passed, disk in zip(self.devices, disks, strict=True):
                    wipe_guest_layers(passed.device, disk.fds[0])
                    if passed.device.number not in self.left:
                        say(
                            f"wiped {passed.device.node}'s first and last {GUEST_LAYERS // 2**20} MiB after the VM, "
                            "so that this host assembles no md, LVM, LUKS, bcache or ZFS the guest left there"
                        )
            for passed in self.devices:  # what is left after the guest's fslab and the wipe
                self.left[passed.device.number] = {_key(s) for s in signatures(passed.device)}


def _key(signature: Signature) -> tuple[str, ...]:
    return (signature.type, signature.uuid)


def plan(study: Study, destroy_flags: Sequence[str]) -> tuple[Passthrough, list[str]]:
    """The devices the study names, each confirmed by a flag and unused (as a run here would
    have them), a serial each; and every problem found, all at once."""
    if not any(t.named for t in study.targets):
        return Passthrough(), []
    devices, problems = confirmed_devices(study, tuple(destroy_flags), space_problem)
    paths: dict[int, list[str]] = {}
    for path, device in devices.items():
        paths.setdefault(device.number, []).append(path)
    problems += [
        f"{', '.join(named)} name one device: in a study run over kernels name each device by one path"
        for named in paths.values()
        if len(named) > 1
    ]
    try:  # the guest's study file is written at each boot: a value it cannot write refused now, not then
        toml_text(tomllib.loads(study.source))
    except FslabError as exc:
        problems.append(f"{study.path}: {exc}: a lab VM reads the study as fslab writes it again: give it as a string")
    serials = {number: f"fslab-{n}" for n, number in enumerate(paths, start=1)}
    passthrough = Passthrough({path: Passed(d, serials[d.number]) for path, d in devices.items()})
    return passthrough, list(dict.fromkeys(problems))  # the study's ceiling names its device again


# ---- the study file as the guest reads it ----------------------------------------------------------


def toml_text(document: dict) -> str:
    """A TOML document of a parsed study file (tomllib's: tables, arrays of tables, strings,
    numbers, booleans, arrays; nested tables inline): what tomllib reads back as `document`."""
    lines = [f"{_key_text(k)} = {_value(v)}" for k, v in document.items() if not _is_table(v) and not _is_tables(v)]
    for name, value in document.items():
        if _is_table(value):
            lines += ["", f"[{_key_text(name)}]", *(f"{_key_text(k)} = {_value(v)}" for k, v in value.items())]
        elif _is_tables(value):
            for table in value:
                lines += ["", f"[[{_key_text(name)}]]", *(f"{_key_text(k)} = {_value(v)}" for k, v in table.items())]
    return "\n".join(lines).lstrip("\n") + "\n"


def _is_table(value: object) -> bool:
    return isinstance(value, dict)


def _is_tables(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _key_text(key: str) -> str:
    return key if BARE_KEY.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    escaped = "".join(
        "\\" + c if c in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text
    )
    return f'"{escaped}"'


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key_text(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise FslabError(f"a study file's value {value!r} ({type(value).__name__}) cannot be written for the guest")
