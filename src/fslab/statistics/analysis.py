"""What a study run answers: every pair of targets compared per workload and metric, and each
workload a study pairs with another (`compare_with`) compared with it on every target both ran
on, with Benjamini–Hochberg over all of them as one family. Each target's row against its
baseline and each workload's ranking are both read from that one family, so they never
disagree; those rows on the primary metrics are the main comparisons (Analysis.main_rows), what a
summary leads with. And two study runs, cell by cell.

Pure: takes samples grouped by cell, returns comparisons. statistics/stats.py does the arithmetic.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from fslab.core.errors import FslabError
from fslab.model import Host, Roles
from fslab.statistics.stats import (
    CONFIDENCE,
    SLOWER,
    UNDECIDED,
    Comparison,
    Ranking,
    SamplePair,
    adjust_family,
    beyond,
    compare_pairs,
    geometric_mean,
    inverted,
    rank,
    runs_needed,
    withhold,
)
from fslab.statistics.timing import why_not_within
from fslab.workloads import declared_metrics, resolution

if TYPE_CHECKING:
    from fslab.model.records import SampleGroups
    from fslab.statistics.explain import Explanation

Samples = dict[tuple[str, str], dict[str, list[float]]]  # (workload, target) → metric → values in run order
PairKey = tuple[str, str, str, str]  # (workload, metric, a, b): b against a, a before b in the study's order
RankingKey = tuple[
    str, str, "str | None"
]  # (workload, primary metric, the host its targets ran on: None unless per host)


class AnalysisError(FslabError):
    pass


@dataclass(frozen=True)
class Row:
    workload: str
    target: str  # the target compared (in `compare`: the same target in the newer study run)
    baseline: str  # the target it is compared with (in `compare`: the older study run)
    metric: str
    comparison: Comparison
    # the workload it is compared with on its own target (compare_with); None: its own workload
    baseline_workload: str | None = None
    # beside a decided verdict, what the monitors measured differently in the two cells (explained)
    explanation: Explanation | None = None


@dataclass(frozen=True)
class Analysis:
    rows: list[Row]  # each target against its own baseline, read from `pairs`
    pairs: dict[
        PairKey, Comparison
    ]  # the one family, corrected together: every pair of targets per workload and metric
    rankings: dict[RankingKey, Ranking]  # (workload, primary metric, host) → ranking, read from `pairs`
    runs_needed: dict[str, int | None]  # workload → runs per cell for a ratio within ±precision
    threshold: float
    precision: float
    override: str | None = None  # --baseline: the target every other is compared with where it was measured
    # each workload against the one it is paired with (compare_with), per target: in the family
    between: list[Row] = field(default_factory=list)
    paired_with: dict[str, str] = field(default_factory=dict)  # workload → the workload it was to be compared with
    primary: frozenset[tuple[str, str]] = frozenset()  # (workload, metric): the primary metrics (Roles.primary)
    # (workload, primary metric, host) → why its targets are not ranked (timing.why_not_within: emulated)
    unranked: dict[RankingKey, str] = field(default_factory=dict)

    def rows_of(self, workload: str) -> list[Row]:
        return [r for r in self.rows if r.workload == workload]

    def main_rows(self, workload: str | None = None) -> list[Row]:
        """The main comparisons: every target against its baseline on the primary metrics alone
        (of one workload, or of all), in the rows' order. What a summary leads with: the other
        metrics' rows (percentiles, CPU) come after them, never before."""
        return [r for r in self.rows if self.is_main(r) and (workload is None or r.workload == workload)]

    def is_main(self, row: Row) -> bool:
        """Whether a row is one of the main comparisons (main_rows): a target against its
        baseline (not a workload against the one it is paired with) on a primary metric."""
        return row.baseline_workload is None and (row.workload, row.metric) in self.primary

    def between_of(self, workload: str) -> list[Row]:
        """A workload's rows against the workload it is paired with, target by target."""
        return [r for r in self.between if r.workload == workload]

    @property
    def family_size(self) -> int:
        """How many comparisons Benjamini–Hochberg corrected together."""
        return sum(c.p_value is not None for c in [*self.pairs.values(), *(r.comparison for r in self.between)])

    @property
    def level(self) -> float:
        """The confidence the family's intervals are drawn at (stats.family_level), each verdict read from its own."""
        tested = (c for c in [*self.pairs.values(), *(r.comparison for r in self.between)] if c.p_value is not None)
        return next((c.level for c in tested), CONFIDENCE)

    def comparison(self, workload: str, metric: str, baseline: str, other: str) -> Comparison | None:
        """`other` against `baseline`, as the family has it (read the other way round if need be)."""
        if (workload, metric, baseline, other) in self.pairs:
            return self.pairs[(workload, metric, baseline, other)]
        found = self.pairs.get((workload, metric, other, baseline))
        return None if found is None else inverted(found)

    def differ(self, workload: str, metric: str, a: str, b: str) -> bool:
        """Whether the family tells `a` and `b` apart, whichever way round it compared them (read as
        it is: a ranking asks it of every pair of targets, thousands of times a summary)."""
        found = self.pairs.get((workload, metric, a, b)) or self.pairs.get((workload, metric, b, a))
        return found is not None and found.differs


def look_schedule(runs: int, max_runs: int) -> list[int]:
    """The runs per cell after which an adaptive plan judges its comparisons, and may stop: after
    its first `runs`, then after each further block up to `max_runs`."""
    return list(range(runs, max_runs + 1)) if max_runs > runs else [runs]


def looks_of(settings: Mapping[str, Any]) -> int:
    """How many times a study run could have stopped adding runs, fixed by its plan before its
    first run (look_schedule) when it added runs as they came (--target-ci, --decide), once
    otherwise. Read from the repetitions it was run with (running.plan.Repetitions.describe,
    stored in its settings): the planner judges at each look, and the summary afterwards, with
    the same number (analyse's `looks`)."""
    if settings.get("target_ci") is None and not settings.get("decide"):
        return 1
    return len(look_schedule(int(settings.get("runs", 1)), int(settings["max_runs"])))


def roles_of(samples: Samples, roles: Roles | None = None) -> Roles:
    """The metrics' roles: as stored with them (`roles`), else as the workload kinds declare
    them (samples that come without their roles: synthetic ones)."""
    if roles is not None:
        return roles
    return Roles.declared(
        {(workload, m) for (workload, _), metrics in samples.items() for m in metrics}, declared_metrics()
    )


def analyse(
    samples: Samples,
    higher_is_better: dict[str, bool],
    targets: list[str],
    workloads: list[str],
    *,
    baselines: dict[str, str] | None = None,
    baseline: str | None = None,
    threshold: float = 0.03,
    precision: float | None = None,
    roles: Roles | None = None,
    kinds: dict[str, str] | None = None,
    hosts: dict[str, Hosted] | None = None,
    compare_with: dict[str, str] | None = None,
    blocks: dict[tuple[str, str], dict[str, list[int]]] | None = None,
    looks: int = 1,
    machines: Mapping[str | None, Sequence[Host]] | None = None,
) -> Analysis:
    """Every pair of targets per workload and compared metric, Benjamini–Hochberg over all of
    them. Each target's rows compare it with its baseline (`compared_with`): `baseline` for every
    target when given (the command line's --baseline), else `baselines[target]` (each target's
    own, as the study set it), else the first target. A target that is its own baseline, or whose
    baseline was not measured, has no rows. `roles`: which metrics are compared and which decide
    precision and rank (default: as declared); `kinds`: each workload's kind, whose printed
    resolution bounds its intervals (default: fio's); `hosts`: each target's host, where the
    targets are a study's targets on several hosts — two are compared, and ranked together, only
    on the same host (--baseline names a target, compared with on each host); `compare_with`:
    workload → the workload it is compared with on each target both measured, in every metric
    compared in both, in the same family (Analysis.between); `blocks`: the block each value ran
    in, shaped as `samples` (two targets that ran in enough of the same blocks are compared
    within them: stats.PAIRED_MIN_BLOCKS); `looks`: how many times the study could have stopped
    adding runs (its intervals hold their error across them: stats.family_level); `machines`:
    each host's facts (by `hosts`' host names; None: the one host of an analysis not per host),
    several where its cells pool hosts — a metric the hosts' timing does not allow compared
    (timing.why_not_within: an emulated host's speed) is undecided with why, and ranks nothing.
    Samples of a cell whose figures cannot be real are left out by the caller
    (summary.py)."""
    check_override(baseline, targets if hosts is None else list(dict.fromkeys(h.target for h in hosts.values())))
    precision = threshold if precision is None else precision
    roles = roles_of(samples, roles)
    pairs: dict[PairKey, SamplePair] = {}
    needed = {}
    measured = {w: [t for t in targets if (w, t) in samples] for w in workloads}  # workload → its targets with samples
    for workload, present in measured.items():
        if not present:
            continue
        for metric in dict.fromkeys(m for t in present for m in roles.compared_in(workload, samples[(workload, t)])):
            cells = {t: values for t in present if (values := samples[(workload, t)].get(metric))}
            names = list(cells)
            step = resolution_of(kinds, workload, metric)
            ran_in = {t: (blocks or {}).get((workload, t), {}).get(metric) for t in names}
            for i, a in enumerate(names):
                for b in (b for b in names[i + 1 :] if host_of(hosts, a) == host_of(hosts, b)):
                    a_in, b_in = ran_in[a], ran_in[b]
                    within = (a_in, b_in) if a_in is not None and b_in is not None else None
                    pairs[(workload, metric, a, b)] = SamplePair(
                        cells[a], cells[b], higher_is_better[metric], step, within
                    )
        primary = [
            samples[(workload, t)][m] for t in present for m in roles.primary_in(workload, samples[(workload, t)])
        ]
        needed[workload] = runs_needed(primary, precision)
    between = _between(samples, roles, higher_is_better, kinds, measured, compare_with or {})
    gate = partial(_gated, machines)
    held = [gate(host_of(hosts, a), metric) for (_, metric, a, _) in pairs]
    held += [gate(host_of(hosts, target), metric) for (_, _, target, metric) in between]
    compared = compare_pairs([*pairs.values(), *between.values()], threshold)
    compared = [c if why is None else withhold(c, why) for c, why in zip(compared, held)]
    tested = adjust_family(compared, threshold, looks)
    family = Analysis([], dict(zip(pairs, tested)), {}, needed, threshold, precision)
    rankings = _rankings(family, samples, roles, higher_is_better, measured, hosts)
    unranked = {key: why for key in rankings if (why := gate(key[2], key[1])) is not None}
    rankings = {key: ranking for key, ranking in rankings.items() if key not in unranked}
    rows = _rows(family, samples, roles, measured, baselines, baseline, hosts)
    paired = [Row(w, t, t, m, c, baseline_workload=other) for (w, other, t, m), c in zip(between, tested[len(pairs) :])]
    found = replace(family, rows=rows, rankings=rankings, override=baseline, between=paired, unranked=unranked)
    return replace(found, paired_with=dict(compare_with or {}), primary=roles.primary)


def _gated(machines: Mapping[str | None, Sequence[Host]] | None, host: str | None, metric: str) -> str | None:
    """Why `metric` may not be compared among the cells of `host` (analyse's `machines`), or None."""
    return None if machines is None else why_not_within(metric, machines.get(host, ()))


def _between(
    samples: Samples,
    roles: Roles,
    higher_is_better: dict[str, bool],
    kinds: dict[str, str] | None,
    measured: dict[str, list[str]],
    compare_with: dict[str, str],
) -> dict[tuple[str, str, str, str], SamplePair]:
    """(workload, the workload it is compared with, target, metric) → the pair: on each target both
    measured, each metric compared in both (by its key, phase and all), the other workload's
    samples the baseline; its resolution the coarser of the two workloads'."""
    pairs = {}
    for workload, other in compare_with.items():
        for target in (t for t in measured.get(workload, []) if (other, t) in samples):
            mine, theirs = samples[(workload, target)], samples[(other, target)]
            for metric in roles.compared_in(workload, mine):
                a, b = theirs.get(metric), mine[metric]
                if a and b and roles.compared_in(other, [metric]):
                    step = max(resolution_of(kinds, workload, metric), resolution_of(kinds, other, metric))
                    pairs[(workload, other, target, metric)] = SamplePair(a, b, higher_is_better[metric], step)
    return pairs


def compared_with(target: str, own: str | None, present: Sequence[str], override: str | None = None) -> str | None:
    """The target `target` is compared with in one workload, `present` being the targets measured
    there (the one rule, for the tables and for the planner): `override` (--baseline) where it
    was measured, else the target's own baseline as the study settled it (none stored: the
    first target); none when that is the target itself or was not measured in this workload —
    a skipped or failed baseline is never replaced by a substitute."""
    base = override if override in present else own if own is not None else next(iter(present), None)
    return base if base in present and base != target else None


def check_override(override: str | None, targets: Sequence[str]) -> None:
    """--baseline names a target of the study run, or is refused: by the plan before any run, as
    by the summary (a skipped target is none of them)."""
    if override is not None and override not in targets:
        raise AnalysisError(f"no target '{override}' in this study run; its targets: {', '.join(targets)}")


def _rows(
    family: Analysis,
    samples: Samples,
    roles: Roles,
    measured: dict[str, list[str]],
    baselines: dict[str, str] | None,
    override: str | None,
    hosts: dict[str, Hosted] | None,
) -> list[Row]:
    rows = []
    for workload, present in measured.items():
        for target in present:
            here = override if hosts is None or override is None else Hosted(override, hosts[target].host).name
            base = compared_with(target, (baselines or {}).get(target), present, here)
            if base is None:
                continue
            for metric in roles.compared_in(workload, samples[(workload, target)]):
                found = family.comparison(workload, metric, base, target)
                if found is not None:
                    rows.append(Row(workload, target, base, metric, found))
    return rows


def _rankings(
    family: Analysis,
    samples: Samples,
    roles: Roles,
    higher_is_better: dict[str, bool],
    measured: dict[str, list[str]],
    hosts: dict[str, Hosted] | None,
) -> dict[RankingKey, Ranking]:
    """Per workload, primary metric and host, the targets by geometric mean, best first (the
    metric's direction says which is best), told apart only where their comparison in the family
    says they differ."""
    rankings = {}
    for workload, every in measured.items():
        for host in dict.fromkeys(host_of(hosts, t) for t in every):
            present = [t for t in every if host_of(hosts, t) == host]
            for metric in dict.fromkeys(m for t in present for m in roles.primary_in(workload, samples[(workload, t)])):
                scores = {
                    t: geometric_mean(values)
                    for t in present
                    if (values := samples[(workload, t)].get(metric)) and _positive(values)
                }
                if len(scores) > 1:
                    differs = partial(family.differ, workload, metric)
                    rankings[(workload, metric, host)] = rank(
                        scores, differs, higher_is_better=higher_is_better[metric]
                    )
    return rankings


@dataclass(frozen=True)
class Hosted:
    """A target of a study as it ran on one of several hosts: a cell's target in a summary per host."""

    target: str
    host: str

    @property
    def name(self) -> str:
        """As tables show it and the analysis knows it: "ext4 @ host-a"."""
        return f"{self.target} @ {self.host}"


def host_of(hosts: dict[str, Hosted] | None, target: str) -> str | None:
    """The host a target of an analysis ran on; None where the analysis is not per host."""
    return None if hosts is None else hosts[target].host


def host_blocks(samples: dict[tuple[str, str, str], dict[str, list[float]]]) -> Samples:
    """Samples of several hosts pooled per (workload, target), host treated as a block: each
    host's values of a workload and metric divided by that host's level (the geometric mean of
    all its values of them, every target's) and multiplied by the level of all hosts together,
    so a host faster than another in everything adds no spread to a comparison of targets."""
    logs: dict[tuple[str, str, str | None], list[float]] = defaultdict(
        list
    )  # (workload, metric, host or None: all) → log values
    for (workload, _, host), metrics in samples.items():
        for metric, values in metrics.items():
            if _positive(values):
                logs[(workload, metric, host)] += [math.log(v) for v in values]
                logs[(workload, metric, None)] += [math.log(v) for v in values]
    level = {key: math.fsum(values) / len(values) for key, values in logs.items()}
    pooled: Samples = {}
    for (workload, target, host), metrics in samples.items():
        cell = pooled.setdefault((workload, target), {})
        for metric, values in metrics.items():
            shift = (
                math.exp(level[(workload, metric, None)] - level[(workload, metric, host)])
                if _positive(values)
                else 1.0
            )
            cell.setdefault(metric, []).extend(v * shift for v in values)
    return pooled


def compare_study_runs(
    older: SampleGroups,
    newer: SampleGroups,
    *,
    threshold: float = 0.03,
    left_out: Collection[tuple[str, str]] = (),
    against: str = "before",
    withheld: Callable[[str, str], str | None] | None = None,
) -> list[Row]:
    """Every cell present in both study runs' stored samples but those `left_out` ((workload,
    target) flagged in either: figures that cannot be real are judged nowhere): newer against
    older, BH over all of them; each metric's direction and roles as either study run stored them.
    Each decided one explained (fslab.statistics.explain), the older side named `against` in its clauses.
    `withheld`: (target, metric) → why the two sides' hosts may not be compared in it
    (timing.why_not_compared), or None; such a cell is undecided with why, out of the family."""
    higher_is_better, roles, kinds = (
        {**older.higher_is_better, **newer.higher_is_better},
        older.roles | newer.roles,
        older.kinds | newer.kinds,
    )
    cells, pairs = [], []
    for (workload, target), metrics in older.values.items():
        if (workload, target) not in newer.values or (workload, target) in left_out:
            continue
        for metric in roles.compared_in(workload, metrics):
            a, b = metrics[metric], newer.values[(workload, target)].get(metric)
            if b:
                cells.append((workload, target, metric))
                pairs.append(SamplePair(a, b, higher_is_better[metric], resolution_of(kinds, workload, metric)))
    made = compare_pairs(pairs, threshold)
    if withheld is not None:
        held = [withheld(target, metric) for _, target, metric in cells]
        made = [c if why is None else withhold(c, why) for c, why in zip(made, held)]
    compared = adjust_family(made, threshold)
    rows = [Row(workload, target, target, metric, c) for (workload, target, metric), c in zip(cells, compared)]
    decided = [r for r in rows if r.comparison.differs]
    found = _explanations(
        [(older.values[(r.workload, r.target)], newer.values[(r.workload, r.target)]) for r in decided],
        [(None, None)] * len(decided),  # two study runs' blocks are not the same blocks
        [({}, {})] * len(decided),
        decided,
        threshold,
        [against] * len(decided),
    )
    by_row = {id(r): e for r, e in zip(decided, found)}
    return [replace(r, explanation=by_row[id(r)]) if id(r) in by_row else r for r in rows]


Notes = dict[tuple[str, str], dict[str, int]]  # (workload, target) → run note kind → runs that carried it


def explained(
    analysis: Analysis,
    samples: Samples,
    *,
    blocks: dict[tuple[str, str], dict[str, list[int]]] | None = None,
    notes: Notes | None = None,
) -> Analysis:
    """The analysis with an explanation beside each decided verdict of its rows (each target
    against its baseline, each workload against the one it is paired with): fslab.statistics.explain's rules
    over the two cells' `samples` (as analyse had them), `blocks` and run `notes`."""
    rows = [*analysis.rows, *analysis.between]
    cells = {
        id(r): ((r.baseline_workload or r.workload, r.baseline), (r.workload, r.target))
        for r in rows
        if r.comparison.differs
    }
    found = _explanations(
        [(samples.get(a, {}), samples.get(b, {})) for a, b in cells.values()],
        [((blocks or {}).get(a), (blocks or {}).get(b)) for a, b in cells.values()],
        [((notes or {}).get(a, {}), (notes or {}).get(b, {})) for a, b in cells.values()],
        [r for r in rows if id(r) in cells],
        analysis.threshold,
        [r.baseline_workload or r.baseline for r in rows if id(r) in cells],
    )
    by_row = dict(zip(cells, found))

    def attach(r: Row) -> Row:
        return replace(r, explanation=by_row[id(r)]) if id(r) in by_row else r

    return replace(analysis, rows=[attach(r) for r in analysis.rows], between=[attach(r) for r in analysis.between])


def _explanations(
    values: list[tuple[Mapping[str, list[float]], Mapping[str, list[float]]]],
    blocks: list[tuple[Mapping[str, list[int]] | None, Mapping[str, list[int]] | None]],
    notes: list[tuple[Mapping[str, int], Mapping[str, int]]],
    rows: list[Row],
    threshold: float,
    against: list[str],
) -> list[Explanation]:
    from fslab.statistics.explain import Asked, Side, explain

    return explain(
        [
            Asked(Side(va, ba, na), Side(vb, bb, nb), r.metric, name)
            for (va, vb), (ba, bb), (na, nb), r, name in zip(values, blocks, notes, rows, against)
        ],
        threshold,
    )


def resolution_of(kinds: dict[str, str] | None, workload: str, metric: str) -> float:
    """The step a workload's tool prints a metric to; of a workload whose kind is not known
    (samples that come without their kinds: synthetic ones), as the kinds declare it (roles_of)."""
    return resolution((kinds or {}).get(workload), metric)


def regressed(c: Comparison, regression: float) -> bool:
    """A regression: decided slower (read from its family's interval) by more than the regression
    threshold, on the log scale as every verdict's threshold is (stats.beyond)."""
    return c.verdict == SLOWER and beyond(c.ratio, regression)


def regressions(rows: list[Row], regression: float) -> list[Row]:
    return [r for r in rows if regressed(r.comparison, regression)]


@dataclass(frozen=True)
class Gate:
    """What a CI gate reads of the comparisons it judges (`fslab compare`'s cells, the steps into
    the newest study run of `fslab history --fail-on-regression`): the one rule of their exit
    status. It fails on a decided regression only — an undecided comparison is not a regression,
    nor is a decided one within `regression` — and, when `strict`, also on any undecided one."""

    regressions: int
    undecided: int
    strict: bool = False

    @property
    def failed(self) -> bool:
        return bool(self.regressions or (self.strict and self.undecided))


def gate(comparisons: Iterable[Comparison], regression: float, *, strict: bool = False) -> Gate:
    judged = list(comparisons)
    return Gate(sum(regressed(c, regression) for c in judged), sum(c.verdict == UNDECIDED for c in judged), strict)


def ranking_line(ranking: Ranking, shown: Callable[[str], str] = str) -> str:
    """ "ext4 > xfs = raw > btrfs" where '>' and '=' say it exactly (every pair across tiers
    detectably different, every pair within a tier not told apart); else a compact letter display,
    best first: "xfs (a) · raw (ab) · ext4 (b)", targets sharing a letter not told apart. Each
    target named as `shown` names it (with what goes with its figures)."""
    if ranking.tiers is not None:
        return " > ".join(" = ".join(map(shown, tier)) for tier in ranking.tiers)
    lettered = " · ".join(f"{shown(name)} ({ranking.letters[name]})" for name in ranking.order)
    return lettered + " — no verdict sets apart targets sharing a letter"


def _positive(values: list[float]) -> bool:
    return all(v > 0 for v in values)
