#!/usr/bin/env python3
"""Error rates and adaptive repetitions, measured on simulated studies through fslab's own rule.

A simulated study is 5 targets × 4 workloads: each cell's IOPS has a true ratio to the baseline
target and its own noise, on a simulated machine whose parameters are frozen here and printed
first (`Parameters`): log-normal noise of CV 1–10 % (as measured on loop images here), AR(1) in
run order (the machine's state carries from one run to the next), a linear drift over the study,
and outliers at half speed. Every run takes the same simulated time.

- Null families: studies whose every true ratio is exactly 1.00, each judged as one family (every
  pair of targets per workload, as a summary does): the fraction of families with any "faster"
  or "slower" verdict, with its exact (Clopper–Pearson) 95 % upper bound.
- Mixed families: true ratios drawn from `Parameters.ratios` (exactly 1.00 and exactly ±threshold
  among them): each verdict's rate per true ratio, of every target against the baseline.
- Adaptive against fixed: a fixed 10-run study, a second one of the same truth (the baseline
  agreement), and an adaptive one (3 runs, then interleaved blocks of the cells whose 95 %
  interval is wider than ±target, at most 10), through fslab's Planner: how often their verdicts
  agree, and the ratio of total runtimes.

The rule under test is `judge` alone (today: Welch on logs, Benjamini–Hochberg, 3 % threshold,
through fslab's analyse); point it at another rule and every figure follows.

Run: python bench/adaptive.py [--families 1000] [--studies 40] [--target-ci 3]
`--smoke`: tens of families, two studies: proves the script runs, in seconds; its figures are
printed, not judged against the target.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from fslab.running.plan import Planner, Repetitions
from fslab.statistics.analysis import Samples, analyse
from fslab.study import parse_study

TARGETS = ["base", "t1", "t2", "t3", "t4"]
WORKLOADS = ["seq_read", "seq_write", "rand_read", "rand_write"]
CELLS = [(w, t) for w in WORKLOADS for t in TARGETS]
STUDY = '[study]\nname = "sim"\nworkloads = ["baseline"]\n' + "".join(
    f'[[target]]\nname = "{t}"\nfilesystem = "ext4"\n' for t in TARGETS
)
METRIC = "read_iops"
FIXED_RUNS = 10
VERDICTS = ["faster", "slower", "no detectable difference"]  # today's words, as judge returns them


@dataclass(frozen=True)
class Parameters:
    """The simulated machine and truths, frozen: every figure printed is of these."""

    cvs: tuple[float, ...] = (0.01, 0.02, 0.03, 0.05, 0.07, 0.10)  # each cell's, drawn
    drift: float = 0.10  # linear slow-down over a fixed 10-run study (an adaptive one drifts as far as it runs)
    rho: float = 0.5  # AR(1) coefficient of the noise, in run order
    outlier_rate: float = 0.02
    outlier_factor: float = 0.5
    threshold: float = 0.03  # the rule's; ±threshold is 1.03 and 1/1.03 (fslab's is symmetric on the log scale)
    ratios: tuple[float, ...] = (0.70, 0.90, 0.95, 1 / 1.03, 1.00, 1.03, 1.05, 1.10, 1.30)
    seed: int = 35

    def lines(self) -> list[str]:
        return [
            "parameters (frozen):",
            f"  noise: log-normal, CV {', '.join(f'{c:.0%}' for c in self.cvs)} per cell; AR(1) in run order, "
            f"rho = {self.rho:g}",
            f"  drift: linear, {self.drift:.0%} slower by the end of a fixed {FIXED_RUNS}-run study",
            f"  outliers: {self.outlier_rate:.0%} of runs at ×{self.outlier_factor:g}",
            f"  true ratios: {', '.join(f'{r:.4f}' for r in self.ratios)} "
            f"(±threshold: 1/{1 + self.threshold:g} and {1 + self.threshold:g}); null: 1.0000",
            f"  rule: fslab's analyse, threshold {self.threshold:.0%}; seed {self.seed}",
        ]


def machine_noise(rng: np.random.Generator, p: Parameters, studies: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(unit AR(1) noise, log shift of drift and outliers), each studies × runs in study order: a
    run at position i of a cell of log-sd sigma and true mean m measures m·exp(sigma·noise + shift)."""
    innovations = rng.standard_normal((studies, length))
    noise = np.empty_like(innovations)
    noise[:, 0] = innovations[:, 0]
    for i in range(1, length):
        noise[:, i] = p.rho * noise[:, i - 1] + math.sqrt(1 - p.rho**2) * innovations[:, i]
    drift = np.log1p(-p.drift * np.arange(length) / (FIXED_RUNS * len(CELLS) - 1))
    outliers = np.where(rng.random((studies, length)) < p.outlier_rate, math.log(p.outlier_factor), 0.0)
    return noise, drift + outliers


def truths(rng: np.random.Generator, p: Parameters, studies: int, null: bool) -> tuple[np.ndarray, np.ndarray]:
    """(true log means, log sds), each studies × cells (in CELLS' order): every target of a workload
    at its true ratio to the baseline (all 1.00 when `null`)."""
    levels = np.log(rng.uniform(2_000, 80_000, (studies, len(WORKLOADS))))
    ratios = np.ones((studies, len(WORKLOADS), len(TARGETS)))
    if not null:
        ratios[:, :, 1:] = rng.choice(p.ratios, (studies, len(WORKLOADS), len(TARGETS) - 1))
    means = (levels[:, :, None] + np.log(ratios)).reshape(studies, -1)
    sigmas = np.sqrt(np.log1p(rng.choice(p.cvs, (studies, len(CELLS))) ** 2))
    return means, sigmas


def fixed_studies(rng: np.random.Generator, p: Parameters, means: np.ndarray, sigmas: np.ndarray) -> list[Samples]:
    """Fixed 10-run studies, vectorised: each block runs every cell once in a random order, as the
    Planner interleaves them."""
    studies, cells = means.shape
    order = rng.permuted(np.tile(np.arange(cells), (studies, FIXED_RUNS, 1)), axis=2)  # slot → cell
    position = np.argsort(order, axis=2) + cells * np.arange(FIXED_RUNS)[None, :, None]  # cell → run index
    noise, shift = machine_noise(rng, p, studies, FIXED_RUNS * cells)
    at = at_positions(noise, position), at_positions(shift, position)
    values = np.exp(means[:, None, :] + sigmas[:, None, :] * at[0] + at[1])  # studies × blocks × cells
    return [{cell: {METRIC: values[s, :, c].tolist()} for c, cell in enumerate(CELLS)} for s in range(studies)]


def at_positions(series: np.ndarray, position: np.ndarray) -> np.ndarray:
    """series (studies × runs) at position (studies × blocks × cells)."""
    return np.take_along_axis(series, position.reshape(len(series), -1), axis=1).reshape(position.shape)


def planned_study(
    p: Parameters, means: np.ndarray, sigmas: np.ndarray, repetitions: Repetitions, seed: int
) -> tuple[Samples, int]:
    """One study through fslab's Planner to its end, on the same simulated machine; returns the
    samples and its run count."""
    rng = np.random.default_rng(seed)
    noise, shift = machine_noise(rng, p, 1, FIXED_RUNS * len(CELLS))
    planner = Planner(parse_study(STUDY, "sim.toml", base_dir=Path(".")).cells, repetitions, seed)
    samples: Samples = {}
    total = 0
    while block := planner.next_block(samples):
        for run in block:
            c = CELLS.index(run.cell.key)
            value = math.exp(means[c] + sigmas[c] * noise[0, total] + shift[0, total])
            samples.setdefault(run.cell.key, {}).setdefault(METRIC, []).append(value)
            total += 1
    return samples, total


def judge(samples: Samples, p: Parameters) -> dict[tuple[str, str, str], str]:
    """The rule under test: (workload, a, b) → the verdict of b against a, for every pair of targets
    of a workload, judged as one family (as a summary does)."""
    found = analyse(samples, {METRIC: True}, TARGETS, WORKLOADS, baseline="base", threshold=p.threshold)
    return {(w, a, b): c.verdict for (w, _, a, b), c in found.pairs.items()}


def upper_bound(count: int, n: int) -> float:
    """The upper end of count/n's exact (Clopper–Pearson) 95 % interval."""
    return float(binomtest(count, n).proportion_ci(0.95, method="exact").high)


def false_verdicts(p: Parameters, families: int) -> tuple[int, int, int]:
    """Null families: (families with any faster/slower, false verdicts, comparisons judged)."""
    rng = np.random.default_rng(p.seed)
    means, sigmas = truths(rng, p, families, null=True)
    with_any, false, judged = 0, 0, 0
    for samples in fixed_studies(rng, p, means, sigmas):
        verdicts = judge(samples, p).values()
        wrong = sum(v in ("faster", "slower") for v in verdicts)
        with_any += wrong > 0
        false += wrong
        judged += len(verdicts)
    return with_any, false, judged


def verdicts_by_truth(p: Parameters, families: int) -> dict[float, Counter]:
    """Mixed families: true ratio of a target to the baseline → its verdicts' counts."""
    rng = np.random.default_rng(p.seed + 1)
    means, sigmas = truths(rng, p, families, null=False)
    table: dict[float, Counter] = {round(r, 4): Counter() for r in sorted({*p.ratios, 1.0})}
    for s, samples in enumerate(fixed_studies(rng, p, means, sigmas)):
        verdicts = judge(samples, p)
        for w, workload in enumerate(WORKLOADS):
            row = means[s].reshape(len(WORKLOADS), len(TARGETS))[w]
            for t, target in enumerate(TARGETS[1:], start=1):
                table[round(math.exp(row[t] - row[0]), 4)][verdicts[(workload, "base", target)]] += 1
    return table


def agreement(verdicts: dict, others: dict) -> float:
    """The fraction of comparisons with the same verdict (an undecided one against a decided one disagrees)."""
    return sum(verdicts[k] == others[k] for k in verdicts) / len(verdicts)


def adaptive_against_fixed(p: Parameters, studies: int, target_ci: float) -> tuple[list, list, list]:
    """Per study: (adaptive's agreement with fixed-10, a second fixed-10's, adaptive/fixed runtime)."""
    agreeing, replicating, runtime = [], [], []
    for study in range(studies):
        means, sigmas = truths(np.random.default_rng(p.seed + 100 + study), p, 1, null=False)
        fixed, fixed_runs = planned_study(p, means[0], sigmas[0], Repetitions(runs=FIXED_RUNS), p.seed + 10_000 + study)
        again, _ = planned_study(p, means[0], sigmas[0], Repetitions(runs=FIXED_RUNS), p.seed + 30_000 + study)
        adaptive, adaptive_runs = planned_study(
            p,
            means[0],
            sigmas[0],
            Repetitions(runs=3, target_ci=target_ci, max_runs=FIXED_RUNS),
            p.seed + 20_000 + study,
        )
        a, b, c = judge(fixed, p), judge(adaptive, p), judge(again, p)
        agreeing.append(agreement(a, b))
        replicating.append(agreement(a, c))
        runtime.append(adaptive_runs / fixed_runs)
    return agreeing, replicating, runtime


def truth_table(table: dict[float, Counter]) -> list[str]:
    lines = [f"  {'true ratio':>10}  {'n':>5}  " + "  ".join(f"{v:>24}" for v in VERDICTS)]
    for ratio, counts in table.items():
        n = sum(counts.values())
        rates = "  ".join(f"{counts[v] / n if n else math.nan:>24.3f}" for v in VERDICTS)
        lines.append(f"  {ratio:>10.4f}  {n:>5}  {rates}")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", type=int, default=1000, help="null families, and as many mixed ones")
    parser.add_argument("--studies", type=int, default=40, help="adaptive and fixed studies compared")
    parser.add_argument("--target-ci", type=float, default=3.0, help="percent")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args(argv)
    p = Parameters()
    families, studies = (40, 2) if args.smoke else (args.families, args.studies)
    print("\n".join(p.lines()))
    with_any, false, judged = false_verdicts(p, families)
    pairs = len(WORKLOADS) * len(TARGETS) * (len(TARGETS) - 1) // 2
    shape = f"{len(TARGETS)} targets × {len(WORKLOADS)} workloads, its {pairs} pairs of targets one family"
    print(f"\n{families} null families ({shape}; fixed {FIXED_RUNS} runs), every true ratio 1.00:")
    bound = upper_bound(with_any, families)
    print(f"false verdicts under no difference: {with_any / families:.4f} (95% upper {bound:.4f}, n={families})")
    print(f"  per comparison: {false / judged:.4f} of {judged} faster or slower (one family's are not independent)")
    print(f"\n{families} mixed families: each target's verdict against the baseline, by its true ratio:")
    print("\n".join(truth_table(verdicts_by_truth(p, families))))
    agreeing, replicating, runtime = adaptive_against_fixed(p, studies, args.target_ci / 100)
    print(f"\n{studies} simulated studies, adaptive (3 runs, then blocks until ±{args.target_ci:g} %, at most 10):")
    print(f"runtime ratio: median {statistics.median(runtime):.2f}, worst {max(runtime):.2f}")
    print(f"agreement: adaptive {statistics.mean(agreeing):.3f}, fixed-vs-fixed {statistics.mean(replicating):.3f}")
    print(
        f"  verdicts agreeing: median {statistics.median(agreeing):.0%}, mean "
        f"{statistics.mean(agreeing):.1%}, worst study {min(agreeing):.0%}"
    )
    print(
        "  for reference, a second fixed 10-run study agrees with the "
        f"first: median {statistics.median(replicating):.0%}, mean "
        f"{statistics.mean(replicating):.1%}, worst {min(replicating):.0%}"
    )
    target = "smoke: not judged" if args.smoke else "target: at most 0.50"
    ratio = f"median {statistics.median(runtime):.2f}, worst study {max(runtime):.2f}"
    print(f"  total runtime adaptive/fixed: {ratio} ({target})")


if __name__ == "__main__":
    main()
