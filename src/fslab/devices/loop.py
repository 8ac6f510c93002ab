"""Loop images in fslab's work directory, attached with direct I/O.

One image per target lives through a study run; each run attaches it, makes a fresh
filesystem on it and detaches it. An image is made anew by fslab (never a file found at its
path) and known from then on by its identity (device, inode); a loop device is fslab's when the
kernel's own record says it is attached to that very file (core/identity.py).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.errors import FslabError, Refused
from fslab.core.identity import FileId, Owned, detach_loop, loops_backed_by, regular_file
from fslab.core.journal import Entry, Journal, releaser
from fslab.core.system import run
from fslab.core.units import format_size
from fslab.devices.source import SOURCES, Attached, SourceKind

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir


@dataclass(frozen=True)
class Image:
    path: Path
    file: FileId  # what proves it is the file fslab made


@dataclass(frozen=True)
class LoopDevice:
    image: Image
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
    """Loop devices attached to the file at this path (by the kernel's record; none if no file)."""
    file = regular_file(image)
    return loops_backed_by(file) if file else []


def check_free_space(directory: Path, needed: int, what: str) -> None:
    free = shutil.disk_usage(directory).free
    if free < needed:
        raise NotEnoughSpace(
            f"{directory} has {format_size(free)} free but {what} need {format_size(needed)}; free some space, "
            'choose another --workdir, or shrink the study (image_size, --scale, or image_fill = "sparse")'
        )


def _image_of(entry: Entry, workdir: Workdir) -> Image | None:
    """The journal entry's image if the file at its path is still the one fslab made, else None
    (gone); Refused when a different file or a symlink is there."""
    path = workdir.inside(entry.ident, workdir.images)
    found = regular_file(path)
    if found is None:
        return None
    if found != FileId.from_proof(entry.proof):
        raise Refused(f"{path} is not the image fslab made (its device and inode differ)")
    return Image(path, found)


@releaser("image")
def release_image(entry: Entry, workdir: Workdir) -> None:
    """Detach the loop devices on the image fslab made, then delete it. Safe to call twice."""
    image = _image_of(entry, workdir)
    if image is not None:
        _detach_all(image.file)
        os.unlink(image.path)


@releaser("loop")
def release_loop(entry: Entry, workdir: Workdir) -> None:
    """Detach every loop device the kernel says is attached to the image fslab made."""
    image = _image_of(entry, workdir)
    if image is not None:
        _detach_all(image.file)


# How long a detached loop device may stay attached: the kernel lets go of it when its last user
# closes it, from a worker thread of its own, which a busy machine runs late.
DETACH_SECONDS = 30.0


class StillAttached(FslabError):
    """A loop device fslab detached that another process keeps open."""


def _detach_all(file: FileId) -> None:
    """Detach the image's loop devices, and wait until the kernel says none is attached to it:
    released means released (the next study, `fslab cleanup`, a check of what is left)."""
    for device in loops_backed_by(file):
        detach_loop(device, file)
    deadline = time.monotonic() + DETACH_SECONDS
    while attached_still := loops_backed_by(file):
        if time.monotonic() > deadline:
            raise StillAttached(
                f"{', '.join(attached_still)} detached but still attached "
                f"after {DETACH_SECONDS:.0f} s: another process holds it open"
                " (fuser -v DEVICE says which); it goes when that process closes it, and `fslab cleanup` checks again"
            )
        time.sleep(0.02)


@contextmanager
def image_file(
    journal: Journal, image_dir: Path, name: str, size: int, *, fill: Callable[[Journal, str], None] | None
) -> Iterator[Image]:
    """A new image file of `size` bytes, deleted afterwards.

    `fill` writes it whole once through its loop device (fio.fill_device: fio is a floor above
    devices, so the runner gives it), so that no run measures the host filesystem allocating the
    blocks of a sparse file: 4 KiB random writes to a fresh sparse image run far slower than
    the same job once the image has been written. Sparse saves disk space.
    """
    path = journal.workdir.subdirectory(image_dir) / f"{name}.img"
    # Made unnamed (O_TMPFILE), journalled with its identity, and only then given its name: a
    # kill at any moment leaves nothing (an unnamed file goes with its process) or an image the
    # journal proves.
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    fd = os.open(".", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600, dir_fd=directory)
    try:
        image = Image(path, FileId.of(os.fstat(fd)))
        with journal.holding("image", str(path), **image.file.proof()):
            try:  # a directory fd makes os.link call linkat, which follows /proc's link to the file
                os.link(
                    f"/proc/self/fd/{fd}", path.name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=True
                )
            except FileExistsError:
                raise Refused(
                    f"{path} already exists: fslab makes its images anew and never takes over a "
                    "file it did not make (`fslab cleanup` releases what a killed fslab left)"
                ) from None
            os.ftruncate(fd, size)
            os.close(fd)
            fd = -1
            if fill:
                with attached(journal, image) as loop:
                    fill(journal, loop.device)
            yield image
    finally:
        if fd >= 0:
            os.close(fd)
        os.close(directory)


@contextmanager
def attached(journal: Journal, image: Image) -> Iterator[LoopDevice]:
    """The image attached as a loop device with direct I/O, detached afterwards."""
    with journal.holding("loop", str(image.path), **image.file.proof()) as held:
        if regular_file(image.path) != image.file:
            raise Refused(f"{image.path} is no longer the image fslab made")
        device = run(["losetup", "--direct-io=on", "--find", "--show", str(image.path)]).stdout.strip()
        if device not in loops_backed_by(image.file):
            raise Refused(f"{device} is not attached to fslab's image {image.path} after losetup")
        held.prove(device=device)
        yield LoopDevice(
            image=image, device=device, size=os.stat(image.path).st_size, direct_io=direct_io_enabled(device)
        )


def on_loops(loops: list[LoopDevice]) -> Attached:
    """Loop devices as a run's devices: fslab's because the kernel says they rest on its images."""
    return Attached(
        devices=[loop.device for loop in loops],
        owned=Owned(files=frozenset(loop.image.file for loop in loops)),
        direct_io=all(loop.direct_io for loop in loops),
    )


class ImageSource:
    """A target's loop images (made once per study run by the runner), attached for each run."""

    discards_by_default = False  # a discard punches holes in the image: it would lose its fill
    chosen_by = (
        "a target's default: devices = N image files of image_size "
        "(image_fill full or sparse) in fslab's work directory"
    )

    def __init__(self, images: list[Image]):
        self.images = images

    @contextmanager
    def attach(self, journal: Journal) -> Iterator[Attached]:
        with ExitStack() as stack:
            yield on_loops([stack.enter_context(attached(journal, image)) for image in self.images])


SOURCES.add(SourceKind("loop", ImageSource), own=True)
