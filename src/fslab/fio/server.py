"""fio's server on a client host of a shared-storage run (docs/shared-storage.md): `fio
--server` bound to the one address the host names — never every address — for as long as a unit
needs it, held like any process fslab starts (journalled with its pid and start time before it
runs, signalled only while that proof matches, released by `fslab cleanup` after a crash).

A fio server runs whatever job a client that reaches it sends, as root, and asks no password:
so it listens only on an address checked here (an IP literal on loopback, or in a private network
the user names: a lab's own), and only while a unit runs. What reaches it over that network is
the one thing fslab does not guard; the job fslab sends is guarded (fio/jobs.py).

`serving` is what a fleet's worker calls ("serve fio for this unit on this address");
`fslab fio-server` runs one by hand until it is stopped.
"""

from __future__ import annotations

import ipaddress
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fslab.core.errors import FslabError, Refused
from fslab.core.journal import Journal
from fslab.core.scratch import scratch_directory
from fslab.core.system import running_held

DEFAULT_PORT = 8765  # fio's own
READY_WITHIN = 10.0  # seconds for fio to listen once started
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Endpoint:
    """Where a fio server listens: an IP literal and a port."""

    address: IPAddress
    port: int

    @property
    def fio_argument(self) -> str:
        """As fio's --server and --client take it: ip:A,P or ip6:A,P (never a name to resolve)."""
        return f"{'ip' if self.address.version == 4 else 'ip6'}:{self.address},{self.port}"

    def __str__(self) -> str:
        return f"{self.address}:{self.port}" if self.address.version == 4 else f"[{self.address}]:{self.port}"


def networks(named: Iterable[str]) -> tuple[Network, ...]:
    """The networks a user allows fio's servers on, beside loopback: each private (a lab's own), given in CIDR form."""
    found = []
    for text in named:
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise Refused(f"--allow-network {text[:60]!r} is not a network in CIDR form (10.231.0.0/16)") from None
        if not network.is_private or network.is_unspecified or network.prefixlen == 0:
            raise Refused(
                f"--allow-network {network} is not a private network: a fio server "
                "runs any job it is sent, as root; allow only a lab's own network"
            )
        found.append(network)
    return tuple(found)


def checked_address(text: str, allowed: Iterable[Network], what: str) -> IPAddress:
    """An IP literal a fio server may listen on or be reached at: on loopback, or in one of the
    `allowed` networks. Never a name (no resolver is asked), never every address (0.0.0.0, ::)."""
    try:
        address = ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        raise Refused(
            f"{what} {text[:60]!r} is not an IP address; give the address "
            "itself (127.0.0.1, 10.0.0.2): fslab resolves no names"
        ) from None
    if address.is_unspecified or address.is_multicast:
        raise Refused(f"{what} {address} is not one address: a fio server listens on the one address its host names")
    allowed = tuple(allowed)
    if not address.is_loopback and not any(address in network for network in allowed):
        named = ", ".join(map(str, allowed)) or "none"
        raise Refused(
            f"{what} {address} is neither loopback nor in a network allowed with --allow-network (allowed: {named})"
        )
    return address


def checked_port(port: int, what: str) -> int:
    if not 1024 <= port <= 65535:
        raise Refused(f"{what} port {port} is not between 1024 and 65535")
    return port


def endpoint(text: str, allowed: Iterable[Network], what: str) -> Endpoint:
    """ADDRESS:PORT ([ADDRESS]:PORT for IPv6), checked."""
    address, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not address:
        raise Refused(f"{what} {text[:60]!r} is not ADDRESS:PORT (10.0.0.2:8765, [fd00::2]:8765)")
    return Endpoint(checked_address(address, allowed, what), checked_port(int(port), what))


def address_and_port(text: str, allowed: Iterable[Network], what: str) -> Endpoint:
    """ADDRESS or ADDRESS:PORT ([ADDRESS]:PORT for IPv6), fio's own port when none is given; checked."""
    if text.startswith("[") or text.count(":") == 1:
        return endpoint(text, allowed, what)
    return Endpoint(checked_address(text, allowed, what), DEFAULT_PORT)


def _listening(pid: int, where: Endpoint) -> bool:
    """Whether the network namespace of process `pid` has a socket listening at `where` (from
    /proc: nothing is sent to the server)."""
    table = "tcp" if where.address.version == 4 else "tcp6"
    try:
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        local, state = line.split()[1], line.split()[3]
        hex_address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == where.port and _kernel_address(hex_address) == where.address:
            return True
    return False


def _kernel_address(hex_address: str) -> IPAddress:
    """An address as /proc/net/tcp{,6} prints it: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    return ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4)))


@dataclass(frozen=True)
class FioServer:
    """A fio server fslab started, listening at `endpoint`."""

    endpoint: Endpoint
    process: subprocess.Popen[bytes]

    @property
    def running(self) -> bool:
        return self.process.poll() is None


@contextmanager
def serving(journal: Journal, where: Endpoint) -> Iterator[FioServer]:
    """fio's server listening at `where` while the block runs, its current directory and log in a
    scratch directory of the work directory's: held, and stopped when the block ends."""
    with (
        scratch_directory(journal) as directory,
        running_held(
            journal, ["fio", f"--server={where.fio_argument}"], cwd=directory, log=directory / "fio-server.log"
        ) as process,
    ):
        log = directory / "fio-server.log"
        deadline = time.monotonic() + READY_WITHIN
        while not _listening(process.pid, where):
            if process.poll() is not None or time.monotonic() > deadline:
                said = log.read_text(errors="replace").strip().splitlines()[-3:]
                raise FslabError(f"fio --server did not listen at {where}: {' / '.join(said) or 'it said nothing'}")
            time.sleep(0.05)
        yield FioServer(where, process)


def serve_until_stopped(journal: Journal, where: Endpoint, said: Callable[[str], None]) -> None:
    """`serving` until fslab is interrupted (Ctrl-C, SIGTERM: fslab.core.interruption) or the server
    ends by itself (FslabError): `fslab fio-server`."""
    with serving(journal, where) as server:
        said(f"fio server listening at {where}; Ctrl-C stops it")
        while server.running:
            time.sleep(0.2)
    raise FslabError(f"fio --server at {where} ended by itself (exit status {server.process.returncode})")
