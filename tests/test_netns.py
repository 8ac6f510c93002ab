"""The tests' hosts on one machine (tests/netns.py): namespaces that reach each other and this
machine's bridge address, and nothing beyond; nothing left behind."""

from __future__ import annotations

import subprocess
import sys

import pytest

from netns import network

# Listens on the namespace's address, answers one connection with what it was sent, reversed.
ECHO = """import socket, sys
with socket.create_server((sys.argv[1], int(sys.argv[2]))) as server:
    print("ready", flush=True)
    connection, _ = server.accept()
    connection.sendall(connection.recv(100)[::-1])
"""
SEND = """import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) as c:
        c.sendall(b"fslab"); print(c.recv(100).decode())
except OSError as exc:
    print(type(exc).__name__, exc.errno)
"""


@pytest.mark.root
def test_namespaces_reach_each_other_and_the_bridge_and_no_other_address(needs_root):
    with network(2) as net:
        a, b = net.hosts
        server = b.popen([sys.executable, "-c", ECHO, b.address, "7001"], stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline() == "ready\n"
        assert a.run([sys.executable, "-c", SEND, b.address, "7001"]).stdout == "balsf\n", "a reaches b"
        server.wait(timeout=10)
        here = subprocess.Popen([sys.executable, "-c", ECHO, net.address, "7002"], stdout=subprocess.PIPE, text=True)
        assert here.stdout.readline() == "ready\n"
        assert b.run([sys.executable, "-c", SEND, net.address, "7002"]).stdout == "balsf\n", (
            "b reaches this machine's bridge address"
        )
        here.wait(timeout=10)
        # TEST-NET-1: no route leads there from a namespace, so nothing is sent
        assert a.run([sys.executable, "-c", SEND, "192.0.2.1", "7003"]).stdout == "OSError 101\n"
        names = [h.name for h in net.hosts]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not [n for n in names if n in listed] and net.bridge not in links, (
        "namespaces, veth pairs and bridge removed"
    )


@pytest.mark.root
def test_a_namespaces_process_holds_no_copy_of_a_mount_this_machine_then_unmounts(needs_root, tmp_path):
    """A host's process lives in this machine's mounts: a private copy of them (`ip netns exec`)
    would keep another test's filesystem mounted there, its loop device busy, after that test
    unmounted it."""
    mounted = tmp_path / "mnt"
    mounted.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "fslab-netns-test", str(mounted)], check=True)
    try:
        with network(1) as net:
            sleeper = net.hosts[0].popen(["sleep", "60"])
            try:
                subprocess.run(["umount", str(mounted)], check=True)
                seen = f"/proc/{sleeper.pid}/mountinfo"
                assert "fslab-netns-test" not in open(seen).read(), "the mount gone for the namespace's process too"
            finally:
                sleeper.kill()
                sleeper.wait()
    finally:
        subprocess.run(["umount", str(mounted)], capture_output=True)
