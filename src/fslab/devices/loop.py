"""Loop images in fslab's work directory, attached with direct I/O.

One image per target lives through a study run; each run attaches it, makes a fresh
filesystem on it and detaches it. fslab formats only what it created: `attached` is the only
maker of `LoopDevice`s, and a filesystem is created only after `assert_ours` has read back
from the kernel that the device rests on those images alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fslab.errors import FslabError
from fslab.journal import Journal, releaser
from fslab.system import run
from fslab.units import format_size


@dataclass(frozen=True)
class LoopDevice:
    image: Path
    device: str
    size: int
    direct_io: bool  # read back from sysfs: whether the host page cache is bypassed


class NotEnoughSpace(FslabError):
    pass


def direct_io_enabled(device: str) -> bool:
    try:
        return (Path("/sys/block") / Path(device).name / "loop" / "dio").read_text().strip() == "1"
    except OSError:
        return False


def devices_backed_by(image: Path) -> list[str]:
    """Loop devices whose backing file is this image (normally none or one)."""
    out = run(["losetup", "--associated", str(image), "--noheadings", "--output", "NAME"], check=False).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def check_free_space(directory: Path, needed: int, what: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(directory).free
    if free < needed:
        raise NotEnoughSpace(
            f"{directory} has {format_size(free)} free but {what} need {format_size(needed)}; free some space, "
            "choose another --workdir, or shrink the study (image_size, --scale, or image_fill = \"sparse\")"
        )


def _sysfs_of(device: str) -> Path | None:
    """The device's directory in sysfs, found by its device number (a /dev/mapper node need
    not be a link to its dm-N name)."""
    try:
        number = os.stat(device).st_rdev
    except OSError:
        return None
    if not number:
        return None  # not a device node
    path = Path(f"/sys/dev/block/{os.major(number)}:{os.minor(number)}")
    return path.resolve() if path.exists() else None


def assert_ours(device: str, images: list[Path]) -> None:
    """Refuse to format a device unless the kernel says it rests on fslab's own images only:
    a loop device backed by one of them, or a device (md, dm) built solely on such."""
    if not _rests_on(_sysfs_of(device), {image.resolve() for image in images}):
        raise PermissionError(f"refusing to format {device}: it is not a loop device of fslab's images ({', '.join(map(str, images))})")


def _rests_on(sysfs: Path | None, images: set[Path]) -> bool:
    if sysfs is None:
        return False
    below = sorted((sysfs / "slaves").iterdir()) if (sysfs / "slaves").is_dir() else []
    if below:
        return all(_rests_on(member.resolve(), images) for member in below)
    try:
        backing = Path((sysfs / "loop" / "backing_file").read_text().strip())
    except OSError:
        return False
    return backing.resolve() in images


@releaser("image")
def release_image(image: str) -> None:
    """Detach every loop device on the image, then delete it. Safe to call twice."""
    release_loop(image)
    Path(image).unlink(missing_ok=True)


@releaser("loop")
def release_loop(image: str) -> None:
    """Detach every loop device on the image. Safe to call twice."""
    for device in devices_backed_by(Path(image)):
        run(["losetup", "--detach", device])


@contextmanager
def image_file(journal: Journal, image_dir: Path, name: str, size: int, *, fill: bool) -> Iterator[Path]:
    """A new image file of `size` bytes, deleted afterwards.

    `fill` writes it whole once, so that no run measures the host filesystem allocating the
    blocks of a sparse file: 4 KiB random writes to a fresh sparse image run far slower than
    the same job once the image has been written. Sparse saves disk space.
    """
    image = image_dir / f"{name}.img"
    image_dir.mkdir(parents=True, exist_ok=True)
    with journal.holding("image", str(image)):
        release_image(str(image))  # a stale image of the same name from a killed run
        with open(image, "wb") as f:
            f.truncate(size)
        os.chmod(image, 0o600)
        if fill:
            # fio runs in a private directory of its own: it writes side files into its current one
            with attached(journal, image) as loop, tempfile.TemporaryDirectory(prefix="fslab-fill-") as scratch:
                run(["fio", "--name=fill", f"--filename={loop.device}", "--rw=write", "--bs=1m", "--iodepth=16", "--direct=1", "--ioengine=libaio", "--output=/dev/null"], cwd=Path(scratch))
        yield image


@contextmanager
def attached(journal: Journal, image: Path) -> Iterator[LoopDevice]:
    """The image attached as a loop device with direct I/O, detached afterwards."""
    with journal.holding("loop", str(image)):
        device = run(["losetup", "--direct-io=on", "--find", "--show", str(image)]).stdout.strip()
        yield LoopDevice(image=image, device=device, size=image.stat().st_size, direct_io=direct_io_enabled(device))
