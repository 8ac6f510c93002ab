"""A study run spread over a fleet (`fslab run --on … --spread`): its blocks divided between the
workers, a killed worker's block taken by the other, and what cannot be divided refused. Beside
test_fleet.py (its helpers), a module of its own so that a parallel run can give it to another
worker than test_fleet.py's (each module an xdist group, with a fleet lab of its own)."""

from __future__ import annotations

import pytest

from fleet import fleet
from short_studies import short_study
from test_fleet import EXT4, registered, status_of, stored

TWO_EXT4 = EXT4 + '\n[[target]]\nname = "ext4-b"\nfilesystem = "ext4"\n'


def spread_on(f, tmp_path, targets: str, repetitions: int) -> int:
    path = tmp_path / "spread.toml"
    path.write_text(short_study("spread", targets, repetitions))
    queued = f.fslab_in_process("run", str(path), "--no-ceiling", "--on", "a,b", "--spread", "--detach")
    assert queued.returncode == 0, queued.stderr
    return int(queued.stdout.strip())


@pytest.mark.root
def test_a_spread_study_run_divides_its_runs_between_two_workers_and_its_summary_pools_them(fleet_lab, tmp_path):
    with fleet(fleet_lab, tmp_path) as f:
        workers = [f.start(i, name) for i, name in enumerate("ab")]
        f.wait("both workers", registered(f, 2))
        study_run_id = spread_on(f, tmp_path, EXT4, 4)
        f.wait("the study run finished", lambda: status_of(f, study_run_id) == "finished")
        found = stored(f, study_run_id)
        assert sorted((t, w, r, n) for _, t, w, r, n in found) == [
            ("ext4", "seq_write", str(r), "1") for r in (1, 2, 3, 4)
        ], "every planned run stored once, on one host"
        assert {h for h, *_ in found} == {"a", "b"}, "both hosts ran some"
        assert (
            f.sql(
                f"SELECT count(*) FROM fleet_blocks WHERE study_run_id = {study_run_id} AND "
                "host IS NOT NULL AND claimed_at <= started_at AND started_at <= finished_at"
            )
            == "4"
        )
        assert (
            f.sql(
                f"SELECT count(*) FROM fleet_units WHERE study_run_id = {study_run_id} "
                "AND queued_at <= claimed_at AND claimed_at <= started_at"
            )
            == "2"
        ), "the queue's own time, per unit"
        summary = f.fslab_in_process("summary", str(study_run_id))
        assert summary.returncode == 0, summary.stderr
        method = " ".join(summary.stdout.split())
        assert "2 hosts pooled (a, b; the study run was spread over them" in method and "@ a" not in summary.stdout, (
            summary.stdout
        )
        assert [f.stop(w) for w in workers] == [0] * 2


@pytest.mark.root
def test_a_worker_killed_during_a_spread_study_run_has_its_block_taken_by_the_other(fleet_lab, tmp_path):
    with fleet(fleet_lab, tmp_path) as f:
        doomed, other = f.start(0, "a"), f.start(1, "b")
        f.wait("both workers", registered(f, 2))
        study_run_id = spread_on(f, tmp_path, TWO_EXT4, 4)

        def mid_block() -> bool:  # host a stored the first run of a block (of two) and runs the second
            done = int(f.sql(f"SELECT count(*) FROM runs WHERE study_run_id = {study_run_id} AND host = 'a'"))
            return (
                done % 2 == 1
                and f.sql(f"SELECT current FROM fleet_units WHERE study_run_id = {study_run_id} AND host = 'a'") != ""
            )

        f.wait("host a in the middle of a block", mid_block)
        doomed.stopped = True
        doomed.process.kill()  # kill -9: host a never comes back
        doomed.process.wait(timeout=60)
        f.wait("the study run finished without host a", lambda: status_of(f, study_run_id) == "finished")
        found = stored(f, study_run_id)
        assert sorted((t, w, r, n) for _, t, w, r, n in found) == [
            (t, "seq_write", str(r), "1") for t in ("ext4", "ext4-b") for r in (1, 2, 3, 4)
        ], "every planned run stored exactly once"
        assert "queued again" in other.output(), other.output()
        assert (
            f.sql(f"SELECT count(*) FROM fleet_blocks WHERE study_run_id = {study_run_id} AND finished_at IS NULL")
            == "0"
        )
        assert f.stop(other) == 0


def test_spread_refuses_what_cannot_be_divided(tmp_path):
    from conftest import fslab_in_process
    from fslab.fleet.spread import CannotSpread, check
    from fslab.running.plan import Repetitions

    alone = fslab_in_process("run", "quick", "--spread", "--db", str(tmp_path / "r.db"))
    assert alone.returncode == 2 and "--spread goes with --on" in alone.stderr
    with pytest.raises(CannotSpread, match="--target-ci"):
        check(Repetitions(runs=3, target_ci=0.05))
    with pytest.raises(CannotSpread, match="--warmup 0"):
        check(Repetitions(runs=3, warmup=1))
    check(Repetitions(runs=3))  # a fixed plan: nothing to refuse
