"""The server's password as libpq's users give it — PGPASSWORD, ~/.pgpass, a service file
(PGSERVICEFILE, `postgresql:///?service=NAME`) — each tried for real through the `fslab` command
(run in this process, in the environment a user's process would have: libpq reads it as it
connects) on the tests' PostgreSQL (tests/postgres.py); and a wrong or missing one refused in a
message that names the database without its password."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

import postgres
from conftest import fslab_in_process
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.running.environment import host
from synthetic import stored_study


@pytest.fixture(scope="module")
def team_database(pg_cluster, tmp_path_factory):
    """A database with one study run (stored through fslab with the password in its URL)."""
    db = ResultsDB(pg_cluster.new_database("passwords"))
    stored_study(
        tmp_path_factory.mktemp("study"),
        '[study]\nname = "locked"\nworkloads = ["rand_read"]\n[[target]]\nfilesystem = "raw"\n',
        db,
    )
    db.engine.dispose()
    return pg_cluster


def history(db: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`fslab history --db DB` as a user with HOME `home` and only these of libpq's variables."""
    unset = dict.fromkeys([k for k in os.environ if k.startswith("PG")] + ["FSLAB_DB"])
    return fslab_in_process("history", "--db", db, cwd=home, env={**unset, "HOME": str(home), **env})


def test_without_a_password_the_server_refuses_and_fslab_says_so(team_database, tmp_path):
    url = team_database.url("passwords", password=False)
    refused = history(url, tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"cannot use {url} as the results database" in refused.stderr and "password" in refused.stderr
    wrong = history(url.replace("fslab@", "fslab:not-the-password@"), tmp_path)
    assert wrong.returncode == 2 and "password authentication failed" in wrong.stderr
    assert "not-the-password" not in wrong.stderr + wrong.stdout and "fslab:***@" in wrong.stderr


def test_pgpassword_is_used(team_database, tmp_path):
    found = history(team_database.url("passwords", password=False), tmp_path, PGPASSWORD=postgres.PASSWORD)
    assert found.returncode == 0 and "locked" in found.stdout, found.stderr


def test_the_users_pgpass_is_used(team_database, tmp_path):
    pgpass = tmp_path / ".pgpass"
    pgpass.write_text(f"{team_database.host}:{team_database.port}:passwords:{postgres.USER}:{postgres.PASSWORD}\n")
    pgpass.chmod(0o600)  # libpq ignores a password file others may read
    found = history(team_database.url("passwords", password=False), tmp_path)
    assert found.returncode == 0 and "locked" in found.stdout, found.stderr
    assert postgres.PASSWORD not in found.stdout + found.stderr


def test_a_service_file_names_the_server_and_pgpass_its_password(team_database, tmp_path):
    services = tmp_path / "services.conf"
    services.write_text(
        f"[team]\nhost={team_database.host}\nport={team_database.port}\ndbname=passwords\nuser={postgres.USER}\n"
    )
    pgpass = tmp_path / ".pgpass"
    pgpass.write_text(f"*:*:*:{postgres.USER}:{postgres.PASSWORD}\n")
    pgpass.chmod(0o600)
    found = history("postgresql:///?service=team", tmp_path, PGSERVICEFILE=str(services))
    assert found.returncode == 0 and "locked" in found.stdout, found.stderr
    unknown = history("postgresql:///?service=nowhere", tmp_path, PGSERVICEFILE=str(services))
    assert unknown.returncode == 2 and "nowhere" in unknown.stderr and "Traceback" not in unknown.stderr


def test_a_user_who_may_only_read_summarises(team_database):
    """A database at the current version is only read as it is opened: SELECT rights suffice."""
    team_database.sql("DROP ROLE IF EXISTS reader")
    team_database.sql("CREATE ROLE reader LOGIN PASSWORD 'reader-secret'")
    team_database.sql("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader", "passwords")
    url = f"postgresql://reader:reader-secret@{team_database.host}:{team_database.port}/passwords"
    db = ResultsDB(url)
    summary = summarize_study_run(db, db.study_run()["id"])
    assert summary.study_run["study"] == "locked"
    with pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
        db.record_host(1, host())
    db.engine.dispose()
    team_database.sql("REASSIGN OWNED BY reader TO fslab", "passwords")
    team_database.sql("DROP OWNED BY reader", "passwords")
    team_database.sql("DROP ROLE reader")
