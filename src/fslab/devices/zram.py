"""zram devices fslab makes: block devices in compressed RAM, a ceiling no disk reaches.

A fresh device for every run (hot_add, then disksize), journalled before it is made and proven
by its device number, disksize and diskseq (the kernel's sequence number of the disk, never
given twice while it runs); removed after (hot_remove) only when that proof still matches and
nothing mounts or holds it. zram devices fslab did not make are never touched.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.block_devices import refusals, resolve
from fslab.core.errors import FslabError, Refused
from fslab.core.identity import Owned, disk_proof, same_disk
from fslab.core.journal import Entry, Journal, releaser
from fslab.core.system import kernel_has_module, run
from fslab.devices.source import SOURCES, Attached, SourceKind

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir

CONTROL = Path("/sys/class/zram-control")
NO_ZRAM = "this kernel has no zram (CONFIG_ZRAM with /sys/class/zram-control)"


class NoZram(FslabError):
    pass


def missing() -> str | None:
    """Why this machine cannot make zram devices, or None when it can: the module loaded, or there
    to load (a check, as doctor and run --plan make it, loads nothing: _loaded does, for a device)."""
    if CONTROL.is_dir() or kernel_has_module("zram"):
        return None
    return NO_ZRAM


def _loaded() -> str | None:
    """zram's module loaded where it is not yet (without a device of its own); why not, or None."""
    if not CONTROL.is_dir() and kernel_has_module("zram"):
        run(["modprobe", "zram", "num_devices=0"], check=False)
    return None if CONTROL.is_dir() else NO_ZRAM


@contextmanager
def zram_device(journal: Journal, ident: str, size: int) -> Iterator[tuple[str, int]]:
    """A new zram device of `size` bytes (its node and device number), removed afterwards."""
    why = _loaded()
    if why:
        raise NoZram(why)
    with journal.holding("zram", ident) as held:
        index = int((CONTROL / "hot_add").read_text())
        device = f"/dev/zram{index}"
        number = os.stat(device).st_rdev
        held.prove(device=device, **disk_proof(number))
        Path(f"/sys/block/zram{index}/disksize").write_text(f"{size}\n")
        held.prove(disksize=size)
        yield device, number


@releaser("zram")
def remove_zram(entry: Entry, workdir: Workdir) -> None:
    """Remove the zram device fslab made, if the kernel still shows that very device, unused."""
    device = str(entry.proof.get("device", ""))
    sysfs = Path("/sys/block") / Path(device).name
    if not device.startswith("/dev/zram") or not sysfs.exists():
        return  # gone
    if same_disk(entry.proof) is None or (sysfs / "disksize").read_text().strip() != str(
        entry.proof.get("disksize", 0)
    ):
        raise Refused(
            f"{device} is not the zram device fslab made (its device number, diskseq or size differ); left as it is"
        )
    in_use = refusals(resolve(device))
    if in_use:
        raise Refused(f"{device} is in use ({'; '.join(in_use)}); left as it is")
    deadline = time.monotonic() + REMOVE_SECONDS
    while True:
        try:
            (CONTROL / "hot_remove").write_text(device.removeprefix("/dev/zram"))
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
            if time.monotonic() > deadline:
                raise StillThere(
                    f"{device} still busy {REMOVE_SECONDS:.0f} s after it was unmounted: another process holds it "
                    "open (fuser -v DEVICE says which); `fslab cleanup` removes it once that process closes it"
                ) from None
        time.sleep(0.02)


# How long a zram device just unmounted may stay busy: a process that opened it a moment (blkid,
# another fslab reading the machine's block devices) holds it until it closes it (make test: an
# ext4 run's teardown, once, "Device or resource busy" beside the other workers).
REMOVE_SECONDS = 30.0


class StillThere(FslabError):
    """A zram device fslab made that another process keeps open."""


class ZramSource:
    """A target on zram: `count` fresh devices of `size` bytes for every run."""

    discards_by_default = True  # frees the pages a previous run left (a fresh device has none)
    chosen_by = "zram = true: devices = N zram devices of image_size, made fresh for every run (a RAM-backed ceiling)"

    def __init__(self, name: str, count: int, size: int):
        self.name, self.count, self.size = name, count, size

    @contextmanager
    def attach(self, journal: Journal) -> Iterator[Attached]:
        with ExitStack() as stack:
            made = [
                stack.enter_context(zram_device(journal, f"{self.name} #{i}", self.size))
                for i in range(1, self.count + 1)
            ]
            yield Attached(
                devices=[device for device, _ in made], owned=Owned(devices=frozenset(number for _, number in made))
            )


SOURCES.add(SourceKind("zram", ZramSource), own=True)
