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
`--smoke`: one run each of ext4 and Btrfs on 128 MiB images, 0.25 s of fio: proves the script
runs, in seconds; its figures are printed, not judged against the target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from fslab.core.workdir import Workdir
from fslab.results import ResultsDB
from fslab.running.plan import Repetitions
from fslab.running.runner import run_study
from fslab.study import parse_study
from stopwatch import Stopwatch  # bench/'s: this script runs from there

TARGET = 1.5  # seconds of overhead beyond fio per run, at most
STUDY = """\
[study]
name = "overhead"
image_size = "{image_size}"
[[target]]
filesystem = {filesystems}
[[workload]]
name = "rand_write"
rw = "randwrite"
bs = "4k"
iodepth = 16
size = "{size}"
runtime = "{runtime:g}s"
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args()
    filesystems, image_size, size, runtime, runs = ["ext4", "xfs", "btrfs"], "4GiB", "1GiB", 2.0, args.runs
    if args.smoke:
        filesystems, image_size, size, runtime, runs = ["ext4", "btrfs"], "128MiB", "16MiB", 0.25, 1
    text = STUDY.format(filesystems=json.dumps(filesystems), image_size=image_size, size=size, runtime=runtime)
    with tempfile.TemporaryDirectory(prefix="fslab-overhead-", dir="/var/tmp") as tmp:
        study = parse_study(text, "overhead.toml", base_dir=Path(tmp))
        db = ResultsDB(str(Path(tmp) / "overhead.db"))
        watch = Stopwatch()
        repetitions = Repetitions(runs=runs)
        study_run_id = run_study(study, db, Workdir(Path(tmp) / "wd"), repetitions=repetitions, seed=1, observer=watch)
        cycles = watch.cycles(time.monotonic())
        runs_stored = db.runs(study_run_id)
    beyond_fio, beyond_runtime = defaultdict(list), defaultdict(list)
    phases: defaultdict[str, defaultdict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (name, cycle), run in zip(cycles, runs_stored, strict=True):
        assert run["target"] == name and run["status"] == "ok", run["error"]
        beyond_fio[name].append(cycle - run["timings"]["workload"])
        beyond_runtime[name].append(cycle - runtime)
        for phase, seconds in run["timings"].items():
            phases[name][phase].append(seconds)
    print(f"{runs} run(s) per filesystem, {image_size} images, {runtime:g} s of 4 KiB random writes each")
    print(f"{'target':<7} {'beyond fio (s)':>14} {'beyond runtime (s)':>18}   median seconds per phase")
    for name in beyond_fio:
        detail = ", ".join(
            f"{phase} {statistics.median(v):.3f}" + (" (first run only)" if len(v) < len(beyond_fio[name]) else "")
            for phase, v in phases[name].items()
        )
        print(
            f"{name:<7} {statistics.median(beyond_fio[name]):>14.3f} "
            f"{statistics.median(beyond_runtime[name]):>18.3f}   {detail}"
        )
    worst = max(statistics.median(v) for v in beyond_fio.values())
    judged = "smoke: not judged" if args.smoke else f"{'within' if worst <= TARGET else 'OVER'} the {TARGET:g} s target"
    print(f"worst median overhead beyond fio: {worst:.3f} s ({judged})")


if __name__ == "__main__":
    main()
