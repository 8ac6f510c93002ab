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
`--smoke`: two runs of 0.25 s on a 256 MiB image (with --compare, one run the old way: each daemon
started costs its ~3 s exit again): proves the script runs, in seconds; its figures are printed,
not judged against the target.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from unittest import mock

from fslab.core.workdir import Workdir
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.zfs_engine import engine
from fslab.results import ResultsDB
from fslab.running.plan import Repetitions
from fslab.running.runner import run_study
from fslab.study import parse_study
from stopwatch import Stopwatch  # bench/'s: this script runs from there

TARGET = 1.5  # seconds of overhead per ZFS run, at most
STUDY = """\
[study]
name = "zfs-overhead"
image_size = "{image_size}"
image_fill = "sparse"
[[target]]
name = "zfs"
filesystem = "zfs"
[[workload]]
name = "rand_write"
rw = "randwrite"
bs = "4k"
iodepth = 16
size = "{size}"
runtime = "{runtime:g}s"
"""


@dataclass(frozen=True)
class Overhead:
    """Seconds beyond the workload, per run: from the runs' stored timings, and from the cycles."""

    stored: list[float]
    cycle: list[float]
    daemons: int  # distinct zfs-fuse daemons the runs used
    phases: dict[str, list[float]]  # seconds of each phase fslab records, per run


@dataclass(frozen=True)
class Size:
    """What the study measures with: its image, fio's file and runtime, and runs."""

    image_size: str
    size: str
    runtime: float
    runs: int


def measure(size: Size) -> Overhead:
    with tempfile.TemporaryDirectory(prefix="fslab-zfs-overhead-", dir="/var/tmp") as tmp:
        text = STUDY.format(image_size=size.image_size, size=size.size, runtime=size.runtime)
        study = parse_study(text, "zfs-overhead.toml", base_dir=Path(tmp))
        db = ResultsDB(str(Path(tmp) / "zfs-overhead.db"))
        watch = Stopwatch()
        repetitions = Repetitions(runs=size.runs)
        study_run_id = run_study(study, db, Workdir(Path(tmp) / "wd"), repetitions=repetitions, seed=1, observer=watch)
        cycles = [seconds for _, seconds in watch.cycles(time.monotonic())]
        stored = db.runs(study_run_id)
    for run in stored:
        assert run["status"] == "ok", run["error"]
    daemons = {line for run in stored for line in run["fs_details"].splitlines() if line.startswith("daemon: ")}
    return Overhead(
        stored=[sum(run["timings"].values()) - run["timings"]["workload"] for run in stored],
        cycle=[cycle - run["timings"]["workload"] for cycle, run in zip(cycles, stored, strict=True)],
        daemons=len(daemons),
        phases={
            phase: [run["timings"].get(phase, 0.0) for run in stored]
            for phase in {p for run in stored for p in run["timings"]}
        },
    )


def show(label: str, overhead: Overhead) -> None:
    print(f"{label}: {len(overhead.stored)} runs, {overhead.daemons} zfs-fuse daemon(s)")
    for name, figures in (("stored", overhead.stored), ("cycle", overhead.cycle)):
        print(
            f"  {name:6} overhead per run: median {statistics.median(figures):.2f} s, mean "
            f"{statistics.mean(figures):.2f} s  ({' '.join(f'{x:.2f}' for x in figures)})"
        )
    print(
        "  phases (median s): "
        + ", ".join(f"{phase} {statistics.median(figures):.2f}" for phase, figures in sorted(overhead.phases.items()))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--compare", action="store_true", help="also measure a daemon started and stopped for every run"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args()
    size = Size("256MiB", "16MiB", 0.25, 2) if args.smoke else Size("1GiB", "256MiB", 2.0, args.runs)
    found = engine()
    if found is None:
        raise SystemExit("no ZFS here: apt-get install zfs-fuse")
    print(f"engine: {found.describe()}; {size.runs} runs of {size.runtime:g} s of fio on a {size.image_size} image")
    kept = measure(size)
    show("one daemon per study run", kept)
    if args.compare and found.fuse:
        # The study run keeps no daemon: each run's provision starts and stops its own.
        with mock.patch.object(type(FILESYSTEMS["zfs"]), "across_runs", lambda self, journal: nullcontext()):
            per_run = measure(replace(size, runs=1) if args.smoke else size)
        show("a daemon per run (before)", per_run)
        print(
            f"saved per run: {statistics.mean(per_run.cycle) - statistics.mean(kept.cycle):.2f} s (mean cycle overhead)"
        )
    mean = statistics.mean(kept.cycle)
    judged = f"target at most {TARGET} s: {'met' if mean <= TARGET else 'NOT met'}"
    judged = "smoke: not judged" if args.smoke else judged
    print(f"fslab's overhead per ZFS run beyond the workload: {mean:.2f} s (mean cycle); {judged}")


if __name__ == "__main__":
    main()
