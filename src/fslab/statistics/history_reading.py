"""A study's history as the database holds it: every study run of the study, with what statistics/history.py
judges (each host's samples, kernel and fslab version), and the threshold the study set."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fslab.core.errors import FslabError
from fslab.results import ResultsDB
from fslab.statistics.history import DEFAULT_THRESHOLD, History, StoredStudyRun, history, series_points


class HistoryError(FslabError):
    pass


def read_history(
    db: ResultsDB,
    study: str,
    *,
    hosts: Iterable[str] | None = None,
    metrics: Iterable[str] | None = None,
    threshold: float | None = None,
) -> History:
    """The history of `study`: its primary metrics (or those `metrics` names), on every host (or
    those `hosts` names), judged at `threshold` (default: the one its newest study run was run
    with, else 3 %). Refused, naming what there is, when the study or a metric has no run."""
    found = [sr for sr in db.study_runs() if sr["study"] == study]
    if not found:
        studies = sorted({sr["study"] for sr in db.study_runs()})
        raise HistoryError(
            f"no study run of study '{study}' in the database; its studies: {', '.join(studies) or 'none'}"
        )
    chosen = None if metrics is None else list(metrics)
    stored = [_stored(db, sr, chosen) for sr in found]
    if chosen is not None:
        measured = {m for sr in stored for cell in sr.values.values() for m in cell}
        missing = [m for m in chosen if m not in measured]
        if missing:
            every = sorted({m for sr in found for cell in db.host_samples(sr["id"]).values() for m in cell})
            raise HistoryError(
                f"--metric {', '.join(missing)}: no run of study '{study}' measured it; its metrics: {', '.join(every)}"
            )
    if threshold is None:
        threshold = (found[-1].get("settings") or {}).get("threshold", DEFAULT_THRESHOLD)
    if hosts is not None:
        hosts = list(hosts)
        present = {key.host for key in series_points(stored)}
        unknown = [h for h in hosts if h not in present]
        if unknown:
            raise HistoryError(
                f"--host {', '.join(unknown)}: no run of study '{study}' "
                f"ran there; its hosts: {', '.join(sorted(present))}"
            )
    return history(stored, threshold=threshold, hosts=hosts)


def _stored(db: ResultsDB, sr: dict[str, Any], metrics: list[str] | None) -> StoredStudyRun:
    """One study run as history.py reads it: its primary metrics (stored with their roles), or those named."""
    groups = db.sample_groups(sr["id"])
    values = {
        (host, workload, target): {
            m: v
            for m, v in cell.items()
            if (m in metrics if metrics is not None else m in groups.roles.primary_in(workload, cell))
        }
        for (workload, target, host), cell in db.host_samples(sr["id"]).items()
    }
    owner = sr.get("owner") or {}
    facts = {h.name: h for h in db.hosts(sr["id"])}
    return StoredStudyRun(
        id=sr["id"],
        started_at=sr["started_at"],
        fslab_version=sr["fslab_version"] or str(sr["environment"].get("fslab", "")),
        kernel=str(sr["environment"].get("kernel", "")),
        owner_host=owner.get("hostname"),
        host_kernels={h.name: h.kernel for h in facts.values()},
        host_facts=facts,
        values={key: cell for key, cell in values.items() if cell},
        higher_is_better=groups.higher_is_better,
        kinds=groups.kinds,
    )
