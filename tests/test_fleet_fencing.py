"""A fleet under a lapse: a spread host's link cut past its heartbeat lapse, the server away past
it, or away just as a worker begins its unit or asks for a block (tests/fleet.py). What the
unheard host held is handed to another — and the first, alive all along, stores nothing more of
it as counted: every planned run is stored exactly once, what the fenced host measured kept
aside as superseded (fleet/lease.py; docs/fleet.md, "Guarantees"). Every wait is for a state,
never a sleep."""

from __future__ import annotations

import re
import time
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from fleet import DATABASE, LAPSE, fleet
from short_studies import short_study

TARGETS = ("ext4", "ext4-b", "ext4-c")


def spread_on(f, tmp_path, targets: int, blocks: int) -> int:
    """A spread study run on hosts a and b: `blocks` blocks of `targets` runs (one per target)."""
    path = tmp_path / "spread.toml"
    path.write_text(
        short_study(
            "fenced", "".join(f'[[target]]\nname = "{t}"\nfilesystem = "ext4"\n\n' for t in TARGETS[:targets]), blocks
        )
    )
    queued = f.fslab_in_process("run", str(path), "--no-ceiling", "--on", "a,b", "--spread", "--detach")
    assert queued.returncode == 0, queued.stderr
    return int(queued.stdout.strip())


def counted(f, study_run_id: int) -> list[tuple[str, ...]]:
    """Each (target, repetition) stored as counted, with how many times."""
    rows = f.sql(
        "SELECT target, repetition, count(*) FROM runs WHERE study_run_id = "
        f"{study_run_id} AND status <> 'superseded' GROUP BY 1, 2 ORDER BY 1, 2"
    )
    return [tuple(line.split("|")) for line in rows.splitlines()]


def planned(targets: int, blocks: int) -> list[tuple[str, ...]]:
    return [(t, str(r), "1") for t in TARGETS[:targets] for r in range(1, blocks + 1)]


def under_way(f, study_run_id: int, host: str) -> tuple[str, str] | None:
    """The run `host` has under way, not yet stored by any host: (target, repetition)."""
    current = f.sql(f"SELECT current FROM fleet_units WHERE study_run_id = {study_run_id} AND host = '{host}'")
    found = re.fullmatch(r"(\S+) · seq_write · run (\d+)", current)
    if found is None or stored(f, study_run_id, *found.groups()):
        return None
    return found[1], found[2]


def stored(f, study_run_id: int, target: str, repetition: str, host: str | None = None) -> list[str]:
    """The status of each run of that target and repetition stored (by `host`, if named)."""
    by = f" AND host = '{host}'" if host else ""
    return f.sql(
        f"SELECT status FROM runs WHERE study_run_id = {study_run_id} "
        f"AND target = '{target}' AND repetition = {repetition}{by}"
    ).split()


def registered(f, count: int):
    return lambda: (
        f.sql("SELECT to_regclass('procrastinate_workers')")
        and f.sql("SELECT count(*) FROM procrastinate_workers") == str(count)
    )


def ended(f, study_run_id: int):
    """The study run finished and each host's unit ended: nothing more will be stored."""
    units = f"SELECT count(*) FROM fleet_units WHERE study_run_id = {study_run_id} AND state IN ('done', 'failed')"
    return lambda: (
        f.sql(f"SELECT status FROM study_runs WHERE id = {study_run_id}") == "finished" and f.sql(units) == "2"
    )


@pytest.mark.root
def test_a_spread_host_cut_off_or_the_server_away_past_the_lapse_leaves_every_planned_run_counted_once(
    fleet_lab, tmp_path
):
    with fleet(fleet_lab, tmp_path) as f:
        workers = {"a": f.start(0, "a"), "b": f.start(1, "b")}
        f.wait("both workers", registered(f, 2))

        # Host a's link cut until b has taken a's block over and run the run a had under way.
        study_run_id = spread_on(f, tmp_path, targets=2, blocks=3)
        target, repetition = f.wait("a run under way on host a", lambda: under_way(f, study_run_id, "a"))
        with f.hosts[0].cut():
            f.wait(
                "host b to take a's block over and store that run",
                lambda: stored(f, study_run_id, target, repetition, "b"),
            )
        f.wait(
            "host a, back, to store the run it had under way", lambda: stored(f, study_run_id, target, repetition, "a")
        )
        f.wait("the study run and both units ended", ended(f, study_run_id))
        assert counted(f, study_run_id) == planned(2, 3), "every planned run stored exactly once"
        assert stored(f, study_run_id, target, repetition, "a") == ["superseded"], (
            "a's run of the block b took over: kept aside"
        )
        assert "queued again" in workers["b"].output(), workers["b"].output()
        assert "was taken by another worker while this one was unheard" in workers["a"].output(), workers["a"].output()
        shown = f.fslab_in_process("status", str(study_run_id))
        assert shown.returncode == 0, shown.stderr
        # the run under way when cut, and any a began before it heard its block was taken (under load)
        superseded = f.sql(
            f"SELECT count(*) FROM runs WHERE study_run_id = {study_run_id} AND host = 'a' AND status = 'superseded'"
        )
        assert int(superseded) >= 1
        pattern = rf"\ba\s+done\s.*\b{superseded} run\(s\) superseded, not counted"
        assert re.search(pattern, shown.stdout), shown.stdout

        # The server away while one host runs the only block and the other waits for one. Once it
        # is back, whichever worker is heard from first judges the other: the waiting host may take
        # the block over (the other's run after that kept aside), or the holder go on with it.
        second = spread_on(f, tmp_path, targets=3, blocks=1)
        holder = f.wait(
            "a host running the only block", lambda: next((h for h in "ab" if under_way(f, second, h)), None)
        )
        waiting = "b" if holder == "a" else "a"
        f.wait(
            "the other host waiting for a block",
            lambda: (
                f.sql(f"SELECT state FROM fleet_units WHERE study_run_id = {second} AND host = '{waiting}'")
                == "running"
            ),
        )
        lost = workers[holder].output().count("database connection lost")
        with f.pg.away():
            away_since = time.monotonic()
            f.wait(
                "the holder a run to store, and the lapse past, with the server away",
                lambda: (
                    workers[holder].output().count("database connection lost") > lost
                    and time.monotonic() - away_since > float(LAPSE)
                ),
            )
        f.wait("the study run and both units ended", ended(f, second))
        assert counted(f, second) == planned(3, 1), "every planned run stored exactly once"
        kept_aside = f.sql(f"SELECT host FROM runs WHERE study_run_id = {second} AND status = 'superseded'").split()
        assert kept_aside in ([], [holder]), "at most the holder's run after its block was taken over is kept aside"
        for worker in workers.values():
            f.stop(worker)


@pytest.fixture
def leases(pg_cluster):
    """A fleet's database with one study run on hosts a and b, its blocks queued; a worker's
    SteadyResults on it."""
    from fslab.fleet import spread, units
    from fslab.fleet.steady import SteadyResults

    db = SteadyResults(pg_cluster.new_database("leases"), print)
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO study_runs (study, study_path, study_source, scale, "
                "repetitions, plan_seed, started_at, status, environment, fslab_version) "
                "VALUES ('s', 's.toml', '', 1, 1, 1, now(), 'running', '{}', 'x')"
            )
        )
    units.queued(db.engine, 1, ["a", "b"])
    spread.queued(db.engine, 1, 2)
    yield db
    db.engine.dispose()


def a_run(repetition: int, block: int = 1):
    from fslab.model.records import RunRecord, now

    return RunRecord("ext4", "seq_write", repetition, False, block, 1, now(), now(), "ok", False, host="a")


@pytest.mark.root
def test_a_worker_whose_unit_or_block_was_taken_stores_its_run_aside_and_hears_so(leases):
    from fslab.fleet import lease
    from fslab.fleet.lease import UnitWithdrawn
    from fslab.running.plan import BlockWithdrawn

    first = lease.take_unit(leases.engine, 1, "a")
    with leases.leased(lambda record: first):
        kept = leases.record_run(1, a_run(1))
    second = lease.take_unit(leases.engine, 1, "a")  # another worker of a's name took the unit
    assert (first.generation, second.generation) == (1, 2)
    with (
        leases.leased(lambda record: first),
        pytest.raises(UnitWithdrawn, match="the unit of study run 1 on a was taken by another worker"),
    ):
        leases.record_run(1, a_run(2))
    block = lease.take_block(leases.engine, 1, 2, "a")
    assert lease.take_block(leases.engine, 1, 2, "b").generation == block.generation + 1
    with leases.leased(lambda record: block), pytest.raises(BlockWithdrawn, match="block 2 of study run 1 was taken"):
        leases.record_run(1, a_run(3, block=2))
    assert not lease.write(leases.engine, block, finished_at=a_run(3).finished_at), (
        "nothing more of the block written by the host it was taken from"
    )
    with leases.engine.connect() as conn:
        found = conn.execute(sa.text("SELECT id, repetition, status, error FROM runs ORDER BY id")).all()
    assert [(r.repetition, r.status) for r in found] == [(1, "ok"), (2, "superseded"), (3, "superseded")] and found[
        0
    ].id == kept
    assert found[1].error.startswith("measured on a after the unit of study run 1 on a was taken by another worker")
    assert [r["repetition"] for r in leases.runs(1)] == [1], "kept aside: never counted"


@pytest.mark.root
def test_a_blocks_job_ended_or_given_back_twice_is_so_once(leases):
    """The host a block was taken from finishes it just as the other takes it (still its own:
    fleet/lease.py): each then ends the block's job, and the second finds it ended. A block given
    back (its unit stopped) after it was queued again (its worker's heartbeat lapsed) is queued."""
    import asyncio

    from fslab.fleet import queue

    queue.install(leases.engine)
    app = queue.app_for(leases.location)

    async def twice(end) -> list[str]:  # noqa: ANN001
        async with app.open_async():
            await app.configure_task(queue.BLOCK_TASK, queue=queue.spread_queue(1)).defer_async(study_run_id=1, block=1)
            taken = await queue.take_block(app, 1, await app.job_manager.register_worker())
            assert taken is not None, "the block just deferred"
            job_id, _ = taken
            for _ in range(2):
                await end(app, job_id)
            return [job.status for job in await app.job_manager.list_jobs_async(id=job_id)]

    assert asyncio.run(twice(queue.block_done)) == ["succeeded"]
    assert asyncio.run(twice(queue.give_back)) == ["todo"]


@contextmanager
def held_at(f, table: str, query: str):
    """The worker held at its first statement on `table` that `query` matches (the test locks
    the table, the worker's statement waits on the lock), then the server stopped: the moment it
    meets the outage is held, not raced. Its sessions closed with the server, the lock's too."""
    engine = sa.create_engine(f.pg.url(DATABASE), poolclass=sa.pool.NullPool)
    lock = engine.connect()
    try:
        lock.execute(sa.text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        yield
        waiting = f"SELECT query FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ~ '{query}'"
        f.wait(f"the worker's {query} held by the lock", lambda: f.sql(waiting), deadline=120)
        with f.pg.away():
            pass
    finally:
        lock.invalidate()
        engine.dispose()


@pytest.mark.root
def test_a_unit_that_starts_while_the_server_is_away_runs_once_it_is_back(fleet_lab, tmp_path):
    """The server goes away just as a worker begins a unit, reading what the host's share still
    lacks (runner.run_share): the worker waits for it by the workers' one rule (steady.steadily),
    and every planned run is stored exactly once."""
    from test_fleet import dispatched, registered, stored

    with fleet(fleet_lab, tmp_path) as f:
        worker = f.start(0, "h")
        f.wait("the worker", registered(f, 1))
        with held_at(f, "runs", "FROM runs"):
            study_run_id = dispatched(f, tmp_path, "h", 2)
        f.wait(
            "the unit to end",
            lambda: f.sql(f"SELECT state FROM fleet_units WHERE study_run_id = {study_run_id}") in ("done", "failed"),
        )
        assert f.sql(f"SELECT state FROM fleet_units WHERE study_run_id = {study_run_id}") == "done", worker.output()
        assert stored(f, study_run_id) == [("h", "ext4", "seq_write", str(r), "1") for r in (1, 2)], (
            "every run stored once"
        )
        assert "database connection lost" in worker.output(), worker.output()
        f.stop(worker)


@pytest.mark.root
def test_a_spread_unit_taking_a_block_while_the_server_is_away_takes_it_once_it_is_back(fleet_lab, tmp_path):
    """The server goes away just as a spread host asks the queue for its next block (or ends the
    one before): the queue's calls wait for it by the same rule, and every block runs once."""
    from test_fleet import registered

    with fleet(fleet_lab, tmp_path) as f:
        worker = f.start(0, "h")
        f.wait("the worker", registered(f, 1))
        path = tmp_path / "spread.toml"
        path.write_text(short_study("spread", '[[target]]\nname = "ext4"\nfilesystem = "ext4"\n', 3))
        queued = f.fslab_in_process("run", str(path), "--no-ceiling", "--on", "h", "--spread", "--detach")
        assert queued.returncode == 0, queued.stderr
        study_run_id = int(queued.stdout.strip())
        f.wait("the first block's run stored", lambda: counted(f, study_run_id))
        with held_at(f, "procrastinate_jobs", "procrastinate_f"):  # procrastinate_fetch_job, procrastinate_finish_job
            pass
        f.wait(
            "the study run and its unit ended",
            lambda: f.sql(f"SELECT state FROM fleet_units WHERE study_run_id = {study_run_id}") in ("done", "failed"),
        )
        assert f.sql(f"SELECT state FROM fleet_units WHERE study_run_id = {study_run_id}") == "done", worker.output()
        assert counted(f, study_run_id) == [("ext4", str(r), "1") for r in (1, 2, 3)], (
            "every planned run stored exactly once"
        )
        assert "database connection lost" in worker.output(), worker.output()
        f.stop(worker)
