"""Hosts on one machine: network namespaces on a bridge of the tests' own.

Each namespace stands for a host of a fleet: its own network stack with a veth pair to a bridge
in this machine's namespace, on a private subnet no route leads out of (traffic stays between
these namespaces and the bridge's address, where a test's PostgreSQL listens). Every process a
test starts in a namespace shares this machine's files, so a plain directory stands for a shared
filesystem. All of it is removed when done, whatever happened."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

SUBNET = "10.231.{}"  # a /24 per set of namespaces


@dataclass(frozen=True)
class Namespace:
    name: str  # as `ip netns` knows it
    address: str  # its own, on the bridge's subnet

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv`, to run inside this namespace's network, in this machine's own mounts. Not `ip
        netns exec`: it gives each command a mount namespace of its own, a private copy of every
        mount of that moment — another test's filesystem among them, whose loop device then stays
        busy after that test unmounts it, for as long as the command lives."""
        return ["nsenter", f"--net=/run/netns/{self.name}", *argv]

    def run(self, argv: Sequence[str], **kwargs) -> subprocess.CompletedProcess:  # noqa: ANN003
        return subprocess.run(self.command(argv), **{"capture_output": True, "text": True, **kwargs})

    def popen(self, argv: Sequence[str], **kwargs) -> subprocess.Popen:  # noqa: ANN003
        return subprocess.Popen(self.command(argv), **kwargs)

    @contextmanager
    def cut(self) -> Iterator[None]:
        """Its link down, as a pulled cable: what it sends goes nowhere (its connections hang, new
        ones fail) until the link is up again, when done."""
        _ip("-n", self.name, "link", "set", "eth0", "down")
        try:
            yield
        finally:
            _ip("-n", self.name, "link", "set", "eth0", "up")


@dataclass(frozen=True)
class Network:
    bridge: str
    address: str  # this machine's, on the bridge: where a service the namespaces reach listens
    hosts: list[Namespace]


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, text=True)


def _free_subnet() -> str:
    """A subnet of SUBNET's no address of this machine is on (another set's, a concurrent test's)."""
    taken = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True, check=True).stdout
    free = [SUBNET.format(octet) for octet in range(1, 255) if f" {SUBNET.format(octet)}." not in taken]
    return free[secrets.randbelow(len(free))]


@contextmanager
def network(count: int) -> Iterator[Network]:
    """`count` namespaces on a new bridge; this machine is .1 on it, the namespaces .2, .3, …"""
    tag = secrets.token_hex(3)
    subnet = _free_subnet()
    bridge = f"fslbr{tag}"
    with ExitStack() as undo:
        _ip("link", "add", bridge, "type", "bridge")
        undo.callback(subprocess.run, ["ip", "link", "del", bridge], capture_output=True)
        _ip("addr", "add", f"{subnet}.1/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        hosts = []
        for index in range(count):
            name, outside = f"fslab-{tag}-{index}", f"fslv{tag}{index}"
            _ip("netns", "add", name)
            undo.callback(subprocess.run, ["ip", "netns", "del", name], capture_output=True)
            _ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", name)
            undo.callback(subprocess.run, ["ip", "link", "del", outside], capture_output=True)
            _ip("link", "set", outside, "master", bridge)
            _ip("link", "set", outside, "up")
            address = f"{subnet}.{index + 2}"
            for argv in (
                ["addr", "add", f"{address}/24", "dev", "eth0"],
                ["link", "set", "eth0", "up"],
                ["link", "set", "lo", "up"],
            ):
                _ip("-n", name, *argv)
            hosts.append(Namespace(name, address))
        yield Network(bridge, f"{subnet}.1", hosts)
