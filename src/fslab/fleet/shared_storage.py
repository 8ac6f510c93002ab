"""Shared storage from several clients on a fleet (docs/shared-storage.md): the workers of the
hosts a workload's `clients` names serve fio, and the unit that runs the study drives them.

The protocol, in the queue and the roster alone:
1. A unit whose study has workloads with `clients` asks each client host's worker, through the
   queue, to serve fio for its study run (queue.request_fio: one request per study run and host).
2. That worker takes the request between its own units, under its host lock (hostlock.py: a fio
   server's jobs are a benchmark on that host, so no worker of its name runs one meanwhile),
   checks that the study run names it among its clients, starts `fio --server` on the address it
   registered (`--fio-address`; fio.server.serving: journalled, proven by pid and start time
   before it is signalled), and says so in the roster (fleet_workers.fio_serving). It stops the
   server as soon as no unit of that study run runs.
3. The driving unit's runs wait for that (roster.FleetClients: with a deadline, a clear error)
   and drive the servers as `fslab run --client` does (fio/clients.py).

Why not serve for as long as the worker runs (simpler): a fio server runs any job that reaches
it, as root, with no password. Served only while a study run that names the host runs, it is
open for the minutes that study needs, not for the weeks a worker runs."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fslab.core.errors import FslabError
from fslab.core.workdir import Workdir
from fslab.fio import Endpoint, Network, serving
from fslab.fleet import queue, roster, units
from fslab.fleet.steady import LOST, SteadyResults
from fslab.model import Host, Study
from fslab.workloads.base import ClientDirectory

POLL = 1.0  # seconds between looks at whether the study run served still runs


@dataclass(frozen=True)
class FioSettings:
    """A worker's part in shared-storage runs."""

    location: str  # the shared database's URL (the queue's)
    address: Endpoint | None  # --fio-address: where it serves fio (None: it serves none)
    allowed: tuple[Network, ...]  # --allow-network: where clients' servers may be, beside loopback


def clients_named(study: Study) -> list[str]:
    """Every host the study's workloads name among their clients."""
    from fslab.fio import FioJob

    return sorted({name for w in study.workloads if isinstance(w.tool, FioJob) for name in w.tool.clients})


@contextmanager
def unit_services(
    study: Study, host: Host, study_run_id: int, db: SteadyResults, settings: FioSettings
) -> Iterator[ClientDirectory | None]:
    """For a unit of `study` on `host`: where its workloads' clients serve fio (None: it names
    none), each client host's worker asked to serve for the study run first."""
    named = clients_named(study)
    if not named:
        yield None
        return
    ready = {w.name for w in db.steadily(lambda: roster.workers(db.engine)) if w.fio_address is not None}
    asked = [
        name for name in named if name != host.name and name in ready
    ]  # the others are refused by name when a run asks
    if asked:
        db.steadily(
            lambda: _request_fio(settings.location, study_run_id, asked)
        )  # asked again: the waiting request is kept
    yield roster.FleetClients(db.engine, study_run_id, settings.allowed, driving=host.name, steadily=db.steadily)


def _request_fio(location: str, study_run_id: int, hosts: list[str]) -> None:
    app = queue.app_for(location)
    app.open()
    try:
        for name in hosts:
            queue.request_fio(app, study_run_id, name)
    finally:
        app.close()


def serve_fio_for(
    study_run_id: int,
    db: SteadyResults,
    host: Host,
    workdir: Workdir,
    settings: FioSettings,
    say: Callable[[str], None],
) -> None:
    """A request to serve fio (queue.request_fio): serve it at this worker's address while a unit
    of the study run runs, in the worker's own work directory (claimed: no run of its own meanwhile;
    waited for while another fslab uses it)."""
    from fslab.running.resume import share_of

    if settings.address is None:
        raise FslabError(
            f"asked to serve fio for study run {study_run_id}, but "
            "this worker was started without --fio-address: not served"
        )
    with tempfile.TemporaryDirectory(
        prefix="fslab-fleet-"
    ) as nothing_beside:  # the study as stored: untrusted, checked as any study file
        study = db.steadily(lambda: share_of(db, study_run_id, host.name, Path(nothing_beside))).study
    if host.name not in clients_named(study):
        raise FslabError(f"study run {study_run_id} names no workload with client {host.name}: fio not served")
    if not db.steadily(lambda: units.any_running(db.engine, study_run_id)):
        say(f"study run {study_run_id} has no unit running: fio not served")
        return

    def busy(why: Exception, pause: float) -> None:
        say(f"fio for study run {study_run_id} waits: {why}; trying again in {pause:.0f} s")

    with workdir.claim(busy):
        for outcome in workdir.journal.clean_up():
            say(f"left by an interrupted fslab: {outcome.kind} {outcome.ident}: {outcome.status}")
        with serving(workdir.journal, settings.address) as server:
            db.steadily(lambda: roster.serving_for(db.engine, host.name, study_run_id))
            say(f"serving fio at {settings.address} for study run {study_run_id}")
            try:
                while db.steadily(lambda: units.any_running(db.engine, study_run_id)):
                    if not server.running:
                        raise FslabError(
                            f"fio --server at {settings.address} ended by "
                            f"itself (exit status {server.process.returncode})"
                        )
                    time.sleep(POLL)
            finally:
                try:
                    roster.serving_for(db.engine, host.name, None)
                except LOST:
                    pass  # the next registration of this worker clears it
        workdir.journal.clean_up()
    say(f"stopped serving fio for study run {study_run_id}: none of its units runs")
