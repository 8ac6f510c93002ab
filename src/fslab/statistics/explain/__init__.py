"""An explanation beside a decided verdict: what the kernel did differently in the two cells, in a
line of "with …" clauses, most telling first (docs/statistics.md, "Explanations").

A rule is one module of this package that joins RULES as it is imported (`RULES.add(Rule(...))`).
Each reads one metric a monitor stores beside every run (the workload's own figures are what a
verdict is of, never what explains it), of the phase the verdict's metric is of, and fires only
where that metric's difference between the two cells is itself decided — by the comparison a
verdict is read from (stats.compare_pairs, paired within blocks where they ran in enough of the
same, its interval drawn at the false coverage rate of the explanation's rules together:
stats.adjust_family), never by a bare point difference. Pure: samples in, clauses out; the wording
of a verdict around them is the report's.

Two scales, as a rule says:
- RATIO: the ratio of geometric means, decided beyond ±max(the rule's threshold, the study's);
- DIFFERENCE: for shares and percentages, where 0 is an ordinary value and a ratio has no meaning
  (0 % of writes through the page cache): the difference of means, decided beyond ±`threshold` in
  the metric's own unit ÷ `unit`. Compared by the same machinery on exp(value ÷ unit), whose log
  ratio is exactly that difference, so Welch's (or the paired) interval, the family's level and
  the threshold rule of stats.decide apply unchanged.

Most telling first: each fired rule's strength is how far the end of its interval nearest no
difference lies from it, in multiples of the rule's own threshold (|log bound| ÷ log(1 +
threshold); for a difference, |bound| ÷ threshold): the effect the interval guarantees, on a scale
each rule sets by what it calls a difference worth naming. Ties: the rule's `priority`, lower first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from fslab.core.registry import Registry
from fslab.model import PHASE_SEPARATOR, qualified
from fslab.statistics.stats import Comparison, SamplePair, adjust_family, compare_pairs

RATIO, DIFFERENCE = "ratio", "difference"
SHOWN = 3  # clauses a sentence names; the rest are counted ("and 2 more"), and all are in summary.json
NOTHING_DIFFERS = "with no measured difference in what the kernel did"  # every measure decided equivalent
NOTHING_MEASURED = "with nothing measured of what the kernel did"  # no rule's metric in both cells


@dataclass(frozen=True)
class Difference:
    """What a fired rule words: its metric's decided comparison (the target against `against`),
    each side's values, and how many runs of each carried the rule's run note (Rule.note)."""

    key: str  # the metric read, with its phase ("after.extents")
    comparison: Comparison
    mine: list[float]  # the target's values
    theirs: list[float]  # the baseline's
    against: str  # the baseline, as a clause names it ("ext4", "before")
    noted: int = 0  # the target's runs that carried the rule's note
    runs: int = 0  # the target's runs

    @property
    def mean(self) -> float:
        return math.fsum(self.mine) / len(self.mine)

    @property
    def baseline_mean(self) -> float:
        return math.fsum(self.theirs) / len(self.theirs)

    @property
    def ratio(self) -> float:
        """The target's geometric mean over the baseline's (a RATIO rule's comparison)."""
        return self.comparison.ratio

    def noted_text(self, what: str) -> str:
        """ "; served by a cache in 3 of 3 runs" where the target's runs carried the note, else ""."""
        return f"; {what} in {self.noted} of {self.runs} runs" if self.noted else ""


@dataclass(frozen=True)
class Rule:
    """A rule, the one shape every rule module registers: reads `metric`, fires where its
    difference is decided beyond `threshold` (RATIO: a relative change, raised to the study's
    threshold where that is larger; DIFFERENCE: in the metric's unit ÷ `unit`), worded by `clause`
    (without the leading "with"). `note`: a run note kind whose count its clause names;
    `instead_of`: a metric whose presence in both cells says the same better (this rule then does
    not apply); `applies`: whether the two cells' values (the target's, the baseline's) are worth
    comparing at all (None: always)."""

    name: str
    metric: str
    trigger: str
    clause: Callable[[Difference], str]
    priority: int
    scale: str = RATIO
    threshold: float = 0.10
    unit: float = 1.0
    note: str = ""
    instead_of: str = ""
    applies: Callable[[list[float], list[float]], bool] | None = None

    def says(self, d: Difference) -> str:
        return self.clause(d)


def margin(rule: Rule, study_threshold: float) -> float:
    """The threshold a rule's comparison is decided beyond, as stats.decide reads it (a ratio's)."""
    if rule.scale == DIFFERENCE:
        return math.expm1(rule.threshold)
    return max(rule.threshold, study_threshold)


RULES: Registry[Rule] = Registry("explanation rule", package=__name__)


@dataclass(frozen=True)
class Clause:
    rule: str
    key: str
    says: str  # without "with": "99 % of its direct writes through the page cache (ext4: 0 %)"
    comparison: Comparison  # the decided difference it words (a DIFFERENCE rule's: on exp(value ÷ unit))
    scale: str
    strength: float  # what it is ranked by (the module's docstring)

    @property
    def difference(self) -> float | None:
        """A DIFFERENCE rule's difference of means (in the metric's unit ÷ the rule's unit)."""
        return math.log(self.comparison.ratio) if self.scale == DIFFERENCE else None


@dataclass(frozen=True)
class Explanation:
    """The clauses that fired, most telling first; how many rules could have (their metric
    measured in both cells), and of those how many were undecided (neither a difference nor
    equivalent: too few runs, or too much spread, to tell)."""

    clauses: tuple[Clause, ...]
    measured: int
    undecided: int = 0

    @property
    def sentence(self) -> str:
        """ "with A, B and C" (SHOWN at most, the rest counted); where none fired, one phrase: no
        measured difference only where every measure was decided equivalent, never from too few runs."""
        if not self.clauses:
            if not self.measured:
                return NOTHING_MEASURED
            if not self.undecided:
                return NOTHING_DIFFERS
            undecided = f"{self.undecided} of {self.measured} measures undecided"
            return f"with no decided difference in what the kernel did ({undecided})"
        said = [c.says for c in self.clauses[:SHOWN]]
        more = len(self.clauses) - SHOWN
        if more > 0:
            said.append(f"{more} more measured difference{'s' if more > 1 else ''}")
        return "with " + (said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}")


@dataclass(frozen=True)
class Side:
    """One cell as the rules read it: metric key → its runs' values (in run order), the block each
    ran in (as stats.SamplePair.blocks; None: unknown), run note kind → runs that carried it."""

    values: Mapping[str, list[float]]
    blocks: Mapping[str, list[int]] | None = None
    notes: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Asked:
    """A decided verdict to explain: `other` against `baseline` in metric `key`; `against`: how a
    clause names the baseline."""

    baseline: Side
    other: Side
    key: str
    against: str


def rules() -> list[Rule]:
    """Every rule, in tie order (priority, then name)."""
    return sorted(RULES.values(), key=lambda r: (r.priority, r.name))


def explain(asked: Sequence[Asked], threshold: float = 0.03) -> list[Explanation]:
    """Each verdict's explanation (its rules' pairs compared together: one batch for all). The
    verdicts of one pair of cells in one phase — its IOPS, bandwidth and latencies — share one:
    worked out once (a study run of 10 targets × 20 workloads has thousands of decided rows)."""
    every = rules()
    metrics = {rule.metric for rule in every}
    distinct: dict[tuple[object, ...], int] = {}
    for a in asked:
        distinct.setdefault(_sameness(a, metrics), len(distinct))
    found = _explain([asked[i] for i in _firsts(asked, metrics, distinct)], every, threshold)
    return [found[distinct[_sameness(a, metrics)]] for a in asked]


def _sameness(a: Asked, metrics: set[str]) -> tuple[object, ...]:
    """What an explanation depends on: the two cells (the very mappings), the phase, how the
    baseline is named, the notes counted, and the verdict's metric where a rule reads it too."""
    phase, _, own = a.key.rpartition(PHASE_SEPARATOR)
    sides = (a.baseline.values, a.other.values, a.baseline.blocks, a.other.blocks)
    return (*map(id, sides), phase, a.against, tuple(sorted(a.other.notes.items())), own if own in metrics else "")


def _firsts(asked: Sequence[Asked], metrics: set[str], distinct: dict[tuple[object, ...], int]) -> list[int]:
    """The index of the first of `asked` of each distinct explanation, in `distinct`'s order."""
    firsts: dict[int, int] = {}
    for i, a in enumerate(asked):
        firsts.setdefault(distinct[_sameness(a, metrics)], i)
    return [firsts[n] for n in range(len(distinct))]


def _explain(asked: Sequence[Asked], every: list[Rule], threshold: float) -> list[Explanation]:
    from fslab.monitors.traffic import withheld_amplifications

    candidates: list[list[tuple[Rule, str]]] = []
    pairs: list[SamplePair] = []
    for a in asked:
        phase = a.key.rpartition(PHASE_SEPARATOR)[0]
        withheld = withheld_amplifications(a.baseline.values).keys() | withheld_amplifications(a.other.values).keys()
        found = []
        for rule in every:
            key = qualified(phase, rule.metric)
            mine, theirs = a.other.values.get(key), a.baseline.values.get(key)
            if not mine or not theirs or key in withheld or key == a.key:
                continue
            if not any(mine) and not any(theirs):  # nothing on either side (a read's device writes): no measure
                continue
            if rule.applies is not None and not rule.applies(mine, theirs):
                continue
            if rule.instead_of and all(qualified(phase, rule.instead_of) in s.values for s in (a.baseline, a.other)):
                continue
            found.append((rule, key))
            pairs.append(_pair(rule, theirs, mine, a.baseline, a.other, key))
        candidates.append(found)
    compared = iter(compare_pairs(pairs, threshold))
    return [_explanation(a, found, [next(compared) for _ in found], threshold) for a, found in zip(asked, candidates)]


def _pair(rule: Rule, theirs: list[float], mine: list[float], baseline: Side, other: Side, key: str) -> SamplePair:
    blocks = None
    if baseline.blocks is not None and other.blocks is not None:
        a, b = baseline.blocks.get(key), other.blocks.get(key)
        blocks = (a, b) if a is not None and b is not None else None
    if rule.scale == DIFFERENCE:  # exp(x): its log ratio is the difference of means (the module's docstring)
        theirs, mine = [math.exp(x / rule.unit) for x in theirs], [math.exp(x / rule.unit) for x in mine]
    return SamplePair(theirs, mine, True, 0.0, blocks)


def _explanation(a: Asked, found: list[tuple[Rule, str]], compared: list[Comparison], threshold: float) -> Explanation:
    family = adjust_family(compared, threshold)
    clauses, undecided = [], 0
    for (rule, key), c in zip(found, family):
        c = replace(c, threshold=margin(rule, threshold))
        if not c.differs:
            undecided += not c.decided
            continue
        mine, theirs = list(a.other.values[key]), list(a.baseline.values[key])
        d = Difference(key, c, mine, theirs, a.against, a.other.notes.get(rule.note, 0) if rule.note else 0, len(mine))
        clauses.append(
            (-strength(c), rule.priority, rule.name, Clause(rule.name, key, rule.says(d), c, rule.scale, strength(c)))
        )
    return Explanation(tuple(c for *_, c in sorted(clauses, key=lambda x: x[:3])), len(found), undecided)


def strength(c: Comparison) -> float:
    """How far a decided comparison's interval lies from no difference at its nearer end, in
    multiples of its threshold (on the log scale of stats.decide: a DIFFERENCE rule's exactly its
    difference ÷ its threshold)."""
    low, high = c.interval or (c.ratio, c.ratio)
    nearer = low if c.ratio > 1 else high
    return abs(math.log(nearer)) / math.log1p(c.threshold)


# --- wording, shared by the rules ----------------------------------------------------------------


def percent(share: float) -> str:
    """A share in [0, 1] as a clause says it: "99 %", "0.4 %", "0 %"."""
    value = share * 100
    return f"{value:.0f} %" if value == 0 or abs(value) >= 10 else f"{value:.1f} %"


def times(ratio: float) -> str:
    """A ratio as a clause says it: "2.1×", "0.48×"."""
    return f"{ratio:.2g}×" if ratio < 1 else f"{ratio:.1f}×" if ratio < 100 else f"{ratio:,.0f}×"


def microseconds(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"
