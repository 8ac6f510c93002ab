"""A user's fio job file fitted to its study: every job rewritten through the parsed records
(fio/jobs: JobFile, Section), never its text — the sizes and times the study asks for, the
numjobs, iodepth and bs a workload sets (or sweeps), and --scale. Pure: a JobFile in, a new
JobFile and what was rewritten from what out (Rewrite: stored with the workload, and said in its
report by `described`).

What is rewritten (docs/study-format.md, "Job files"):
- ASKED, in every job: the study's value when it gives one — the workload's own field, else, for
  the sizes and times (STUDY_WIDE), the [fio] table's —, else the job's own;
- then sizes × --scale, with what counts bytes or I/Os beside them, so a job keeps its shape on
  the smaller image (offset, offset_increment, filesize, number_ios); times × the time scale (1
  under --scale-sizes-only): runtime, ramp_time, startdelay, and fio's steady-state window and
  its ramp (the window no shorter than fio can judge, as a workload's). A percentage (size=50%) is of the
  target, which --scale shrank already: kept. Kept too: nrfiles, loops, time_based, rates and
  think times — a job's shape and pace, not its length.
A rewritten option leaves every section it was in, [global] ones too, and ends each job that has
a value: a job's own value is the last fio reads for it, so every job runs exactly that one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fslab.core.errors import Refused
from fslab.core.units import format_duration, format_size, parse_duration, parse_size, scaled_size
from fslab.fio.jobs import GLOBAL, SHORTEST_STEADY_WINDOW, JobFile, Section, check_option, fio_seconds
from fslab.fio.values import (
    block_size,
    each_number,
    size_bytes as fio_bytes,
    size_text as fio_size,
    time_text as fio_time,
    tokens,
)  # fio's one reading and writing of its values

SIZES = ("size", "io_size", "offset", "offset_increment", "filesize")  # bytes: × --scale
COUNTS = ("number_ios",)  # I/Os: × --scale, as the bytes they add up to
TIMES = ("runtime", "ramp_time", "startdelay", "steadystate_duration", "steadystate_ramp_time")  # × the time scale
# What a study may set beside a job_file, over every job: a workload's own field, and the [fio]
# table's for STUDY_WIDE alone — numjobs, iodepth and bs say what the I/O is, which a job file
# says job by job: a study-wide value would flatten what a workload's own field asks on purpose.
ASKED = ("size", "io_size", "runtime", "ramp_time", "numjobs", "iodepth", "bs")
STUDY_WIDE = ("size", "io_size", "runtime", "ramp_time")
REWRITTEN = (
    *ASKED,
    "offset",
    "offset_increment",
    "filesize",
    "number_ios",
    "startdelay",
    "steadystate_duration",
    "steadystate_ramp_time",
)
# Counts that multiply a job's bytes: under --scale they take the share its sizes could not, when
# those are held at their floor (files under a MiB kept, others raised to one: shrunk) — fio's
# filecreate example's 31250 files of 4k, fsx.fio's 500000 loops over 256k. So the job's I/O is
# the scale's share of the job file's, its files as large as written. A size that shrank whole
# MiB as asked leaves them as written (its rounding takes at most half the scale's share: HELD).
HELD_COUNTS = ("nrfiles", "loops")
HELD = 0.5
# The least a time may be scaled to: a steady-state window fio can judge (as fio_steady scales a workload's).
SHORTEST = {"steadystate_duration": SHORTEST_STEADY_WINDOW}
# A fio workload's fields that make no sense beside a job_file, and what to do instead (rw: a
# workload has one or the other). The others go with one: ASKED, and fslab's own (timeout,
# memory_limit, clients, targets).
REFUSED_BESIDE = {
    "direct": "a job file says how each job does its I/O (direct, buffered, its engine): set direct=1 in the job file",
    "ioengine": "a job file's engine options go with its engine: set ioengine in the job file",
    "rwmixread": "set rwmixread in the job file's mixed jobs",
    "randseed": "set randseed in the job file",
    "data": "a job file's data is what its buffer options set: set "
    "refill_buffers, buffer_compress_percentage, … in the job file",
    "shared_file": "a job file's jobs share a file by naming it: set filename= in the job file",
    "options": "put them in the job file",
}
# fio uses these instead of bs wherever a job sets them, whatever their order.
INSTEAD_OF_BS = ("bsrange", "bssplit")


@dataclass(frozen=True)
class Asked:
    """A value the study gives one option of every job, as the study file writes it, and whose it
    is: "workload" (its own field) or "[fio]" (the study's table)."""

    written: str
    by: str


@dataclass(frozen=True)
class Rewrite:
    """One option as fslab rewrote it in some jobs of a job file: from the job file's value `was`
    (None: they set none) to `now` (None: none, fio's default), the study's value `asked` (and
    whose, `by`) or the job file's own, × `scale` when one applied."""

    option: str
    jobs: tuple[str, ...]
    was: str | None
    now: str | None
    asked: str | None = None
    by: str | None = None
    scale: float | None = None

    def spec(self) -> dict[str, Any]:
        return {
            "option": self.option,
            "jobs": list(self.jobs),
            "was": self.was,
            "now": self.now,
            "asked": self.asked,
            "by": self.by,
            "scale": self.scale,
        }


def refused_beside(given: Iterable[str]) -> tuple[str, str] | None:
    """The first of a workload's fields `given` beside a job_file that is refused, and why they
    all are, naming each and what to do instead; None when none is."""
    refused = [name for name in REFUSED_BESIDE if name in given]
    if not refused:
        return None
    said = "; ".join(f"{name} beside a job_file is refused: {REFUSED_BESIDE[name]}" for name in refused)
    return refused[0], f"{said} (beside one, fslab sets only {', '.join(ASKED)}, in every job)"


def asked_of(workload: object, study: object) -> dict[str, Asked]:
    """What a study asks of every job of a workload's job file, by option: the workload table's
    own fields (one value each: its sweeps are expanded before), else the [fio] table's sizes and
    times (STUDY_WIDE). fslab's own defaults for the workloads it builds are not the study's: a
    job file keeps its own values where the study gives none."""
    asked = {}
    for option in ASKED:
        own, common = getattr(workload, option), getattr(study, option) if option in STUDY_WIDE else None
        if own is not None or common is not None:
            asked[option] = Asked(str(own), "workload") if own is not None else Asked(str(common), "[fio]")
    return asked


def rewritten(
    job: JobFile, asked: Mapping[str, Asked], scale: float = 1.0, time_scale: float = 1.0
) -> tuple[JobFile, tuple[Rewrite, ...]]:
    """`job` with every job's REWRITTEN options as the study asks (`asked`, by option) and scaled,
    and what changed; `job` itself when nothing did. Refused when a job sets what fio uses
    instead of an option asked (bssplit for bs)."""
    names = [section.name for section in job.sections if section.name != GLOBAL]
    jobs = job.jobs()
    if "bs" in asked:
        for name, options in zip(names, jobs):
            if instead := next((o for o in INSTEAD_OF_BS if o in options), None):
                raise Refused(
                    f"bs beside a job_file would change nothing in job '{name}' of {job.source}: it "
                    f"sets {instead}, which fio uses instead of bs; set its block sizes in the job file"
                )
    values: dict[str, list[str | None]] = {}  # option → each job's new value
    rewrites: list[Rewrite] = []
    before = [dict(options) for options in jobs]  # each job's values as asked, before any scale
    after = [dict(options) for options in jobs]  # … and as rewritten
    for option in REWRITTEN:
        factor = scale if option in SIZES + COUNTS else time_scale if option in TIMES else 1.0
        wanted = asked.get(option)
        was = [options.get(option) for options in jobs]
        unscaled = [_study_value(option, wanted.written) if wanted else own for own in was]
        now = [_scaled(option, value, factor) for value in unscaled]
        for index, (value, new) in enumerate(zip(unscaled, now)):
            before[index][option], after[index][option] = value, new
        if now != was:
            values[option] = now
            rewrites += _records(option, names, was, now, wanted, factor)
    for option in HELD_COUNTS if scale < 1 else ():
        was = [options.get(option) for options in jobs]
        shares = [_unshrunk(option, scale, old, new) for old, new in zip(before, after)]
        now = [_count_shrunk(value, share) for value, share in zip(was, shares)]
        for index, new in enumerate(now):
            after[index][option] = new
        if now != was:
            values[option] = now
            for share in dict.fromkeys(shares):
                changed = [(name, old, new) for name, old, new, each in zip(names, was, now, shares) if each == share]
                jobs_changed, values_were, values_now = (list(column) for column in zip(*changed))
                rewrites += _records(option, jobs_changed, values_were, values_now, None, share)
    if not values:
        return job, ()
    return replace(job, sections=tuple(_sections(job, values))), tuple(rewrites)


def _unshrunk(option: str, scale: float, before: Mapping[str, str | None], after: Mapping[str, str | None]) -> float:
    """The share of --scale `scale` a job's bytes did not take (its values `before` and `after`
    scaling), which its count `option` (HELD_COUNTS) takes instead: scale × bytes before / bytes
    after, when its files (nrfiles: each file's size; loops: all a pass moves) are held at their
    floor — a size under a MiB kept, or raised to one (shrunk) —; 1 otherwise, and where a size
    is a percentage (of the target, which --scale shrank) or unset."""
    was, now = (_pass_bytes(option, values) for values in (before, after))
    if not was or not now:
        return 1.0
    share = scale * was / now
    return share if share <= HELD else 1.0


def _pass_bytes(option: str, values: Mapping[str, str | None]) -> int | None:
    """What a job's count `option` multiplies, in bytes: each file (`filesize`, its upper end) for
    nrfiles; for loops, what one pass moves (io_size, else size, else filesize × nrfiles). None
    where fio reads it from the target (a percentage) or it is not set."""

    def upper(value: str | None) -> int | None:
        return max(fio_sizes(value), default=None) if value and "%" not in value else None

    if option == "nrfiles":
        return upper(values.get("filesize"))
    for size in (values.get("io_size"), values.get("size")):
        if size is not None:
            return upper(size)
    each, files = upper(values.get("filesize")), values.get("nrfiles") or "1"
    return each * int(files) if each is not None and files.isdigit() else None


def _count_shrunk(value: str | None, share: float) -> str | None:
    """A count of the job file (nrfiles, loops) × `share`, at least one; as written when not a plain number."""
    if value is None or share == 1.0 or not value.isdigit():
        return value
    return str(max(1, round(int(value) * share)))


def _sections(job: JobFile, values: dict[str, list[str | None]]) -> Iterator[Section]:
    """Each section without the rewritten options, each job ending with its new values (checked
    as any option fio is given)."""
    index = 0
    for section in job.sections:
        options = tuple(option for option in section.options if option[0] not in values)
        if section.name != GLOBAL:
            where = f"{job.source} [{section.name}], as rewritten"
            options += tuple(
                check_option(name, each[index], where=where) for name, each in values.items() if each[index] is not None
            )
            index += 1
        yield replace(section, options=options)


def _records(
    option: str, names: list[str], was: list[str | None], now: list[str | None], wanted: Asked | None, factor: float
) -> list[Rewrite]:
    """The jobs whose value changed, grouped by what it was and is."""
    grouped: dict[tuple[str | None, str | None], list[str]] = {}
    for name, before, after in zip(names, was, now):
        if before != after:
            grouped.setdefault((before, after), []).append(name)
    scale = factor if factor != 1.0 else None
    return [
        Rewrite(
            option, tuple(jobs), before, after, wanted.written if wanted else None, wanted.by if wanted else None, scale
        )
        for (before, after), jobs in grouped.items()
    ]


def _study_value(option: str, written: str) -> str | None:
    """A study's value as fio reads it: sizes and times written as a study file writes them
    (core/units.py: 64MiB, 30s), the rest as fio's own (checked by the allow-list). A time of 0 is
    none: the job runs until its size is done, as a workload of parameters with runtime "0s"."""
    if option in SIZES:
        return fio_size(parse_size(written))
    if option in TIMES:
        seconds = parse_duration(written)
        return fio_time(seconds) if seconds else None
    return block_size(written) if option == "bs" else written


def _scaled(option: str, value: str | None, factor: float) -> str | None:
    """A value of a job file (fio's syntax) × `factor`, each size or time in it; a percentage kept."""
    if value is None or factor == 1.0:
        return value
    if option in SIZES:
        return value if "%" in value else each_number(value, lambda m: fio_size(shrunk(fio_bytes(m[0]), factor)))
    if option in COUNTS:
        return str(max(1, round(int(value) * factor)))
    if option in TIMES:  # a range's first end in ms: fio reads s only at a value's end
        return each_number(
            value,
            lambda m: (
                fio_time(max(SHORTEST.get(option, 0.0), fio_seconds(m[0]) * factor), last=m.end() == len(value))
                if fio_seconds(m[0])
                else m[0]
            ),
        )
    return value


def shrunk(size: int, scale: float) -> int:
    """A job file's size × --scale as every size fslab scales (units.scaled_size: whole MiB, at
    least one), but never rounded up past itself when shrinking: a job file's sizes may be small
    on purpose (a 4k file stays 4k), unlike the files of a workload fslab builds."""
    scaled = scaled_size(size, scale)
    return min(size, scaled) if scale < 1 else scaled


def fio_sizes(value: str) -> list[int]:
    """Each size in a value of a job file (a range's ends, one per direction), as fio reads it."""
    return [fio_bytes(m[0]) for m in tokens(value)]


def described(stored: Sequence[Mapping[str, Any]]) -> str:
    """What was rewritten, in words, from the records stored with a workload (Rewrite.spec):
    "runtime 900s → 9s (scale 0.01); size 10GiB → 102MiB (scale 0.01)"; jobs are named where an
    option was rewritten to several values."""
    options = [record.get("option") for record in stored]
    said = []
    for record in stored:
        option = str(record.get("option"))
        jobs = f" in {', '.join(record.get('jobs') or [])}" if options.count(option) > 1 else ""
        why = [f"{_whose(record.get('by'))} {option} = {record.get('asked')}"
               if record.get("asked") is not None else "",
               f"scale {record['scale']:g}" if record.get("scale") is not None else ""]  # fmt: skip
        because = ", ".join(part for part in why if part)
        said.append(
            f"{option} {_shown(option, record.get('was'), 'unset')} → {_shown(option, record.get('now'), 'none')}{jobs}"
            + (f" ({because})" if because else "")
        )
    return "; ".join(said)


def _whose(by: object) -> str:
    return "[fio]" if by == "[fio]" else "the workload's"


def _shown(option: str, value: object, absent: str) -> str:
    """A value as a reader reads it: a single size or time in fslab's units, anything else as fio's."""
    if value is None:
        return absent
    text = str(value)
    single = [m[0] for m in tokens(text)] == [text]
    if option in SIZES and single:
        return format_size(fio_bytes(text))
    if option in TIMES and single:
        return format_duration(fio_seconds(text))
    return text
