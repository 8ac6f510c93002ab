"""The runner's observer (runner.RunObserver, every call of it) that the overhead benches time a
study's runs with: it stamps each run's start (time.monotonic()) with its target's name, so that
a run's cycle is the time to the next start (the last one's to the study run's return)."""

from __future__ import annotations

import time

from fslab.core.checks import Unsupported
from fslab.model import Study
from fslab.results import RunRecord
from fslab.running.plan import PlannedRun
from fslab.study import describe_study


class Stopwatch:
    def __init__(self) -> None:
        self.starts: list[tuple[float, str]] = []  # (when, target) of each run, in the order run

    def announce(self, study: Study, skipped: list[Unsupported]) -> None:
        print(f"{study.name}: {describe_study(study, skipped=[u.target for u in skipped])}", flush=True)

    def notice(self, message: str) -> None:
        print(message, flush=True)

    def starting(self, planned: PlannedRun, index: int, total: int) -> None:
        self.starts.append((time.monotonic(), planned.cell.target.name))

    def finished(self, planned: PlannedRun, record: RunRecord) -> None:
        pass

    def already_stored(self, planned: PlannedRun, index: int, total: int) -> None:
        pass

    def cycles(self, end: float) -> list[tuple[str, float]]:
        """Each run's target and seconds from its start to the next run's (the last: to `end`)."""
        ends = [start for start, _ in self.starts[1:]] + [end]
        return [(name, nxt - start) for (start, name), nxt in zip(self.starts, ends)]
