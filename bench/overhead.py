#!/usr/bin/env python3
"""Overhead: how long fslab spends per run beyond the workload itself.

Runs a study of ext4, XFS and Btrfs on 4 GiB loop images with one write workload (nothing to
lay out beforehand), 2 s of fio each, 5 runs per target, and times every run cycle from the
start of one run to the start of the next (everything: image, mkfs, mount, cache drop, fio,
unmount, detach, storing). Prints, per filesystem, the median of
  - overhead beyond fio: the cycle minus fio's own wall time (target: at most 1.5 s), and
  - overhead beyond the nominal runtime: the cycle minus fio's runtime setting (fio's own
    start-up and exit included),
with the median seconds of each phase fslab records.

Run as root: python bench/overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from fslab.plan import Repetitions
from fslab.results import ResultsDB
from fslab.runner import run_study
from fslab.study import parse_study
from fslab.workdir import Workdir

RUNTIME = 2.0
STUDY = f"""\
[study]
name = "overhead"
image_size = "4GiB"
[[target]]
filesystem = ["ext4", "xfs", "btrfs"]
[[workload]]
name = "rand_write"
rw = "randwrite"
bs = "4k"
iodepth = 16
size = "1GiB"
runtime = "{RUNTIME}s"
"""


class Stopwatch:
    """Timestamps each run's start; the last cycle ends when the study returns."""

    def __init__(self) -> None:
        self.starts: list[tuple[float, str]] = []

    def notice(self, message: str) -> None:
        print(message)

    def starting(self, planned, index, total) -> None:  # noqa: ANN001
        self.starts.append((time.monotonic(), planned.cell.target.name))

    def finished(self, planned, record) -> None:  # noqa: ANN001
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fslab-overhead-", dir="/var/tmp") as tmp:
        study = parse_study(STUDY, "overhead.toml", base_dir=Path(tmp))
        db = ResultsDB(str(Path(tmp) / "overhead.db"))
        watch = Stopwatch()
        study_run_id = run_study(study, db, Workdir(Path(tmp) / "wd"), repetitions=Repetitions(runs=args.runs), seed=1, observer=watch)
        end = time.monotonic()
        runs = db.runs(study_run_id)
    cycles = [(name, nxt - start) for (start, name), (nxt, _) in zip(watch.starts, watch.starts[1:] + [(end, "")])]
    beyond_fio, beyond_runtime, phases = defaultdict(list), defaultdict(list), defaultdict(lambda: defaultdict(list))
    for (name, cycle), run in zip(cycles, runs):
        assert run["target"] == name and run["status"] == "ok", run["error"]
        beyond_fio[name].append(cycle - run["timings"]["workload"])
        beyond_runtime[name].append(cycle - RUNTIME)
        for phase, seconds in run["timings"].items():
            phases[name][phase].append(seconds)
    print(f"{args.runs} runs per filesystem, 4 GiB images, {RUNTIME:g} s of 4 KiB random writes each")
    print(f"{'target':<7} {'beyond fio (s)':>14} {'beyond runtime (s)':>18}   median seconds per phase")
    for name in beyond_fio:
        detail = ", ".join(
            f"{phase} {statistics.median(v):.3f}" + (" (first run only)" if len(v) < len(beyond_fio[name]) else "")
            for phase, v in phases[name].items()
        )
        print(f"{name:<7} {statistics.median(beyond_fio[name]):>14.3f} {statistics.median(beyond_runtime[name]):>18.3f}   {detail}")
    worst = max(statistics.median(v) for v in beyond_fio.values())
    print(f"worst median overhead beyond fio: {worst:.3f} s ({'within' if worst <= 1.5 else 'OVER'} the 1.5 s target)")


if __name__ == "__main__":
    main()
