#!/usr/bin/env python3
"""fio's own check of a study's jobs before it runs (`fslab run`: fio/workload.job_problems →
fio/jobs.parse_all): how long `fio --debug=parse --parse-only` takes on every job of
studies of 10 and 100 fio workloads (each a measured job and a layout job), all of a study's jobs
in one fio (as fslab does) and one fio a job (as it did): fio's start, not the parsing, is the
cost, and a QEMU guest pays it many times over.

Figures are the median of --repeat runs, in this process (fio's table already known).

Run: .venv/bin/python bench/parse_only.py [--repeat 3]
`--smoke`: studies of 1 and 2 workloads, once each: proves the script runs, in seconds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fslab.core.workdir import Workdir
from fslab.filesystems.base import Provisioned
from fslab.fio.jobs import parse_all
from fslab.fio.workload import job_for, layout_job_for
from fslab.study import parse_study
from study_validation import HEAD  # bench/'s: this script runs from there


def jobs_of(workloads: int, scratch: Path) -> list[tuple[str, str]]:
    text = HEAD + "".join(
        f'\n[[workload]]\nname = "w{i}"\nrw = "randread"\nbs = "{4 * (1 + i % 4)}k"\n' for i in range(workloads)
    )
    study = parse_study(text, "p.toml", base_dir=scratch)
    somewhere = Provisioned(top="", directory=Workdir(scratch).mounts / "check")
    return [
        (job, w.name) for w in study.workloads for job in (job_for(w, somewhere), layout_job_for(w, somewhere)) if job
    ]


def seconds(jobs: list[tuple[str, str]], directory: Path, *, together: bool, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        problems = (
            parse_all(jobs, directory=directory)
            if together
            else [p for job in jobs for p in parse_all([job], directory=directory)]
        )
        times.append(time.perf_counter() - began)
        assert problems == [], problems
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args()
    sizes, repeat = ((1, 2), 1) if args.smoke else ((10, 100), args.repeat)
    print(f"{'workloads':>9}  {'jobs':>5}  {'one fio':>9}  {'a fio a job':>11}")
    with tempfile.TemporaryDirectory() as scratch:
        for workloads in sizes:
            jobs = jobs_of(workloads, Path(scratch))
            one = seconds(jobs, Path(scratch), together=True, repeat=repeat)
            each = seconds(jobs, Path(scratch), together=False, repeat=repeat)
            print(f"{workloads:>9}  {len(jobs):>5}  {one:>7.2f} s  {each:>9.2f} s")


if __name__ == "__main__":
    main()
