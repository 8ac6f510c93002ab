"""The workers of a fleet as they said they were: name, labels, facts (model.Host), last heartbeat
(fleet_workers, schema 11), where each serves fio and for which study run it serves now (schema
12), which fslab it runs and the schema that writes (schema 16); the hosts `fslab run --on` names:
HOST[,HOST…], label:LABEL, all; and where a study run's clients serve fio (FleetClients, the
fleet's fio_clients.ClientDirectory)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from fslab import version
from fslab.core.errors import FslabError, Refused
from fslab.core.names import check_name
from fslab.fio import Endpoint, Network, endpoint
from fslab.model import Host
from fslab.model.records import now
from fslab.results.schema import SCHEMA_VERSION, fleet_workers

# A worker not heard from for this long is not counted in `--on all` or `--on label:…`.
PRESENT = timedelta(minutes=2)
# How long a run waits for its clients' workers to serve fio: a client host busy with a unit of
# its own serves once that unit ends.
CLIENTS_SERVE_WITHIN = 300.0


class NoSuchHosts(FslabError):
    pass


@dataclass(frozen=True)
class Worker:
    name: str
    labels: list[str]
    facts: Host
    seen_at: datetime
    fio_address: str | None = None  # ADDRESS:PORT, as it registered it (untrusted where read)
    lapse: float | None = None  # how long it may go unheard (None: a worker of before schema 13 did not say)
    fslab_version: str | None = None  # the fslab it runs (None: a worker of before schema 16 did not say)
    schema_version: int | None = None  # the schema that fslab writes


def checked_labels(labels: Sequence[str]) -> list[str]:
    """Labels as names are checked (core/names.py): no path, no control character."""
    found = []
    for label in labels:
        try:
            found.append(check_name(label))
        except ValueError as exc:
            raise NoSuchHosts(f"--labels: {exc}") from None
    return found


def register(engine: sa.Engine, host: Host, labels: list[str], lapse: float, fio: Endpoint | None = None) -> None:
    """The worker, as it is now (a worker of that name before is replaced: the same host,
    restarted, perhaps upgraded); `lapse`: how long it may go unheard before its unit is taken
    again. It runs this fslab, which writes this schema (fleet/versions.py)."""
    values = {
        "labels": labels,
        "facts": asdict(host),
        "seen_at": now(),
        "fio_address": None if fio is None else str(fio),
        "fio_serving": None,
        "lapse": lapse,
        "fslab_version": version(),
        "schema_version": SCHEMA_VERSION,
    }
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


def serving_for(engine: sa.Engine, name: str, study_run_id: int | None) -> None:
    """Worker `name`'s fio server listens for the clients of study run `study_run_id` (None: it stopped)."""
    with engine.begin() as conn:
        conn.execute(fleet_workers.update().where(fleet_workers.c.name == name).values(fio_serving=study_run_id))


def lapses(engine: sa.Engine) -> dict[str, float | None]:
    """Each worker's lapse, by name (None: a worker of an fslab before schema 13 did not say)."""
    with engine.connect() as conn:
        return {name: lapse for name, lapse in conn.execute(sa.select(fleet_workers.c.name, fleet_workers.c.lapse))}


def workers(engine: sa.Engine) -> list[Worker]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(fleet_workers).order_by(fleet_workers.c.name)).all()
    return [
        Worker(
            r.name,
            list(r.labels),
            Host(**r.facts),
            r.seen_at,
            r.fio_address,
            r.lapse,
            r.fslab_version,
            r.schema_version,
        )
        for r in rows
    ]


def chosen(engine: sa.Engine, on: str) -> list[str]:
    """The hosts `--on` names: HOST[,HOST…] (a worker of that name may start later: its units
    wait for it), label:LABEL (the workers present that carry it), all (every worker present)."""
    if on == "all" or on.startswith("label:"):
        present = [w for w in workers(engine) if now() - w.seen_at <= PRESENT]
        label = on.removeprefix("label:") if on != "all" else None
        names = [w.name for w in present if label is None or label in w.labels]
        if not names:
            which = "no worker" if label is None else f"no worker labelled {label!r}"
            raise NoSuchHosts(
                f"--on {on}: {which} has been heard from in the last {PRESENT.seconds // 60} "
                "minutes; start `fslab worker` on the hosts first (docs/fleet.md)"
            )
        return names
    names = [name.strip() for name in on.split(",") if name.strip()]
    try:
        return list(dict.fromkeys(check_name(name) for name in names)) or _none(on)
    except ValueError as exc:
        raise NoSuchHosts(f"--on: {exc}") from None


def _none(on: str) -> list[str]:
    raise NoSuchHosts(f"--on {on!r} names no host: give HOST[,HOST…], label:LABEL or all")


class FleetClients:
    """Where the client hosts of study run `study_run_id` serve fio (fio_clients.ClientDirectory):
    the address each one's worker registered — read from the shared database, so checked again
    here as `--client` is (an IP literal on loopback or in an `allowed` network) — once that
    worker says its server listens for this study run. A host with no worker, one that serves no
    fio, or the host driving (`driving`: busy with this unit, it serves none) is refused at once;
    one that does not serve within `within` seconds, then. Each read goes through `steadily` (a
    worker's: its rule for a database away, steady.steadily)."""

    def __init__(
        self,
        engine: sa.Engine,
        study_run_id: int,
        allowed: Sequence[Network],
        *,
        driving: str,
        within: float = CLIENTS_SERVE_WITHIN,
        wait: Callable[[float], None] = time.sleep,
        steadily: Callable[[Callable[[], Any]], Any] = lambda read: read(),
    ):
        self.engine, self.study_run_id, self.allowed, self.driving, self.within, self.wait = (
            engine,
            study_run_id,
            tuple(allowed),
            driving,
            within,
            wait,
        )
        self.steadily = steadily

    def endpoint_of(self, host: str) -> Endpoint:
        if host == self.driving:
            raise Refused(
                f"client host {host!r} is the host running this unit: a worker serves fio only between "
                "units of its own; name other hosts as clients, or run the study on another host"
            )
        deadline = time.monotonic() + self.within
        while True:
            row = self.steadily(lambda: self._registered(host))
            if row is None:
                raise Refused(
                    f"client host {host!r} has no worker in the fleet: start `fslab worker "
                    f"--name {host} --fio-address ADDRESS` on that host (docs/shared-storage.md)"
                )
            if row.fio_address is None:
                raise Refused(
                    f"client host {host!r}: its worker serves no fio; start it again with --fio-address "
                    "ADDRESS[:PORT] (that host's address on the lab's network; docs/shared-storage.md)"
                )
            where = endpoint(row.fio_address, self.allowed, f"client {host}'s --fio-address")
            if row.fio_serving == self.study_run_id:
                return where
            if time.monotonic() > deadline:
                raise Refused(
                    f"client host {host!r}: its worker did not serve fio for "
                    f"study run {self.study_run_id} within {self.within:.0f} s: "
                    "it is busy with a unit of its own, serving another study "
                    "run, or stopped (`fslab status`, its worker's output)"
                )
            self.wait(0.2)

    def _registered(self, host: str) -> sa.Row | None:
        with self.engine.connect() as conn:
            return conn.execute(
                sa.select(fleet_workers.c.fio_address, fleet_workers.c.fio_serving).where(fleet_workers.c.name == host)
            ).first()
