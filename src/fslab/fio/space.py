"""The room a fio job's files take on a target (FioJob.bytes_needed), read from its jobs as fio
lays them out — a job file's as rewritten and scaled, and the one job fslab builds from a
study's parameters alike —, so a workload too big for its image is refused before anything is
formatted (study.space_problem); and which jobs fio can lay out before the run (laid_out).
Pure: the parsed jobs in, bytes or jobs out.

On a filesystem, every file once, as far as any job reaches in it:
- a job's own files: `nrfiles` of them (default 1) for each of its `numjobs` clones, each
  `filesize` (a range: its upper end) or else `size` shared out among them;
- a file a job names (`filename`) is one file, however many clones or jobs name it;
- `offset` (and `offset_increment`, one more for each clone) lies before what a job writes in a
  file, which fio makes that much larger;
- e4defrag's donor file (`donorname`), as large as the file it defragments, unless `inplace`.
Counted as none: `io_size` (how much I/O is done, not where); a percentage (fio sizes it from
the file or device itself: a new file it refuses, "you need to specify size="); `fill_device`
(it fills whatever is free, by design); the filecreate engine's files (made empty).
On a raw device every job works on the device: the furthest any job reaches.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from fslab.fio.jobs import (
    GLOBAL,
    JobFile,
    _on as switched_on,  # a boolean option as fio reads it
)
from fslab.fio.rewrite import fio_sizes

DEVICE = ("the device",)
EMPTY_FILES = ("filecreate",)  # engines whose files are made empty (fio's FIO_DISKLESSIO ones fslab allows)


def room_needed(job: JobFile, block_device: bool) -> int:
    """Bytes the job's files take on a target: on a filesystem every file's (once, as far as any
    job reaches in it), on a raw device (`block_device`) as far as any job reaches in it."""
    names = [section.name for section in job.sections if section.name != GLOBAL]
    files: dict[tuple[str, ...], int] = {}  # a named file, the device → the furthest byte a job reaches in it
    own: dict[str, list[_OwnFiles]] = {}  # a section's name → its jobs' own files (sections of one name share them)
    for name, options in zip(names, job.jobs()):
        for file, end in _files(name, options, block_device, own):
            files[file] = max(files.get(file, 0), end)
    return sum(files.values()) + sum(_own_room(each) for each in own.values())


@dataclass(frozen=True)
class _OwnFiles:
    """A job's own files, as fio names them (name.clone.number): `count` of them for each of its
    `clones`, clone c's reaching `start + increment · c` into each."""

    clones: int
    count: int
    start: int
    increment: int


def _own_room(jobs: list[_OwnFiles]) -> int:
    """The room the own files of the sections of one name take, each file as far as any of them
    reaches in it — worked out, not counted file by file: a job file may ask for billions. Where
    their increments differ, the largest is taken for all (more room, never less)."""
    increment = max(j.increment for j in jobs)
    total, low = 0, 0
    for high in sorted({j.clones for j in jobs}):  # the clones low..high-1 have the same jobs
        active = sorted((j for j in jobs if j.clones >= high), key=lambda j: -j.start)
        clones, sum_of_c = high - low, (high - 1 + low) * (high - low) // 2
        covered = 0
        for j in active:  # each file numbered below j.count, as far as the furthest job reaching it
            if j.count > covered:
                total += (j.count - covered) * (j.start * clones + increment * sum_of_c)
                covered = j.count
        low = high
    return total


def _files(
    name: str, options: Mapping[str, str | None], block_device: bool, own: dict[str, list[_OwnFiles]]
) -> Iterator[tuple[tuple[str, ...], int]]:
    """Each file a job's clones work on by name, and how far into it they reach: (key, bytes) — a
    `filename` by its name, the device as one —; the job's own files (fio names them
    job.clone.file: sections of the same name share them) added to `own`."""
    if switched_on(options, "fill_device") or (options.get("ioengine") or "") in EMPTY_FILES:
        return
    clones, count = _count(options.get("numjobs")), _count(options.get("nrfiles"))
    size, each = _bytes(options.get("size")), max(_bytes(options.get("filesize"), upper=True), 0)
    offset, increment = _bytes(options.get("offset")), _bytes(options.get("offset_increment"))
    furthest = offset + increment * (clones - 1)
    if block_device:
        yield DEVICE, furthest + (size or each)
        return
    named = options.get("filename")
    per_file = each or (size if named else -(-size // count))  # fio shares size out among a job's own files
    if named:
        yield ("file", named), furthest + per_file
    else:
        own.setdefault(name, []).append(_OwnFiles(clones, count, offset + per_file, increment))
    donor = options.get("donorname")
    if options.get("ioengine") == "e4defrag" and donor and not switched_on(options, "inplace"):
        yield ("file", donor), each or per_file


def _bytes(value: str | None, *, upper: bool = False) -> int:
    """A size as fio reads it; a range's lower end (`upper`: its upper end); 0 unset or a percentage."""
    if not value or "%" in value:
        return 0
    sizes = fio_sizes(value)
    return (max if upper else min)(sizes) if sizes else 0


def _count(value: str | None) -> int:
    return int(value) if value and value.isdigit() and int(value) > 0 else 1


def laid_out(job: JobFile) -> JobFile | None:
    """The jobs of a job file fio can lay out before it runs (fslab's layout: fio's create_only),
    or None when none can: those that size their files themselves (`size` or `filesize` in
    bytes). Left out: a job that reads what an earlier job writes, sized by that file (fio's
    surface-scan.fio reads the file its write phase filled: laid out alone, fio asks for a
    size), a percentage (of a file not there yet), and `fill_device` (it fills what is free
    when it runs: laid out first, it would fill the device twice)."""
    sized = [_sized(options) for options in job.jobs()]
    if not any(sized):
        return None
    kept, index = [], 0
    for section in job.sections:
        if section.name == GLOBAL:
            kept.append(section)
        else:
            kept += [section] if sized[index] else []
            index += 1
    return replace(job, sections=tuple(kept))


def _sized(options: Mapping[str, str | None]) -> bool:
    return not switched_on(options, "fill_device") and bool(
        _bytes(options.get("size")) or _bytes(options.get("filesize"), upper=True)
    )
