#!/usr/bin/env python3
"""ZFS overhead: how long fslab spends per ZFS run beyond the workload itself.

Runs a study of one ZFS target on a 1 GiB sparse loop image with one write workload (nothing to
lay out beforehand), 2 s of fio, 5 runs, through fslab's runner, and prints per run:
  - stored: the run's own timings (runs.timings: provision, layout, drop_caches, workload,
    parse, teardown, and the image where the run made it) minus its workload;
  - cycle: from the start of one run to the start of the next (the last one ends when the study
    run returns, so a daemon stopped at the study run's end is counted, spread over its runs)
    minus its workload;
with their median and mean. Target: a mean cycle overhead of at most 1.5 s.

With zfs-fuse, `--compare` runs the same study a second time with a daemon started and stopped
for every run (what fslab did before a study run kept one: provision outside a study run still
does it), and prints both side by side. The OpenZFS kernel module has no daemon: both are alike.

Run as root: python bench/zfs_overhead.py [--runs 5] [--compare]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.zfs_engine import engine
from fslab.plan import Repetitions
from fslab.results import ResultsDB
from fslab.runner import run_study
from fslab.study import parse_study
from fslab.workdir import Workdir

RUNTIME = 2.0
TARGET = 1.5  # seconds of overhead per ZFS run, at most
STUDY = f"""\
[study]
name = "zfs-overhead"
image_size = "1GiB"
image_fill = "sparse"
[[target]]
name = "zfs"
filesystem = "zfs"
[[workload]]
name = "rand_write"
rw = "randwrite"
bs = "4k"
iodepth = 16
size = "256MiB"
runtime = "{RUNTIME}s"
"""


@dataclass(frozen=True)
class Overhead:
    """Seconds beyond the workload, per run: from the runs' stored timings, and from the cycles."""

    stored: list[float]
    cycle: list[float]
    daemons: int  # distinct zfs-fuse daemons the runs used
    phases: dict[str, list[float]]  # seconds of each phase fslab records, per run


class Stopwatch:
    """Timestamps each run's start; the last cycle ends when the study run returns."""

    def __init__(self) -> None:
        self.starts: list[float] = []

    def notice(self, message: str) -> None:
        print(message)

    def starting(self, planned, index, total) -> None:
        self.starts.append(time.monotonic())

    def finished(self, planned, record) -> None:
        pass

    def already_stored(self, planned, index, total) -> None:
        pass


def measure(runs: int) -> Overhead:
    with tempfile.TemporaryDirectory(prefix="fslab-zfs-overhead-", dir="/var/tmp") as tmp:
        study = parse_study(STUDY, "zfs-overhead.toml", base_dir=Path(tmp))
        db = ResultsDB(str(Path(tmp) / "zfs-overhead.db"))
        watch = Stopwatch()
        study_run_id = run_study(study, db, Workdir(Path(tmp) / "wd"), repetitions=Repetitions(runs=runs), seed=1, observer=watch)
        end = time.monotonic()
        stored = db.runs(study_run_id)
    for run in stored:
        assert run["status"] == "ok", run["error"]
    cycles = [nxt - start for start, nxt in zip(watch.starts, [*watch.starts[1:], end])]
    daemons = {line for run in stored for line in run["fs_details"].splitlines() if line.startswith("daemon: ")}
    return Overhead(
        stored=[sum(run["timings"].values()) - run["timings"]["workload"] for run in stored],
        cycle=[cycle - run["timings"]["workload"] for cycle, run in zip(cycles, stored)],
        daemons=len(daemons),
        phases={phase: [run["timings"].get(phase, 0.0) for run in stored] for phase in {p for run in stored for p in run["timings"]}},
    )


def show(label: str, overhead: Overhead) -> None:
    print(f"{label}: {len(overhead.stored)} runs, {overhead.daemons} zfs-fuse daemon(s)")
    for name, figures in (("stored", overhead.stored), ("cycle", overhead.cycle)):
        print(f"  {name:6} overhead per run: median {statistics.median(figures):.2f} s, mean {statistics.mean(figures):.2f} s  ({' '.join(f'{x:.2f}' for x in figures)})")
    print("  phases (median s): " + ", ".join(f"{phase} {statistics.median(figures):.2f}" for phase, figures in sorted(overhead.phases.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compare", action="store_true", help="also measure a daemon started and stopped for every run")
    args = parser.parse_args()
    found = engine()
    if found is None:
        raise SystemExit("no ZFS here: apt-get install zfs-fuse")
    print(f"engine: {found.describe()}; {args.runs} runs of {RUNTIME:g} s of fio")
    kept = measure(args.runs)
    show("one daemon per study run", kept)
    if args.compare and found.fuse:
        # The study run keeps no daemon: each run's provision starts and stops its own.
        with mock.patch.object(type(FILESYSTEMS["zfs"]), "across_runs", lambda self, journal: nullcontext()):
            per_run = measure(args.runs)
        show("a daemon per run (before)", per_run)
        print(f"saved per run: {statistics.mean(per_run.cycle) - statistics.mean(kept.cycle):.2f} s (mean cycle overhead)")
    mean = statistics.mean(kept.cycle)
    print(f"fslab's overhead per ZFS run beyond the workload: {mean:.2f} s (mean cycle); target at most {TARGET} s: {'met' if mean <= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
