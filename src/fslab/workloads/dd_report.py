"""What dd's runs offer a report (the dd kind's report hook, offered.KindReport): a table of each
run's copies, a row per run and step — the bytes it copied, in how long, at what rate —, from the
metrics stored of it. dd reports one line per copy, at its end: it has no series over time (its
status=progress prints a running total once a second to a terminal, a handful of points over a
copy of a second or two, and is not asked for) and no latency distribution (one copy is one
figure). Light, as dd_metrics is.
"""

from __future__ import annotations

from collections import defaultdict

from fslab.model import PHASE_SEPARATOR
from fslab.units import format_size
from fslab.workloads.dd_metrics import DIRECTIONS, MOVED
from fslab.workloads.offered import Offered, RunTable, Stored

COLUMNS = ["run", "copied", "seconds", "MB/s"]


class DdReport:
    def offered(self, stored: Stored) -> Offered:
        names = {f"{d}_{what}" for d in DIRECTIONS for what in ("mb_s", "elapsed_s")} | set(MOVED.values())
        values = stored.values(names)
        rows: dict[tuple[str, str, str], list[list[str]]] = defaultdict(list)
        for r in sorted(stored.runs, key=lambda r: r["repetition"]):
            phases = dict.fromkeys(phase for run_id, phase, _ in values if run_id == r["id"])
            for phase in phases:
                for d in DIRECTIONS:
                    got = {
                        name: values.get((r["id"], phase, name)) for name in (f"{d}_mb_s", f"{d}_elapsed_s", MOVED[d])
                    }
                    if None in got.values():
                        continue
                    step = f"{phase}{PHASE_SEPARATOR}{d}" if phase else d
                    rows[(r["workload"], r["target"], step)].append(
                        [
                            str(r["repetition"]),
                            format_size(int(got[MOVED[d]] or 0)),
                            f"{got[f'{d}_elapsed_s']:.3f}",
                            f"{got[f'{d}_mb_s']:,.1f}",
                        ]
                    )
        return Offered(
            tables=[
                RunTable(workload, target, step, f"{target}: each run's dd {step}", COLUMNS, each)
                for (workload, target, step), each in rows.items()
            ]
        )


DD_REPORT = DdReport()
REPORT = DD_REPORT  # as the registry finds a shipped kind's (workloads.report_of)
