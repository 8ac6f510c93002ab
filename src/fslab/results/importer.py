"""Results fslab did not make: existing fio JSON output, imported as a study run of its own so it
joins summaries and compares (`fslab import`).

Three steps, kept apart. Reading (`read_files`, the one part that touches the filesystem): the
files named and those under the directories named, every one untrusted — a symlink met in a
directory is never followed, only regular files of readable size are read, each file once; fio's
log files (FIO_LOG) passed over unopened. Parsing (results/import_parsing.py's `parse_output`, pure): one
file's text into the runs it holds, from any fio version, client/server output too.
Mapping (`imported_study`, pure): the files into one study run — each job name a workload, each
`--target` (default: the file's directory name, or in bench-fio's tree its target's directory:
fio/bench_tree.py; client/server output: `TARGET@HOST`) a target,
several files of one cell its repetitions, each run keeping fio's JSON whole as its raw output
and where it came from. Runs are repetitions of one workload only when fio's job options agree
(`what_it_ran`): a job name run with different options (one file per iodepth × numjobs, as
bench-fio writes them) is one workload per set of options, named by the options that differ
(`random-read iodepth=16 numjobs=32`); `ImportedStudy.grouping` says how the files were
grouped. `import_files` does all three; storing is results/db.py's (`ResultsDB.store_imported`).
fio's histogram logs beside a JSON file (`<prefix>_clat_hist.<N>.log`, its jobs' write_hist_log)
join its run as the raw output a measured run keeps them as (`histogram_logs`).

A file that is not fio's JSON, or is malformed, is `Skipped` with why; fio's logs and bench-fio's
preconditioning runs are skipped as `passed_over` (no fault, counted); the rest are imported.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fslab import version
from fslab.core.names import NAME
from fslab.fio import LOG_KINDS, hist as fio_hist, place
from fslab.model import RawOutput
from fslab.model.records import IMPORTED, RunRecord
from fslab.results.import_parsing import FioOutput, ImportedJob, NotFioOutput, parse_output

DEFAULT_TARGET = "imported"  # when a file's directory has no plain name
MAX_BYTES = 64 * 2**20  # fio's JSON of one run is kilobytes to a few MiB; a larger file is something else


@dataclass(frozen=True)
class FoundFile:
    """A file read for import: its path as found, its text, and what stands in for a missing timestamp."""

    path: str
    text: str
    modified: datetime  # its modification time (UTC)
    target: str  # the target its runs go to unless --target names one: its directory's name


@dataclass(frozen=True)
class Skipped:
    path: str
    why: str
    passed_over: bool = False  # left out on purpose, not for a fault: fio's logs, bench-fio's preconditioning runs


# fio's log files, as fio names them (write_bw_log, write_lat_log, write_iops_log, write_hist_log:
# NAME_TYPE[.JOB].log, .log.fz compressed, .HOST after it from a fio client): not its JSON output,
# passed over where they lie beside it (bench-fio writes five kinds per job)
FIO_LOG = re.compile(rf".+_({LOG_KINDS})(\.[0-9]+)?\.log(\.fz)?(\.[^/]+)?")


# --- mapping into a study run (pure) ------------------------------------------------------------


@dataclass(frozen=True)
class ImportedTarget:
    name: str
    fio_versions: list[str]  # of the files its runs came from

    filesystem = ""  # not known: fslab did not make it

    def spec(self) -> dict:
        return {"imported": True}


# fio options that say where a job ran, or what it logged and how it reported, not what it did:
# runs that differ in these alone are repetitions of one workload (two servers' /dev/sdb and
# /dev/md0; each run's own log names). Every other option, and every option's absence, counts.
WHERE_AND_WHAT_LOGGED = frozenset(
    {
        "filename",
        "directory",
        "filename_format",
        "description",
        "group_reporting",
        "write_bw_log",
        "write_iops_log",
        "write_lat_log",
        "write_hist_log",
        "write_iolog",
        "per_job_logs",
        "lat_percentiles",
        "clat_percentiles",
        "slat_percentiles",
        "percentile_list",
    }
)  # and every log_* option (log_avg_msec, log_offset, …)
SHOWN_VALUE = re.compile(r"[A-Za-z0-9_.+:/,%-]{1,32}")  # an option's value shown as it is in a workload's name
UNSET = "(unset)"  # an option one run's job set and another's did not: fio's default, whatever it was


def what_it_ran(options: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """A job's options that make it the workload it is: those two runs must agree on to be
    repetitions of one workload (every option but WHERE_AND_WHAT_LOGGED and log_*)."""
    return tuple(
        sorted((k, v) for k, v in options.items() if k not in WHERE_AND_WHAT_LOGGED and not k.startswith("log_"))
    )


def workload_names(
    job: str, variants: list[tuple[tuple[str, str], ...]], listed: Iterable[str] = ()
) -> dict[tuple[tuple[str, str], ...], str]:
    """The workload name of each set of options (what_it_ran) one job name ran with: the job's
    name when it ran with one; else the name followed by each option the sets differ in, in the
    order fio listed them (`listed`; any other after them, by name): `random-read rw=randread
    iodepth=16 numjobs=32`. A value that is not plain (fio's options come from an untrusted
    file) is shown by a hash of it."""
    if len(variants) == 1:
        return {variants[0]: job}
    tables = [dict(v) for v in variants]
    keys = dict.fromkeys([*listed, *sorted(k for table in tables for k in table)])
    differing = [k for k in keys if len({table.get(k) for table in tables}) > 1]
    return {
        v: " ".join([job, *(f"{k}={_shown(table.get(k))}" for k in differing)]) for v, table in zip(variants, tables)
    }


def _shown(value: str | None) -> str:
    if value is None:
        return UNSET
    return value if SHOWN_VALUE.fullmatch(value) else "#" + hashlib.sha1(value.encode()).hexdigest()[:8]


@dataclass(frozen=True)
class ImportedWorkload:
    name: str
    job: str  # fio's job name
    options: dict[str, str]  # fio's options of its first run, as fio listed them

    def spec(self) -> dict:
        return {"kind": "fio", "imported": True, "job": self.job, "fio_options": self.options}


@dataclass
class ImportedStudy:
    """One `fslab import`: the study run it makes, with its runs in the order of their files."""

    name: str
    paths: list[str]  # as named on the command line
    targets: list[ImportedTarget]
    workloads: list[ImportedWorkload]
    runs: list[RunRecord]
    files: list[str]  # every file imported, in order
    skipped: list[Skipped] = field(default_factory=list)  # for a fault: each is said, and the import exits 1
    passed_over: list[Skipped] = field(default_factory=list)  # on purpose (Skipped.passed_over): counted

    @property
    def repetitions(self) -> int:
        """The most runs any cell has."""
        return max(Counter((r.target, r.workload) for r in self.runs).values(), default=0)

    def grouping(self) -> list[str]:
        """How the files became workloads, to be said as they are imported: how many of each,
        each workload with its runs per target, and each job name split by the options it ran with."""
        lines = [
            f"{len(self.files)} file(s) → {len(self.workloads)} workload(s); runs of one "
            "workload agree on every fio job option but where they ran and what they logged:"
        ]
        split = Counter(w.job for w in self.workloads)
        for job, n in split.items():
            if n > 1:
                lines.append(
                    f"  fio job '{job}' ran with different options: {n} workloads, named by the options that differ"
                )
        runs: dict[str, Counter] = {w.name: Counter() for w in self.workloads}  # workload → target → its runs
        for r in self.runs:
            runs[r.workload][r.target] += 1
        for workload, targets in runs.items():
            lines.append(
                f"  {workload}: "
                + ", ".join(f"{target} {n} run{'s' if n > 1 else ''}" for target, n in targets.items())
            )
        return lines + [f"passed over {n} file(s): {why}" for why, n in self.passed_over_by_why().items()]

    def passed_over_by_why(self) -> dict[str, int]:
        return dict(Counter(s.why for s in self.passed_over))

    def settings(self, imported_at: datetime) -> dict:
        """What the study run records of its import (settings["imported"]): the files, those skipped
        and why, how many were passed over and why (a bench-fio tree holds thousands of fio's logs), when."""
        skipped = [{"file": s.path, "why": s.why} for s in self.skipped]
        return {
            IMPORTED: {
                "files": self.files,
                "skipped": skipped,
                "passed_over": self.passed_over_by_why(),
                "at": imported_at.isoformat(),
            }
        }

    def environment(self) -> dict:
        """What is known of where its runs were made: the fio versions alone (and the fslab importing them)."""
        return {
            "fslab": version(),
            "tools": {"fio": ", ".join(sorted({v for t in self.targets for v in t.fio_versions}))},
        }


def import_files(study: str, paths: list[Path], target: str | None = None) -> ImportedStudy:
    """The study run these PATHs make, with the files it skipped and why (no runs: nothing to import)."""
    files, unreadable = read_files(paths)
    parsed, not_fio = parse_files(files, target)
    histograms, refused = histogram_logs(parsed)
    read_as_logs = {path for _, each in histograms.items() for path in each.paths} | {s.path for s in refused}
    # a log read with its run is not one passed over; no log reaches parsing (FIO_LOG), so not_fio holds none
    passed_over = [s for s in unreadable if s.path not in read_as_logs]
    return imported_study(study, [str(p) for p in paths], parsed, passed_over + not_fio + refused, histograms)


def imported_study(
    name: str,
    paths: Iterable[str],
    found: Iterable[tuple[FoundFile, FioOutput]],
    skipped: list[Skipped],
    histograms: dict[tuple[str, str], HistogramLogs] | None = None,
) -> ImportedStudy:
    """The study run of these parsed files: each job name a workload — one per set of options it
    ran with (workload_names) —, each target a target, a file's runs repetitions of their cells
    in the order the files come; a run keeps its histogram logs (`histograms`: by file and job name)."""
    found = list(found)
    variants: dict[str, list[tuple[tuple[str, str], ...]]] = {}  # job name → the option sets it ran with, as first met
    listed: dict[str, dict[str, None]] = {}  # job name → its options' names, in the order fio listed them
    for _, output in found:
        for job in output.jobs:
            if (ran := what_it_ran(job.options)) not in (seen := variants.setdefault(job.name, [])):
                seen.append(ran)
            listed.setdefault(job.name, {}).update(dict.fromkeys(job.options))
    named = {
        (job, ran): workload
        for job, each in variants.items()
        for ran, workload in workload_names(job, each, listed[job]).items()
    }
    targets: dict[str, list[str]] = {}
    workloads: dict[str, ImportedWorkload] = {}
    repetitions: Counter = Counter()
    runs: list[RunRecord] = []
    files: list[str] = []
    for file, output in found:
        files.append(file.path)
        version = output.fio_version or "unknown"
        for job in output.jobs:
            if job.started_at:  # client/server output
                started, finished, when = (
                    job.started_at,
                    job.started_at + timedelta(seconds=job.seconds),
                    job.started_from,
                )
            else:
                finished = output.finished_at or file.modified
                started, when = (
                    finished - timedelta(seconds=job.seconds),
                    "fio" if output.finished_at else "file modification time",
                )
            workload = named[(job.name, what_it_ran(job.options))]
            cell = (job.target, workload)
            versions = targets.setdefault(job.target, [])
            if version not in versions:
                versions.append(version)
            workloads.setdefault(workload, ImportedWorkload(workload, job.name, job.options))
            repetitions[cell] += 1
            source = {"file": file.path, "job": job.name, "fio_version": output.fio_version, "finished_at_from": when}
            logs = (histograms or {}).get((file.path, job.name)) if not job.host else None
            runs.append(
                RunRecord(
                    target=job.target,
                    workload=workload,
                    repetition=repetitions[cell],
                    warmup=False,
                    block=repetitions[cell],
                    position=len(runs),
                    started_at=started,
                    finished_at=finished,
                    status="failed" if job.error else "ok",
                    error=job.error,
                    buffered=job.buffered,
                    outputs=[RawOutput("", "fio", file.text), *([logs.output] if logs else [])],
                    metrics=job.metrics,
                    source=source
                    | ({"host": job.host} if job.host else {})
                    | ({"histogram_logs": logs.paths} if logs else {}),
                )
            )
    faults, passed_over = [s for s in skipped if not s.passed_over], [s for s in skipped if s.passed_over]
    return ImportedStudy(
        name,
        list(paths),
        [ImportedTarget(t, v) for t, v in targets.items()],
        list(workloads.values()),
        runs,
        files,
        faults,
        passed_over,
    )


# --- reading the files ----------------------------------------------------------------------------


def read_files(paths: Iterable[Path]) -> tuple[list[FoundFile], list[Skipped]]:
    """Every file named, and every regular file under every directory named (in name order), each
    once, by its absolute path; those that cannot be read as text, with why. A file named is read through a symlink; a
    symlink met in a directory never is — one leading out of it is reported, one inside it points
    at what the walk reads where it is."""
    found: list[FoundFile] = []
    skipped: list[Skipped] = []
    seen: set[tuple[int, int]] = set()

    def take(path: Path, follow: bool) -> None:
        if FIO_LOG.fullmatch(path.name):
            skipped.append(Skipped(str(path), "fio's log file, not its JSON output", passed_over=True))
            return
        try:
            file = _read(path, follow, seen)
        except NotFioOutput as exc:
            skipped.append(Skipped(str(path), str(exc)))
            return
        if file is not None:
            found.append(file)

    for named in paths:
        path = Path(os.path.abspath(named))  # recorded as found, symlinks in it kept
        if not path.is_dir():
            take(path, follow=True)
            continue
        root = path.resolve()
        for directory, subdirectories, names in os.walk(
            path, onerror=lambda exc: skipped.append(Skipped(str(exc.filename), f"cannot be read: {exc.strerror}"))
        ):
            subdirectories.sort()
            here = Path(directory)
            for name in sorted(names) + [d for d in subdirectories if (here / d).is_symlink()]:
                entry = here / name
                if entry.is_symlink():
                    # realpath, not Path.resolve: a link in a loop must not raise (Python 3.11)
                    if not Path(os.path.realpath(entry)).is_relative_to(root):
                        skipped.append(Skipped(str(entry), f"a symbolic link out of {path}: not followed"))
                    continue
                take(entry, follow=False)
    return found, skipped


def _read(path: Path, follow: bool, seen: set[tuple[int, int]]) -> FoundFile | None:
    """One file's text, or None when it was read already (named twice, or under two paths named).
    Anything but a regular file is never opened: opening a device may act on it (a watchdog, a tape)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        if not stat.S_ISREG(os.stat(path, follow_symlinks=follow).st_mode):
            raise NotFioOutput("not a regular file")
        fd = os.open(path, flags)
    except OSError as exc:
        raise NotFioOutput(f"cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced since it was looked at
            raise NotFioOutput("not a regular file")
        if (st.st_dev, st.st_ino) in seen:
            return None
        seen.add((st.st_dev, st.st_ino))
        if st.st_size > MAX_BYTES:
            raise NotFioOutput(
                f"{st.st_size} bytes, larger than fio's JSON of a run ({MAX_BYTES // 2**20} MiB at most here)"
            )
        data = f.read(MAX_BYTES + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotFioOutput("not UTF-8 text: not fio's JSON output") from None
    return FoundFile(
        str(path),
        text,
        datetime.fromtimestamp(st.st_mtime, UTC).replace(tzinfo=None),
        _target_named(path.absolute().parent.name),
    )


def _target_named(directory: str) -> str:
    """The target a directory's name makes: itself when plain, else DEFAULT_TARGET."""
    return directory if NAME.fullmatch(directory) else DEFAULT_TARGET


def parse_files(
    files: Iterable[FoundFile], target: str | None = None
) -> tuple[list[tuple[FoundFile, FioOutput]], list[Skipped]]:
    """Each file parsed for its target (`target`, else the target directory of bench-fio's tree,
    else its directory's name); those that are not fio's output, with why, and bench-fio's
    preconditioning runs, passed over."""
    parsed, skipped = [], []
    for file in files:
        try:
            output = parse_output(file.text, target or file.target)
        except NotFioOutput as exc:
            skipped.append(Skipped(file.path, str(exc)))
            continue
        if (bench_fio := place(file.path, [job.options for job in output.jobs])) is not None:
            if bench_fio.precondition:
                skipped.append(
                    Skipped(file.path, "bench-fio's preconditioning run (run-N), not a measurement", passed_over=True)
                )
                continue
            if target is None:
                output = output.of(_target_named(bench_fio.target))
        parsed.append((file, output))
    return parsed, skipped


# --- fio's histogram logs beside a JSON file ------------------------------------------------------


@dataclass(frozen=True)
class HistogramLogs:
    """A run's histogram logs found beside its JSON file, as the raw output a measured run keeps."""

    paths: list[str]
    output: RawOutput


def histogram_logs(
    parsed: Iterable[tuple[FoundFile, FioOutput]],
) -> tuple[dict[tuple[str, str], HistogramLogs], list[Skipped]]:
    """(file, job name) → the histogram logs fio wrote of that job beside the file: those its
    write_hist_log names (`<prefix>_clat_hist.<N>.log`, or `<prefix>_clat_hist.log`, in the file's
    directory whatever directory the prefix names), read as untrusted as any file here and kept as
    fio_hist.kept keeps a run's; and the logs that could not be, with why. A prefix several jobs of
    a file share is attached to none: which of its logs is whose, fio's JSON does not say. Client/
    server output's logs are the hosts' own: not looked for."""
    found: dict[tuple[str, str], HistogramLogs] = {}
    refused: list[Skipped] = []
    for file, output in parsed:
        named: dict[str, list[ImportedJob]] = {}
        for job in output.jobs:
            if job.host is None and job.error is None and (prefix := job.options.get("write_hist_log")):
                named.setdefault(Path(prefix).name, []).append(job)
        for prefix, jobs in named.items():
            paths = _beside(Path(file.path).parent, prefix)
            if len({job.name for job in jobs}) > 1:
                refused += [
                    Skipped(
                        str(p),
                        f"a histogram log of prefix '{prefix}', which jobs "
                        f"{', '.join(sorted({j.name for j in jobs}))} of "
                        f"{file.path} share: not attached to either",
                    )
                    for p in paths
                ]
            elif paths:
                try:
                    logs = HistogramLogs(
                        [str(p) for p in paths], RawOutput("", fio_hist.HIST_TOOL, _kept_logs(paths, jobs[0].options))
                    )
                except (NotFioOutput, ValueError) as exc:
                    refused += [
                        Skipped(
                            str(p), f"fio's histogram log of job '{jobs[0].name}' in {file.path}, not attached: {exc}"
                        )
                        for p in paths
                    ]
                else:
                    found[(file.path, jobs[0].name)] = logs
    return found, refused


def _beside(directory: Path, prefix: str) -> list[Path]:
    """The histogram logs of `prefix` in `directory`, by job number (fio's names)."""
    named = fio_hist.hist_files(prefix)
    try:
        entries = [
            (int(m.group(1) or 0), entry.name) for entry in os.scandir(directory) if (m := named.fullmatch(entry.name))
        ]
    except OSError:
        return []
    return [directory / name for _, name in sorted(entries)]


def _kept_logs(paths: list[Path], options: dict[str, str]) -> str:
    """Logs read (as every file here: never through a symlink, regular and of readable size) and
    kept, in the windows and coarseness their job's options set (fio's defaults where unset); on
    fio's default clock (ms since the job's epoch), else — log_alternate_epoch — counted from a
    window before their first line. NotFioOutput or ValueError when they are not such logs."""
    texts = {}
    for path in paths:
        read = _read(path, False, set())
        texts[path.name] = read.text if read else ""
    try:
        window, coarseness = int(options.get("log_hist_msec", "0")), int(options.get("log_hist_coarseness", "0"))
    except ValueError:
        raise ValueError("its job's log_hist_msec or log_hist_coarseness is no whole number") from None
    if window <= 0:
        raise ValueError("its job sets no log_hist_msec, without which fio logs no histogram")
    epoch = None
    if options.get("log_alternate_epoch", "0") not in ("0", ""):
        stamps = [line.msec for text in texts.values() for line in fio_hist.read_fio_log(text)[1]]
        epoch = min(stamps) - window if stamps else None
    kept = fio_hist.kept(texts, window, coarseness, epoch)
    fio_hist.latency_over_time(kept)  # what a report reads of it, read once here: refused now, not when drawn
    return kept
