"""A PostgreSQL cluster of the tests' own: Debian's postgresql, initdb'd in a temporary directory
and run as the `postgres` user (PostgreSQL refuses to run as root, and the suite runs as root),
listening on loopback (and on any address a test names, such as a network namespace's veth end)
at a free port; stopped and removed when done. Its superuser `fslab` has a password, so that
the tests see what a team's server asks for."""

from __future__ import annotations

import ipaddress
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

USER = "fslab"
PASSWORD = "pg-secret-of-the-tests"


def bin_directory() -> Path | None:
    """Debian's PostgreSQL server programs (initdb, pg_ctl), newest version first; None if absent."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else None


def programs() -> Path:
    """bin_directory, which a running cluster had (unavailable_reason says why one cannot)."""
    binaries = bin_directory()
    assert binaries is not None, unavailable_reason()
    return binaries


def unavailable_reason() -> str | None:
    if bin_directory() is None:
        return "PostgreSQL's server is not installed (apt-get install postgresql)"
    if not shutil.which("runuser"):
        return "runuser is not installed (util-linux)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Cluster:
    directory: Path
    port: int
    host: str  # the address clients reach it at
    options: str = ""  # the server's, as pg_ctl starts it

    @contextmanager
    def away(self) -> Iterator[None]:
        """The server stopped (its connections closed, as a restart for an upgrade closes them),
        started again when done."""
        _as_postgres(
            self.directory,
            str(programs() / "pg_ctl"),
            "-D",
            str(self.directory / "data"),
            "-m",
            "fast",
            "-w",
            "stop",
        )
        try:
            yield
        finally:
            self._start()

    def _start(self) -> None:
        _as_postgres(
            self.directory,
            str(programs() / "pg_ctl"),
            "-D",
            str(self.directory / "data"),
            "-o",
            self.options,
            "-l",
            str(self.directory / "log"),
            "-w",
            "start",
        )

    def url(self, database: str = "postgres", *, password: bool = True, host: str | None = None) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{USER}{secret}@{host or self.host}:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Runs one statement through psql on the cluster's socket; its output, unaligned."""
        done = subprocess.run(
            [str(programs() / "psql"), "-h", str(self.directory), "-p", str(self.port), "-U", USER, "-d", database,
             "-At", "-v", "ON_ERROR_STOP=1", "-c", statement],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    def new_database(self, name: str) -> str:
        """An empty database `name` (dropped first if there); its URL."""
        self.sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.sql(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _as_postgres(directory: Path, *argv: str) -> None:
    subprocess.run(
        ["runuser", "-u", "postgres", "--", *argv], capture_output=True, text=True, check=True, cwd=directory
    )


@contextmanager
def cluster(listen: Sequence[str] = ("127.0.0.1",)) -> Iterator[Cluster]:
    """A running cluster listening on `listen` (loopback only by default), removed afterwards."""
    binaries = programs()
    directory = Path(tempfile.mkdtemp(prefix="fslab-pg-", dir="/var/tmp"))
    shutil.chown(directory, "postgres", "postgres")
    data = directory / "data"
    password_file = directory / "password"
    password_file.write_text(PASSWORD + "\n")
    shutil.chown(password_file, "postgres", "postgres")
    port = _free_port()
    try:
        _as_postgres(
            directory,
            str(binaries / "initdb"),
            "-D",
            str(data),
            "-U",
            USER,
            f"--pwfile={password_file}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--no-sync",
        )
        password_file.unlink()
        # initdb lets in loopback alone: clients on another address's subnet (the namespaces of a
        # bridge) are let in too, by password, as a team's server lets in its fleet
        subnets = [
            f"{ipaddress.ip_network(f'{a}/24', strict=False)}"
            for a in listen
            if not ipaddress.ip_address(a).is_loopback
        ]
        with (data / "pg_hba.conf").open("a") as hba:
            hba.writelines(f"host all all {subnet} scram-sha-256\n" for subnet in subnets)
        options = (
            f"-c listen_addresses='{','.join(listen)}' -c port={port} -c "
            f"unix_socket_directories='{directory}' -c fsync=off -c max_connections=200"
        )
        found = Cluster(directory, port, listen[0], options)
        found._start()
        yield found
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [
                    "runuser",
                    "-u",
                    "postgres",
                    "--",
                    str(binaries / "pg_ctl"),
                    "-D",
                    str(data),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
                capture_output=True,
                cwd=directory,
            )
        shutil.rmtree(directory, ignore_errors=True)
