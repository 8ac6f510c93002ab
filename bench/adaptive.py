#!/usr/bin/env python3
"""Adaptive repetitions: the same verdicts as a fixed 10-run study, in how much of its time?

A simulated study of 5 targets × 4 workloads: each cell draws its IOPS from a log-normal
distribution with a true ratio to the baseline target (0.70, 0.90, 1.00, 1.10, ...) and its own
noise (CV 1–10 %, as measured on loop images here), every run taking the same simulated time.
The fixed study runs every cell 10 times; the adaptive one starts with 3 runs and adds
interleaved blocks of the cells whose 95 % interval is wider than ±target (at most 10 runs).
Both go through fslab's own Planner and analysis (Welch on logs, Benjamini–Hochberg, 3 %
threshold). Prints, over many simulated studies, how often the verdicts agree and the ratio of
total runtimes.

Run: python bench/adaptive.py [--studies 40] [--target-ci 3]
`--smoke`: two simulated studies: proves the script runs, in seconds; its figures are printed,
not judged against the target.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from fslab.running.plan import Planner, Repetitions
from fslab.statistics.analysis import analyse
from fslab.study import parse_study

TARGETS = ["base", "t1", "t2", "t3", "t4"]
WORKLOADS = ["seq_read", "seq_write", "rand_read", "rand_write"]
STUDY = '[study]\nname = "sim"\nworkloads = ["baseline"]\n' + "".join(
    f'[[target]]\nname = "{t}"\nfilesystem = "ext4"\n' for t in TARGETS
)
RATIOS = [0.70, 0.85, 0.90, 0.95, 1.00, 1.00, 1.08, 1.10, 1.20]
NOISE = [0.01, 0.02, 0.03, 0.05, 0.07, 0.10]


def simulated_cells(rng: np.random.Generator) -> dict[tuple[str, str], tuple[float, float]]:
    """(workload, target) → (true mean IOPS, noise sigma on the log scale)."""
    cells = {}
    for workload in WORKLOADS:
        base = rng.uniform(2_000, 80_000)
        for target in TARGETS:
            ratio = 1.0 if target == "base" else float(rng.choice(RATIOS))
            cells[(workload, target)] = (base * ratio, float(rng.choice(NOISE)))
    return cells


def simulate(cells, repetitions: Repetitions, seed: int) -> tuple[dict, int]:
    """Runs the planner to the end, drawing every run's IOPS; returns the samples and run count."""
    rng = np.random.default_rng(seed)
    planner = Planner(parse_study(STUDY, "sim.toml", base_dir=Path(".")).cells, repetitions, seed)
    samples: dict = {}
    total = 0
    while block := planner.next_block(samples):
        for run in block:
            mean, sigma = cells[run.cell.key]
            samples.setdefault(run.cell.key, {}).setdefault("read_iops", []).append(
                float(rng.lognormal(np.log(mean), sigma))
            )
            total += 1
    return samples, total


def verdicts(samples) -> dict:
    result = analyse(
        samples, {"read_iops": True}, TARGETS, WORKLOADS, baseline="base"
    )  # one family: every pair, as in a summary
    return {(r.workload, r.target): r.comparison.verdict for r in result.rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=40)
    parser.add_argument("--target-ci", type=float, default=3.0, help="percent")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args()
    studies = 2 if args.smoke else args.studies
    agreement, replication, runtime_ratio = [], [], []
    for study in range(studies):
        cells = simulated_cells(np.random.default_rng(study))
        fixed, fixed_runs = simulate(cells, Repetitions(runs=10), seed=10_000 + study)
        again, _ = simulate(cells, Repetitions(runs=10), seed=30_000 + study)
        adaptive, adaptive_runs = simulate(
            cells, Repetitions(runs=3, target_ci=args.target_ci / 100, max_runs=10), seed=20_000 + study
        )
        a, b, c = verdicts(fixed), verdicts(adaptive), verdicts(again)
        agreement.append(sum(a[k] == b[k] for k in a) / len(a))
        replication.append(sum(a[k] == c[k] for k in a) / len(a))
        runtime_ratio.append(adaptive_runs / fixed_runs)
    shape = f"{len(TARGETS)} targets × {len(WORKLOADS)} workloads, {len(TARGETS) - 1} comparisons per workload"
    print(f"{studies} simulated studies of {shape}")
    print(f"adaptive (3 runs, then blocks until ±{args.target_ci:g} %, at most 10) against fixed 10 runs:")
    print(
        f"  verdicts agreeing: median {statistics.median(agreement):.0%}, mean "
        f"{statistics.mean(agreement):.1%}, worst study {min(agreement):.0%}"
    )
    print(
        "  for reference, a second fixed 10-run study agrees with the "
        f"first: median {statistics.median(replication):.0%}, mean "
        f"{statistics.mean(replication):.1%}, worst {min(replication):.0%}"
    )
    target = "smoke: not judged" if args.smoke else "target: at most 0.50"
    ratio = f"median {statistics.median(runtime_ratio):.2f}, worst study {max(runtime_ratio):.2f}"
    print(f"  total runtime adaptive/fixed: {ratio} ({target})")


if __name__ == "__main__":
    main()
