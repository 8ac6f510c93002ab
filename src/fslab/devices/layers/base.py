"""Storage layers between a target's devices (fslab's loop images, zram devices, or the user's
confirmed devices) and a filesystem: md RAID1, LUKS, LVM.

A target's `layers` are built bottom first on its devices at the start of every run
(with mdadm, cryptsetup and LVM, as a user would) and taken down after it, each journalled
so that a killed run is undone like a mount is. A layer whose kernel feature or tool is
missing (`missing`) is refused before anything is formatted.

This module is what every layer shares (the registry's `Layer`, `Stack`, `built`); each layer is a
module of its own beside it (md.py, luks.py, lvm.py) that defines its options, its build and the
journal's releaser of what it makes, and joins LAYERS itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fslab.core.errors import Refused
from fslab.core.identity import Owned, assert_ours, device_number, rests_on
from fslab.core.journal import Entry, Journal
from fslab.core.names import kernel_name, workdir_tag
from fslab.core.registry import Registry
from fslab.core.system import kernel_has_module, run, tool_version
from fslab.devices.source import Attached
from fslab.model import Target
from fslab.model.options import ToolOptions, check_arguments

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir

# The names kernel_name gives, with the suffixes the layers add.
_KERNEL_NAME = re.compile(r"fslab_[0-9a-f]{5}_[0-9a-f]{8}(_crypt|_vg)?")


@dataclass(frozen=True)
class Layer:
    """A layer as the registry holds it (LAYERS): what it needs, what a study may add to the
    command that creates it, and how it is built on the devices below it."""

    name: str  # as a target's `layers` names it
    kernel_feature: str  # what the kernel needs, as its configuration names it
    modules: tuple[str, ...]  # loaded before building, when not built in
    tool: tuple[str, ...]  # prints the tool's version
    package: str
    options: ToolOptions  # what a study's layer_options may add to the command that creates it
    # (journal, the devices below, the kernel name to give, the study's extra arguments) →
    # a block yielding (its device, the commands that built it, what its tool reports of it)
    build: Callable[[Journal, list[str], str, list[str]], AbstractContextManager[tuple[str, list[list[str]], str]]]


BY_FSLAB = "fslab passes it itself"
NAMES_A_FILE = "it names a file"

# Every layer, each joining from its own module (md.py: md RAID1, luks.py: LUKS, lvm.py: LVM), in this order,
# or from a plugin.
LAYERS: Registry[Layer] = Registry(
    "layer",
    {"md-raid1": "fslab.devices.layers.md", "luks": "fslab.devices.layers.luks", "lvm": "fslab.devices.layers.lvm"},
)


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
    """The block devices a filesystem is made on, and how they were made from the target's own
    devices (fslab's loop images, zram devices, or the user's confirmed devices)."""

    devices: list[str]  # the top of the stack: what mkfs or zpool is given
    owned: Owned  # what the stack may rest on
    commands: list[list[str]] = field(default_factory=list)  # how the layers were built
    details: str = ""  # what the layers' tools report of them
    bottom: list[str] = field(default_factory=list)  # the target's own devices (default: `devices`, no layer yet)
    between: list[str] = field(default_factory=list)  # each layer's device, bottom first (the last is the top)

    def __post_init__(self) -> None:
        self.bottom = self.bottom or list(self.devices)

    @classmethod
    def on(cls, attached: Attached) -> Stack:
        """The bare devices, before any layer."""
        return cls(
            devices=list(attached.devices),
            owned=attached.owned,
            commands=list(attached.commands),
            details=attached.details,
        )

    def assert_ours(self) -> None:
        """Refuse unless every device rests on the target's own devices only."""
        for device in self.devices:
            assert_ours(device, self.owned)


@contextmanager
def built(journal: Journal, attached: Attached, target: Target) -> Iterator[Stack]:
    """The target's layers built on its devices, bottom first, and taken down after."""
    stack = Stack.on(attached)
    name = kernel_name(journal.workdir.root, target.name)
    with ExitStack() as layers:
        for layer in target.layers:
            stack.assert_ours()
            for module in LAYERS[layer].modules:
                run(["modprobe", module])  # nothing to do where it is loaded or built in
            extra = check_arguments(LAYERS[layer].options, target.layer_options.get(layer, ()))
            device, commands, details = layers.enter_context(LAYERS[layer].build(journal, stack.devices, name, extra))
            stack.devices = [device]
            stack.between.append(device)
            stack.commands += commands
            stack.details += details
        yield stack


def running_ours(entry: Entry, workdir: Workdir, node: str) -> bool:
    """Whether the layer's device node exists; Refused unless its name is one fslab makes in this
    work directory and the kernel shows it resting on this work directory's images only."""
    if not _KERNEL_NAME.fullmatch(entry.ident.split(" ")[0]) or not entry.ident.startswith(workdir_tag(workdir.root)):
        raise Refused(f"{entry.ident} is not a name fslab gives in {workdir.root}")
    number = device_number(node)
    if number is None:
        return False
    if not rests_on(number, workdir.owned()):
        raise Refused(
            f"{node} does not rest on fslab's images or the devices it holds in {workdir.root} only; left as it is"
        )
    return True
