"""A fleet on one machine for the tests: a PostgreSQL cluster listening on a bridge of the tests'
own (tests/postgres.py, tests/netns.py) and `fslab worker`s, each in its own network namespace
with its own work directory, its output kept in a file; every worker stopped when done. A module
of fleet tests may share one lab (the namespaces and the cluster): each fleet on it then starts
from a new, empty database."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import fslab
import postgres
from conftest import fresh_workdir, fslab_in_process, wait_for
from fslab.core.workdir import Workdir
from netns import Namespace, Network, network

DATABASE = "fleet"
LAPSE = "2"  # seconds a worker may go unheard (--heartbeat-lapse): short, for the tests

WAITING_FOR_LOOPS = (
    "import sys; from fslab.devices import loop; loop.DETACH_SECONDS = float(sys.argv.pop(1)); "
    "from fslab.__main__ import main; main()"
)


@dataclass
class Worker:
    name: str
    process: subprocess.Popen
    log: Path
    workdir: Workdir
    stopped: bool = False  # by the test: its end is no failure

    def output(self) -> str:
        return self.log.read_text()


@dataclass
class Fleet:
    pg: postgres.Cluster
    hosts: list[Namespace]
    directory: Path
    undo: ExitStack
    workers: list[Worker] = field(default_factory=list)

    @property
    def subnet(self) -> str:
        """The bridge's network, as --allow-network takes it."""
        return self.hosts[0].address.rsplit(".", 1)[0] + ".0/24"

    @property
    def url(self) -> str:
        """The database's URL without its password: PGPASSWORD gives it (env), as docs/fleet.md advises."""
        return self.pg.url(DATABASE, password=False)

    def env(self) -> dict[str, str]:
        return {**os.environ, "PGPASSWORD": postgres.PASSWORD}

    def start(
        self,
        index: int,
        name: str,
        *args: str,
        workdir: Workdir | None = None,
        fslab_version: str | None = None,
        url: str | None = None,
        path: str | None = None,
        detach_seconds: float | None = None,
    ) -> Worker:
        """A worker named `name` in namespace `index` (its own work directory unless given one);
        `fslab_version`: run by this fslab released as that version (fslab_released_as); `url`:
        the database's (with a password perhaps) instead of the fleet's; `path`: its PATH;
        `detach_seconds`: how long it waits for a loop device another process holds (the
        devices' DETACH_SECONDS, 30 s): a test that holds one sits through no more than it needs."""
        workdir = workdir or self.undo.enter_context(fresh_workdir())
        log = self.directory / f"{name}-{len(self.workers)}.log"
        env = self.env() | ({"PATH": path} if path is not None else {})
        if fslab_version is not None:
            env["PYTHONPATH"] = str(fslab_released_as(fslab_version, self.directory))
        with log.open("w") as out:
            # fslab's entry point as `python -m fslab` runs it, the wait set first when asked for
            entry = ["-m", "fslab"] if detach_seconds is None else ["-c", WAITING_FOR_LOOPS, str(detach_seconds)]
            argv = [
                sys.executable,
                *entry,
                "worker",
                "--db",
                url or self.url,
                "--name",
                name,
                "--workdir",
                str(workdir.root),
                "--heartbeat-lapse",
                LAPSE,
                *args,
            ]
            process = self.hosts[index].popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        worker = Worker(name, process, log, workdir)
        self.workers.append(worker)
        return worker

    def fslab(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """fslab on this machine (outside the namespaces), on the fleet's database, as a process:
        for a command the docs show as one."""
        return subprocess.run(
            [sys.executable, "-m", "fslab", *args, "--db", self.url],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(),
            cwd=self.directory,
        )

    def fslab_in_process(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The same command run in this process (conftest.fslab_in_process): where what it queues,
        prints and stores is tested, not its process (the workers are processes of their own)."""
        return fslab_in_process(*args, "--db", self.url, cwd=self.directory, env={"PGPASSWORD": postgres.PASSWORD})

    def sql(self, statement: str) -> str:
        return self.pg.sql(statement, DATABASE)

    def wait(self, what: str, ready: Callable[[], object], deadline: float = 240) -> object:
        """wait_for, failing at once when a worker that should serve has ended."""

        def ready_or_dead() -> object:
            ended = [w for w in self.workers if w.process.poll() is not None and not w.stopped]
            assert not ended, f"worker {ended[0].name} ended ({ended[0].process.returncode}):\n{ended[0].output()}"
            return ready()

        return wait_for(what, ready_or_dead, deadline)

    def stop(self, worker: Worker) -> int:
        """SIGTERM, as systemd stops it; its exit status (0: stopped so, a worker ends normally)."""
        worker.stopped = True
        worker.process.send_signal(signal.SIGTERM)
        return worker.process.wait(timeout=120)


def fslab_released_as(version: str, directory: Path) -> Path:
    """Where (for PYTHONPATH) a copy of this fslab lies whose version is `version`, all else the
    same: a fleet's worker of another fslab, as a host not yet upgraded runs one."""
    top = directory / f"fslab-{version}"
    if not top.exists():
        package = Path(fslab.__file__).parent
        shutil.copytree(package, top / "fslab", ignore=shutil.ignore_patterns("__pycache__"))
        init = top / "fslab" / "__init__.py"
        init.write_text(re.sub(r'__version__ = ".*"', f'__version__ = "{version}"', init.read_text()))
    return top


@dataclass(frozen=True)
class Lab:
    """Namespaces on a bridge and a PostgreSQL cluster listening on it, for fleets one after another."""

    net: Network
    pg: postgres.Cluster


@contextmanager
def lab(hosts: int) -> Iterator[Lab]:
    with network(hosts) as net, postgres.cluster(listen=(net.address,)) as pg:
        yield Lab(net, pg)


@contextmanager
def fleet(hosts: int | Lab, directory: Path) -> Iterator[Fleet]:
    """A fleet on `hosts` namespaces of its own, or on a shared lab's (a new database there)."""
    with ExitStack() as undo:
        shared = hosts if isinstance(hosts, Lab) else undo.enter_context(lab(hosts))
        net, pg = shared.net, shared.pg
        pg.new_database(DATABASE)
        found = Fleet(pg, net.hosts, directory, undo)
        try:
            yield found
        finally:
            for w in found.workers:
                if w.process.poll() is None:
                    w.process.kill()
                    w.process.wait(timeout=60)
            for w in found.workers:
                print(f"--- worker {w.name} ({w.log.name}) ---\n{w.output()}")
            for w in found.workers:  # what a killed one held, released as `fslab cleanup` would
                w.workdir.journal.clean_up()
