#!/usr/bin/env python3
"""Paired within blocks against Welch, measured on simulated pairs through fslab's own comparison.

Two targets run in the same interleaved blocks can be compared on the ratio of their runs within
each block (stats.compare_pairs pairs them from stats.PAIRED_MIN_BLOCKS shared blocks): a drift
of the machine over the study — slower block after block — moves both runs of a block alike and
cancels in their ratio, where Welch's interval, from each cell's spread over the whole study,
carries it. The price: a paired interval has n − 1 degrees of freedom where Welch's has up to
2n − 2, so with no drift to cancel it is somewhat wider.

The machine is bench/adaptive.py's, imported, not copied (its studies of 5 targets × 4 workloads,
each block every cell once in a random order, log-normal noise of CV 1–10 % a cell, AR(1) in run
order, a linear drift over the study, true ratios to the baseline drawn from its list), here without
its outliers, with its drift (10 % over the study) and without (0): the frozen parameters are
printed first. The same samples are compared both ways — paired within their blocks and Welch
(the blocks left out) — each target against the baseline per workload, every interval at 95 %,
unadjusted (one comparison on its own, as `fslab compare` draws it before a family widens it).

Printed per scenario: the median interval width paired and Welch (ln(high/low): the log scale, on
which both are symmetric), their ratio, and each method's coverage — the fraction of intervals
holding the true ratio — with its exact (Clopper–Pearson) 95 % interval; then the ratio of the
widths by each cell's CV, and the floor under any pairing: Welch's interval with the drift taken
out exactly and its degrees of freedom kept (each cell's noise variance σ² against σ² + the drift's
variance over the study). Issue 35's target: paired ≥ 20 % narrower under drift (ratio ≤ 0.80)
and ≤ 10 % wider without (ratio ≤ 1.10). The comparisons of one simulated study share its
machine, so the coverage's interval, which takes them as independent, is a little narrow.

Run: python bench/paired.py [--studies 125]  (16 pairs a study: 2,000 pairs a scenario)
`--smoke`: four studies a scenario: proves the script runs, in a second; nothing judged.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import binomtest

from adaptive import FIXED_RUNS, METRIC, TARGETS, WORKLOADS, Parameters as Machine, fixed_studies, truths
from fslab.statistics.stats import SamplePair, compare_pairs

NARROWER_UNDER_DRIFT = 0.80  # paired/Welch median width at most this under drift
WIDER_WITHOUT = 1.10  # … and at most this without


@dataclass(frozen=True)
class Parameters:
    """The simulated machine (adaptive.py's, but for its outliers) and the scenarios, frozen."""

    machine: Machine = replace(Machine(), outlier_rate=0.0)
    drifts: tuple[float, ...] = (0.10, 0.0)  # linear slow-down over the study: each a scenario
    blocks: int = FIXED_RUNS  # every cell once a block

    def lines(self) -> list[str]:
        m = self.machine
        return [
            "parameters (frozen):",
            f"  machine: bench/adaptive.py's — {len(TARGETS)} targets × {len(WORKLOADS)} workloads, {self.blocks} "
            "interleaved blocks in a random order each, every cell once a block",
            f"  noise: log-normal, CV {', '.join(f'{c:.0%}' for c in m.cvs)} per cell; AR(1) in run order, "
            f"rho = {m.rho:g}; no outliers",
            f"  drift: linear, {' and '.join(f'{d:.0%}' for d in self.drifts)} slower by the end of the study",
            f"  true ratios to the baseline: {', '.join(f'{r:.4f}' for r in m.ratios)}",
            f"  compared: each target against the baseline per workload, 95 % intervals; seed {m.seed}",
        ]


@dataclass(frozen=True)
class Compared:
    """One simulated pair, compared both ways on the same samples."""

    cv: float  # the larger of its two cells'
    truth: float  # the true ratio
    paired: tuple[float, float]  # the interval
    welch: tuple[float, float]
    paired_blocks: int
    drift_removed: float  # the width Welch's would have with the drift taken out exactly: its ratio to Welch's

    @staticmethod
    def width(interval: tuple[float, float]) -> float:
        return math.log(interval[1] / interval[0])

    def covers(self, interval: tuple[float, float]) -> bool:
        return interval[0] <= self.truth <= interval[1]


def simulate(p: Parameters, drift: float, studies: int) -> list[Compared]:
    """Every target against the baseline, per workload, of `studies` simulated fixed studies."""
    machine = replace(p.machine, drift=drift)
    rng = np.random.default_rng(machine.seed)  # the same truths and noise in each scenario: the drift alone differs
    means, sigmas = truths(rng, machine, studies, null=False)
    blocks = list(range(1, p.blocks + 1))
    # The drift's own variance over a study's runs (each cell's runs spread through it alike): what
    # Welch's interval carries and the best pairing could take out, no more.
    drift_variance = float(np.var(np.log1p(-drift * np.linspace(0, 1, p.blocks * len(WORKLOADS) * len(TARGETS)))))
    pairs, known = [], []
    for s, samples in enumerate(fixed_studies(rng, machine, means, sigmas)):
        cells = means[s].reshape(len(WORKLOADS), len(TARGETS))
        spread = sigmas[s].reshape(len(WORKLOADS), len(TARGETS))
        for w, workload in enumerate(WORKLOADS):
            base = samples[(workload, TARGETS[0])][METRIC]
            for t, target in enumerate(TARGETS[1:], start=1):
                other = samples[(workload, target)][METRIC]
                pairs += [SamplePair(base, other, True, 0.0, (blocks, blocks)), SamplePair(base, other)]
                cv = math.sqrt(math.expm1(max(spread[w, 0], spread[w, t]) ** 2))
                noise = spread[w, 0] ** 2 + spread[w, t] ** 2
                removed = math.sqrt(noise / (noise + 2 * drift_variance))
                known.append((cv, math.exp(cells[w, t] - cells[w, 0]), removed))
    found = compare_pairs(pairs, machine.threshold)
    compared = []
    for (cv, truth, removed), paired, welch in zip(known, found[::2], found[1::2]):
        assert paired.interval is not None and welch.interval is not None and not welch.paired_blocks
        compared.append(Compared(round(cv, 2), truth, paired.interval, welch.interval, paired.paired_blocks, removed))
    return compared


def coverage_line(name: str, covered: int, n: int) -> str:
    low, high = binomtest(covered, n).proportion_ci(0.95, method="exact")
    return f"{name} {covered / n:.3f} (95% CI {low:.3f}–{high:.3f})"


def scenario_lines(label: str, compared: list[Compared]) -> tuple[list[str], float, float]:
    """Its printed lines, the ratio of the median widths (paired/Welch), and its floor."""
    paired = statistics.median(Compared.width(c.paired) for c in compared)
    welch = statistics.median(Compared.width(c.welch) for c in compared)
    n = len(compared)
    per_pair = statistics.median(Compared.width(c.paired) / Compared.width(c.welch) for c in compared)
    ideal = statistics.median(Compared.width(c.welch) * c.drift_removed for c in compared)
    lines = [
        f"{label}: median width paired {paired:.4f}, Welch {welch:.4f}, ratio {paired / welch:.3f}",
        f"  per pair, paired/Welch: median {per_pair:.3f}; blocks paired: {min(c.paired_blocks for c in compared)}",
        f"  the floor: Welch's with the drift taken out exactly (its degrees of freedom kept), ratio "
        f"{ideal / welch:.3f} — no pairing is narrower but by chance",
        "  coverage of the true ratio: "
        + coverage_line("paired", sum(c.covers(c.paired) for c in compared), n)
        + ", "
        + coverage_line("Welch", sum(c.covers(c.welch) for c in compared), n)
        + f", n={n}",
    ]
    by_cv = {
        cv: statistics.median(Compared.width(c.paired) / Compared.width(c.welch) for c in compared if c.cv == cv)
        for cv in sorted({c.cv for c in compared})
    }
    lines.append(
        "  paired/Welch by the noisier cell's CV: " + ", ".join(f"{cv:.0%} {r:.2f}" for cv, r in by_cv.items())
    )
    return lines, paired / welch, ideal / welch


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=125, help="simulated studies a scenario (16 pairs each)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in a second: the script runs; nothing judged")
    args = parser.parse_args(argv)
    p = Parameters()
    studies = 4 if args.smoke else args.studies
    print("\n".join(p.lines()))
    per_study = len(WORKLOADS) * (len(TARGETS) - 1)
    print(
        f"\n{studies * per_study} pairs a scenario ({studies} simulated studies, {per_study} pairs each), "
        "each compared paired and by Welch on the same samples:"
    )
    ratios, floors = {}, {}
    for drift in p.drifts:
        lines, ratios[drift], floors[drift] = scenario_lines(f"drift {drift:.0%}", simulate(p, drift, studies))
        print("\n".join(lines))
    if args.smoke:
        print("\nsmoke: not judged")
        return
    under, without = ratios[p.drifts[0]], ratios[p.drifts[1]]
    said = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    print(
        f"\ntarget: paired/Welch at most {NARROWER_UNDER_DRIFT:.2f} under drift: {under:.3f}, "
        f"{said(under <= NARROWER_UNDER_DRIFT)} (its floor here {floors[p.drifts[0]]:.3f}); "
        f"at most {WIDER_WITHOUT:.2f} without: {without:.3f}, "
        f"{said(without <= WIDER_WITHOUT)}"
    )


if __name__ == "__main__":
    main()
