"""Where a target's block devices come from, behind one small protocol: loop images in fslab's
work directory (loop.py), a user's own devices confirmed on the command line (named.py), zram
devices fslab makes (zram.py). For each run the runner asks the target's source for its devices
and for what fslab owns among them (`Owned`), which is all the guard lets it format.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from fslab.core.identity import Owned, assert_ours
from fslab.core.journal import Journal
from fslab.core.registry import Registry
from fslab.core.system import run

Notice = Callable[[str], None]  # tells the user something before it happens


@dataclass
class Attached:
    """A run's block devices, bottom of the stack, and what proves them fslab's."""

    devices: list[str]
    owned: Owned
    direct_io: bool | None = None  # loop images: whether the host's page cache is bypassed
    commands: list[list[str]] = field(default_factory=list)  # what was done to them (wipefs, blkdiscard)
    details: str = ""  # what was on them before


class DeviceSource(Protocol):
    # Whether a whole-device discard before each run is the default (an image would lose its fill).
    discards_by_default: bool
    chosen_by: str  # what in a target's table makes it the target's source (`fslab list sources`)

    def attach(self, journal: Journal) -> AbstractContextManager[Attached]:
        """The devices for one run, held until the block ends."""
        ...


def discard(attached: Attached) -> None:
    """Discard every device whole (blkdiscard), so a run starts on an SSD's fresh mapping."""
    for device in attached.devices:
        assert_ours(device, attached.owned, action="discard")
        command = ["blkdiscard", device]
        run(command)
        attached.commands.append(command)


@dataclass(frozen=True)
class SourceKind:
    """A device source as the registry holds it: its name (`fslab list sources`) and its class,
    of which the runner makes one for each target (runner.Sources)."""

    name: str
    source: type[DeviceSource]


# Every source, each joining from its own module; read by `fslab list sources`.
SOURCES: Registry[SourceKind] = Registry(
    "device source", {"loop": "fslab.devices.loop", "named": "fslab.devices.named", "zram": "fslab.devices.zram"}
)
