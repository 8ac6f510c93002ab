"""A study run's conclusions in words (pure): what the one family of comparisons says, worded
with its uncertainty. Each comparison is said in the one wording every output shares
(formatting.verdict_phrase): its verdict — faster, slower, equivalent or undecided — with the ratio,
the very interval it is read from (at the family's confidence: stats.adjust_family) and why; a
difference is claimed only where the verdict is faster or slower. A target whose figures
cannot be real is in no comparison or ranking (summary.py), and said to be left out; a target
whose figures carry a caveat (an fsync that did not reach the device) is named with it. What is
said of a workload's targets is said of the cells its table shows (a test holds every built-in
study's conclusions to its tables).
"""

from __future__ import annotations

from dataclasses import dataclass

from fslab.report.formatting import explained_phrase, metric_label
from fslab.report.sections import left_out_line, with_caveats
from fslab.report.summary import StudySummary
from fslab.statistics.analysis import Row
from fslab.statistics.stats import Ranking


@dataclass(frozen=True)
class Conclusion:
    text: str
    claim: bool  # it states a difference (the verdict said faster or slower)
    row: Row | None = None  # the comparison it words, as the tables show it (none: a ranking's, or nothing to compare)
    targets: tuple[str, ...] = ()  # the targets it speaks of
    ranked_by: str | None = None  # a ranking's metric


def conclusions(s: StudySummary) -> dict[str, list[Conclusion]]:
    """Workload → what its comparisons and rankings allow to be said: its rankings and main
    comparisons (the primary metrics') first, then the other metrics'; claims first in each."""
    out = {}
    for workload in s.workloads:
        rankings = [
            (metric, r) for (w, metric, _), r in s.analysis.rankings.items() if w == workload
        ]  # on several hosts, the targets name theirs
        caveats = s.caveats_of(workload)
        said = [c for metric, r in rankings if (c := ranking_conclusion(r, metric, caveats)) is not None]
        rows = [*s.analysis.rows_of(workload), *s.analysis.between_of(workload)]
        said += row_conclusions(rows, s.analysis.threshold, caveats)
        # the main comparisons' (and the rankings on the primary metrics) first, then the other
        # metrics' (percentiles, CPU): each claims first
        said = sorted(said, key=lambda c: (not _main(s, c), not c.claim)) or [nothing_to_compare(s, workload)]
        left_out = left_out_line(s, workload)
        out[workload] = said + ([Conclusion(left_out, False)] if left_out else [])
    return out


def _main(s: StudySummary, said: Conclusion) -> bool:
    """Whether a conclusion is of the main comparisons (Analysis.main_rows) or a ranking, which is
    on a primary metric."""
    return said.ranked_by is not None or (said.row is not None and s.analysis.is_main(said.row))


def nothing_to_compare(s: StudySummary, workload: str) -> Conclusion:
    """Why a workload has no comparison, from the cells its table shows: the targets with
    figures, and those of them left out (flagged)."""
    cells = [c for c in s.cells_of(workload) if c.metrics]
    measured, judged = [c.target for c in cells], [c.target for c in cells if not c.implausible]
    if len(measured) < 2:
        who = f"only {measured[0]}" if measured else "no target"
        return Conclusion(f"Nothing to compare: {who} measured it.", False, targets=tuple(measured))
    said = f"Nothing to compare: {len(measured)} targets measured it, and "
    if len(judged) < 2:
        left = len(measured) - len(judged)
        said += f"the figures of {left} of them cannot be real (left out), which leaves {len(judged)}."
    else:
        said += (
            "no compared figure of theirs could be set against another's "
            "(a comparison needs positive values of one metric in two cells, on one host)."
        )
    return Conclusion(said, False, targets=tuple(judged))


def row_conclusions(rows: list[Row], threshold: float, caveats: dict[str, list[str]] | None = None) -> list[Conclusion]:
    """One sentence per target against its baseline and metric (or, on one target, per workload
    against the workload it is paired with), each target named with its caveats."""
    return [_row_conclusion(r, threshold, caveats or {}) for r in rows]


def _row_conclusion(r: Row, threshold: float, caveats: dict[str, list[str]]) -> Conclusion:
    c, what = r.comparison, metric_label(r.metric)
    # on one target, a workload against the one it is paired with; else a target against its baseline
    if r.baseline_workload:
        on, subject, baseline = f"On {with_caveats(r.target, caveats)}, ", r.workload, r.baseline_workload
        targets: tuple[str, ...] = (r.target,)
    else:
        subject, baseline = with_caveats(r.target, caveats), with_caveats(r.baseline, caveats)
        on, targets = "", (r.target, r.baseline)
    said = f"{on}{subject} against {baseline} in {what}: {explained_phrase(c, r.explanation)}."
    return Conclusion(said, c.differs, r, targets)


def ranking_conclusion(ranking: Ranking, metric: str, caveats: dict[str, list[str]] | None = None) -> Conclusion | None:
    """Who leads on a primary metric, said only where the leader is decided faster than every
    other target; else that no target leads. Each target named with its caveats."""
    what, named = metric_label(metric), lambda target: with_caveats(target, caveats or {})
    if len(ranking.order) < 2:
        return None
    leader = ranking.order[0]
    if ranking.tiers is not None and len(ranking.tiers[0]) == 1 and len(ranking.tiers) > 1:
        said = f"{named(leader)} leads in {what}, decided faster than every other target."
        return Conclusion(said, True, targets=tuple(ranking.order), ranked_by=metric)
    tied = [name for name in ranking.order if set(ranking.letters[name]) & set(ranking.letters[leader])]
    said = f"No target leads in {what}: no verdict sets one of {', '.join(map(named, tied))} ahead of the others."
    return Conclusion(said, False, targets=tuple(ranking.order), ranked_by=metric)
