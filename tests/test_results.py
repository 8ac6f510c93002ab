"""The results database: schema version and migration of a database written by an older fslab."""

import shutil

import pytest
import sqlalchemy as sa

from conftest import FIXTURES, fslab
from fslab.results import ResultsDB
from fslab.results.db import SCHEMA_VERSION, SchemaMismatch, schema_info


def test_a_version_1_database_is_migrated_with_nothing_lost(tmp_path):
    # written by fslab with schema version 1 (the first release), from a real study run
    db_path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v1.db", db_path)
    db = ResultsDB(str(db_path))
    with db.engine.connect() as conn:
        assert conn.execute(sa.select(schema_info.c.version)).scalar() == SCHEMA_VERSION
    study_run = db.study_run()
    assert study_run["study"] == "v1" and study_run["settings"] is None
    runs = db.runs(study_run["id"])
    assert len(runs) == 4 and all(r["warmup"] is False for r in runs)
    assert {s["target"] for s in db.samples(study_run["id"]) if s["name"] == "read_iops"} == {"xfs", "raw"}
    result = fslab("summary", "--db", str(db_path))
    assert result.returncode == 0 and "rand_read (direct I/O)" in result.stdout


def test_a_newer_database_is_refused(tmp_path):
    db = ResultsDB(str(tmp_path / "new.db"))
    with db.engine.begin() as conn:
        conn.execute(schema_info.update().values(version=SCHEMA_VERSION + 1))
    with pytest.raises(SchemaMismatch, match="newer than this fslab's"):
        ResultsDB(str(tmp_path / "new.db"))
