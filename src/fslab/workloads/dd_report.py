"""What dd's runs offer a report (the dd kind's report hook, offered.KindReport): a table of each
run's copies, a row per run — the bytes it copied, in how long, at what rate — per step, from the
metrics stored of it. dd reports one line per copy, at its end: it has no series over time (its
status=progress prints a running total once a second to a terminal, a handful of points over a
copy of a second or two, in a line fslab's parser would have to tell from the final one: not asked
for) and no latency distribution (one copy is one figure). Light, as dd_metrics is.
"""

from __future__ import annotations

from collections import defaultdict

from fslab.core.units import format_size
from fslab.model import PHASE_SEPARATOR
from fslab.workloads.dd_metrics import DIRECTIONS, MOVED
from fslab.workloads.offered import KindReport, Offered, RunTable, Stored

COLUMNS = ["target", "run", "copied", "seconds", "MB/s"]


class DdReport(KindReport):
    def offered(self, stored: Stored) -> Offered:
        names = {f"{d}_{what}": d for d in DIRECTIONS for what in ("mb_s", "elapsed_s")} | {
            moved: d for d, moved in MOVED.items()
        }
        values = stored.values(names)
        phases: dict[int, list[str]] = defaultdict(list)  # a run's phases with dd's figures (a scenario's dd phases)
        for run_id, phase, _ in values:
            if phase not in phases[run_id]:
                phases[run_id].append(phase)
        rows: dict[tuple[str, str], list[list[str]]] = defaultdict(list)
        for r in sorted(stored.runs, key=lambda r: (r["target"], r["repetition"])):
            for phase in phases[r["id"]]:
                for d in DIRECTIONS:
                    copied, seconds, rate = (
                        values.get((r["id"], phase, name)) for name in (MOVED[d], f"{d}_elapsed_s", f"{d}_mb_s")
                    )
                    if copied is None or seconds is None or rate is None:
                        continue  # not dd's: a scenario's fio phase has its MB/s and bytes, not its elapsed time
                    step = f"{phase}{PHASE_SEPARATOR}{d}" if phase else d
                    rows[(r["workload"], step)].append(
                        [r["target"], str(r["repetition"]), format_size(int(copied)), f"{seconds:.3f}", f"{rate:,.1f}"]
                    )
        return Offered(
            tables=[
                RunTable(workload, step, f"Each run's dd {step}", COLUMNS, each)
                for (workload, step), each in rows.items()
            ]
        )


DD_REPORT = DdReport()
REPORT = DD_REPORT  # as the registry finds a shipped kind's (workloads.report_of)
