"""`fslab bisect`: the first kernel package where one cell's metric changes.

Over kernel releases in order, the first known good and the last known bad, each step boots a
kernel, runs the cell and judges it against the good end's runs with fslab's own sequential rule
(the planner's, running/plan.py): a comparison (stats.compare) whose interval is drawn at
1 − q/K for the K looks the step's run budget allows (analysis.look_schedule; stats.adjust_family),
looked at after each boot, so its error holds whichever look it stops at. A step's verdict is
three-way:

- **same**: the comparison is equivalent (its interval within ±threshold of the good end);
- **different**: faster or slower, the way the bad end differs (the other way: undecided);
- **undecided**: the budget is spent (`max_runs`, or futile: even `max_runs` could not decide it
  at the spread seen, plan.futile).

A step not yet decided gets another boot with as many runs as its comparison says would decide it
(Comparison.runs_to_decide), up to `max_runs`; the good end's runs are topped up alike when the
step has more (the reference is kept for every later step). A kernel that fails to prepare, boot
or run (KernelFailed) is skipped, said with its reason, and so is an undecided one: the search
goes on with the untested kernel nearest the middle, and where only skipped or undecided kernels
are left between the last good and the first bad, it names that range instead of one package.
The first bad package (or the range) is confirmed by an A/B: its predecessor and it, both measured
afresh, judged by the same rule.

A share (a metric in [0, 1] named *_share: write_buffered_share) is judged on the difference of
means, in points (`Rule.difference`, SHARE_POINTS unless told), not on a ratio: near 0 a ratio has
no meaning (0.001 against 0.0012 is "20 % more" of nothing). As the explanations do
(statistics/explain), it is compared on exp(value), whose log ratio is exactly that difference, so
the same sequential rule applies unchanged.

Pure: every measurement goes through `measure(release, runs) -> Samples` (lab/study.py's boot_once
in production, a fake in the tests), every line said through `say`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from fslab.core.errors import FslabError
from fslab.core.names import visible
from fslab.lab.kernels import LIST_HINT, KernelFailed, KernelPackage, release_key
from fslab.running.plan import futile
from fslab.statistics.analysis import look_schedule
from fslab.statistics.stats import (
    EQUIVALENT,
    FASTER,
    SLOWER,
    UNDECIDED,
    Comparison,
    adjust_family,
    compare,
    interval_text,
    level_text,
    ratio_text,
)

# What a step's verdict makes of its kernel.
GOOD, BAD, NEITHER, SKIPPED = "same", "different", "undecided", "skipped"
RUNS = 5  # runs per boot before a step's first look: a run costs a fraction of a boot (~20 s against ~80 s under TCG)
MAX_RUNS = 10  # a step's budget of runs, as bench/adaptive.py's MAX_RUNS
SHARE_POINTS = 0.05  # a share's margin of "same": 5 points, as the explanations' rule of the buffered shares


class BisectError(FslabError):
    """A bisect that cannot begin or go on: its ends, its list, its metric."""


@dataclass(frozen=True)
class Samples:
    """One metric's values from one boot of a kernel (a run each), and its direction."""

    values: tuple[float, ...]
    higher_is_better: bool = True


Measure = Callable[[str, int], Samples]  # (release, runs) → that many runs' values, from one boot


@dataclass(frozen=True)
class Rule:
    """How a step is judged: the verdicts' threshold (also the margin of "same"), the runs of a
    step's first boot and its budget of runs, and the metric's printed resolution."""

    threshold: float = 0.03
    runs: int = RUNS
    max_runs: int = MAX_RUNS
    resolution: float = 0.0
    difference: float | None = None  # a share's margin in points: judged on the difference of means

    @classmethod
    def for_metric(cls, metric: str, threshold: float = 0.03, runs: int = RUNS, max_runs: int = MAX_RUNS) -> Rule:
        """The rule for `metric`: a share (*_share) judged on its difference of SHARE_POINTS."""
        return cls(threshold, runs, max_runs, difference=SHARE_POINTS if metric.endswith("_share") else None)

    def __post_init__(self) -> None:
        if self.runs < 2:
            raise BisectError(f"--runs {self.runs}: a step's interval needs at least 2 runs per boot")
        if self.max_runs < self.runs:
            raise BisectError(f"--max-runs {self.max_runs} is below --runs {self.runs}: give at least as many")

    @property
    def looks(self) -> int:
        """How many times a step may stop adding runs: its intervals are drawn over all of them."""
        return len(look_schedule(self.runs, self.max_runs))


@dataclass(frozen=True)
class Step:
    """One kernel judged: its boots and runs, its verdict against the good end, what that makes it
    (GOOD, BAD, NEITHER, SKIPPED) and why."""

    release: str
    role: str  # "good end", "bad end", "step", "A/B"
    boots: int
    runs: int
    call: str
    comparison: Comparison | None = None
    reason: str = ""
    difference: bool = False  # judged on the difference of means (Rule.difference): said as one

    @property
    def verdict(self) -> str:
        return self.comparison.verdict if self.comparison is not None else ("skipped" if self.call == SKIPPED else "–")

    def line(self, version: str = "") -> str:
        """As it is printed while the bisect goes on."""
        package = f" ({version})" if version else ""
        head = f"{self.role:<8} {self.release}{package}: {_count(self.boots, 'boot')}, {_count(self.runs, 'run')}"
        if self.call == SKIPPED:
            return f"{head}: skipped — {self.reason}"
        c = self.comparison
        if c is None:
            return f"{head}: {self.reason}" if self.reason else head
        if self.difference:  # compared on exp(value): its log ratio is the difference of means
            low, high = (math.log(x) for x in c.interval) if c.interval else (0.0, 0.0)
            interval = f"{level_text(c.level)} CI {low:+.3f} – {high:+.3f}" if c.interval else "no interval"
            return f"{head}: {c.verdict}, difference {math.log(c.ratio):+.3f} ({interval}) → {self.call}: {self.reason}"
        interval = f"{level_text(c.level)} CI {interval_text(c.interval)}" if c.interval else "no interval"
        return f"{head}: {c.verdict}, ratio {ratio_text(c.ratio)} ({interval}) → {self.call}: {self.reason}"


@dataclass(frozen=True)
class Outcome:
    """What a bisect found: the first bad release (or the `suspects` it is among), the last good
    one before it, the A/B that confirms it; or why it stopped (`stopped`)."""

    steps: tuple[Step, ...]
    last_good: str | None = None
    suspects: tuple[str, ...] = ()  # one: the first bad release, named; more: it is one of these
    confirmation: Step | None = None
    stopped: str = ""
    direction: str = ""  # FASTER or SLOWER: how the bad end differs from the good end

    @property
    def first_bad(self) -> str | None:
        return self.suspects[0] if len(self.suspects) == 1 else None

    @property
    def confirmed(self) -> bool:
        c = self.confirmation
        return c is not None and c.comparison is not None and c.comparison.verdict == self.direction

    @property
    def boots(self) -> int:
        """The bisect's own boots (ends and steps), the confirming A/B's apart."""
        return sum(s.boots for s in self.steps)


@dataclass
class _Judge:
    measure: Measure
    rule: Rule
    say: Callable[[str], None]
    good: str  # the known-good end (the A/B's: the last good): its runs are every step's reference
    label: str = "good end"
    reference: list[float] = field(default_factory=list)
    higher_is_better: bool = True
    reference_boots: int = 0

    def boot(self, release: str, runs: int) -> list[float]:
        found = self.measure(release, runs)
        if len(found.values) < 1:
            raise KernelFailed(f"{release}: its boot gave no value of the metric")
        self.higher_is_better = found.higher_is_better
        return list(found.values)

    def judged(self, baseline: list[float], values: list[float]) -> Comparison:
        """The sequential rule's comparison: one comparison, its interval over the step's looks."""
        r = self.rule
        if r.difference is not None:  # a share (module docstring)
            threshold = math.expm1(r.difference)
            mine, theirs = [math.exp(x) for x in baseline], [math.exp(x) for x in values]
            c = compare(mine, theirs, self.higher_is_better, threshold)
            return adjust_family([c], threshold, r.looks)[0]
        c = compare(baseline, values, self.higher_is_better, r.threshold, r.resolution)
        return adjust_family([c], r.threshold, r.looks)[0]

    def reason(self, c: Comparison) -> str:
        """Why the verdict: a share's in points (its comparison's own words are of a ratio)."""
        points = self.rule.difference
        if points is None or c.verdict == UNDECIDED:
            return c.reason
        return f"{'within' if c.verdict == EQUIVALENT else 'beyond'} ±{points:.2f}"

    def step(self, release: str, role: str) -> Step:
        """Boot `release` until its verdict against the good end's runs (topped up as the step
        needs) is decided or the budget is spent; a kernel that fails is skipped."""
        boots, values = 0, []
        differs = self.rule.difference is not None
        try:
            values, boots = self.boot(release, self.rule.runs), 1
            while True:
                c = self.judged(self.reference, values)
                if c.decided:
                    return Step(release, role, boots, len(values), _call(c), c, self.reason(c), differs)
                if len(values) >= self.rule.max_runs or futile(c, self.rule.max_runs):
                    return Step(
                        release, role, boots, len(values), NEITHER, c, f"budget spent: {self.reason(c)}", differs
                    )
                # a boot costs several runs' time: one more boots for at least a first boot's runs
                wanted = min(self.rule.max_runs, max(len(values) + self.rule.runs, c.runs_to_decide or 0))
                if len(self.reference) < wanted:
                    self.top_up(wanted)
                values += self.boot(release, wanted - len(values))
                boots += 1
        except KernelFailed as failed:
            return Step(release, role, boots, len(values), SKIPPED, reason=str(failed))

    def top_up(self, wanted: int) -> None:
        """The good end's runs, up to `wanted`: one more boot of it, said."""
        more = _count(wanted - len(self.reference), "run")
        self.say(f"{self.label:<8} {self.good}: one more boot, {more}, for the steps' intervals")
        self.reference += self.boot(self.good, wanted - len(self.reference))
        self.reference_boots += 1


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def _call(c: Comparison) -> str:
    return GOOD if c.verdict == EQUIVALENT else BAD if c.verdict in (FASTER, SLOWER) else NEITHER


def bisect(
    releases: Sequence[str],
    measure: Measure,
    *,
    rule: Rule | None = None,
    versions: dict[str, str] | None = None,
    metric: str = "the metric",
    say: Callable[[str], None] = lambda _: None,
) -> Outcome:
    """Find the first of `releases` (ordered, the first known good, the last known bad) whose
    metric differs from the first's, each step judged by the sequential rule (module docstring)."""
    if len(releases) < 2 or len(set(releases)) != len(releases):
        raise BisectError("--kernels: give at least two different kernel releases, the known-good one first")
    rule = rule or Rule()
    versions = versions or {}
    judge = _Judge(measure, rule, say, releases[0])
    steps: list[Step] = []

    def said(step: Step) -> Step:
        steps.append(step)
        say(step.line(versions.get(step.release, "")))
        return step

    good, bad = releases[0], releases[-1]
    try:
        judge.reference = judge.boot(good, rule.runs)
    except KernelFailed as failed:
        raise BisectError(f"the known-good end {good} failed: {failed}; give a first kernel that boots") from None
    said(Step(good, "good end", 1, len(judge.reference), "reference", reason="the reference of every step"))
    end = judge.step(bad, "bad end")
    said(end)
    if end.call == SKIPPED:
        raise BisectError(f"the known-bad end {bad} failed: {end.reason}; give a last kernel that boots")
    if end.call != BAD:
        stopped = (
            "the ends do not differ: the bad end is equivalent to the good end"
            if end.call == GOOD or (end.comparison and end.comparison.verdict == EQUIVALENT)
            else f"the ends are not told apart ({end.reason}): nothing to bisect"
        )
        return _done(steps, judge, Outcome(tuple(steps), stopped=stopped))
    direction = end.comparison.verdict if end.comparison else UNDECIDED
    low, high, passed = 0, len(releases) - 1, set()
    while candidates := [i for i in range(low + 1, high) if i not in passed]:
        middle = min(candidates, key=lambda i: (abs(2 * i - (low + high)), i))
        step = judge.step(releases[middle], "step")
        if step.call == BAD and step.comparison and step.comparison.verdict != direction:
            step = replace(
                step, call=NEITHER, reason=f"{step.reason}, but {step.comparison.verdict}: the bad end is {direction}"
            )
        said(step)
        if step.call == GOOD:
            low = middle
        elif step.call == BAD:
            high = middle
        else:
            passed.add(middle)
    suspects = tuple(releases[low + 1 : high + 1])
    if len(suspects) > 1:
        say(
            f"the first {direction} kernel is one of {', '.join(suspects)}: "
            f"{', '.join(s.release + ' ' + s.call for s in steps if s.release in suspects[:-1])}"
        )
    outcome = Outcome(tuple(steps), releases[low], suspects, direction=direction)
    return _done(steps, judge, _confirmed(outcome, judge, say, versions, metric))


def _confirmed(
    outcome: Outcome, judge: _Judge, say: Callable[[str], None], versions: dict[str, str], metric: str
) -> Outcome:
    """The A/B: the last good and the first bad (or the range's last) measured afresh, judged by the
    same rule, the first bad against the last good; said with its verdict and interval."""
    before, after = outcome.last_good, outcome.suspects[-1]
    assert before is not None
    ab = _Judge(judge.measure, judge.rule, say, before, "A/B")
    try:
        ab.reference = ab.boot(before, judge.rule.runs)
    except KernelFailed as failed:
        say(f"A/B      {before}: skipped — {failed}: not confirmed")
        return outcome
    step = ab.step(after, "A/B")
    step = replace(
        step,
        boots=step.boots + 1 + ab.reference_boots,
        reason=f"{step.reason}; against {before} measured afresh ({len(ab.reference)} runs)",
    )
    say(step.line(versions.get(after, "")))
    confirmed = replace(outcome, confirmation=step)
    verdict = step.comparison.verdict if step.comparison else step.call
    if confirmed.confirmed:
        say(f"confirmed: {after} is {verdict} than {before} on {metric}, as the bad end is")
    else:
        say(f"not confirmed: the A/B says {verdict} where the bad end is {outcome.direction}")
    return confirmed


def _done(steps: list[Step], judge: _Judge, outcome: Outcome) -> Outcome:
    """The outcome, the good end's later boots (its top-ups) counted in its step."""
    if judge.reference_boots:
        first = steps[0]
        steps[0] = replace(first, boots=first.boots + judge.reference_boots, runs=len(judge.reference))
    return replace(outcome, steps=tuple(steps))


# --- the kernels bisected, and the metric -----------------------------------------------------


def _version_part(release: str) -> str:
    """A release without its flavour: "6.12.100+deb12-cloud-amd64" → "6.12.100+deb12"."""
    for suffix in ("-cloud-amd64", "-rt-amd64", "-amd64"):
        if release.endswith(suffix):
            return release.removesuffix(suffix)
    return release


def resolve(name: str, offered: Sequence[KernelPackage], flavour: str = "generic") -> KernelPackage:
    """The package a name means: a release offered as it is ("6.1.0-56-amd64"), or a version
    ("6.1.0-56", "6.12.100", "6.12.100+deb12") of the flavour wanted (generic, cloud, rt)."""
    exact = [k for k in offered if k.release == name]
    if exact:
        return exact[0]
    found = [
        k
        for k in offered
        if k.flavour == flavour and name in (_version_part(k.release), _version_part(k.release).split("+")[0])
    ]
    if len(found) != 1:
        raise BisectError(
            f"--kernels/--range: no {flavour} kernel package '{visible(name)}' in the configured archive; {LIST_HINT}"
        )
    return found[0]


def in_range(spec: str, offered: Sequence[KernelPackage]) -> list[KernelPackage]:
    """`--range A..B`: every offered package of A's flavour from A to B, ordered by release_key."""
    first, sep, last = spec.partition("..")
    if not sep or not first or not last:
        raise BisectError(f"--range '{visible(spec)}': give it as FIRST..LAST, e.g. 6.1.0-54..6.12.117")
    low = resolve(first, offered)
    high = resolve(last, offered, low.flavour)
    if high.flavour != low.flavour:
        raise BisectError(f"--range: {low.release} and {high.release} are of different flavours: give one flavour")
    lo, hi = release_key(low.release)[1], release_key(high.release)[1]
    if not lo < hi:
        raise BisectError(f"--range: {low.release} is not older than {high.release}: the known-good end comes first")
    chosen = {k.release: k for k in offered if k.flavour == low.flavour and lo <= release_key(k.release)[1] <= hi}
    return sorted(chosen.values(), key=lambda k: release_key(k.release))


def check_metric(metric: str, accelerator: str, timing: str) -> None:
    """Under TCG only a metric whose figures do not depend on the CPU's speed may be bisected
    (timing.timing_of: "independent" or "dependent"); a speed metric is refused, saying why."""
    if accelerator == "tcg" and timing == "speed":
        raise BisectError(
            f"--metric {metric}: a speed metric, and this machine's VMs run under TCG (software emulation, KVM "
            "unavailable): an emulated run measures QEMU, not the kernel, so a step's verdict would be noise. "
            "Bisect a behaviour metric here (write_buffered_share, an option as applied, space used), or bisect "
            "this one on a machine where KVM works (or on bare metal, one kernel installed at a time)"
        )
