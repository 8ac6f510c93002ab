"""Hardware counters (cycles, instructions) over a measured window, from `perf stat`, for
--trace cpu (cpu_trace.py) — where the machine has a PMU; where it has none (a VM without a
virtual PMU: /sys/bus/event_source/devices lists no cpu PMU) they are not measurable, never 0.

perf runs system-wide (-a), fslab's fixed argv (EVENTS alone varies, and only between fslab's own
constants), held in the journal (system.running_held) from the window's start to its end, and
printing every INTERVAL_MS its counts of the interval (-I, CSV: -x,):

    <seconds since it began>,<count>,<unit>,<event>,<run time>,<% of it counted>,...

The counts, added up, are cumulative counters stamped on fslab's monotonic clock (perf's
seconds + when it was started), so the window is counted from the workload's own start to the
sync (base.counted_from), as every monitor is. It is stopped with SIGINT — the signal on which
it prints its last interval and exits — sent to fslab's own child, not yet reaped, whose pid
therefore cannot belong to another process; the journal's releaser kills it on any other exit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.checks import Check, tool_check

if TYPE_CHECKING:
    from fslab.core.journal import Journal

EVENT_SOURCES = Path("/sys/bus/event_source/devices")
# The core PMUs perf names cycles and instructions on: x86 (hybrid: cpu_core, cpu_atom), Arm.
CORE_PMUS = ("cpu", "cpu_core", "cpu_atom")
CORE_PMU_PREFIXES = ("armv7_", "armv8_", "arm_cortex", "arm_neoverse")
HARDWARE = ("cycles", "instructions")
INTERVAL_MS = 250
STOP_SECONDS = 10.0  # for perf to print its last interval and exit once signalled
NO_PMU = "not measurable here: no PMU"


@dataclass(frozen=True)
class Counts:
    """Each event's count since perf began, at `at` (time.monotonic())."""

    at: float
    counts: dict[str, int]


def core_pmu(sources: Path = EVENT_SOURCES) -> str | None:
    """The name of this machine's core PMU, or None when it has none."""
    try:
        names = sorted(p.name for p in sources.iterdir())
    except OSError:
        return None
    return next((n for n in names if n in CORE_PMUS or n.startswith(CORE_PMU_PREFIXES)), None)


def checks() -> list[Check]:
    pmu = core_pmu()
    return [
        tool_check("perf", ("perf", "--version"), "linux-perf", required=False),
        Check(
            "PMU",
            pmu is not None,
            f"{pmu}: --trace cpu counts cycles and instructions"
            if pmu
            else f"{EVENT_SOURCES} lists no cpu PMU: --trace cpu says cycles and instructions are {NO_PMU}",
            "a machine (or a VM with a virtual PMU) whose CPU counters the kernel exposes, for cycles and instructions",
            required=False,
        ),
    ]


def argv(events: Sequence[str]) -> list[str]:
    """perf stat's fixed command: system-wide, CSV, an interval's counts every INTERVAL_MS."""
    return ["perf", "stat", "-a", "-x", ",", "-I", str(INTERVAL_MS), "-e", ",".join(events)]


def parse_intervals(text: str, events: Sequence[str]) -> list[tuple[float, dict[str, int]]]:
    """perf's intervals as (seconds since it began, each event's count in that interval), in
    order; an interval missing an event, or with one not counted ("<not counted>",
    "<not supported>"), is left out. Lines that are not an interval's (comments) are skipped."""
    found: dict[float, dict[str, int | None]] = {}
    for line in text.splitlines():
        fields = line.strip().split(",")
        if len(fields) < 4 or fields[3] not in events or not _number(fields[0]):
            continue
        found.setdefault(float(fields[0]), {})[fields[3]] = int(float(fields[1])) if _number(fields[1]) else None
    return [
        (at, {e: n for e, n in counts.items() if n is not None})
        for at, counts in sorted(found.items())
        if set(counts) == set(events) and None not in counts.values()
    ]


def _number(text: str) -> bool:
    try:
        return float(text) >= 0
    except ValueError:
        return False


def cumulative(intervals: Sequence[tuple[float, dict[str, int]]], began: float) -> list[Counts]:
    """The intervals' counts added up, each stamped `began` (monotonic) + perf's seconds; a first
    sample of zeros at `began`."""
    running: dict[str, int] = {}
    samples: list[Counts] = []
    for at, counts in intervals:
        running = {e: running.get(e, 0) + n for e, n in counts.items()}
        samples.append(Counts(began + at, dict(running)))
    return [Counts(began, dict.fromkeys(running, 0)), *samples] if samples else []


def between(samples: Sequence[Counts], start: float, end: float) -> dict[str, float] | None:
    """Each event's count from `start` to `end` (monotonic), interpolated between the samples
    around each; None when the samples do not cover the interval."""
    if len(samples) < 2 or start < samples[0].at or end > samples[-1].at or end <= start:
        return None

    def at(moment: float) -> dict[str, float]:
        after = next(i for i, s in enumerate(samples) if s.at >= moment)
        if after == 0:
            return {e: float(n) for e, n in samples[0].counts.items()}
        a, b = samples[after - 1], samples[after]
        fraction = (moment - a.at) / (b.at - a.at)
        return {e: a.counts[e] + (b.counts[e] - a.counts[e]) * fraction for e in a.counts}

    first, last = at(start), at(end)
    return {e: last[e] - first[e] for e in first}


@dataclass
class Counting:
    """perf stat counting `events` from `start` to `stop`, held in `journal`; its samples after."""

    journal: Journal
    events: Sequence[str] = HARDWARE
    samples: list[Counts] | None = None

    def start(self) -> None:
        from fslab.core.scratch import scratch_directory  # the journal's and subprocess's: not for a summary
        from fslab.core.system import running_held

        self._stack = ExitStack()
        try:
            scratch = self._stack.enter_context(scratch_directory(self.journal))
            self._out = scratch / "perf.csv"
            self._began = time.monotonic()
            self._proc: subprocess.Popen[bytes] = self._stack.enter_context(
                running_held(self.journal, argv(self.events), log=self._out)
            )
        except BaseException:
            self._stack.close()
            raise

    def stop(self) -> None:
        try:
            if self._proc.returncode is None:  # our own child, not yet reaped: its pid is still its own
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._proc.pid, signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(STOP_SECONDS)
            text = self._out.read_text(errors="replace") if self._out.exists() else ""
            self.samples = cumulative(parse_intervals(text, self.events), self._began)
        finally:
            self._stack.close()  # kills it, if still there, and removes its scratch directory
