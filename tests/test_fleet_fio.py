"""Shared storage from several clients on a fleet (fleet/shared_storage.py): the workers of the
client hosts serve fio while the study run that names them runs, the unit that runs the study
drives them, and a run whose client cannot serve fails saying which host and what to do."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from fleet import fleet
from fslab.core.errors import Refused
from fslab.fio.server import networks
from fslab.fleet import roster
from fslab.model import Host
from fslab.results import ResultsDB
from fslab.results.schema import SCHEMA_VERSION
from test_fleet import registered

SHARED = """[study]
name = "shared"
repetitions = {repetitions}

[[target]]
name = "ext4"
filesystem = "ext4"
image_size = "64MiB"
{workloads}"""

MIXED = """
[[workload]]
name = "{name}"
rw = "randrw"
size = "4MiB"
runtime = "1s"
clients = {clients}
"""


def study_file(tmp_path, repetitions: int, **clients: list[str]) -> str:
    path = tmp_path / "shared.toml"
    workloads = "".join(
        MIXED.format(name=name, clients=str(hosts).replace("'", '"')) for name, hosts in clients.items()
    )
    path.write_text(SHARED.format(repetitions=repetitions, workloads=workloads))
    return str(path)


def fio_servers() -> list[str]:
    found = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if "fio --server" in line]


def documented_commands(lab_prefix: str) -> list[list[str]]:
    """The commands of docs/shared-storage.md's "On a fleet", as written there, on the tests' lab
    network (its addresses 10.0.0.N there, the bridge's here)."""
    doc = (Path(__file__).parent.parent / "docs" / "shared-storage.md").read_text().split("## On a fleet")[1]
    block = doc.split("```sh\n")[1].split("```")[0]
    return [line.replace("10.0.0.", lab_prefix).split() for line in block.splitlines() if line.startswith("fslab ")]


@pytest.mark.root
def test_a_study_on_one_host_drives_the_fio_servers_of_its_clients_workers_as_documented(fleet_lab, tmp_path):
    before = fio_servers()
    with fleet(fleet_lab, tmp_path) as f:
        prefix = f.hosts[0].address.rsplit(".", 1)[0] + "."
        *workers, run = documented_commands(prefix)
        assert [w[:4] for w in workers] == [
            ["fslab", "worker", "--name", n] for n in ("host-a", "host-b", "driver")
        ] and run[:2] == ["fslab", "run"]
        # host-a and host-b in the namespaces of the addresses they name (.2, .3), the driver in the third; all
        # in this machine's own mounts: what the driver mounts the clients see, as a shared filesystem
        assert [f.hosts[i].address for i in (0, 1)] == [f"{prefix}2", f"{prefix}3"]
        clients = [f.start(i, argv[3], *argv[4:]) for i, argv in enumerate(workers[:2])]
        f.start(2, "driver", *workers[2][4:])
        f.wait("three workers", registered(f, 3))
        assert (
            f.sql("SELECT string_agg(name || '=' || coalesce(fio_address, '-'), ',' ORDER BY name) FROM fleet_workers")
            == f"driver=-,host-a={prefix}2:8765,host-b={prefix}3:8765"
        )
        assert fio_servers() == before, "no fio server while no study run needs one"

        path = Path(study_file(tmp_path, 2, mixed=["host-a", "host-b"]))
        path.rename(tmp_path / run[2])
        done = f.fslab(*run[1:])
        assert done.returncode == 0, done.stdout + done.stderr
        study_run_id = int(f.sql("SELECT max(id) FROM study_runs"))
        assert (
            f.sql(
                "SELECT string_agg(host || ':' || status, ',' ORDER BY "
                f"repetition) FROM runs WHERE study_run_id = {study_run_id}"
            )
            == "driver:ok,driver:ok"
        )
        outputs = f.sql(
            "SELECT string_agg(o.phase, ',' ORDER BY r.repetition, o.phase) FROM run_outputs o JOIN "
            f"runs r ON r.id = o.run_id WHERE r.study_run_id = {study_run_id} AND o.tool = 'fio'"
        )
        assert outputs == "host-a,host-b,host-a,host-b", "each client's own output, for every run"
        for repetition in (1, 2):
            found = dict(
                line.split("|")
                for line in f.sql(
                    "SELECT m.phase || '.' || m.name, m.value FROM metrics m JOIN runs r ON r.id = "
                    f"m.run_id WHERE r.study_run_id = {study_run_id} AND r.repetition = {repetition}"
                ).splitlines()
            )
            whole, parts = float(found[".write_iops"]), [float(found[f"{c}.write_iops"]) for c in ("host-a", "host-b")]
            assert all(p > 0 for p in parts) and whole == pytest.approx(sum(parts)), "the whole is the clients' sum"
        for client in clients:
            f.wait(f"{client.name}'s server stopped", lambda c=client: "stopped serving fio" in c.output())
            assert f"for study run {study_run_id}" in client.output() and "serving fio at " in client.output()
            assert client.workdir.journal.outstanding() == [], "its fio server and scratch directory released"
        assert fio_servers() == before, "no fio server left once the study run ended"
        assert f.sql("SELECT count(*) FROM fleet_workers WHERE fio_serving IS NOT NULL") == "0"
        assert f.sql(f"SELECT state FROM fleet_units WHERE study_run_id = {study_run_id}") == "done"
        for worker in f.workers:
            f.stop(worker)


@pytest.mark.root
def test_a_client_without_a_worker_or_without_fio_fails_its_run_naming_it_and_what_to_do(fleet_lab, tmp_path):
    with fleet(fleet_lab, tmp_path) as f:
        f.start(0, "x")
        f.start(1, "a")  # no --fio-address
        f.wait("two workers", registered(f, 2))
        done = f.fslab_in_process("run", study_file(tmp_path, 1, no_fio=["a"], no_worker=["c"]), "--on", "x")
        assert done.returncode == 1 and "2 run(s) failed" in done.stdout, done.stdout + done.stderr
        study_run_id = int(f.sql("SELECT max(id) FROM study_runs"))
        failed = dict(
            line.split("|", 2)[::2]
            for line in f.sql(
                f"SELECT workload, status, error FROM runs WHERE study_run_id = {study_run_id}"
            ).splitlines()
        )
        assert "client host 'a': its worker serves no fio; start it again with --fio-address" in failed["no_fio"]
        assert (
            "client host 'c' has no worker in the fleet: start `fslab worker --name c --fio-address ADDRESS`"
            in failed["no_worker"]
        )
        assert f.sql(f"SELECT string_agg(status, ',') FROM runs WHERE study_run_id = {study_run_id}") == "failed,failed"
        for worker in f.workers:
            f.stop(worker)


def test_where_a_client_serves_is_checked_again_when_read_from_the_database_and_waited_for(pg_cluster):
    db = ResultsDB(pg_cluster.new_database("fleetfio"))
    lab = networks(["10.231.0.0/16"])
    host = Host("a", "id", "6.1", "cpu", 2, 1 << 30)
    roster.register(db.engine, host, [], 60.0)
    clients = roster.FleetClients(db.engine, 7, lab, driving="x", within=0.0, wait=lambda _: None)
    with pytest.raises(Refused, match="'a': its worker serves no fio"):
        clients.endpoint_of("a")
    with pytest.raises(Refused, match="is the host running this unit"):
        clients.endpoint_of("x")
    for planted, said in (
        ("0.0.0.0:8765", "not one address"),
        ("192.168.7.2:8765", "neither loopback"),
        ("a.example:8765", "not an IP address"),
    ):
        with db.engine.begin() as conn:
            conn.execute(sa.text("UPDATE fleet_workers SET fio_address = :a, fio_serving = 7"), {"a": planted})
        with pytest.raises(Refused, match=said):
            clients.endpoint_of("a")
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE fleet_workers SET fio_address = '10.231.4.2:8765', fio_serving = 6"))
    with pytest.raises(Refused, match="did not serve fio for study run 7 within 0 s"):
        clients.endpoint_of("a")
    roster.serving_for(db.engine, "a", 7)
    assert str(clients.endpoint_of("a")) == "10.231.4.2:8765"
    # waited for, until its worker serves this study run
    roster.serving_for(db.engine, "a", None)
    patient = roster.FleetClients(
        db.engine, 7, lab, driving="x", within=60.0, wait=lambda _: roster.serving_for(db.engine, "a", 7)
    )
    assert str(patient.endpoint_of("a")) == "10.231.4.2:8765"


def test_a_version_11_database_gains_the_workers_fio_columns(tmp_path):
    path = tmp_path / "v11.db"
    ResultsDB(str(path))
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE fleet_workers DROP COLUMN fio_address")
        conn.execute("ALTER TABLE fleet_workers DROP COLUMN fio_serving")
        conn.execute("UPDATE schema_info SET version = 11")
    ResultsDB(str(path))
    with sqlite3.connect(path) as conn:
        assert [c[1] for c in conn.execute("PRAGMA table_info(fleet_workers)")][-2:] == ["fio_address", "fio_serving"]
        assert conn.execute("SELECT version FROM schema_info").fetchone() == (SCHEMA_VERSION,)


def test_a_version_12_database_gains_the_workers_lapse_and_its_workers_have_the_default(tmp_path):
    path = tmp_path / "v12.db"
    db = ResultsDB(str(path))
    roster.register(db.engine, Host("old", "id", "6.1", "cpu", 2, 1 << 30), [], 60.0)
    db.engine.dispose()
    with sqlite3.connect(path) as conn:  # as version 12 left it: its workers said no lapse
        conn.execute("ALTER TABLE fleet_workers DROP COLUMN lapse")
        conn.execute("UPDATE schema_info SET version = 12")
    db = ResultsDB(str(path))
    assert roster.lapses(db.engine) == {"old": None}, "judged by the default lapse (queue.requeue_stalled)"
    roster.register(db.engine, Host("new", "id2", "6.1", "cpu", 2, 1 << 30), [], 2.5)
    assert roster.lapses(db.engine) == {"old": None, "new": 2.5}
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_info").fetchone() == (SCHEMA_VERSION,) == (20,)
