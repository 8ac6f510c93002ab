"""Storage layers between fslab's loop devices and a filesystem: md RAID1, LUKS, LVM.

A target's `layers` are built bottom first on its loop devices at the start of every run
(with mdadm, cryptsetup and LVM, as a user would) and taken down after it, each journalled
so that a killed run is undone like a mount is. A layer whose kernel feature or tool is
missing (`missing`) is refused before anything is formatted.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.devices.loop import LoopDevice, assert_ours
from fslab.journal import Journal, releaser
from fslab.system import kernel_has_module, run, tool_version
from fslab.guard.names import kernel_name

if TYPE_CHECKING:
    from fslab.study import Target


@dataclass(frozen=True)
class Layer:
    kernel_feature: str  # what the kernel needs, as its configuration names it
    modules: tuple[str, ...]  # loaded before building, when not built in
    tool: tuple[str, ...]  # prints the tool's version
    package: str


LAYERS = {
    "md-raid1": Layer("md RAID1 (CONFIG_BLK_DEV_MD, CONFIG_MD_RAID1)", ("md_mod", "raid1"), ("mdadm", "--version"), "mdadm"),
    "luks": Layer("dm-crypt (CONFIG_BLK_DEV_DM, CONFIG_DM_CRYPT)", ("dm_mod", "dm_crypt"), ("cryptsetup", "--version"), "cryptsetup"),
    "lvm": Layer("device-mapper (CONFIG_BLK_DEV_DM)", ("dm_mod",), ("lvm", "version"), "lvm2"),
}

# LVM looks at fslab's own device only, and makes its device nodes itself where no udev runs.
_LVM_CONFIG = 'devices {{ filter = [ "a|^{device}$|", "r|.*|" ] }} activation {{ udev_sync = 0 udev_rules = 0 }}'


def missing(layer: str) -> str | None:
    """What this machine lacks to build the layer, or None when it has everything."""
    spec = LAYERS[layer]
    if not all(kernel_has_module(module) for module in spec.modules):
        return f"this kernel has no {spec.kernel_feature}"
    if tool_version(spec.tool) is None:
        return f"{spec.tool[0]} is not installed (apt-get install {spec.package})"
    return None


@dataclass
class Stack:
    """The block devices a filesystem is made on, and how they were made from fslab's loop devices."""

    loops: list[LoopDevice]
    devices: list[str]  # the top of the stack: what mkfs or zpool is given
    commands: list[list[str]] = field(default_factory=list)  # how the layers were built
    details: str = ""  # what the layers' tools report of them

    def assert_ours(self) -> None:
        """Refuse unless every device rests on fslab's own loop images only."""
        images = [loop.image for loop in self.loops]
        for device in self.devices:
            assert_ours(device, images)


@contextmanager
def built(journal: Journal, loops: list[LoopDevice], target: Target) -> Iterator[Stack]:
    """The target's layers built on its loop devices, bottom first, and taken down after."""
    stack = Stack(loops=loops, devices=[loop.device for loop in loops])
    name = kernel_name(journal.workdir, target.name)
    with ExitStack() as layers:
        for layer in target.layers:
            stack.assert_ours()
            for module in LAYERS[layer].modules:
                run(["modprobe", module])  # nothing to do where it is loaded or built in
            extra = target.layer_options.get(layer, ())
            build = {"md-raid1": _md_raid1, "luks": _luks, "lvm": _lvm}[layer]
            device, commands, details = layers.enter_context(build(journal, stack.devices, name, list(extra)))
            stack.devices = [device]
            stack.commands += commands
            stack.details += details
        yield stack


@releaser("md")
def stop_array(name: str) -> None:
    """Stop fslab's array and wipe its members' superblocks, so that nothing reassembles it."""
    link = Path("/dev/md") / name
    members = Path("/sys/block") / Path(os.path.realpath(link)).name / "slaves"
    if members.is_dir():  # the array still runs
        devices = [f"/dev/{member.name}" for member in members.iterdir()]
        run(["mdadm", "--stop", str(link)])
        run(["mdadm", "--zero-superblock", *devices], check=False)
    link.unlink(missing_ok=True)  # where no udev runs, mdadm made the link and leaves it


@contextmanager
def _md_raid1(journal: Journal, devices: list[str], name: str, extra: list[str]) -> Iterator[tuple[str, list[list[str]], str]]:
    # --assume-clean: no initial resync competing with the workload; the halves differ only
    # where nothing was ever written, which no benchmark reads back.
    command = ["mdadm", "--create", f"/dev/md/{name}", "--run", "--level=1", f"--raid-devices={len(devices)}", "--metadata=1.2", "--assume-clean", *extra, *devices]
    with journal.holding("md", name):
        run(command)
        device = os.path.realpath(f"/dev/md/{name}")
        yield device, [command], f"mdadm --detail {device}:\n{run(['mdadm', '--detail', device], check=False).stdout}\n"


@releaser("luks")
def close_luks(name: str) -> None:
    if Path(f"/dev/mapper/{name}").exists():
        run(["cryptsetup", "close", name])


@contextmanager
def _luks(journal: Journal, devices: list[str], name: str, extra: list[str]) -> Iterator[tuple[str, list[list[str]], str]]:
    # A random key used once; a fast key derivation, since the key protects nothing here.
    mapped = f"{name}_crypt"
    with tempfile.NamedTemporaryFile(prefix="fslab-key-") as key:
        key.write(secrets.token_bytes(64))
        key.flush()
        format_command = ["cryptsetup", "luksFormat", "--type", "luks2", "--batch-mode", "--key-file", key.name, "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", *extra, devices[0]]
        open_command = ["cryptsetup", "open", "--key-file", key.name, devices[0], mapped]
        run(format_command)
        with journal.holding("luks", mapped):
            run(open_command)
            key.close()  # deleted: nothing outlives the run that could open the device again
            status = run(["cryptsetup", "status", mapped], check=False).stdout
            yield f"/dev/mapper/{mapped}", [format_command, open_command], f"cryptsetup status {mapped}:\n{status}\n"


def _lvm_command(action: str, device: str, *args: str) -> list[str]:
    return ["lvm", action, "--config", _LVM_CONFIG.format(device=device), *args]


@releaser("lvm")
def remove_volume_group(ident: str) -> None:
    """Remove fslab's volume group (ident "group on device") if its volume is still active."""
    group, _, device = ident.partition(" on ")
    if Path(f"/dev/mapper/{group}-data").exists():
        run(_lvm_command("vgremove", device, "--force", group))


@contextmanager
def _lvm(journal: Journal, devices: list[str], name: str, extra: list[str]) -> Iterator[tuple[str, list[list[str]], str]]:
    device, group = devices[0], f"{name}_vg"
    commands = [
        _lvm_command("pvcreate", device, "--force", "--yes", device),
        _lvm_command("vgcreate", device, group, device),
        _lvm_command("lvcreate", device, "--yes", "--extents", "100%FREE", "--name", "data", *extra, group),
    ]
    with journal.holding("lvm", f"{group} on {device}"):
        for command in commands:
            run(command)
        volumes = run(_lvm_command("lvs", device, "-o", "lv_name,vg_name,lv_size,seg_type,stripes,devices"), check=False).stdout
        yield f"/dev/mapper/{group}-data", commands, f"lvs:\n{volumes}\n"
