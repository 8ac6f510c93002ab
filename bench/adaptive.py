#!/usr/bin/env python3
"""Error rates and adaptive repetitions, measured on simulated studies through fslab's own rule.

A simulated study is 5 targets × 4 workloads: each cell's IOPS has a true ratio to the baseline
target and its own noise, on a simulated machine whose parameters are frozen here and printed
first (`Parameters`): log-normal noise of CV 1–10 % (as measured on loop images here), AR(1) in
run order (the machine's state carries from one run to the next), a linear drift over the study,
and outliers at half speed. Every run takes the same simulated time.

- Null families: studies whose every true ratio is exactly 1.00, run as `fslab run --decide` runs
  them (the Planner's looks and stops) and judged as its summary judges them (every pair of
  targets per workload one family, intervals widened over the plan's looks): the fraction of
  families with any "faster" or "slower" verdict, with its exact (Clopper–Pearson) 95 % upper
  bound; and the same families run fixed (10 runs, one look), for reference.
- Mixed families: true ratios drawn from `Parameters.ratios` (exactly 1.00 and exactly ±threshold
  among them), run adaptively: each verdict's rate per true ratio, of every target against the
  baseline, and the rate of "equivalent" at exactly ±threshold (a false one: the truth is on the margin).
- Adaptive against fixed: a fixed 10-run study, a second one of the same truth (the baseline
  agreement), and an adaptive one, all through fslab's Planner on the same simulated machine:
  how often the main comparisons' verdicts (each target against the baseline: what the planner
  decides) agree — an undecided one against a decided one disagrees — and the ratio of total runtimes.

The adaptive plan's choices, fixed here and in docs/statistics.md ("How many runs"):
- INITIAL_RUNS = 2: a first look at 2 runs a side costs a fifth of fixed-10 and decides only the
  plain cases (a 30 % change in low noise), or finds a comparison futile whose spread already
  rules out a verdict by MAX_RUNS; 3 first runs cost 0.30 before any look (runtime median 0.41
  measured, against 0.35), for an agreement 0.01 higher.
- Looks after every block from INITIAL_RUNS to MAX_RUNS (9 looks): fewer looks widen each
  interval less but keep open cells running between looks, and cost more runtime (a variant of
  this script, not kept, measured it).
- MAX_RUNS = 10: never longer per cell than the fixed study it is held against.
- Futility: a comparison is closed undecided when, at the spread seen and its ratio staying
  where it is, an interval at its level could not decide it by MAX_RUNS (Comparison.runs_to_decide):
  closing it can only make a verdict rarer, so it costs no error.

The rule under test is `judge` alone (analysis.analyse: Welch's or paired t on logs, the family's
false-coverage-rate intervals, the four verdicts of decide, 3 % threshold); point it at another
rule and every figure follows.

Run: python bench/adaptive.py [--families 1000] [--studies 200]
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

from fslab.running.plan import Blocks, Planner, Repetitions
from fslab.statistics.analysis import Samples, analyse, roles_of
from fslab.statistics.stats import EQUIVALENT, FASTER, SLOWER, VERDICTS
from fslab.study import parse_study

TARGETS = ["base", "t1", "t2", "t3", "t4"]
WORKLOADS = ["seq_read", "seq_write", "rand_read", "rand_write"]
CELLS = [(w, t) for w in WORKLOADS for t in TARGETS]
STUDY = '[study]\nname = "sim"\nworkloads = ["baseline"]\n' + "".join(
    f'[[target]]\nname = "{t}"\nfilesystem = "ext4"\n' for t in TARGETS
)
METRIC = "read_iops"
FIXED_RUNS = 10
# The adaptive plan's choices (docs/statistics.md, "How many runs"): its first look after
# INITIAL_RUNS blocks, then one after every block, MAX_RUNS at most (never longer than fixed-10).
INITIAL_RUNS = 2
MAX_RUNS = FIXED_RUNS
SIM_CELLS = parse_study(STUDY, "sim.toml", base_dir=Path(".")).cells
CELL_INDEX = {key: i for i, key in enumerate(CELLS)}
ROLES = roles_of({cell: {METRIC: []} for cell in CELLS})
FIXED_BLOCKS: Blocks = {cell: {METRIC: list(range(1, FIXED_RUNS + 1))} for cell in CELLS}


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
) -> tuple[Samples, Blocks, int]:
    """One study through fslab's Planner to its end, on the same simulated machine, judged at each
    look as the planner judges (blocks and all); returns its samples, their blocks and its run count."""
    rng = np.random.default_rng(seed)
    noise, shift = machine_noise(rng, p, 1, max(FIXED_RUNS, repetitions.max_runs) * len(CELLS))
    planner = Planner(SIM_CELLS, repetitions, seed)
    samples: Samples = {}
    blocks: Blocks = {}
    total = 0
    while block := planner.next_block(samples, roles=ROLES, blocks=blocks):
        for run in block:
            c = CELL_INDEX[run.cell.key]
            value = math.exp(means[c] + sigmas[c] * noise[0, total] + shift[0, total])
            samples.setdefault(run.cell.key, {}).setdefault(METRIC, []).append(value)
            blocks.setdefault(run.cell.key, {}).setdefault(METRIC, []).append(run.block)
            total += 1
    return samples, blocks, total


def judge(
    samples: Samples, p: Parameters, blocks: Blocks | None = None, looks: int = 1
) -> dict[tuple[str, str, str], str]:
    """The rule under test, as a summary applies it (analysis.analyse: every pair of targets of a
    workload judged as one family, paired within blocks from 5 shared ones, intervals widened over
    `looks`): (workload, a, b) → the verdict of b against a, one of the four words."""
    found = analyse(
        samples, {METRIC: True}, TARGETS, WORKLOADS, baseline="base", threshold=p.threshold, blocks=blocks, looks=looks
    )
    return {(w, a, b): c.verdict for (w, _, a, b), c in found.pairs.items()}


def main_verdicts(verdicts: dict[tuple[str, str, str], str]) -> dict[tuple[str, str, str], str]:
    """The main comparisons' verdicts: each target against the baseline (what an adaptive plan decides)."""
    return {k: v for k, v in verdicts.items() if k[1] == "base"}


def upper_bound(count: int, n: int) -> float:
    """The upper end of count/n's exact (Clopper–Pearson) 95 % interval."""
    return float(binomtest(count, n).proportion_ci(0.95, method="exact").high)


def adaptive_repetitions(p: Parameters) -> Repetitions:
    """The adaptive plan under test: fslab's `--decide` at INITIAL_RUNS, at most MAX_RUNS."""
    return Repetitions(runs=INITIAL_RUNS, max_runs=MAX_RUNS, decide=True, threshold=p.threshold)


def fixed_false_verdicts(p: Parameters, families: int) -> tuple[int, int, int]:
    """Null families run fixed (10 runs, one look): (families with any faster/slower, false verdicts, comparisons)."""
    rng = np.random.default_rng(p.seed)
    means, sigmas = truths(rng, p, families, null=True)
    with_any, false, judged = 0, 0, 0
    for samples in fixed_studies(rng, p, means, sigmas):
        verdicts = judge(samples, p, FIXED_BLOCKS).values()
        wrong = sum(v in (FASTER, SLOWER) for v in verdicts)
        with_any += wrong > 0
        false += wrong
        judged += len(verdicts)
    return with_any, false, judged


def adaptive_false_verdicts(p: Parameters, families: int) -> tuple[int, int, int, float]:
    """Null families run adaptively (the planner's looks, its stops, the summary's verdicts after):
    (families with any faster/slower among all their pairs, false verdicts, comparisons, mean
    runtime against fixed-10)."""
    rng = np.random.default_rng(p.seed + 2)
    means, sigmas = truths(rng, p, families, null=True)
    repetitions = adaptive_repetitions(p)
    with_any, false, judged, runs = 0, 0, 0, 0
    for f in range(families):
        samples, blocks, total = planned_study(p, means[f], sigmas[f], repetitions, p.seed + 50_000 + f)
        verdicts = judge(samples, p, blocks, repetitions.looks).values()
        wrong = sum(v in (FASTER, SLOWER) for v in verdicts)
        with_any += wrong > 0
        false += wrong
        judged += len(verdicts)
        runs += total
    return with_any, false, judged, runs / families / (FIXED_RUNS * len(CELLS))


def adaptive_by_truth(p: Parameters, families: int) -> dict[float, Counter]:
    """Mixed families run adaptively: true ratio of a target to the baseline → its verdicts' counts."""
    rng = np.random.default_rng(p.seed + 1)
    means, sigmas = truths(rng, p, families, null=False)
    repetitions = adaptive_repetitions(p)
    table: dict[float, Counter] = {round(r, 4): Counter() for r in sorted({*p.ratios, 1.0})}
    for f in range(families):
        samples, blocks, _ = planned_study(p, means[f], sigmas[f], repetitions, p.seed + 60_000 + f)
        verdicts = judge(samples, p, blocks, repetitions.looks)
        for w, workload in enumerate(WORKLOADS):
            row = means[f].reshape(len(WORKLOADS), len(TARGETS))[w]
            for t, target in enumerate(TARGETS[1:], start=1):
                table[round(math.exp(row[t] - row[0]), 4)][verdicts[(workload, "base", target)]] += 1
    return table


def agreement(verdicts: dict, others: dict) -> float:
    """The fraction of comparisons with the same verdict (an undecided one against a decided one disagrees)."""
    return sum(verdicts[k] == others[k] for k in verdicts) / len(verdicts)


def adaptive_against_fixed(p: Parameters, studies: int) -> tuple[list, list, list]:
    """Per study, on its main comparisons: (adaptive's agreement with fixed-10, a second
    fixed-10's, adaptive/fixed runtime)."""
    agreeing, replicating, runtime = [], [], []
    repetitions = adaptive_repetitions(p)
    fixed_plan = Repetitions(runs=FIXED_RUNS, threshold=p.threshold)
    for study in range(studies):
        means, sigmas = truths(np.random.default_rng(p.seed + 100 + study), p, 1, null=False)
        fixed, fixed_blocks, fixed_runs = planned_study(p, means[0], sigmas[0], fixed_plan, p.seed + 10_000 + study)
        again, again_blocks, _ = planned_study(p, means[0], sigmas[0], fixed_plan, p.seed + 30_000 + study)
        adaptive, adaptive_blocks, adaptive_runs = planned_study(
            p, means[0], sigmas[0], repetitions, p.seed + 20_000 + study
        )
        a = main_verdicts(judge(fixed, p, fixed_blocks))
        b = main_verdicts(judge(adaptive, p, adaptive_blocks, repetitions.looks))
        c = main_verdicts(judge(again, p, again_blocks))
        agreeing.append(agreement(a, b))
        replicating.append(agreement(a, c))
        runtime.append(adaptive_runs / fixed_runs)
    return agreeing, replicating, runtime


def standard_error(values: list[float]) -> float:
    """Of the mean of independent values."""
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan


def truth_table(table: dict[float, Counter]) -> list[str]:
    lines = [f"  {'true ratio':>10}  {'n':>5}  " + "  ".join(f"{v:>10}" for v in VERDICTS)]
    for ratio, counts in table.items():
        n = sum(counts.values())
        rates = "  ".join(f"{counts[v] / n if n else math.nan:>10.3f}" for v in VERDICTS)
        lines.append(f"  {ratio:>10.4f}  {n:>5}  {rates}")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", type=int, default=1000, help="null families, and as many mixed ones")
    parser.add_argument("--studies", type=int, default=200, help="adaptive and fixed studies compared")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args(argv)
    p = Parameters()
    families, studies = (40, 2) if args.smoke else (args.families, args.studies)
    repetitions = adaptive_repetitions(p)
    print("\n".join(p.lines()))
    print(
        f"  adaptive: fslab run --decide, {INITIAL_RUNS} runs first, at most {MAX_RUNS}: "
        f"{repetitions.looks} looks, each interval at 1 − max(R,1)·q/m/{repetitions.looks}"
    )
    pairs = len(WORKLOADS) * len(TARGETS) * (len(TARGETS) - 1) // 2
    shape = f"{len(TARGETS)} targets × {len(WORKLOADS)} workloads, its {pairs} pairs of targets one family"
    with_any, false, judged, cost = adaptive_false_verdicts(p, families)
    print(f"\n{families} null families ({shape}; adaptive, as above), every true ratio 1.00:")
    bound = upper_bound(with_any, families)
    print(f"false verdicts under no difference: {with_any / families:.4f} (95% upper {bound:.4f}, n={families})")
    print(f"  per comparison: {false / judged:.4f} of {judged} faster or slower (one family's are not independent)")
    print(f"  runtime against fixed {FIXED_RUNS} runs: mean {cost:.2f}")
    fixed_any, fixed_false, fixed_judged = fixed_false_verdicts(p, families)
    print(
        f"  the same run fixed ({FIXED_RUNS} runs, one look): {fixed_any / families:.4f} of families "
        f"(95% upper {upper_bound(fixed_any, families):.4f}), {fixed_false / fixed_judged:.4f} per comparison"
    )
    table = adaptive_by_truth(p, families)
    print(f"\n{families} mixed families, adaptive: each target's verdict against the baseline, by its true ratio:")
    print("\n".join(truth_table(table)))
    edges = [table[round(r, 4)] for r in (1 / (1 + p.threshold), 1 + p.threshold)]
    equivalent, n = sum(c[EQUIVALENT] for c in edges), sum(sum(c.values()) for c in edges)
    print(
        f"false equivalent at exactly ±threshold: {equivalent / n:.4f} "
        f"(95% upper {upper_bound(equivalent, n):.4f}, n={n})"
    )
    agreeing, replicating, runtime = adaptive_against_fixed(p, studies)
    print(
        f"\n{studies} simulated studies of mixed truths, on their main comparisons (each target against "
        f"the baseline: what the planner decides), adaptive against fixed {FIXED_RUNS} runs:"
    )
    print(f"runtime ratio: median {statistics.median(runtime):.2f}, worst {max(runtime):.2f}")
    print(f"agreement: adaptive {statistics.mean(agreeing):.3f}, fixed-vs-fixed {statistics.mean(replicating):.3f}")
    gap = [a - b for a, b in zip(agreeing, replicating)]
    print(
        f"  standard errors over the {studies} studies (independent; a study's comparisons are not): "
        f"adaptive ±{standard_error(agreeing):.3f}, fixed-vs-fixed ±{standard_error(replicating):.3f}, "
        f"their difference {statistics.mean(gap):+.3f} ±{standard_error(gap):.3f}"
    )
    print(
        f"  verdicts agreeing: median {statistics.median(agreeing):.0%}, mean "
        f"{statistics.mean(agreeing):.1%}, worst study {min(agreeing):.0%}"
    )
    print(
        "  for reference, a second fixed 10-run study agrees with the "
        f"first: median {statistics.median(replicating):.0%}, mean "
        f"{statistics.mean(replicating):.1%}, worst {min(replicating):.0%}"
    )
    target = "smoke: not judged" if args.smoke else "targets: median at most 0.35, worst at most 0.50"
    ratio = f"median {statistics.median(runtime):.2f}, worst study {max(runtime):.2f}"
    print(f"  total runtime adaptive/fixed: {ratio} ({target})")


if __name__ == "__main__":
    main()
