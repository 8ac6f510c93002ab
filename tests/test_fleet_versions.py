"""Versions in a fleet: a worker of another fslab refuses its unit, naming both, until its host is
upgraded; a database migrated beneath a unit stores no more of its runs; a v14 fleet database
gains its workers' versions. Beside test_fleet.py (its helpers), a module of its own so that a
parallel run can give it to another worker than test_fleet.py's (each module an xdist group, with
a fleet lab of its own)."""

from __future__ import annotations

import re
import shutil

import pytest
import sqlalchemy as sa

import postgres
from fleet import fleet, fslab_released_as
from fslab.results.schema import SCHEMA_VERSION
from test_fleet import mid_run, registered, runs_of, status_of, stored, study_file


def unit_of(f, study_run_id: int, host: str) -> tuple[str, str]:
    """A unit's state and why (its note in `fslab status`)."""
    found = f.sql(f"SELECT state, why FROM fleet_units WHERE study_run_id = {study_run_id} AND host = '{host}'")
    state, why = found.split("|", 1)
    return state, why


@pytest.mark.root
def test_a_worker_of_another_fslab_refuses_its_unit_naming_both_until_its_host_is_upgraded(fleet_lab, tmp_path):
    from fslab import source_hash, version

    with fleet(fleet_lab, tmp_path) as f:
        old = f.start(0, "old", fslab_version="0.0.9")  # a host not yet upgraded
        older = f"0.0.9+{source_hash(fslab_released_as('0.0.9', f.directory) / 'fslab')}"  # its copy's source
        new = f.start(1, "new")
        f.wait("both workers", registered(f, 2))
        queued = f.fslab_in_process("run", study_file(tmp_path, 1), "--no-ceiling", "--on", "old,new", "--detach")
        assert queued.returncode == 0, queued.stderr
        study_run_id = int(queued.stdout.strip())
        told = " ".join(queued.stderr.split())
        versions = (
            f"worker old runs fslab {older} (schema {SCHEMA_VERSION}), "
            f"and this is fslab {version()} (schema {SCHEMA_VERSION})"
        )
        assert versions in told, told
        assert "it will refuse its unit" in told and "worker new" not in told, told

        def states() -> tuple[str, str]:
            return unit_of(f, study_run_id, "old")[0], unit_of(f, study_run_id, "new")[0]

        f.wait("old's unit refused, new's done", lambda: states() == ("refused", "done"))
        why = unit_of(f, study_run_id, "old")[1]
        assert why == (
            f"study run {study_run_id} was made by fslab {version()}, "
            f"and this worker runs fslab {older} (schema {SCHEMA_VERSION}): run "
            f"a worker of fslab {version()} on this host, or the study again"
        )
        assert f"old (no labels; fslab {older}, schema {SCHEMA_VERSION}) waiting for units" in old.output()
        assert f"unit refused: study run {study_run_id} on old: {why}" in old.output()
        assert stored(f, study_run_id) == [("new", "ext4", "seq_write", "1", "1")], "nothing of old's"
        assert status_of(f, study_run_id) == "running", "old's share waits"
        shown = f.fslab_in_process("status", str(study_run_id))
        assert shown.returncode == 0, shown.stderr
        assert re.search(r"old\s+refused\s+0\s+study run", shown.stdout), shown.stdout
        assert why in " ".join(shown.stdout.split()), "its note: why, naming both versions"
        workers = shown.stdout.split(f"2 worker(s); the database is at schema {SCHEMA_VERSION}", 1)[1]
        assert re.search(rf"\nold\s+{re.escape(older)}\s+{SCHEMA_VERSION}\s", workers), workers
        assert re.search(rf"\nnew\s+{re.escape(version())}\s+{SCHEMA_VERSION}\s", workers), workers

        f.stop(old)  # its host upgraded: the worker of this fslab takes the unit when it is offered again
        upgraded = f.start(0, "old", workdir=old.workdir)
        f.wait("the study run finished", lambda: status_of(f, study_run_id) == "finished")
        assert stored(f, study_run_id) == [(h, "ext4", "seq_write", "1", "1") for h in ("new", "old")], "each run once"
        assert unit_of(f, study_run_id, "old") == ("done", ""), "its refusal cleared"
        assert "unit refused" not in upgraded.output() + new.output()
        for w in (new, upgraded):
            f.stop(w)


@pytest.mark.root
def test_a_database_migrated_beneath_a_unit_stores_no_more_of_its_runs_and_refuses_it(fleet_lab, tmp_path):
    from fslab import version

    with fleet(fleet_lab, tmp_path) as f:
        worker, study_run_id = mid_run(f, tmp_path, 3)
        f.sql(
            f"UPDATE schema_info SET version = {SCHEMA_VERSION + 1}"
        )  # as a newer fslab leaves it, migrated on opening
        f.wait("the unit refused", lambda: unit_of(f, study_run_id, "h")[0] == "refused")
        kept = runs_of(f, study_run_id)
        why = unit_of(f, study_run_id, "h")[1]
        assert kept < 3, "the run measured after the migration is not stored"
        assert why.endswith(
            f"is at schema version {SCHEMA_VERSION + 1} now, and this fslab {version()} writes schema "
            f"{SCHEMA_VERSION}: it stores nothing more there; upgrade "
            f"fslab here to one that writes schema {SCHEMA_VERSION + 1} "
            '(docs/fleet.md, "Upgrading a fleet")'
        ), why
        assert f"unit refused: study run {study_run_id} on h: {why}" in worker.output() and postgres.PASSWORD not in why
        # offered again after its lapse, and refused as it is taken: nothing more runs, said once
        f.wait("the unit taken again", lambda: worker.output().count("took unit") >= 2)
        job = "SELECT status, attempts >= 2 FROM procrastinate_jobs"
        f.wait("its job given back again", lambda: f.sql(job) == "todo|t")
        assert unit_of(f, study_run_id, "h")[0] == "refused"
        assert runs_of(f, study_run_id) == kept and worker.output().count("unit refused") == 1
        assert worker.process.poll() is None, "the worker goes on"
        f.stop(worker)


def migrated_v14_fleet_shows_its_workers_versions(db) -> None:
    """The database of schema-v14.db (fslab b299554's, with a fleet's worker registered by that
    fslab: nvme-box, labelled ssd, its lapse 60 s), opened (so migrated) by this fslab: the old
    worker kept, its versions unknown; one registered now says its own; `fslab status` shows both."""
    import io

    from rich.console import Console

    from fslab import version
    from fslab.fleet import dispatch, roster, versions
    from fslab.model import Host
    from fslab.results.schema import SCHEMA_VERSION

    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version FROM schema_info")).scalar() == SCHEMA_VERSION == 20
    old = roster.workers(db.engine)
    assert [(w.name, w.labels, w.lapse, w.fslab_version, w.schema_version) for w in old] == [
        ("nvme-box", ["ssd"], 60.0, None, None)
    ]
    roster.register(db.engine, Host("new-box", "id", "6.1", "cpu", 2, 1 << 30), ["nvme"], 2.0)
    found = {w.name: (w.fslab_version, w.schema_version) for w in roster.workers(db.engine)}
    assert found == {"nvme-box": (None, None), "new-box": (version(), SCHEMA_VERSION)}
    assert versions.refusers(roster.workers(db.engine)) == [
        "worker nvme-box runs an fslab of before schema 16, which refuses no unit it cannot run faithfully: "
        'stop it, and upgrade its host (docs/fleet.md, "Upgrading a fleet")'
    ], "what `fslab run --on` says of it"
    printed = io.StringIO()
    Console(file=printed, width=160).print(dispatch.workers_table(db))
    shown = printed.getvalue()
    assert re.search(rf"new-box\s+nvme\s+{re.escape(version())}\s+{SCHEMA_VERSION}\s", shown), shown
    assert re.search(r"nvme-box\s+ssd\s+\?\s+\?\s", shown), "its versions unsaid"
    assert f"the database is at schema {SCHEMA_VERSION}" in shown


def test_a_version_14_fleet_database_on_sqlite_gains_the_workers_versions(tmp_path):
    from conftest import FIXTURES
    from fslab.results import ResultsDB

    path = tmp_path / "v14.db"
    shutil.copy(FIXTURES / "schema-v14.db", path)
    db = ResultsDB(str(path))
    migrated_v14_fleet_shows_its_workers_versions(db)
    db.engine.dispose()
