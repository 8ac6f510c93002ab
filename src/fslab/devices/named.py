"""A user's own block devices as a target's devices: named in the study, confirmed with
--destroy-data on the command line (core/block_devices.py), checked again before every run.

Before each run fslab checks that nothing uses the devices (the state may have changed since the
study began), shows the user the signatures it is about to destroy — unless they are exactly
what fslab itself left there in its last run — wipes them (`wipefs -a`) and journals the device
with its proof (device number, diskseq) while the run holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from fslab.core import DESTROY_FLAG
from fslab.core.block_devices import BlockDevice, confirm, describe, facts, partition_nodes, refusals, signatures
from fslab.core.errors import Refused
from fslab.core.identity import Owned, disk_proof
from fslab.core.journal import Entry, Journal, releaser
from fslab.core.system import run
from fslab.devices.source import SOURCES, Attached, Notice, SourceKind
from fslab.model import Study, Target, Workload

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir


def confirmed(paths: Sequence[str], destroy_flags: Sequence[str]) -> tuple[dict[str, BlockDevice], list[str]]:
    """The devices a target names (by the path it names them by), each confirmed by a flag and
    unused; and every problem found, so the user reads them all before anything is touched."""
    devices, problems = {}, []
    for path in paths:
        try:
            device = confirm(path, destroy_flags)
        except Refused as exc:
            problems.append(str(exc))
            continue
        devices[path] = device
        problems += refusals(device)
    return devices, problems


def confirmed_devices(
    study: Study, destroy_flags: tuple[str, ...], space_problem: Callable[[Target, Workload], str | None]
) -> tuple[dict[str, BlockDevice], list[str]]:
    """The user's devices the study names, each confirmed on the command line and unused, by the
    path the study names it by; and every problem found with them. `space_problem`: why a workload
    does not fit a target (study.space_problem: it asks the target's filesystem, a floor above)."""
    found: dict[str, BlockDevice] = {}
    problems: list[str] = []
    for target in study.targets:
        devices, refused = confirmed(target.named, destroy_flags)
        found |= devices
        problems += refused
        if len({d.number for d in devices.values()}) < len(devices):
            problems.append(f"target '{target.name}' names one device twice: {', '.join(target.named)}")
        if devices and not refused:  # now its size is known: do the workloads fit?
            smallest = min(facts(device).size for device in devices.values())  # a user's device: known only now
            problems += [p for w in study.workloads if (p := space_problem(replace(target, image_size=smallest), w))]
    return found, problems


@releaser("device")
def let_go(entry: Entry, workdir: Workdir) -> None:
    """Nothing to undo: a user's device stays as the run left it (what was on it is gone)."""


class NamedSource:
    """A target on the user's own devices, confirmed before the study began."""

    discards_by_default = True  # where the device accepts discards and does not spin
    chosen_by = 'device = "/dev/…" or devices = ["/dev/…", …]: your own, each confirmed with --destroy-data DEVICE'

    def __init__(self, devices: list[BlockDevice], notice: Notice):
        self.devices, self.notice = devices, notice

    @contextmanager
    def attach(self, journal: Journal) -> Iterator[Attached]:
        for device in self.devices:  # its number alone proves nothing: another disk may have it now
            if not device.still_confirmed():
                raise Refused(
                    f"the device at {device.node} is no longer the disk you confirmed with "
                    f"{DESTROY_FLAG} (it was detached or replaced since); nothing was wiped: run again"
                )
        problems = [problem for device in self.devices for problem in refusals(device)]
        if problems:
            raise Refused("refusing the target's devices:\n  " + "\n  ".join(problems))
        attached = Attached(
            devices=[d.node for d in self.devices], owned=Owned(devices=frozenset(d.number for d in self.devices))
        )
        with ExitStack() as stack:
            for device in self.devices:
                stack.enter_context(self._wiped(journal, device, attached))
            yield attached

    @contextmanager
    def _wiped(self, journal: Journal, device: BlockDevice, attached: Attached) -> Iterator[None]:
        """The device wiped of its signatures, held in the journal; what fslab leaves on it at
        the end of the run is remembered, so the next run does not call it foreign."""
        identity = facts(device).identity()
        found = signatures(device)
        ours = {tuple(key) for key in journal.workdir.written().get(identity or "", [])}
        if any(tuple(s.key()) not in ours for s in found):  # anything not fslab's: show the user all of it
            self.notice(f"about to destroy on {device.node}: {describe(found)}")
        with journal.holding("device", device.node, **disk_proof(device.number)):
            for node in [*partition_nodes(device), device.node]:  # partitions' own first, then the table
                command = ["wipefs", "--all", node]
                run(command)
                attached.commands.append(command)
            attached.details += f"wiped from {device.node}: {describe(found) or 'nothing'}\n"
            try:
                yield
            finally:
                if identity:  # all of it: whatever is on the device after wipefs, fslab put there
                    journal.workdir.record_written(identity, [s.key() for s in signatures(device)])


SOURCES.add(SourceKind("named", NamedSource), own=True)
