"""The workers of a fleet as they said they were: name, labels, facts (model.Host), last heartbeat
(fleet_workers, schema 11); and the hosts `fslab run --on` names: HOST[,HOST…], label:LABEL, all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from fslab.errors import FslabError
from fslab.guard.names import check_name
from fslab.model import Host
from fslab.results.records import now
from fslab.results.schema import fleet_workers

# A worker not heard from for this long is not counted in `--on all` or `--on label:…`.
PRESENT = timedelta(minutes=2)


class NoSuchHosts(FslabError):
    pass


@dataclass(frozen=True)
class Worker:
    name: str
    labels: list[str]
    facts: Host
    seen_at: datetime


def checked_labels(labels: Sequence[str]) -> list[str]:
    """Labels as names are checked (guard/names.py): no path, no control character."""
    found = []
    for label in labels:
        try:
            found.append(check_name(label))
        except ValueError as exc:
            raise NoSuchHosts(f"--labels: {exc}") from None
    return found


def register(engine: sa.Engine, host: Host, labels: list[str]) -> None:
    """The worker, as it is now (a worker of that name before is replaced: the same host, restarted)."""
    values = {"labels": labels, "facts": asdict(host), "seen_at": now()}
    with engine.begin() as conn:
        if conn.execute(fleet_workers.update().where(fleet_workers.c.name == host.name).values(**values)).rowcount:
            return
        try:
            with conn.begin_nested():
                conn.execute(fleet_workers.insert().values(name=host.name, **values))
        except sa.exc.IntegrityError:  # a worker of that name registered meanwhile (two started at once)
            conn.execute(fleet_workers.update().where(fleet_workers.c.name == host.name).values(**values))


def heard_from(engine: sa.Engine, name: str) -> None:
    with engine.begin() as conn:
        conn.execute(fleet_workers.update().where(fleet_workers.c.name == name).values(seen_at=now()))


def workers(engine: sa.Engine) -> list[Worker]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(fleet_workers).order_by(fleet_workers.c.name)).all()
    return [Worker(r.name, list(r.labels), Host(**r.facts), r.seen_at) for r in rows]


def chosen(engine: sa.Engine, on: str) -> list[str]:
    """The hosts `--on` names: HOST[,HOST…] (a worker of that name may start later: its units
    wait for it), label:LABEL (the workers present that carry it), all (every worker present)."""
    if on == "all" or on.startswith("label:"):
        present = [w for w in workers(engine) if now() - w.seen_at <= PRESENT]
        label = on.removeprefix("label:") if on != "all" else None
        names = [w.name for w in present if label is None or label in w.labels]
        if not names:
            which = "no worker" if label is None else f"no worker labelled {label!r}"
            raise NoSuchHosts(f"--on {on}: {which} has been heard from in the last {PRESENT.seconds // 60} minutes; start `fslab worker` on the hosts first (docs/fleet.md)")
        return names
    names = [name.strip() for name in on.split(",") if name.strip()]
    try:
        return list(dict.fromkeys(check_name(name) for name in names)) or _none(on)
    except ValueError as exc:
        raise NoSuchHosts(f"--on: {exc}") from None


def _none(on: str) -> list[str]:
    raise NoSuchHosts(f"--on {on!r} names no host: give HOST[,HOST…], label:LABEL or all")
