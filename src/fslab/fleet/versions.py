"""Which units a worker may run, when a fleet's fslabs differ. The one rule:

A worker runs a unit only when
  1. the database is at the schema its fslab writes (schema_info): an older worker would store
     fields too few, a newer one finds none at start — it migrates the database as any fslab
     does on opening it (results/schema.py), and the older workers then refuse; and
  2. its fslab is the one that made the study run (study_runs.fslab_version, `fslab run --on`'s):
     the study's text, its defaults and its plan mean on every host what they meant to the fslab
     that queued it, and a unit taken again runs on as it began. A version is the release and its
     source's hash (fslab.version); a row of an fslab before that says the release alone ("0.1.0"),
     which tells no source: only a worker of such an fslab matches it, none of today's.
It checks both as it takes a unit, and the schema again in the transaction of each run it stores
(schema.check_current): a database migrated beneath a unit under way stores none of its runs.

Any other unit it refuses, naming both versions: said on its output, recorded on the unit (state
"refused", its note in `fslab status`), and given back to its host's queue, offered again after
the worker's lapse — a worker of that name and the right versions takes it then (docs/fleet.md,
"Upgrading a fleet"). Each worker registers its versions (fleet_workers, schema 16), and `fslab
run --on` says which of the workers it queues units for would refuse them (refusers)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import sqlalchemy as sa

from fslab import version
from fslab.core.errors import FslabError
from fslab.results.schema import SCHEMA_VERSION, SchemaChanged, check_current

if TYPE_CHECKING:
    from fslab.fleet.roster import Worker

REFUSED = "refused"  # the unit's state while no worker of the right versions has taken it


class UnitRefused(FslabError):
    """A unit this worker cannot run faithfully; why, naming both versions."""


def check_runnable(engine: sa.Engine, location: str, study_run_id: int, made_by: str) -> None:
    """Refuse a unit of study run `study_run_id`, made by fslab `made_by`, unless this worker may run it."""
    try:
        with engine.begin() as conn:
            check_current(conn, location)
    except SchemaChanged as exc:
        raise UnitRefused(str(exc)) from None
    if made_by != version():
        raise UnitRefused(
            f"study run {study_run_id} was made by fslab {made_by}, "
            f"and this worker runs fslab {version()} (schema {SCHEMA_VERSION}): "
            f"run a worker of fslab {made_by} on this host, or the study again"
        )


def refusers(workers: Iterable[Worker]) -> list[str]:
    """Of these workers (as they registered), those that would refuse a unit this fslab queues,
    each said with both versions; and those of an fslab before schema 16, which said no version
    and refuse nothing."""
    found = []
    for w in workers:
        if w.fslab_version is None:
            found.append(
                f"worker {w.name} runs an fslab of before schema 16, which refuses no unit it cannot run "
                f'faithfully: stop it, and upgrade its host (docs/fleet.md, "Upgrading a fleet")'
            )
        elif (w.fslab_version, w.schema_version) != (version(), SCHEMA_VERSION):
            found.append(
                f"worker {w.name} runs fslab {w.fslab_version} (schema {w.schema_version}), "
                f"and this is fslab {version()} (schema {SCHEMA_VERSION}): it will refuse its unit, "
                f'which waits for a worker of fslab {version()} (docs/fleet.md, "Upgrading a fleet")'
            )
    return found
