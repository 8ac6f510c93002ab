"""A fio workload run from several client hosts at once on one shared directory (a workload's
`clients = ["host-a", "host-b"]`; docs/shared-storage.md): fio's own client/server. Each client
host serves fio (fio/server.py, started by its worker or `fslab fio-server`); one `fio --client`
here drives them all, each with its own job file rendered from the same guarded job.

What is kept: each client's part of fio's json+ output as a raw output of its own (tool "fio",
phase = the client's name), and the whole taken from those parts — throughput summed over every
client and job, latency percentiles from the clients' histogram bins added up — never fio's own
"All clients" figures, whose latencies are averages of averages (fio issues 610 and 1881).
Each client's own metrics are kept beside, of its phase ("host-a.write_iops").

How the run learns where each client's server listens is `ClientDirectory`: a fleet's roster answers
it (fleet/roster.FleetClients, once each client's worker serves: fleet/shared_storage.py); on one
machine a mapping the user gives (`GivenClients`: HOST=ADDRESS:PORT, IP literals on loopback or in a
network the user allows — no name is ever resolved).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from fslab.core.errors import Refused
from fslab.core.journal import Journal
from fslab.core.names import NAME_RULE, file_name
from fslab.core.system import run_held
from fslab.fio import jobs as fio_jobs
from fslab.fio.jobs import JobFile
from fslab.fio.output import job_entries, job_metrics, load_json
from fslab.fio.server import Endpoint, Network, endpoint
from fslab.model import Metric, RawOutput
from fslab.workloads.base import ClientDirectory

MOST_CLIENTS = 64
# A client's name: a host's, as its worker names itself; its metrics are keyed "<name>.<metric>",
# so it holds no dot.
CLIENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]{0,63}")
CLIENT_RULE = NAME_RULE.replace("_ . + -", "_ + -") + ", no dot"


def checked_clients(names: Sequence[str]) -> tuple[str, ...]:
    """A workload's `clients`: 1 to MOST_CLIENTS host names, each once. ValueError says why not."""
    if not 1 <= len(names) <= MOST_CLIENTS:
        raise ValueError(f"clients names {len(names)} hosts: name 1 to {MOST_CLIENTS}")
    for name in names:
        if not isinstance(name, str) or not CLIENT_NAME.fullmatch(name):
            raise ValueError(f"client {str(name)[:40]!r} is not a host name: use {CLIENT_RULE}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"clients names {', '.join(twice)} more than once")
    return tuple(names)


@dataclass(frozen=True)
class Client:
    name: str
    endpoint: Endpoint


@dataclass(frozen=True)
class GivenClients:
    """The user's own mapping of host names to fio servers (`--client HOST=ADDRESS:PORT`)."""

    endpoints: Mapping[str, Endpoint]

    def endpoint_of(self, host: str) -> Endpoint:
        if host not in self.endpoints:
            known = ", ".join(self.endpoints) or "none"
            raise Refused(f"client {host!r} has no fio server given: add --client {host}=ADDRESS:PORT (given: {known})")
        return self.endpoints[host]


def given_clients(entries: Iterable[str], allowed: Iterable[Network]) -> GivenClients:
    """`HOST=ADDRESS:PORT` entries, each checked: a host name, an IP literal on loopback or in an
    `allowed` network, a port."""
    allowed = tuple(allowed)
    found: dict[str, Endpoint] = {}
    for entry in entries:
        host, equals, where = entry.partition("=")
        if not equals or not CLIENT_NAME.fullmatch(host):
            raise Refused(f"--client {entry[:60]!r} is not HOST=ADDRESS:PORT with a host name ({CLIENT_RULE})")
        if host in found:
            raise Refused(f"--client names {host} twice")
        found[host] = endpoint(where, allowed, f"--client {host}")
    return GivenClients(found)


def clients_of(names: Sequence[str], directory: ClientDirectory) -> list[Client]:
    return [Client(name, directory.endpoint_of(name)) for name in names]


def client_jobs(
    job: JobFile, clients: Sequence[Client], directory: Path, *, shared_files: bool, fixed: Mapping[str, str]
) -> dict[str, str]:
    """Each client's job file (by client name): the same job, checked again option by option (it
    goes to a root process on another host), in `directory` on the shared filesystem — each
    client in its own subdirectory (client_directory) so that none clobbers another's files,
    unless the study says they share them."""
    for section in job.sections:
        for name, value in section.options:
            fio_jobs.check_option(name, value, where=f"{job.source} [{section.name}]", in_job_file=True)
    rendered = {}
    for client in clients:
        where = directory if shared_files else client_directory(directory, client.name)
        if not fio_jobs.written_as_is(where):
            raise Refused(
                f"{where} cannot be written into a job file a fio server reads as is (it holds "
                "':', '$', a control character or ends in a blank): choose a plainer path"
            )
        rendered[client.name] = fio_jobs.render(job, directory=where, device=None, fixed=fixed)
    return rendered


def client_directory(directory: Path, client: str) -> Path:
    return directory / file_name(client)


def run_clients(
    journal: Journal,
    clients: Sequence[Client],
    job_paths: Mapping[str, Path],
    output: Path,
    *,
    timeout: float | None = None,
) -> str:
    """One `fio --client` driving every client's server with its own job file (journalled: clean-up
    stops it); fio's json+ output."""
    argv = ["fio", "--output-format=json+", f"--output={output}"]
    for client in clients:
        argv += [f"--client={client.endpoint.fio_argument}", str(job_paths[client.name])]
    run_held(journal, argv, timeout=timeout, cwd=output.parent)
    return output.read_text()


def by_client(text: str, clients: Sequence[Client]) -> list[RawOutput]:
    """fio's client/server json+ output as each client's own (pure): its entries of fio's
    client_stats, told apart by the address and port fio reached it at, in fio's plain shape
    ({"jobs": [...]}), phase = the client's name. ValueError when a client has none."""
    document = load_json(text)
    entries = job_entries(document)
    if entries is None:
        raise ValueError("fio's output has no client_stats: it was not a client/server run")
    outputs = []
    for client in clients:
        own = [e for e in entries if _reached_at(e) == client.endpoint]
        if not own:
            raise ValueError(f"fio's output has no figures of client {client.name} ({client.endpoint})")
        part = {key: document[key] for key in ("fio version", "timestamp", "timestamp_ms", "time") if key in document}
        outputs.append(RawOutput(client.name, "fio", json.dumps({**part, "jobs": own}, indent=1)))
    return outputs


def _reached_at(entry: dict) -> Endpoint | None:
    try:
        return Endpoint(ipaddress.ip_address(entry.get("hostname", "")), int(entry.get("port", 0)))
    except (ValueError, TypeError):
        return None


def client_metrics(outputs: Sequence[RawOutput]) -> list[Metric]:
    """The whole (phase ""): every client's jobs taken together — IOPS and bandwidth summed,
    percentiles from their bins added up —, then each client's own (phase = its name). Pure."""
    parts = [(o.phase, load_json(o.text)["jobs"]) for o in outputs if o.tool == "fio"]
    if not parts or not all(jobs for _, jobs in parts):
        raise ValueError("a client's output lists no jobs")
    whole = job_metrics([job for _, jobs in parts for job in jobs])
    return whole + [replace(m, phase=name) for name, jobs in parts for m in job_metrics(jobs)]


def run_from_clients(
    journal: Journal,
    job: JobFile,
    clients: Sequence[Client],
    directory: Path,
    scratch: Path,
    *,
    shared_files: bool,
    fixed: Mapping[str, str],
) -> list[RawOutput]:
    """A run of `job` from the `clients` at once, in `directory` (the target's, on the shared
    filesystem, which this host sees too): each client's directory made in it, each client's job
    written to `scratch`; each client's output (by_client)."""
    paths = {}
    for name, text in client_jobs(job, clients, directory, shared_files=shared_files, fixed=fixed).items():
        if not shared_files:
            client_directory(directory, name).mkdir(mode=0o755, exist_ok=True)
        paths[name] = scratch / f"{file_name(name)}.fio"
        paths[name].write_text(text)
    return by_client(run_clients(journal, clients, paths, scratch / "clients.json"), clients)
