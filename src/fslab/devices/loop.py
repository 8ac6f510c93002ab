"""Sparse loop images in fslab's work directory, attached with direct I/O.

fslab formats only what it created: `loop_image` is the only maker of `LoopDevice`s, and a
filesystem is created on one only after `assert_ours` has read back from the kernel that the
device really is backed by that image.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fslab.journal import Journal, releaser
from fslab.system import run
from fslab.units import format_size


@dataclass(frozen=True)
class LoopDevice:
    image: Path
    device: str
    size: int
    direct_io: bool  # read back from sysfs: whether the host page cache is bypassed


class NotEnoughSpace(RuntimeError):
    pass


def _sysfs(device: str) -> Path:
    return Path("/sys/block") / Path(device).name / "loop"


def backing_file(device: str) -> Path | None:
    try:
        return Path((_sysfs(device) / "backing_file").read_text().strip())
    except OSError:
        return None


def direct_io_enabled(device: str) -> bool:
    try:
        return (_sysfs(device) / "dio").read_text().strip() == "1"
    except OSError:
        return False


def devices_backed_by(image: Path) -> list[str]:
    """Loop devices whose backing file is this image (normally none or one)."""
    out = run(["losetup", "--associated", str(image), "--noheadings", "--output", "NAME"], check=False).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def check_free_space(directory: Path, needed: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(directory).free
    if free < needed:
        raise NotEnoughSpace(
            f"{directory} has {format_size(free)} free but an image of {format_size(needed)} is needed; "
            "free some space, choose another --workdir, or shrink the study (image_size, or --scale)"
        )


def assert_ours(loop: LoopDevice) -> None:
    """Refuse to format a device unless the kernel says it is the loop device of fslab's image."""
    backing = backing_file(loop.device)
    if backing is None or backing.resolve() != loop.image.resolve():
        raise PermissionError(f"refusing to format {loop.device}: it is not the loop device of fslab's image {loop.image}")


@releaser("image")
def release_image(image: str) -> None:
    """Detach every loop device on the image, then delete it. Safe to call twice."""
    for device in devices_backed_by(Path(image)):
        run(["losetup", "--detach", device])
    Path(image).unlink(missing_ok=True)


@contextmanager
def loop_image(journal: Journal, image_dir: Path, name: str, size: int) -> Iterator[LoopDevice]:
    """A fresh sparse image of `size` bytes attached as a loop device with direct I/O, gone afterwards."""
    check_free_space(image_dir, size)
    image = image_dir / f"{name}.img"
    with journal.holding("image", str(image)):
        release_image(str(image))  # a stale image of the same name from a killed run
        with open(image, "wb") as f:
            f.truncate(size)
        os.chmod(image, 0o600)
        device = run(["losetup", "--direct-io=on", "--find", "--show", str(image)]).stdout.strip()
        yield LoopDevice(image=image, device=device, size=size, direct_io=direct_io_enabled(device))
