"""fio job files from a study: parsed into records, every option checked (fio/options.py,
against fio's own table), and written out again by fslab.

A study sets fio options three ways — `[fio] options`, a workload's `options`, a job file —
and all three are untrusted: fio runs as root. fslab never hands the user's text to fio: a job
file is parsed into a JobFile, and `render` writes a new job file from that record, pointed at
the target by fslab alone.

Pure (text in, records out), but for `parse_all`, which asks fio itself.
"""

from __future__ import annotations

import functools
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fslab.core.system import CommandError, run
from fslab.fio import values as fio_values
from fslab.fio.options import (  # noqa: F401  (option_problem, option_text, accepted_options, refused_options: fslab's one way to check and list fio options, re-exported for the job's users)
    JOB_NAME,
    NO_IO_ENGINES,
    OUTPUT,
    REFUSED,
    SYNTAX,
    FioRefused,
    accepted_options,
    check_option,
    forbidden_character,
    option_problem,
    option_text,
    refused_options,
    standing_problem,
)

GLOBAL = "global"
READING_MODES = {"read", "randread", "rw", "readwrite", "randrw"}


@dataclass(frozen=True)
class Section:
    """One [section] of a job file: [global] (defaults for the jobs after it) or a job."""

    name: str
    options: tuple[tuple[str, str | None], ...]  # (name, value) in order; None: written bare
    line: int  # of its header in the job file (0 for a job fslab built)


@dataclass(frozen=True)
class JobFile:
    """A fio job, every option checked. fio receives only what `render` writes from it."""

    sections: tuple[Section, ...]
    source: str  # the job file as the study names it, or the workload it was built for

    def applied(self) -> list[list[tuple[str, str | None]]]:
        """Each job's options in the order fio applies them: the [global] sections before it, then its own."""
        defaults: list[tuple[str, str | None]] = []
        found = []
        for section in self.sections:
            if section.name == GLOBAL:
                defaults += section.options
            else:
                found.append([*defaults, *section.options])
        return found

    def jobs(self) -> list[dict[str, str | None]]:
        """Each job's options as fio leaves them: the last value of each."""
        return [dict(options) for options in self.applied()]


def single_job(name: str, options: Mapping[str, str]) -> JobFile:
    """A one-job JobFile from checked-here options (a study's parameters and fslab's own). Its
    `filename`, when it has one, is the file its jobs share, checked as a job file's: a plain name
    in the target's directory (a study's `options` may not set it: section.fio_options)."""
    checked = tuple(
        check_option(key, value, where=f"workload '{name}'", in_job_file=key == "filename")
        for key, value in options.items()
    )
    return JobFile(sections=(Section(name=name, options=checked, line=0),), source=f"workload '{name}'")


_HEADER = re.compile(r"\[([^\[\]]*)\]")
_KEY = re.compile(r"[A-Za-z0-9_-]+")


def parse_job_file(text: str, source: str) -> JobFile:
    """A job file's sections, every option checked (FioRefused names `source`, the line, the
    section, and why). `directory` lines are dropped: fslab chooses the target's directory."""
    return _parsed(text, source, check=True)


def _parsed(text: str, source: str, *, check: bool) -> JobFile:
    """`check`: each option through the guard; else through what it refuses without fio's table
    (a stored job, which fslab wrote itself: reading stored results asks fio nothing)."""
    headers: list[tuple[str, int]] = []  # (name, line) of each section
    options: list[list[tuple[str, str | None]]] = []  # each section's
    for number, raw in enumerate(text.split("\n"), start=1):
        # fio ends a line at ';' or '#' (an inline comment too) and ignores blanks around it.
        line = re.split(r"[;#]", raw.rstrip("\r"), maxsplit=1)[0].strip()
        where = f"{source}:{number}" + (f" [{headers[-1][0]}]" if headers else "")
        if not line:
            continue
        if line.startswith("include"):  # so fio reads any line that begins with it (init.c)
            raise FioRefused(f"{where}: include is refused: {REFUSED['include'][1]}", REFUSED["include"][0])
        if line.startswith("["):
            headers.append((_section_name(line, f"{source}:{number}"), number))
            options.append([])
        elif not headers:
            raise FioRefused(
                f"{where}: '{line[:40]}' comes before any [section]; fio's options go under [global] or a [job]", SYNTAX
            )
        elif option := _option(line, where, check):
            options[-1].append(option)
    if not any(name != GLOBAL for name, _ in headers):
        raise FioRefused(f"{source}: defines no job: add a [name] section with its options", SYNTAX)
    job = JobFile(
        sections=tuple(Section(name, tuple(opts), line) for (name, line), opts in zip(headers, options)), source=source
    )
    if check and all((options.get("ioengine") or "") in NO_IO_ENGINES for options in job.jobs()):
        raise FioRefused(
            f"{source}: no job does I/O on the target (ioengine {', '.join(sorted(NO_IO_ENGINES))} only "
            "loads the CPU): its numbers would say nothing about it; add a job that reads or writes",
            OUTPUT,
        )
    return job


def _section_name(line: str, where: str) -> str:
    header = _HEADER.fullmatch(line)
    if not header:
        raise FioRefused(f"{where}: '{line[:40]}' is not a section header [name]", SYNTAX)
    name = header.group(1).strip()
    if name != GLOBAL and name.startswith(GLOBAL):
        raise FioRefused(
            f"{where}: job name '{name[:40]}' is refused: fio reads "
            "every section whose name begins with 'global' as [global]",
            SYNTAX,
        )
    if name != GLOBAL and JOB_NAME.problem(name):
        raise FioRefused(
            f"{where}: job name '{name[:40]}' is refused: fio makes files named after it; use {JOB_NAME.says}", SYNTAX
        )
    return name


def _option(line: str, where: str, check: bool) -> tuple[str, str | None] | None:
    """One `key=value` or bare `key` line, checked; None for a directory line (fslab's replaces it)."""
    key, sep, text = line.partition("=")
    key = key.strip()
    if not _KEY.fullmatch(key):
        problem, kind = forbidden_character(key) or ("an option is a name, or name=value", SYNTAX)
        raise FioRefused(f"{where}: '{line[:40]}' is refused: {problem}", kind)
    if key == "directory":
        return None
    value = text.strip() if sep else None
    if check:
        return check_option(key, value, where=where, in_job_file=True)
    if found := standing_problem(key, value, in_job_file=True):
        raise FioRefused(f"{where}: {found[0]}", found[1])
    return key, value


# fio reads a job file a line at a time, trims the blanks around a value, expands `$`, and takes a
# ':' in `directory` for the start of another directory: a target's directory whose path holds
# any of these (a work directory's path may) is named through the environment instead, which fio
# expands in a value (${FSLAB_DIRECTORY}); fio_environment gives it, a ':' escaped as fio reads it.
DIRECTORY_VARIABLE = "FSLAB_DIRECTORY"
_AS_WRITTEN = re.compile(r"/(?:[^\x00-\x1f\x7f:$]*[^\x00-\x1f\x7f:$\s])?")


def _directory_line(directory: Path) -> str:
    return f"directory={directory}" if written_as_is(directory) else f"directory=${{{DIRECTORY_VARIABLE}}}"


def written_as_is(directory: Path) -> bool:
    """Whether `directory` can be written into a job file as it is (no ${FSLAB_DIRECTORY}): a
    fio server on another host reads the job without fslab's environment."""
    return bool(_AS_WRITTEN.fullmatch(str(directory)))


def fio_environment(directory: Path | None) -> dict[str, str]:
    """The environment fio runs a job rendered for `directory` in (render may name it there)."""
    return {} if directory is None else {DIRECTORY_VARIABLE: str(directory).replace(":", "\\:")}


def render(job: JobFile, *, directory: Path | None, device: str | None, fixed: Mapping[str, str] | None = None) -> str:
    """The job file fio runs: fslab's [global] naming the target's directory (or raw device),
    then the checked sections, each job ending with `fixed` (fslab's own, which win). On a raw
    device a job's plain `filename` goes: every job works on the device."""
    lines = ["[global]", _directory_line(directory) if directory else f"filename={device}"]
    for section in job.sections:
        lines.append(f"[{section.name}]")
        lines += [_line(key, value) for key, value in section.options if not (directory is None and key == "filename")]
        if section.name != GLOBAL:
            lines += [f"{key}={value}" for key, value in (fixed or {}).items()]
    return "\n".join(lines) + "\n"


def job_text(job: JobFile) -> str:
    """The checked job, without fslab's location lines: what a study stores as its workload."""
    return "".join(f"[{s.name}]\n" + "".join(_line(k, v) + "\n" for k, v in s.options) for s in job.sections)


def _line(key: str, value: str | None) -> str:
    return key if value is None else f"{key}={value}"


def _on(options: Mapping[str, str | None], name: str) -> bool:
    """A boolean option as fio reads it: bare or non-zero is on."""
    return name in options and options[name] != "0"


def reads(job: JobFile) -> bool:
    """Whether a job reads data (fio's default rw is read), so it must be laid out first."""
    return any(
        (opts.get("rw") or "read").split(":")[0].lower() in READING_MODES or _on(opts, "verify_only")
        for opts in job.jobs()
    )


def direct(job: JobFile) -> bool:
    """Whether every job uses direct I/O (fio's default is buffered). `direct` and `buffered` set
    one thing in fio, so the later of them wins: direct=1 then buffered=1 is buffered."""
    return all(direct_after(options) for options in job.applied())


def direct_after(options: list[tuple[str, str | None]]) -> bool:
    """Whether fio does direct I/O after these options, in the order fio applies them."""
    direct = False
    for name, value in options:
        if name in ("direct", "buffered"):
            direct = _on({name: value}, name) == (name == "direct")
    return direct


def stored_job(text: str) -> JobFile:
    """A job fslab stored with a workload (its own rendering of a checked job), read back as
    records without fio's option table: reading stored results asks fio nothing (`fslab summary`
    on a machine without fio, or with another fio). Refused when it is not a job file at all."""
    return _parsed(text, "the stored job", check=False)


def expected_seconds(job: JobFile) -> float:
    """How long the job runs: per job startdelay + ramp_time + runtime; jobs run together
    unless stonewall or wait_for puts a job after those before it. 0 when a job has no runtime
    (it ends when its size is done: unknown)."""
    total = group = 0.0
    for opts in job.jobs():
        if not opts.get("runtime"):
            return 0.0
        delay = fio_values.last_seconds(opts.get("startdelay") or "0")  # at most: fio picks one in a range
        seconds = sum(fio_seconds(opts.get(key) or "0") for key in ("ramp_time", "runtime")) + delay
        if _on(opts, "stonewall") or opts.get("wait_for"):
            total, group = total + group, seconds
        else:
            group = max(group, seconds)
    return total + group


def measured_seconds(job: JobFile) -> float:
    """The shortest measured window of the job's jobs: runtime, ramp_time excluded. 0 when a
    job has no runtime (it ends when its size is done: unknown)."""
    runtimes = [fio_seconds(opts.get("runtime") or "0") for opts in job.jobs()]
    return 0.0 if not runtimes or 0 in runtimes else min(runtimes)


# fio samples steady state once a second: a window of fewer than two samples judges nothing (a
# slope of one sample is no number; one sample is always its own mean).
SHORTEST_STEADY_WINDOW = 2.0


def steadystate_problem(job: JobFile) -> str | None:
    """Why a job's steady-state options cannot work as written (a sentence naming them), or None:
    a criterion without a window, which fio never judges (steadystate_duration's default, 0, turns
    it off); a window under SHORTEST_STEADY_WINDOW; one that its ramp and the job's runtime leave
    no time to fill. A job file of several jobs names the job."""
    names = [section.name for section in job.sections if section.name != GLOBAL]
    for name, options in zip(names, job.jobs()):
        if problem := _steadystate_problem(options):
            return f"[{name}] {problem}" if len(names) > 1 else problem
    return None


def _steadystate_problem(options: Mapping[str, str | None]) -> str | None:
    criterion, window = options.get("steadystate"), options.get("steadystate_duration")
    seconds = fio_seconds(window or "0")
    if criterion is not None and not seconds:
        return (
            f"steadystate={criterion} without steadystate_duration is never judged (fio's default "
            f"window, 0, turns it off): add steadystate_duration (at least {SHORTEST_STEADY_WINDOW:g}s)"
        )
    if not seconds:
        return None
    if seconds < SHORTEST_STEADY_WINDOW:
        return (
            f"steadystate_duration={window} is under {SHORTEST_STEADY_WINDOW:g}s: "
            "fio samples once a second, and fewer than two samples judge nothing"
        )
    needed = seconds + fio_seconds(options.get("steadystate_ramp_time") or "0")
    runtime = fio_seconds(options.get("runtime") or "0")
    if runtime and needed > runtime:
        return (
            f"steadystate_ramp_time + steadystate_duration ({needed:g}s) is longer than runtime "
            f"({runtime:g}s): fio could never judge steady state; lengthen runtime or shorten the window"
        )
    return None


@functools.lru_cache(maxsize=1024)  # pure: the same few values in every workload of a study
def fio_seconds(value: str) -> float:
    """A time of runtime, ramp_time, startdelay or fio's steady-state window as fio reads it (a
    bare number is seconds; fio_values): what fslab says of a job's length is what fio runs."""
    return fio_values.seconds(value)


def parse_all(jobs: Sequence[tuple[str, str]], *, directory: Path | None) -> list[str]:
    """fio's own parser (`fio --parse-only`, in a private directory) on rendered jobs, each with
    where it comes from: it knows what the allow-list cannot (an engine's options under another
    engine, a value out of range). Every job is parsed by one fio where they all pass — a fio
    start costs 0.16 s here (`fio --parse-only` of one job), far more in a QEMU guest; a --parse-only run keeps
    nothing from one job file to the next (fio drops each job it parsed) — and by one more after
    each refused one (fio stops at a job file it refuses). fio's account of what it read
    (--debug=parse) is checked against fslab's reading of the values fslab reads itself
    (fio_values.disagreement). A problem for each job refused, saying where and why."""
    if not jobs:
        return []
    problems = []
    with tempfile.TemporaryDirectory(prefix="fslab-parse-") as scratch:
        names = [f"job-{number}.fio" for number in range(len(jobs))]
        for name, (text, _) in zip(names, jobs):
            (Path(scratch) / name).write_text(text)
        start = 0
        while start < len(jobs):
            failed = None
            try:
                output = run(
                    ["fio", "--debug=parse", "--parse-only", *names[start:]],
                    cwd=Path(scratch),
                    timeout=60 + len(jobs) - start,
                    env=fio_environment(directory),
                ).stdout
            except CommandError as exc:
                output, failed = exc.stdout, exc
            handled = fio_values.parse_debug(output)
            parsed = fio_values.files_parsed(output)
            end = (
                names.index(parsed[-1])
                if failed is not None and parsed and parsed[-1] in names[start:]
                else (start if failed is not None else len(jobs))
            )
            for found in handled:
                if found.file in names[start:end] and (why := fio_values.disagreement(found)):
                    problems.append(f"{jobs[names.index(found.file)][1]}: {why}")
            if failed is not None:
                said = [
                    line.strip()
                    for line in (failed.stderr or output).splitlines()
                    if line.strip() and not line.startswith("parse ")
                ]
                problems.append(
                    f"{jobs[end][1]}: fio does not accept the job: {' / '.join(said[-5:]) or 'no reason given'}"
                )
            start = end + 1
    return list(dict.fromkeys(problems))
