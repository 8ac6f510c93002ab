"""Resuming an interrupted study run: which one, and the study, plan and settings it ran with.

Everything comes from the database — the study file's text as it was, the seed, the
repetitions asked for, the baseline, the scale (sizes only or not), --no-ceiling, the targets it
skipped — so the planner hands out the very blocks it handed out before (its ceiling's too).
Job files are read again (they live beside the study file), and a resume is
refused when they, or any workload or target, no longer match what the study run stored.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from fslab.core.errors import FslabError
from fslab.fio import preallocates
from fslab.model import FAILED_ALIKE, Study
from fslab.model.ceiling import with_ceiling
from fslab.model.records import StoredRun
from fslab.results import ResultsDB
from fslab.results.location import shown
from fslab.results.owner import Owner
from fslab.running.plan import Repetitions
from fslab.study import StudyError, parse_study


class CannotResume(FslabError):
    pass


@dataclass(frozen=True)
class Resumable:
    """An interrupted study run, ready to go on."""

    study_run_id: int
    study: Study
    repetitions: Repetitions
    seed: int
    baseline: str | None  # --baseline as given when it began (None: each target's own)
    started_at: datetime
    stored: list[StoredRun]
    notes: list[str]  # what differs from when it began (kernel), for the user to weigh
    dropped: tuple[str, ...] = ()  # targets skipped midway, their runs having failed alike: still planned, passed over


def resumable(db: ResultsDB, ref: str | None = None) -> Resumable:
    """The study run `ref` (id or study name; default: the newest interrupted one), if it can go on."""
    row = _interrupted(db, ref)
    settings = dict(row["settings"] or {"runs": row["repetitions"]})  # before schema version 2: runs only
    if "lab" in settings:
        kernels = ", ".join(settings["lab"].get("kernels", []))
        raise CannotResume(
            f"study run {row['id']} ran on kernels ({kernels}: `fslab run --kernel`), boot by boot: it cannot be "
            "resumed (a boot cut short stored none of its runs; those of the boots that ended stay stored). "
            "Run the study again with --kernel for what is missing"
        )
    baseline = settings.pop("baseline", None)
    sizes_only = settings.pop("scale_sizes_only", False)
    no_ceiling = settings.pop("no_ceiling", False)
    traces = tuple(settings.pop("traces", ()))
    redo_disturbed = settings.pop("redo_disturbed", False)
    recorded = settings.pop("skipped", [])
    # skipped midway (runner._Watched): planned as before, passed over
    dropped = tuple(s["target"] for s in recorded if s["why"].startswith(FAILED_ALIKE))
    skipped = {s["target"] for s in recorded} - set(dropped)  # by --skip-unsupported: left out again
    settings.pop("spread", None)  # a fleet's (fleet/spread.py)
    repetitions = Repetitions(**settings)
    study = _study_as_stored(db, row, sizes_only, no_ceiling, skipped)
    study = replace(
        study, repetitions=repetitions.runs, warmup=repetitions.warmup, traces=traces, redo_disturbed=redo_disturbed
    )
    kernel = row["environment"].get("kernel")
    notes = (
        [f"study run {row['id']} began on kernel {kernel}; this is {platform.release()}"]
        if kernel and kernel != platform.release()
        else []
    )
    stored = db.stored_runs(row["id"])
    seed, started = row["plan_seed"], row["started_at"]
    return Resumable(row["id"], study, repetitions, seed, baseline, started, stored, notes, dropped)


def share_of(db: ResultsDB, study_run_id: int, host: str, base_dir: Path) -> Resumable:
    """One host's share of a fleet's study run: its study as stored (untrusted text, parsed and
    checked here as any study file; files it names are looked for in `base_dir`), its plan and
    settings, and the runs already stored on `host` alone (the resume key includes the host) —
    spread, on any host."""
    row = db.study_run(study_run_id)
    if row is None:
        raise CannotResume(f"no study run {study_run_id} in {db.location}")
    settings = dict(row["settings"] or {"runs": row["repetitions"]})
    baseline = settings.pop("baseline", None)
    sizes_only = settings.pop("scale_sizes_only", False)
    no_ceiling = settings.pop("no_ceiling", False)
    traces = tuple(settings.pop("traces", ()))
    redo_disturbed = settings.pop("redo_disturbed", False)
    settings.pop("skipped", None)  # a fleet's study run skips per host (fleet_units)
    settings.pop("lab", None)  # over kernels: its unit decodes them (fleet/units.py's kernel_share)
    spread = settings.pop(
        "spread", False
    )  # its runs are divided among its hosts: a run stored by any of them is stored
    repetitions = Repetitions(**settings)
    study = _study_as_stored(db, row, sizes_only, no_ceiling, set(), base_dir)
    study = replace(
        study, repetitions=repetitions.runs, warmup=repetitions.warmup, traces=traces, redo_disturbed=redo_disturbed
    )
    return Resumable(
        row["id"],
        study,
        repetitions,
        row["plan_seed"],
        baseline,
        row["started_at"],
        db.stored_runs(row["id"], host=None if spread else host),
        [],
    )


def _interrupted(db: ResultsDB, ref: str | None) -> dict:
    if ref is None:
        found = [sr for sr in db.study_runs() if sr["status"] == "interrupted"]
        if not found:
            raise CannotResume(f"no interrupted study run in {shown(db.location)} to resume (see `fslab history`)")
        return found[-1]
    row = db.study_run(ref)
    if row is None:
        raise CannotResume(f"no study run {ref} in {shown(db.location)} (see `fslab history`)")
    if row["status"] == "finished":
        raise CannotResume(
            f"study run {row['id']} ({row['study']}) finished on "
            f"{row['finished_at']:%Y-%m-%d %H:%M}: nothing to resume; `fslab run` starts a new one"
        )
    if row["status"] == "running":
        owner = Owner.from_stored(row["owner"])
        where = f" (pid {owner.pid} on {owner.hostname})" if owner else ""
        raise CannotResume(f"study run {row['id']} is still running{where}; resume it once it has stopped")
    return row


def _study_as_stored(
    db: ResultsDB, row: dict, sizes_only: bool, no_ceiling: bool, skipped: set[str], base_dir: Path | None = None
) -> Study:
    """The study parsed from the text stored with the study run, scaled as it was, with the
    ceiling it stored (none with --no-ceiling, nor for a study run stored before fslab added
    ceilings) and without the targets it skipped, checked against what it ran. Files it names are
    looked for in `base_dir` (default: beside the study file, where they were)."""
    stored_targets = db.targets(row["id"])
    try:
        base_dir = base_dir if base_dir is not None else Path(row["study_path"]).parent
        study = parse_study(
            row["study_source"], row["study_path"], base_dir=base_dir, scale=row["scale"], scale_sizes_only=sizes_only
        )
    except StudyError as exc:
        raise CannotResume(f"study run {row['id']} cannot be resumed: {exc}") from None
    stored_ceiling = any(t["spec"].get("ceiling") for t in stored_targets)
    study = with_ceiling(study, no_ceiling or not stored_ceiling, skipped).without(skipped)  # as `fslab run` had it
    stored_workloads, current = db.workloads(row["id"]), {w.name: w.spec() for w in study.workloads}
    changed = _differing(stored_workloads, current)
    unallocated = [
        f"'{w['name']}'"
        for w in stored_workloads
        if f"'{w['name']}'" in changed and _preallocation_dropped(w["spec"], current.get(w["name"], {}))
    ]
    if unallocated:
        raise CannotResume(
            f"study run {row['id']} cannot be resumed: {', '.join(unallocated)} "
            "ran before fslab stopped preallocating fio's files "
            "(fio's default, fallocate=native); fslab's jobs now write them "
            "unallocated (fallocate=none), and runs of both kinds are not "
            "repetitions of one cell. Start a new study run with `fslab run` (options "
            '= { fallocate = "native" } in its [fio] table measures as before)'
        )
    changed += _differing(stored_targets, {t.name: t.spec() for t in study.targets})
    if changed:
        raise CannotResume(
            f"study run {row['id']} cannot be resumed: {', '.join(changed)} no longer as it ran "
            "(a job file or fslab's defaults changed since); restore them, or start a new study run with `fslab run`"
        )
    return study


def _preallocation_dropped(then: dict, now: dict) -> bool:
    """Whether a workload stored before fslab recorded its preallocation (when its fio jobs
    preallocated, as fio does by default) would now run without (fio.NO_PREALLOCATION)."""
    return "preallocation" not in then and "preallocation" in now and not preallocates(now["preallocation"])


def _differing(stored: list[dict], current: dict[str, dict]) -> list[str]:
    """Names whose spec differs between the database and the study as parsed now (JSON-compared:
    that is how the spec was stored). Only what was stored is compared: a newer fslab records
    more of a spec (a field it added since), never less, and such a field says nothing changed."""
    then = {row["name"]: row["spec"] for row in stored}
    now = {name: json.loads(json.dumps(spec)) for name, spec in current.items()}
    names = [*then, *(n for n in now if n not in then)]
    return [
        f"'{name}'"
        for name in names
        if name not in then
        or name not in now
        or any(now[name].get(k) != v for k, v in then[name].items() if k in now[name])
    ]
