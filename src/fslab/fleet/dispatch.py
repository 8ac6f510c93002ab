"""`fslab run STUDY --on …`: the fleet's study run — one row, stored before anything is queued —
and one unit per host queued on that host's queue; then its progress across hosts, followed in a
live table until every unit has ended, through any outage of the database (or shown once:
`fslab status`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.live import Live

from fslab.core.errors import FslabError
from fslab.core.names import visible
from fslab.fleet import queue, roster, spread as spreading, units, versions
from fslab.fleet.steady import steadily
from fslab.model import Study
from fslab.model.records import now
from fslab.report.console import table
from fslab.results import ResultsDB
from fslab.results.schema import SCHEMA_VERSION
from fslab.running import environment

if TYPE_CHECKING:
    from fslab.running.plan import Repetitions

COLUMNS = ["host", "state", "runs\ndone", "runs\nplanned", "current", "ETA", "note"]
RIGHT = [False, False, True, True, False, True, False]
STATE_STYLES = {
    "queued": "",
    "waiting": "yellow",
    "running": "cyan",
    "released": "yellow",
    "refused": "yellow",
    "done": "green",
    "failed": "red",
}
WORKER_COLUMNS = ["worker", "labels", "fslab", "schema", "last heard\n(ago)"]


def begin(
    db: ResultsDB,
    study: Study,
    repetitions: Repetitions,
    *,
    on: str,
    seed: int | None = None,
    baseline: str | None = None,
    spread: bool = False,
    kernels: list[str] | None = None,
    boots: int = 1,
) -> int:
    """Store the fleet's study run and queue one unit per host `on` names; its id. `spread`: the
    plan's blocks are divided among those hosts (fleet/spread.py) instead of each running all.
    `kernels` (`--kernel`, with `boots`): each host runs the plan under each kernel named, as
    `fslab run --kernel` here does (units.KernelShare; the caller checks the study first, as the
    lab's check_kernel_study does)."""
    from fslab.running.plan import Planner, new_seed  # here: `fslab status` needs no planner, nor the numpy it loads
    from fslab.running.runner import study_run_settings

    queue.conninfo(db.location)  # PostgreSQL, or a clear refusal, before anything is stored
    if spread:
        spreading.check(repetitions)
    share = units.KernelShare(tuple(dict.fromkeys(kernels)), boots) if kernels else None
    if share is not None and spread:
        raise FslabError(
            "--spread cannot go with --kernel: each host boots its own kernels and runs the whole plan on each"
        )
    try:
        units.check_self_contained(study.source, study.path)
    except units.NotSelfContained as exc:
        raise FslabError(str(exc)) from None
    queue.install(db.engine)
    hosts = roster.chosen(db.engine, on)
    plan_seed = seed if seed is not None else study.seed if study.seed is not None else new_seed()
    planner = Planner(
        study.cells, repetitions, plan_seed, baseline
    )  # refuses a --baseline no target answers, before anything is stored
    study = replace(study, repetitions=repetitions.runs, warmup=repetitions.warmup)
    settings = (
        repetitions.describe()
        | ({"baseline": baseline} if baseline else {})
        | study_run_settings(study, [])
        | ({spreading.SETTING: True} if spread else {})
        | ({"lab": share.encoded()} if share is not None else {})
    )
    study_run_id = db.begin_study_run(
        study, plan_seed, environment.collect(Path.cwd()), {}, settings, None
    )  # its workers own it, each its unit
    units.queued(db.engine, study_run_id, hosts)
    blocks = spreading.block_count(planner) if spread else 0
    spreading.queued(db.engine, study_run_id, blocks)
    app = queue.app_for(db.location)
    app.open()
    try:
        queue.enqueue_blocks(
            app, study_run_id, blocks
        )  # before the units: a unit never finds its blocks not yet queued
        for host in hosts:
            queue.enqueue(app, study_run_id, host)
    finally:
        app.close()
    return study_run_id


def refusing(db: ResultsDB, study_run_id: int) -> list[str]:
    """Of the workers of the study run's hosts, those that would refuse their units, each said with
    both versions (fleet/versions.py; a host whose worker has not registered yet is not judged)."""
    hosts = set(units.hosts_of(db.engine, study_run_id))
    return [visible(line) for line in versions.refusers(w for w in roster.workers(db.engine) if w.name in hosts)]


def progress_table(db: ResultsDB, study_run_id: int) -> tuple[RenderableType, bool]:
    """The progress table of a fleet's study run, and whether every unit has ended."""
    found = units.progress(db.engine, study_run_id)
    rows = [
        [
            visible(p.host),
            p.state,
            str(p.done),
            "" if p.planned is None else str(p.planned),
            visible(p.current),
            _eta(p.eta),
            visible(_note(p)),
        ]
        for p in found
    ]
    title = f"study run {study_run_id}: {sum(p.done for p in found)} run(s) stored on {len(found)} host(s)"
    ended = all(p.ended for p in found) or units.finished(
        db.engine, study_run_id
    )  # spread: every block done, a host perhaps gone
    return table(title, COLUMNS, rows, RIGHT, styles=[STATE_STYLES.get(p.state, "") for p in found]), ended


def workers_table(db: ResultsDB) -> RenderableType:
    """The fleet's workers as each last said it was: its labels, the fslab it runs and the schema
    that writes (what decides which units it refuses: fleet/versions.py; "?": a worker of before
    schema 16 did not say), how long ago it was last heard from."""
    found = roster.workers(db.engine)
    at = now()
    rows = [
        [
            visible(w.name),
            visible(", ".join(w.labels)),
            visible(w.fslab_version or "?"),
            "?" if w.schema_version is None else str(w.schema_version),
            _eta(at - w.seen_at),
        ]
        for w in found
    ]
    styles = ["" if w.schema_version == SCHEMA_VERSION else "yellow" for w in found]
    title = f"{len(found)} worker(s); the database is at schema {SCHEMA_VERSION}"
    return table(title, WORKER_COLUMNS, rows, [False, False, False, True, True], styles=styles)


UNREACHABLE = "database unreachable, retrying (the workers go on, and store their runs once it answers)"


def follow(
    db: ResultsDB,
    study_run_id: int,
    console: Console,
    say: Callable[[str], None],
    every: float = 1.0,
    wait: Callable[[float], None] = time.sleep,
) -> None:
    """The progress table, live, until every unit has ended. The database away a while (its
    server restarted, the network cut) is waited for as the workers wait for it (steady.steadily),
    and said once an outage."""

    def once_an_outage(tries: int, exc: BaseException, pause: float) -> None:
        if tries == 1:
            say(UNREACHABLE)

    def progress() -> tuple[RenderableType, bool]:
        return steadily(lambda: progress_table(db, study_run_id), once_an_outage)

    shown, ended = progress()
    with Live(shown, console=console, auto_refresh=False) as live:
        while not ended:
            wait(every)
            shown, ended = progress()
            live.update(shown, refresh=True)


def _note(p: units.Progress) -> str:
    kept_aside = f"{p.superseded} run(s) superseded, not counted" if p.superseded else ""
    return "; ".join(note for note in (p.why, kept_aside) if note)


def _eta(eta: timedelta | None) -> str:
    if eta is None:
        return ""
    seconds = max(int(eta.total_seconds()), 0)  # a worker's clock may run ahead of this host's
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
