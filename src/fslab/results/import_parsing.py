"""One file's fio JSON output, parsed for `fslab import` (results/importer.py; pure): the runs it holds —
fio's "jobs", or its client/server "client_stats" (per host, each with its server's global
options; fio's own "All clients" sum left out), from any fio version (2.x's µs keys, 3.x's ns
keys, plain json or json+), with whatever fio printed before the JSON — their metrics read by
fio's own parser (fio/output.py), nothing read a second way. NotFioOutput says why a
text is not fio's output, or not one fslab can read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from fslab.core.errors import FslabError
from fslab.core.names import NAME, NAME_RULE
from fslab.fio import DIRECTIONS, NoJson, direct_after, job_entries, job_metrics, load_json
from fslab.model import Metric

MAX_SECONDS = 10**8  # a job's runtime beyond three years is not fio's


class NotFioOutput(FslabError):
    """A file that is not fio's JSON output, or not one fslab can read: why."""


@dataclass(frozen=True)
class ImportedJob:
    """One run of a file: the jobs of one name (of one host, in client/server output) taken
    together, as fio.py takes a run's jobs together — numjobs clones, or a group under
    group_reporting (fio names a group after its first job)."""

    name: str  # fio's job name
    target: str
    host: str | None  # the fio server that ran it (client/server output)
    metrics: list[Metric]
    error: str | None  # what fio reported as the job's error; its metrics are then not imported
    seconds: float  # how long it measured: its longest direction's runtime
    buffered: bool  # through the page cache (fio's default), unless direct=1 or buffered=0
    options: dict[str, str]  # fio's global options with the job's own over them, as fio listed them
    started_at: datetime | None = None  # client/server output's: when it began (UTC); None: it ended at fio's timestamp
    started_from: str | None = None  # what said when: fio's job_start, else the fio client's timestamp (its start)


@dataclass(frozen=True)
class FioOutput:
    """One file's fio JSON, parsed."""

    fio_version: str | None
    finished_at: (
        datetime | None
    )  # fio's timestamp (UTC); None when this fio wrote none, or a fio client did (its start)
    jobs: list[ImportedJob]

    def of(self, target: str) -> FioOutput:
        """The same runs, of another target (client/server output's: TARGET@HOST)."""
        return replace(self, jobs=[replace(job, target=_at(target, job.host)) for job in self.jobs])


def parse_output(text: str, target: str) -> FioOutput:
    """fio's JSON output (text before it tolerated) into its runs, for `target`; NotFioOutput
    saying why when it is not fio's output or not one fslab can read."""
    try:
        document = load_json(text)
    except NoJson:
        raise NotFioOutput("no JSON in it: not fio's JSON output") from None
    except ValueError as exc:
        raise NotFioOutput(str(exc)) from None
    try:
        return _parsed(document, target)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise NotFioOutput(f"not fio output as fslab reads it: {_described(exc)}") from None


def _parsed(document: dict, target: str) -> FioOutput:
    entries = job_entries(document)
    if entries is None:
        raise NotFioOutput("no 'jobs' or 'client_stats': not fio's JSON output")
    client_server = not isinstance(document.get("jobs"), list)  # job_entries read "client_stats"
    if not entries:
        raise NotFioOutput("fio's output lists no jobs")
    version = document.get("fio version")
    if version is not None and not isinstance(version, str):
        raise TypeError("'fio version' is not text")
    global_options = _global_options(document.get("global options", {}))
    groups: dict[tuple[str | None, str], list[dict]] = {}
    for entry in entries:
        host = _plain(entry["hostname"], "host name") if client_server else None
        groups.setdefault((host, _plain(entry["jobname"], "job name")), []).append(entry)
    # fio writes its timestamp as it ends; a fio client as it starts the servers (client.c), before
    # their jobs: their runs begin at it, or at each job's own job_start (fio 3.36 on)
    timestamp = _timestamp(document)
    began = timestamp if client_server else None
    jobs = [
        _job(name, _at(target, host), host, group, global_options(group[0]), began)
        for (host, name), group in groups.items()
    ]
    return FioOutput(version, None if client_server else timestamp, jobs)


def _at(target: str, host: str | None) -> str:
    """The target of a run: client/server output's runs are of TARGET@HOST."""
    return f"{target}@{host}" if host else target


def _global_options(found: Any) -> Callable[[dict], dict[str, str]]:
    """Each job entry's global options: fio's one table of them, or — fio 3.39 and later, a client
    driving several servers — one per server, named by its hostname and port (a server whose job
    file has none is not listed)."""
    if not isinstance(found, list):
        shared = _options(found)
        return lambda entry: shared
    per_server = {}
    for table in found:
        options = _options(table)
        per_server[(options.pop("hostname"), options.pop("port"))] = options
    return lambda entry: per_server.get((str(entry["hostname"]), str(entry["port"])), {})


def _job(
    name: str,
    target: str,
    host: str | None,
    entries: list[dict],
    global_options: dict[str, str],
    began: datetime | None,
) -> ImportedJob:
    if any("mixed" in e and "read" not in e for e in entries):
        raise NotFioOutput(
            f"job '{name}' was reported with unified_rw_reporting (one "
            "'mixed' direction): fslab reads reads and writes apart"
        )
    own = _options(entries[0].get("job options", {}))
    options = global_options | own
    buffered = not direct_after(
        [*global_options.items(), *own.items()]
    )  # in fio's order: the later of direct and buffered wins
    if not all(isinstance(e["error"], int) for e in entries):
        raise TypeError("'error' is not a number")
    errors = sorted({e["error"] for e in entries if e["error"]})
    seconds = max(e[d]["runtime"] for e in entries for d in DIRECTIONS) / 1000
    if not 0 <= seconds < MAX_SECONDS:
        raise ValueError(f"job '{name}' ran for {seconds} s, not a runtime fio writes")
    started: tuple[datetime | None, str | None] = (None, None)  # a run of fio's own output ends at its timestamp
    if began:
        job_start = _job_start(entries, options)
        started = (job_start, "fio job_start") if job_start else (began, "fio client's start")
    if errors:
        return ImportedJob(
            name,
            target,
            host,
            [],
            f"fio reported error {', '.join(map(str, errors))} for job '{name}'",
            seconds,
            buffered,
            options,
            *started,
        )
    metrics = job_metrics(entries)
    for m in metrics:
        if not (isinstance(m.value, (int, float)) and math.isfinite(m.value) and m.value >= 0):
            raise NotFioOutput(f"job '{name}': {m.name} is {m.value!r}, not a number fio writes")
    return ImportedJob(name, target, host, metrics, None, seconds, buffered, options, *started)


def _job_start(entries: list[dict], options: dict[str, str]) -> datetime | None:
    """When a job began (its first entry's): fio's job_start, in ms (fio 3.36 on), when on the
    real-time clock (job_start_clock_id 0, fio's default); None when fio wrote none."""
    if options.get("job_start_clock_id", "0") != "0" or not all(e.get("job_start") for e in entries):
        return None
    return _utc(min(e["job_start"] for e in entries) / 1000, "job_start")


def _plain(value: Any, what: str) -> str:
    """A job or host name from the file, used as a workload or target name: plain, as every name is."""
    if not isinstance(value, str) or not NAME.fullmatch(value):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:80] + "…"  # a file may hold a name of megabytes
        raise NotFioOutput(f"{what} {shown} is not a plain name ({NAME_RULE})")
    return value


def _options(found: Any) -> dict[str, str]:
    if not isinstance(found, dict):
        raise TypeError("fio's options are not a table")
    return {str(k): str(v) for k, v in found.items()}


def _timestamp(document: dict) -> datetime | None:
    """When fio wrote its output (its end): timestamp_ms when fio wrote it, else timestamp (s)."""
    if "timestamp_ms" in document:
        seconds = document["timestamp_ms"] / 1000
    elif "timestamp" in document:
        seconds = document["timestamp"]
    else:
        return None
    return _utc(seconds, "timestamp")


def _utc(seconds: Any, what: str) -> datetime:
    try:
        return datetime.fromtimestamp(float(seconds), UTC).replace(tzinfo=None)
    except (OverflowError, OSError) as exc:
        raise ValueError(f"fio's {what} {seconds!r} is no time ({exc})") from None


def _described(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"{exc.args[0]!r} missing where fio writes it"
    return str(exc)
