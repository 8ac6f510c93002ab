"""sysbench fileio (seed 000's mail server): its options through an allow-list, the commands of
its three steps, running them in the target's directory, and its report read into numbers.

Steps: `prepare` lays out the files and `cleanup` removes them — neither is measured; `run` is.
sysbench makes its files (test_file.0 …) in its current directory: fslab runs every step in the
target's directory, never in a path a study names, and no option may name a path.

What sysbench 1.0.20 writes (src/tests/fileio/sb_fileio.c): every thread's buffer is allocated
and memset to 0, and written as it is — zeros, in prepare and in run — unless `--validate=on`,
under which each block is filled before it is written with bytes from sysbench's own PRNG
(xoshiro, `sb_rand_uniform_uint64() & 0xFF`), its last 12 bytes a CRC32 of the rest and the
block's offset; every block read is then checked against that checksum. So fslab's default data
("random") is `--validate=on` on prepare and run alike (a run reading zero-filled files with
validation on fails its checksums); its cost is the CPU to fill each written block and to check
each block read, inside the measured window, and is recorded with the pattern. "zeros" leaves
sysbench's own buffers, as seed 000 ran it. sysbench has no other data option.

`--file-fsync-freq=N` (seed 000: 1) does not fsync the file just written: after every N-th
request sysbench fsyncs *every one* of its files, one event each, most of them clean. With
10,000 files that is 10,000 fsync events per write, so fsyncs/s, events/s and the mean latency
are dominated by fsyncs of clean files; `fsyncs_per_write` shows it. `--file-fsync-all=on` is
the option that fsyncs the written file after each write.

Parsing is pure (text in, a record out), tested on real output (tests/fixtures/sysbench).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from fslab.core.journal import Journal
from fslab.core.system import run_held
from fslab.core.units import parse_size
from fslab.model import Metric, RawOutput, Workload
from fslab.model.findings import Finding
from fslab.model.options import (
    ON_OFF,
    Integer,
    Matches,
    Number,
    OneOf,
    OptionRefused,
    ToolOptions,
    ValueForm,
    accepted_values,
    check_arguments,
    shown,
    value_text,
)
from fslab.workloads import KINDS, Needed, Registered
from fslab.workloads.base import FSYNCS, IOS, READ_BYTES, WRITTEN_BYTES, Measured, StudyScope, directory_of, tool_of
from fslab.workloads.sysbench_metrics import METRICS
from fslab.workloads.sysbench_report import REPORT_INTERVAL_S, SYSBENCH_REPORT
from fslab.workloads.tables import ToolWorkloadSection, tool_workload

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir
    from fslab.filesystems.base import Provisioned

BY_FSLAB = "fslab sets it itself"
_CHANGES_OUTPUT = "it changes the report fslab reads its numbers from"
MODES = ("seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw")
PERCENTILE = 95  # the latency percentile fslab asks for (sysbench's own default), read as lat_p95_ms

# What a study may set, by sysbench's own names (`--file-num=…`). Those on FIELDS become the
# record's typed fields; the others are kept, checked, as `tuning`.
SYSBENCH_OPTIONS = ToolOptions(
    "sysbench fileio",
    {
        "--file-num": Integer(1, 10_000_000),
        "--file-total-size": Number(1, 2**44, units="kmgt"),
        "--file-block-size": Number(512, 2**30, units="kmg"),
        "--file-test-mode": OneOf(MODES),
        "--file-fsync-freq": Integer(0, 2**31),
        "--threads": Integer(1, 1024),
        "--time": Integer(1, 86_400),
        "--rand-seed": Integer(1, 2**31 - 1),  # 0 would seed from the clock: a run fslab cannot repeat
        "--file-io-mode": OneOf(("sync", "async", "mmap")),
        "--file-async-backlog": Integer(1, 65536),
        "--file-extra-flags": Matches(r"(?:sync|dsync|direct)(?:,(?:sync|dsync|direct)){0,2}",
            "a list of sync, dsync, direct"),
        "--file-fsync-all": ON_OFF,
        "--file-fsync-end": ON_OFF,
        "--file-fsync-mode": OneOf(("fsync", "fdatasync")),
        "--file-merged-requests": Integer(0, 2**31),
        "--file-rw-ratio": Matches(r"\d{1,6}(?:\.\d{1,6})?", "a ratio of reads to writes (1.5)"),
        "--rand-type": OneOf(("uniform", "gaussian", "special", "pareto")),
        "--events": Integer(0, 2**62),
        "--rate": Integer(0, 2**31),
    },
    refused={
        "--validate": "fslab sets it from the workload's data (random: on, zeros: off)",
        "--percentile": f"fslab reads the {PERCENTILE}th percentile",
        "--report-interval": BY_FSLAB, "--report-checkpoints": _CHANGES_OUTPUT, "--histogram": _CHANGES_OUTPUT,
        "--verbosity": _CHANGES_OUTPUT, "--debug": _CHANGES_OUTPUT, "--help": _CHANGES_OUTPUT,
        "--version": _CHANGES_OUTPUT,
        "--config-file": "it reads options from a file of the study's choosing",
        "--luajit-cmd": "it runs a LuaJIT command inside sysbench",
        "--forced-shutdown": "fslab ends a run that outlives its time itself",
        "--max-time": "write --time", "--max-requests": "write --events", "--num-threads": "write --threads",
        "--tx-rate": "write --rate",
        "--db-driver": "fileio uses no database",
    },
)  # fmt: skip

# sysbench name → the record's field
FIELDS = {
    "--file-num": "files", "--file-total-size": "total_size", "--file-block-size": "block_size",
    "--file-test-mode": "mode", "--file-fsync-freq": "fsync_freq", "--threads": "threads",
    "--time": "seconds", "--rand-seed": "seed",
}  # fmt: skip
DATA = ("random", "zeros")
DATA_PATTERNS = {
    "random": (
        "random (sysbench --validate=on: each block written, in prepare and run, is new PRNG bytes with a 12-byte "
        "CRC32 and offset at its end; blocks read are checked — the CPU for both is inside the measured window)"
    ),
    "zeros": "zeros (sysbench's own buffers, memset to 0: every byte written is 0, as compressible as data gets)",
}


@dataclass(frozen=True)
class SysbenchOptions:
    """One sysbench fileio workload, every value checked (model.Tool). Defaults: seed
    000's mail server."""

    kind: ClassVar[str] = "sysbench"
    needs_directory: ClassVar[bool] = True  # its files are made in the target's directory
    takes_snapshots: ClassVar[bool] = False

    files: int = 10_000
    total_size: str = "40000K"  # as sysbench reads it: K, M, G, T are binary; a bare number is bytes
    block_size: str = "4096"
    mode: str = "rndrw"
    fsync_freq: int = 1
    threads: int = 4
    seconds: int = 45
    seed: int = 1
    data: str = "random"
    tuning: tuple[tuple[str, str], ...] = ()  # the other allowed options, as (--name, value)

    def geometry(self) -> list[str]:
        """What prepare, run and cleanup must agree on: the files."""
        return [
            f"--file-num={self.files}",
            f"--file-total-size={self.total_size}",
            f"--file-block-size={self.block_size}",
        ]

    def validate(self) -> str:
        return f"--validate={'on' if self.data == 'random' else 'off'}"

    @property
    def direct(self) -> bool:
        """Whether the run bypasses the page cache (--file-extra-flags with direct); else buffered."""
        return any(name == "--file-extra-flags" and "direct" in value.split(",") for name, value in self.tuning)

    def data_pattern(self) -> str:
        """The words stored with every run (runs.data_pattern)."""
        return DATA_PATTERNS[self.data]

    def spec(self) -> dict[str, Any]:
        return asdict(self) | {"tuning": [list(pair) for pair in self.tuning]}

    def bytes_needed(self, block_device: bool) -> int:
        return parse_size(self.total_size)

    def measured_seconds(self) -> float:
        return float(self.seconds)

    @property
    def file_size(self) -> int:
        """Bytes in each file, as sysbench divides the total (rounding down)."""
        return parse_size(self.total_size) // self.files

    def scaled(self, scale: float, time_scale: float) -> SysbenchOptions:
        """Each file's size × `scale`, kept a whole number of blocks (at least one, so that random
        data's checksums still hold); the time × `time_scale` (whole seconds, at least 1)."""
        block = parse_size(self.block_size)
        size = (
            self.total_size if scale == 1.0 else str(self.files * block * max(1, round(self.file_size * scale / block)))
        )
        return replace(self, total_size=size, seconds=max(1, round(self.seconds * time_scale)))


def sysbench_options(options: Mapping[str, str | int | float | bool], *, data: str = "random") -> SysbenchOptions:
    """A study's sysbench options (sysbench's names, with or without the leading --; true/false
    as on/off) over seed 000's defaults, each checked against SYSBENCH_OPTIONS; OptionRefused
    names every one refused and why. `data`: "random" or "zeros"."""
    if data not in DATA:
        raise OptionRefused(
            f"sysbench data {data!r} is not one of {', '.join(DATA)}: "
            "sysbench writes zeros or, validating, random bytes; nothing else"
        )
    names = [name.removeprefix("--") for name in options]
    if bad := [name for name in names if not re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", name)]:
        raise OptionRefused(
            "; ".join(
                f"sysbench option name {shown(name)} is refused: a name is lowercase words joined by '-'"
                for name in bad
            )
        )
    args = [f"--{name}={value_text(value, 'on', 'off')}" for name, value in zip(names, options.values())]
    check_arguments(SYSBENCH_OPTIONS, args)
    fields: dict[str, str | int] = {}
    tuning = []
    for arg in args:
        name, _, value = arg.partition("=")
        if name in FIELDS:
            kind = SYSBENCH_OPTIONS.options[name]
            fields[FIELDS[name]] = int(value) if _whole(kind) else value
        else:
            tuning.append((name, value))
    made = SysbenchOptions(**fields, data=data, tuning=tuple(tuning))  # type: ignore[arg-type]
    if data == "random" and made.file_size % parse_size(made.block_size):
        raise OptionRefused(
            'sysbench data "random" checks every block it reads (--validate=on), '
            "which fails unless each file is a whole number of blocks: "
            f"{made.total_size} over {made.files} files is {made.file_size} "
            f"bytes a file, not a multiple of --file-block-size {made.block_size}; "
            "make --file-total-size a multiple of --file-num × --file-block-size"
        )
    return made


def _whole(kind: ValueForm) -> bool:
    return isinstance(kind, Number) and not kind.units


def prepare_argv(options: SysbenchOptions) -> list[str]:
    """Lay out the files (not measured). With random data, each block is random and checksummed."""
    return ["sysbench", "fileio", *options.geometry(), options.validate(), "prepare"]


def run_argv(options: SysbenchOptions) -> list[str]:
    """The measured run: the study's options, then fslab's own (which win); each interval reported
    too (sysbench_report: a report's series), beside the totals, which it leaves as they are."""
    return [
        "sysbench", "fileio", *options.geometry(),
        f"--file-test-mode={options.mode}", f"--file-fsync-freq={options.fsync_freq}",
        f"--threads={options.threads}", f"--time={options.seconds}", f"--rand-seed={options.seed}",
        *(f"{name}={value}" for name, value in options.tuning),
        f"--percentile={PERCENTILE}", f"--report-interval={REPORT_INTERVAL_S}", options.validate(), "run",
    ]  # fmt: skip


def cleanup_argv(options: SysbenchOptions) -> list[str]:
    """Remove the files (not measured)."""
    return ["sysbench", "fileio", *options.geometry(), "cleanup"]


def run_step(journal: Journal, argv: list[str], directory: Path, *, timeout: float | None = None) -> str:
    """Run one step in the target's directory (journalled: clean-up stops it); its report text.
    sysbench never sets a locale, so its numbers are always written the C way."""
    return run_held(journal, argv, timeout=timeout, cwd=directory).stdout


# ---- the report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SysbenchRun:
    """What a fileio run reports, as printed (MiB/s, ms rounded to 2 decimals) but for `events`."""

    reads_per_s: float
    writes_per_s: float
    fsyncs_per_s: float
    read_mib_s: float
    write_mib_s: float
    total_s: float
    events: int
    lat_min_ms: float
    lat_avg_ms: float
    lat_max_ms: float
    lat_p95_ms: float | None  # None when sysbench was asked for no percentile
    lat_sum_ms: float
    threads: int

    @property
    def events_per_s(self) -> float:
        """fileio prints no events/s: events ÷ total time."""
        return self.events / self.total_s if self.total_s > 0 else 0.0

    @property
    def mean_latency_ms(self) -> float:
        """The mean latency from the latency sum (printed to 0.01 ms of a large total) ÷ events:
        resolved where sysbench's own avg, rounded to 0.01 ms, reads 0.00."""
        return self.lat_sum_ms / self.events if self.events else 0.0

    @property
    def read_bytes(self) -> float:
        """Bytes read over the run, approximately: sysbench prints no byte count, only the rate
        (MiB/s to 2 decimals) over the total time; their product is within the rate's rounding
        (0.005 MiB/s) and any gap between sysbench's rate interval and its total time."""
        return self.read_mib_s * 2**20 * self.total_s

    @property
    def written_bytes(self) -> float:
        """Bytes written over the run, approximately (as read_bytes)."""
        return self.write_mib_s * 2**20 * self.total_s

    @property
    def fsyncs(self) -> int:
        """fsyncs (or fdatasyncs: --file-fsync-mode) issued over the run, approximately (as read_bytes)."""
        return round(self.fsyncs_per_s * self.total_s)

    @property
    def fsyncs_per_write(self) -> float | None:
        return self.fsyncs_per_s / self.writes_per_s if self.writes_per_s > 0 else None


def metric_values(result: SysbenchRun) -> list[Metric]:
    """The run's metrics (METRICS). lat_avg_ms is the sum ÷ events, not the rounded avg."""
    values = {
        "events_per_s": result.events_per_s,
        "reads_per_s": result.reads_per_s,
        "writes_per_s": result.writes_per_s,
        "fsyncs_per_s": result.fsyncs_per_s,
        "read_mib_s": result.read_mib_s,
        "write_mib_s": result.write_mib_s,
        "read_mb_s": result.read_mib_s * 2**20 / 1e6,
        "write_mb_s": result.write_mib_s * 2**20 / 1e6,
        "lat_avg_ms": result.mean_latency_ms,
        "lat_max_ms": result.lat_max_ms,
        "elapsed_s": result.total_s,
        READ_BYTES: result.read_bytes,
        WRITTEN_BYTES: result.written_bytes,
    }
    if result.lat_p95_ms is not None:
        values["lat_p95_ms"] = result.lat_p95_ms
    if result.fsyncs:
        values[FSYNCS] = result.fsyncs
    if ios := round((result.reads_per_s + result.writes_per_s) * result.total_s):
        values[IOS] = ios
    return [METRICS[name].of(name, value) for name, value in values.items()]


_NUMBER = r"(\d+(?:\.\d+)?)"
_FIELDS = {
    "reads_per_s": r"reads/s:", "writes_per_s": r"writes/s:", "fsyncs_per_s": r"fsyncs/s:",
    "read_mib_s": r"read, MiB/s:", "write_mib_s": r"written, MiB/s:",
    "total_s": r"total time:", "events": r"total number of events:",
    "lat_min_ms": r"min:", "lat_avg_ms": r"avg:", "lat_max_ms": r"max:", "lat_sum_ms": r"sum:",
    "threads": r"Number of threads:",
}  # fmt: skip


def parse_run(text: str) -> SysbenchRun:
    """A fileio run's report; ValueError naming what is missing when it is not one (sysbench
    ended early, or printed an error instead)."""
    found: dict[str, float] = {}
    missing = []
    for field, label in _FIELDS.items():
        match = re.search(rf"^\s*{re.escape(label)}\s+{_NUMBER}s?\s*$", text, re.MULTILINE)
        if match:
            found[field] = float(match.group(1))
        else:
            missing.append(label.rstrip(":"))
    if missing:
        fatal = [line.strip() for line in text.splitlines() if "FATAL" in line or "error" in line.lower()]
        raise ValueError(
            f"sysbench's report lacks {', '.join(missing)}" + (f": {' / '.join(fatal[-3:])}" if fatal else "")
        )
    p95 = re.search(rf"^\s*{PERCENTILE}th percentile:\s+{_NUMBER}\s*$", text, re.MULTILINE)
    return SysbenchRun(
        **{k: v for k, v in found.items() if k not in ("events", "threads")},
        events=int(found["events"]),
        threads=int(found["threads"]),
        lat_p95_ms=float(p95.group(1)) if p95 else None,
    )


@dataclass(frozen=True)
class Prepared:
    """What prepare says it wrote (not measured: a check that the files are all there)."""

    bytes_written: int
    seconds: float


def parse_prepare(text: str) -> Prepared:
    match = re.search(rf"^(\d+) bytes written in {_NUMBER} seconds", text, re.MULTILINE)
    if not match:
        raise ValueError("sysbench prepare did not say what it wrote")
    return Prepared(int(match.group(1)), float(match.group(2)))


# ---- what cannot be real ----------------------------------------------------------------------

# sysbench prints latencies in ms with two decimals: below this, a latency reads 0.00.
LATENCY_RESOLUTION_MS = 0.005
# The least one fileio event can take — sysbench's mutex, its request generator, one system call
# (even an fsync of a clean file) and its statistics — per thread: ~1 µs. More events per thread
# per second than 1 / this are not events that ran.
MIN_EVENT_US = 1.0
# Threads cannot be busy longer than the run: latency sum ≤ threads × total time, with this slack
# (sysbench times each thread from its own start).
BUSY_SLACK = 0.02
# fsyncs per write at or above this share of the files: sysbench's periodic fsync sweep over
# every file (--file-fsync-freq), not an fsync of what was written.
SWEEP_SHARE = 0.5


def judge(result: SysbenchRun, options: SysbenchOptions | None = None) -> list[Finding]:
    """What in a run's report cannot be real, and what a reader must know to read it (pure).
    Rates beyond what the raw device delivered are judged by the summary, against the study's
    raw targets: this run's MB/s (metric_values) are what it needs; sysbench fileio is buffered
    unless --file-extra-flags has direct (SysbenchOptions.direct)."""
    found = []
    if result.events and result.lat_avg_ms < LATENCY_RESOLUTION_MS:
        found.append(Finding(
            "latency_unresolved",
            f"sysbench printed avg latency 0.00 ms over {result.events} events: below its 0.01 ms resolution; "
            f"lat_avg_ms is the latency sum ÷ events ({result.mean_latency_ms * 1e3:.2f} µs), "
            "p95 and min are not resolved",
            implausible=result.lat_sum_ms == 0,
        ))  # fmt: skip
    per_thread = result.events_per_s / max(result.threads, 1)
    if per_thread > 1e6 / MIN_EVENT_US:
        found.append(Finding(
            "events_too_fast",
            f"{per_thread:.0f} events/s per thread: under {MIN_EVENT_US:g} µs each, "
            "less than one system call takes; not events that ran",
            implausible=True,
        ))  # fmt: skip
    busy = result.threads * result.total_s * 1e3
    if result.lat_sum_ms > busy * (1 + BUSY_SLACK):
        found.append(Finding(
            "busy_beyond_time",
            f"latency sum {result.lat_sum_ms / 1e3:.1f} s exceeds {result.threads} threads × {result.total_s:.1f} s: "
            "the report contradicts itself",
            implausible=True,
        ))  # fmt: skip
    per_write = result.fsyncs_per_write
    if options and per_write is not None and options.fsync_freq and per_write >= SWEEP_SHARE * options.files:
        found.append(Finding(
            "fsync_sweep",
            f"{per_write:.0f} fsyncs per write with {options.files} files: "
            "sysbench's --file-fsync-freq fsyncs every file, "
            "most of them clean, so events/s and latency mostly measure fsyncs of unchanged files",
            implausible=False,
        ))  # fmt: skip
    return found


# ---- the workload kind ------------------------------------------------------------------------


class Sysbench:
    """sysbench fileio behind the workload protocol (workloads/base.py): prepare lays the files
    out in the target's directory (not measured), run is measured; cleanup is left to the
    filesystem's teardown, which destroys it whole."""

    name = "sysbench"
    metrics = METRICS
    report = SYSBENCH_REPORT
    accepted_options = {
        name.removeprefix("--"): form for name, form in accepted_values(SYSBENCH_OPTIONS.options).items()
    }  # a study writes them with or without --

    def problems(self, workloads: list[Workload], workdir: Workdir) -> list[str]:
        return []  # every option was checked when the study was read

    def command(self, workload: Workload, ready: Provisioned) -> str:
        return shlex.join(run_argv(tool_of(workload, SysbenchOptions)))  # run in the target's directory

    def prepare(
        self, journal: Journal, workload: Workload, ready: Provisioned, scratch: Path, scope: StudyScope
    ) -> list[RawOutput]:
        parse_prepare(
            run_step(journal, prepare_argv(tool_of(workload, SysbenchOptions)), directory_of(ready, self.name))
        )
        return []

    def run(
        self,
        journal: Journal,
        workload: Workload,
        ready: Provisioned,
        command: str,
        scratch: Path,
        scope: StudyScope,
        measured: Measured,
    ) -> list[RawOutput]:
        with measured(""):
            text = run_step(journal, run_argv(tool_of(workload, SysbenchOptions)), directory_of(ready, self.name))
        return [RawOutput("", self.name, text)]

    def parse(self, outputs: list[RawOutput]) -> list[Metric]:
        return [m for output in outputs for m in metric_values(parse_run(output.text))]

    def judge(self, workload: Workload, outputs: list[RawOutput]) -> list[Finding]:
        return [f for output in outputs for f in judge(parse_run(output.text), tool_of(workload, SysbenchOptions))]


SYSBENCH = Sysbench()


# ---- its table in a study file -----------------------------------------------------------------


class SysbenchSection(ToolWorkloadSection):
    """sysbench fileio (workloads/sysbench.py); defaults: seed 000's mail server."""

    kind: Literal["sysbench"]

    def checked(self) -> SysbenchOptions:
        return sysbench_options(self.options, data=self.data or "random")


KINDS.add(
    Registered(
        SYSBENCH, section=SysbenchSection, build=tool_workload, tool=Needed(("sysbench", "--version"), "sysbench")
    ),
    own=True,
)
