#!/usr/bin/env python3
"""Monitors: what each level of watching costs a run. The highest-IOPS case fslab has — 4 KiB
random reads, direct I/O, queue depth 1 (psync), on ext4 on a fresh zram device — run at each level,
the levels in a shuffled order within each block of repetitions, so that drift falls on all alike:
  - none: no monitor (the baseline);
  - always-on: every monitor of the registry without a `trace` (what every run pays);
  - trace-block, trace-cpu: always-on + the opt-in monitor `--trace block` / `--trace cpu` turns on
    ("not registered yet" where no monitor has that trace).
Prints a line per level,
  LEVEL: fslab CPU P % of one core, IOPS ratio R (95% L–U)
P: the CPU time fslab used while fio ran (every thread of this process, and the processes it
started but fio: a tracer's), ÷ fio's wall time, the median over the level's runs; R: the geometric
mean of the blocks' IOPS ratios (level ÷ none), with its 95 % interval (scipy's one-sample t on the
logs of the ratios). Then each monitor's samples a second (a Sampler's: one thread takes them
all, base.CLOCK) and its seconds in start, stop (at the window's edges) and values (after it).
Targets (issue 36): always-on at most 0.5 % of one core, its interval including 1.0.

Run as root: python bench/monitors.py [--blocks 10] [--runtime 3]
`--smoke`: two blocks of 0.3 s on a 16 MiB file: proves the script runs, in seconds; its figures
are printed, not judged against the targets.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from scipy import stats

from fslab.core.system import run
from fslab.core.workdir import Workdir
from fslab.devices.layers import Stack
from fslab.devices.zram import ZramSource
from fslab.filesystems import FILESYSTEMS, Provisioned
from fslab.model import Target
from fslab.monitors import Monitor, WorkloadSaid, collect, for_run, measuring, traces

MiB = 2**20
LEVELS = {"always-on": "", "trace-block": "block", "trace-cpu": "cpu"}  # level → the trace it adds
CPU_TARGET = 0.5  # % of one core, at most, for always-on
TICK = os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU time of this process, every thread of it."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def descendants_cpu_seconds(leave_out: int) -> float:
    """CPU time of every process descended from this one, but `leave_out` (fio) and its own: a
    tracer fslab started. (Scanning /proc costs this process ms: see fio() for where it falls.)"""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            after = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        pid = int(entry.name)
        parents[pid] = int(after[1])  # ppid; then utime, stime, cutime, cstime at 11–14
        ticks[pid] = sum(int(x) for x in after[11:15])
    mine, found = {os.getpid()}, True
    while found:
        found = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine and pid != leave_out:
                mine.add(pid)
                found = True
    return sum(ticks[pid] for pid in mine if pid != os.getpid()) / TICK


def fio(path: Path, size: int, runtime: float, scratch: Path) -> tuple[float, float, float]:
    """One fio run: its IOPS, its wall time and fslab's CPU time meanwhile: this process's and its
    other descendants' (the scans of /proc outside the interval counted)."""
    argv = [
        "fio", "--name=bench", f"--filename={path}", "--rw=randread", "--bs=4k", "--direct=1",
        "--ioengine=psync", "--iodepth=1", f"--size={size}", f"--runtime={runtime * 1000:g}ms", "--time_based",
        "--randrepeat=1", "--output-format=json",
    ]  # fmt: skip
    began = time.monotonic()
    process = subprocess.Popen(argv, cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    others = descendants_cpu_seconds(process.pid)
    own = own_cpu_seconds()
    assert process.stdout is not None
    output = process.stdout.read()  # to its end: fio has exited, or is about to
    own = own_cpu_seconds() - own
    wall = time.monotonic() - began
    others = descendants_cpu_seconds(process.pid) - others
    if process.wait() != 0:
        raise SystemExit(f"fio failed ({process.returncode})")
    return json.loads(output)["jobs"][0]["read"]["iops"], wall, own + others


class Timed:
    """A monitor with the seconds of each of its calls written down."""

    def __init__(self, monitor: Monitor, seconds: dict[str, list[float]]):
        self.monitor, self.name, self.seconds = monitor, monitor.name, seconds

    def _timed(self, call: str, *args) -> None:  # noqa: ANN002
        start = time.perf_counter()
        getattr(self.monitor, call)(*args)
        self.seconds[call].append(time.perf_counter() - start)

    def start(self) -> None:
        self._timed("start")

    def stop(self) -> None:
        self._timed("stop")

    def values(self, workload, found) -> None:  # noqa: ANN001
        self._timed("values", workload, found)


@dataclass
class Level:
    traces: frozenset[str] | None  # None: no monitor at all
    iops: list[float] = field(default_factory=list)
    cpu_pct: list[float] = field(default_factory=list)  # of one core, while fio ran
    seconds: dict[str, dict[str, list[float]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    samples: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # a second
    failed: str = ""


def ratio_interval(level: list[float], none: list[float]) -> tuple[float, float, float]:
    """The geometric mean of the paired ratios, and its 95 % interval (t on their logs)."""
    logs = [math.log(a / b) for a, b in zip(level, none)]
    interval = stats.ttest_1samp(logs, 0.0).confidence_interval(0.95)
    return math.exp(statistics.fmean(logs)), math.exp(interval.low), math.exp(interval.high)


def measure(
    level: Level, device: str, made: Provisioned, path: Path, size: int, runtime: float, wd: Workdir, scratch: Path
) -> None:
    if level.failed:
        return
    try:
        built = (
            []
            if level.traces is None
            else for_run(
                [device],
                made.directory,
                traces=level.traces,
                journal=wd.journal,
                direct=True,  # fio's reads are direct: the page cache's count watches them
                bdi=FILESYSTEMS["ext4"].bdi(made),
            )
        )
    except Exception as exc:  # a trace this machine cannot run: said, the other levels measured
        level.failed = f"not measurable here: {exc}"
        return
    monitors = [Timed(m, level.seconds[m.name]) for m in built]
    with measuring(monitors):
        iops, wall, cpu = fio(path, size, runtime, scratch)
    collect(monitors, WorkloadSaid(read_bytes=iops * 4096 * wall))
    level.iops.append(iops)
    level.cpu_pct.append(100 * cpu / wall)
    for timed in monitors:
        sampler = getattr(timed.monitor, "sampler", None)
        if sampler is not None:
            level.samples[timed.name].append(len(sampler.samples) / wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=10, help="repetitions: each runs every level once")
    parser.add_argument("--runtime", type=float, default=3.0, help="seconds of fio a run")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args()
    blocks, runtime, size = (2, 0.3, 16 * MiB) if args.smoke else (args.blocks, args.runtime, 256 * MiB)
    known = traces()
    levels = {"none": Level(None)}
    absent = []
    for name, trace in LEVELS.items():
        if trace and trace not in known:
            absent.append(name)
        else:
            levels[name] = Level(frozenset({trace} if trace else ()))
    order = random.Random(36)
    load_before = Path("/proc/loadavg").read_text().split()[0]
    with tempfile.TemporaryDirectory(prefix="fslab-monitors-", dir="/var/tmp") as tmp:
        wd = Workdir(Path(tmp) / "wd")
        wd.prepare()
        target = Target("bench", "ext4", (), "", 2 * size + 64 * MiB, "sparse")
        with ZramSource("bench", 1, target.image_size).attach(wd.journal) as attached:
            with FILESYSTEMS["ext4"].provision(wd.journal, Stack.on(attached), wd.mounts / "bench", target) as made:
                assert made.directory is not None, "ext4 mounted"
                path = made.directory / "bench.0"
                layout = ["fio", "--name=layout", f"--filename={path}", "--rw=write", "--bs=1m", "--direct=1"]
                run([*layout, f"--size={size}", "--output=/dev/null"], cwd=Path(tmp))
                device = attached.devices[0]
                for _ in range(blocks):
                    names = list(levels)
                    order.shuffle(names)
                    for name in names:
                        measure(levels[name], device, made, path, size, runtime, wd, Path(tmp))
    none = levels.pop("none")
    print(
        f"{blocks} blocks, {runtime:g} s of 4 KiB random reads (direct, QD1, psync) on ext4 on zram, "
        f"the levels shuffled in each; load average before {load_before}, "
        f"after {Path('/proc/loadavg').read_text().split()[0]}"
    )
    print(
        f"none (the baseline): median IOPS {statistics.median(none.iops):,.0f}, "
        f"fslab CPU {statistics.median(none.cpu_pct):.2f} % of one core"
    )
    for name in LEVELS:
        if name in absent:
            print(f"{name}: not registered yet (no monitor has trace {LEVELS[name]!r})")
            continue
        level = levels[name]
        if level.failed or len(level.iops) < 2:
            print(f"{name}: {level.failed or 'too few runs'}")
            continue
        ratio, low, high = ratio_interval(level.iops, none.iops)
        print(
            f"{name}: fslab CPU {statistics.median(level.cpu_pct):.2f} % of one core, "
            f"IOPS ratio {ratio:.3f} (95% {low:.3f}–{high:.3f})"
        )
    print(f"{'monitor':<20} {'samples/s':>9} {'start (ms)':>10} {'stop (ms)':>10} {'values (ms)':>11}")
    for name, level in levels.items():
        for monitor, calls in level.seconds.items():
            rate = level.samples.get(monitor)
            print(
                f"{name + ' ' + monitor:<20} "
                + (f"{statistics.median(rate):>9.1f} " if rate else f"{'–':>9} ")
                + " ".join(
                    f"{statistics.median(calls[c]) * 1000:>{w}.3f}"
                    for c, w in (("start", 10), ("stop", 10), ("values", 11))
                )
            )
    if not args.smoke and "always-on" in levels and len(levels["always-on"].iops) >= 2:
        always = levels["always-on"]
        cpu = statistics.median(always.cpu_pct)
        _, low, high = ratio_interval(always.iops, none.iops)
        print(
            f"always-on: {cpu:.2f} % of one core "
            f"({'met' if cpu <= CPU_TARGET else 'NOT met'}: at most {CPU_TARGET} %); "
            f"interval {'includes' if low <= 1 <= high else 'does NOT include'} 1.0"
        )


if __name__ == "__main__":
    main()
