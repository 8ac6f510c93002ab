"""Shared storage from several clients (fio/clients.py, fio/server.py): each client's
json+ kept, the whole as merged bins and summed throughput; the guard on every client's job; fio
servers in network namespaces driven over a bridge on a plain shared directory, and nothing left."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from fslab.core.errors import Refused
from fslab.core.workdir import Workdir
from fslab.fio.clients import (
    Client,
    by_client,
    checked_clients,
    client_directory,
    client_jobs,
    client_metrics,
    given_clients,
    run_clients,
)  # fmt: skip
from fslab.fio.jobs import JobFile, Section, parse_job_file, single_job
from fslab.fio.output import latency_bins, percentile_from_bins
from fslab.fio.server import Endpoint, checked_address, endpoint, networks
from fslab.fio.workload import FIXED_OPTIONS
from netns import network

FIXTURES = Path(__file__).parent / "fixtures" / "fio" / "clients"
LOOPBACK_CLIENTS = [
    Client("host-a", Endpoint(ipaddress.ip_address("127.0.0.1"), 18781)),
    Client("host-b", Endpoint(ipaddress.ip_address("127.0.0.2"), 18782)),
]


def _by_key(metrics):
    return {m.key: m.value for m in metrics}


def test_each_client_keeps_its_own_output_and_the_whole_sums_throughput_and_merges_bins():
    outputs = by_client((FIXTURES / "two-clients.json").read_text(), LOOPBACK_CLIENTS)
    assert [(o.phase, o.tool) for o in outputs] == [("host-a", "fio"), ("host-b", "fio")]
    found = _by_key(client_metrics(outputs))
    for direction in ("read", "write"):
        a, b = found[f"host-a.{direction}_iops"], found[f"host-b.{direction}_iops"]
        assert a != b and found[f"{direction}_iops"] == pytest.approx(a + b)
        assert found[f"{direction}_bytes"] == found[f"host-a.{direction}_bytes"] + found[f"host-b.{direction}_bytes"]
        for kind in ("lat", "clat", "slat"):
            merged = Counter()
            for output in outputs:
                merged.update(latency_bins(output.text, kinds=(kind,))[(direction, kind)])
            # the whole's percentiles are those of the clients' bins added up, not a mean of theirs
            p99 = percentile_from_bins(merged, 99.0) / 1e3
            assert found[f"{direction}_{kind}_p99_us"] == pytest.approx(p99)
            mean_of_clients = (
                found[f"host-a.{direction}_{kind}_p99_us"] + found[f"host-b.{direction}_{kind}_p99_us"]
            ) / 2
            assert found[f"{direction}_{kind}_p99_us"] != pytest.approx(mean_of_clients)


def test_the_whole_is_not_fios_all_clients_average():
    """fio's own "All clients" entry averages the clients' percentiles; fslab never reads it."""
    import json

    document = json.loads(_json_part())
    fios_sum = next(e for e in document["client_stats"] if e["jobname"] == "All clients")
    assert not fios_sum["write"]["lat_ns"].get("bins"), (
        "fio keeps no bins for its sum: its percentiles cannot be merged ones"
    )
    found = _by_key(client_metrics(by_client((FIXTURES / "two-clients.json").read_text(), LOOPBACK_CLIENTS)))
    # fio's sum divides all I/Os by its longest runtime; fslab's is the sum of every client's IOPS
    clients = [e["write"]["iops"] for e in document["client_stats"] if e["jobname"] != "All clients"]
    assert found["write_iops"] == pytest.approx(sum(clients)) != pytest.approx(fios_sum["write"]["iops"])


def _json_part() -> str:
    text = (FIXTURES / "two-clients.json").read_text()
    return text[text.index("\n{") + 1 :]


def test_a_client_missing_from_the_output_is_an_error_not_a_smaller_whole():
    stranger = Client("host-c", Endpoint(ipaddress.ip_address("127.0.0.3"), 18783))
    with pytest.raises(ValueError, match="no figures of client host-c"):
        by_client((FIXTURES / "two-clients.json").read_text(), [*LOOPBACK_CLIENTS, stranger])


def test_clients_are_host_names_between_1_and_64_each_once():
    assert checked_clients(["host-a", "host-b"]) == ("host-a", "host-b")
    for bad, said in (
        ([], "1 to 64"),
        ([f"h{i}" for i in range(65)], "1 to 64"),
        (["a.b"], "not a host name"),
        (["../x"], "not a host name"),
        (["a", "a"], "more than once"),
    ):
        with pytest.raises(ValueError, match=said):
            checked_clients(bad)


def test_addresses_are_ip_literals_on_loopback_or_an_allowed_private_network():
    lab = networks(["10.231.0.0/16"])
    assert given_clients(["host-a=10.231.7.2:8765", "host-b=[::1]:9000"], lab).endpoint_of("host-b") == Endpoint(
        ipaddress.ip_address("::1"), 9000
    )
    refused = {
        "host-a=localhost:8765": "not an IP address", "host-a=0.0.0.0:8765": "not one address",
        "host-a=192.168.1.2:8765": "neither loopback", "host-a=127.0.0.1": "not ADDRESS:PORT",
        "host-a=127.0.0.1:80": "between 1024", "a.b=127.0.0.1:8765": "host name",
    }  # fmt: skip
    for entry, said in refused.items():
        with pytest.raises(Refused, match=said):
            given_clients([entry], lab)
    with pytest.raises(Refused, match="no fio server given"):
        given_clients([], lab).endpoint_of("host-a")
    with pytest.raises(Refused, match="not a private network"):
        networks(["8.8.8.0/24"])
    with pytest.raises(Refused, match="not one address"):
        checked_address("::", lab, "--address")


def test_the_guard_refuses_a_jobs_unsafe_options_for_client_runs_as_for_local_ones():
    with pytest.raises(Refused, match="exec_prerun"):
        parse_job_file("[j]\nrw=write\nexec_prerun=touch /x\n", "evil.fio")
    # a job that went round the parser is checked again before it goes to the clients' servers
    planted = JobFile((Section("j", (("rw", "write"), ("exec_prerun", "touch /x")), 1),), "planted")
    with pytest.raises(Refused, match="exec_prerun"):
        client_jobs(planted, LOOPBACK_CLIENTS, Path("/mnt/shared"), shared_files=False, fixed={})
    with pytest.raises(Refused, match="ioengine=net"):
        client_jobs(
            JobFile((Section("j", (("ioengine", "net"),), 1),), "planted"),
            LOOPBACK_CLIENTS,
            Path("/mnt/shared"),
            shared_files=False,
            fixed={},
        )
    # a path fio on another host would read otherwise than written (fio expands $ there)
    with pytest.raises(Refused, match="plainer path"):
        client_jobs(
            single_job("j", {"rw": "write"}), LOOPBACK_CLIENTS, Path("/mnt/$HOME"), shared_files=False, fixed={}
        )


def test_each_client_writes_in_its_own_directory_unless_they_share_files():
    job = single_job("j", {"rw": "write", "size": "1m"})
    own = client_jobs(job, LOOPBACK_CLIENTS, Path("/mnt/shared/run1"), shared_files=False, fixed=FIXED_OPTIONS)
    assert (
        "directory=/mnt/shared/run1/host-a\n" in own["host-a"]
        and "directory=/mnt/shared/run1/host-b\n" in own["host-b"]
    )
    shared = client_jobs(job, LOOPBACK_CLIENTS, Path("/mnt/shared/run1"), shared_files=True, fixed=FIXED_OPTIONS)
    assert shared["host-a"] == shared["host-b"] and "directory=/mnt/shared/run1\n" in shared["host-a"]


def _fio_servers() -> list[str]:
    found = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if "fio --server" in line]


@pytest.mark.root
def test_two_clients_in_namespaces_load_one_shared_directory(needs_root, tmp_path):
    # a plain directory under /var/tmp stands for the shared filesystem every namespace mounts
    base = Path(os.environ.get("FSLAB_TEST_VAR", "/var/tmp")) / f"fioclients-test-{os.getpid()}"
    shared = base / "shared"
    shared.mkdir(parents=True)
    before = _fio_servers()
    try:
        with network(2) as net:
            subnet = f"{net.address.rsplit('.', 1)[0]}.0/24"
            servers, clients = [], []
            for index, host in enumerate(net.hosts):
                name, port = f"host-{'ab'[index]}", 18790 + index
                argv = [
                    sys.executable,
                    "-m",
                    "fslab",
                    "fio-server",
                    "--address",
                    host.address,
                    "--port",
                    str(port),
                    "--allow-network",
                    subnet,
                    "--workdir",
                    str(base / f"wd-{name}"),
                ]
                servers.append(host.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
                clients.append(Client(name, endpoint(f"{host.address}:{port}", networks([subnet]), name)))
            try:
                for server in servers:
                    assert "fio server listening" in server.stdout.readline()
                work = Workdir(tmp_path / "driver")
                work.prepare()
                job = single_job(
                    "mixed",
                    {
                        "rw": "randrw",
                        "bs": "4k",
                        "size": "4m",
                        "ioengine": "libaio",
                        "direct": "1",
                        "time_based": "1",
                        "runtime": "1s",
                    },
                )
                for client in clients:
                    client_directory(shared, client.name).mkdir()
                paths = {}
                for name, text in client_jobs(job, clients, shared, shared_files=False, fixed=FIXED_OPTIONS).items():
                    paths[name] = tmp_path / f"{name}.fio"
                    paths[name].write_text(text)
                output = run_clients(work.journal, clients, paths, tmp_path / "out.json")
                outputs = by_client(output, clients)
                found = _by_key(client_metrics(outputs))
                assert found["write_iops"] == pytest.approx(found["host-a.write_iops"] + found["host-b.write_iops"])
                assert found["host-a.write_iops"] > 0 and found["host-b.write_iops"] > 0
                # each client wrote its own files, named by fio with the address it was reached at
                assert sorted(p.name for p in client_directory(shared, "host-a").iterdir()) == [
                    f"{net.hosts[0].address}.mixed.0.0"
                ]
                assert sorted(p.name for p in client_directory(shared, "host-b").iterdir()) == [
                    f"{net.hosts[1].address}.mixed.0.0"
                ]
                assert work.journal.outstanding() == []
            finally:
                for server in servers:
                    server.send_signal(signal.SIGTERM)
                said = [server.communicate(timeout=30) for server in servers]
            assert [s.returncode for s in servers] == [0, 0], said
            assert all("fio server stopped" in out for out, _ in said)
            for client in clients:
                assert Workdir(base / f"wd-{client.name}").journal.outstanding() == [], (
                    "each server's process and scratch released"
                )
        assert _fio_servers() == before, "no fio server left running"
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(base)], check=False)


@pytest.mark.root
def test_cleanup_stops_a_fio_server_a_killed_fslab_left(needs_root, tmp_path):
    argv = [
        sys.executable,
        "-m",
        "fslab",
        "fio-server",
        "--address",
        "127.0.0.1",
        "--port",
        "18799",
        "--workdir",
        str(tmp_path / "wd"),
    ]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert "fio server listening" in server.stdout.readline()
        server.kill()  # kill -9: nothing released
        server.wait(timeout=10)
        left = [line for line in _fio_servers() if "127.0.0.1,18799" in line]
        assert left, "the killed fslab's fio server outlives it"
        cleaned = subprocess.run(
            [sys.executable, "-m", "fslab", "cleanup", "--workdir", str(tmp_path / "wd")],
            capture_output=True,
            text=True,
        )
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        assert "process fio: released" in cleaned.stdout
        assert not [line for line in _fio_servers() if "127.0.0.1,18799" in line]
    finally:
        for line in _fio_servers():
            if "127.0.0.1,18799" in line:
                os.kill(int(line.split()[0]), signal.SIGKILL)


STUDY = """[study]
name = "shared"
[[target]]
name = "ext4"
filesystem = "ext4"
image_size = "64MiB"
[[workload]]
name = "mixed"
rw = "randrw"
size = "4MiB"
runtime = "1s"
{clients}
[[workload]]
name = "alone"
rw = "read"
size = "4MiB"
runtime = "1s"
"""


def test_a_study_names_its_workloads_clients_and_only_those_workloads_store_them(tmp_path):
    from fslab.fio.workload import FioJob
    from fslab.study import load_study

    path = tmp_path / "shared.toml"
    path.write_text(STUDY.format(clients='clients = ["host-a", "host-b"]'))
    study = load_study(path)
    mixed, alone = study.workloads
    assert mixed.tool.clients == ("host-a", "host-b") and mixed.tool.spec()["clients"] == ["host-a", "host-b"]
    assert isinstance(alone.tool, FioJob) and "clients" not in alone.tool.spec(), (
        "a workload without clients is stored as before"
    )
    for bad in ("clients = []", 'clients = ["a.b"]', 'clients = ["h", "h"]', 'clients = "host-a"'):
        path.write_text(STUDY.format(clients=bad))
        with pytest.raises(Exception, match="clients"):
            load_study(path)


def test_the_fio_kind_reads_a_client_runs_outputs_as_the_whole_and_each_client():
    from fslab.fio.workload import FIO

    outputs = by_client((FIXTURES / "two-clients.json").read_text(), LOOPBACK_CLIENTS)
    assert _by_key(FIO.parse(outputs)) == _by_key(client_metrics(outputs))
