"""A fleet for real: `fslab worker`s in network namespaces, a PostgreSQL on the bridge, studies
run on them with `fslab run --on` (tests/fleet.py). Every wait is for a state, never a sleep."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import postgres
from conftest import fresh_workdir, held_by, wait_for
from fleet import LAPSE, Worker, fleet
from short_studies import short_study

EXT4 = '[[target]]\nname = "ext4"\nfilesystem = "ext4"\n'


def study_file(tmp_path, repetitions: int = 2):
    path = tmp_path / "fleet.toml"
    path.write_text(short_study("fleet", EXT4, repetitions))
    return str(path)


def stored(f, study_run_id: int) -> list[tuple[str, ...]]:
    """Each (host, target, workload, repetition) stored, with how many times."""
    rows = f.sql(
        "SELECT host, target, workload, repetition, count(*) FROM runs WHERE "
        f"study_run_id = {study_run_id} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
    )
    return [tuple(line.split("|")) for line in rows.splitlines()]


def status_of(f, study_run_id: int) -> str:
    return f.sql(f"SELECT status FROM study_runs WHERE id = {study_run_id}")


def registered(f, count: int):
    return lambda: (
        f.sql("SELECT count(*) FROM procrastinate_workers") == str(count)
        if f.sql("SELECT to_regclass('procrastinate_workers')")
        else False
    )


def dispatched(f, tmp_path, on: str, repetitions: int) -> int:
    queued = f.fslab_in_process("run", study_file(tmp_path, repetitions), "--no-ceiling", "--on", on, "--detach")
    assert queued.returncode == 0, queued.stderr
    return int(queued.stdout.strip())


def runs_of(f, study_run_id: int) -> int:
    return int(f.sql(f"SELECT count(*) FROM runs WHERE study_run_id = {study_run_id}") or 0)


def under_way(f, study_run_id: int, run: str):
    return lambda: f.sql(f"SELECT current FROM fleet_units WHERE study_run_id = {study_run_id}").endswith(run)


def stacks_of(f, worker: Worker) -> str:
    """What a worker prints of its threads on SIGUSR1 (docs/fleet.md): its output once it has
    printed them all (the main thread, started by `python -m`, comes last)."""
    worker.process.send_signal(signal.SIGUSR1)
    f.wait("its threads' stacks", lambda: "in _run_module_as_main" in worker.output(), deadline=30)
    return worker.output()


def mid_run(f, tmp_path, runs: int):
    """One worker "h", a study run of `runs` runs on it, waited for until its first run is stored
    and its second under way: the worker and the study run's id."""
    worker = f.start(0, "h")
    f.wait("the worker", registered(f, 1))
    study_run_id = dispatched(f, tmp_path, "h", runs)
    f.wait(
        "a run stored, the next under way",
        lambda: runs_of(f, study_run_id) == 1 and under_way(f, study_run_id, "run 2")(),
    )
    return worker, study_run_id


@pytest.mark.root
def test_a_worker_killed_mid_run_has_its_unit_taken_again_and_every_run_stored_once(fleet_lab, tmp_path):
    with fleet(fleet_lab, tmp_path) as f:
        first, study_run_id = mid_run(f, tmp_path, 2)
        first.stopped = True
        first.process.kill()  # kill -9: no clean-up, its heartbeat stops
        first.process.wait(timeout=60)
        assert f.sql("SELECT status FROM procrastinate_jobs") == "doing", "its unit still looks taken"
        again = f.start(0, "h", workdir=first.workdir)  # the host's next worker, on its work directory
        f.wait("the study run finished", lambda: status_of(f, study_run_id) == "finished")
        assert stored(f, study_run_id) == [("h", "ext4", "seq_write", str(r), "1") for r in (1, 2)], (
            "every planned run stored exactly once"
        )
        assert "queued again" in again.output() and "left by an interrupted fslab" in again.output(), again.output()
        assert f.sql("SELECT status, attempts FROM procrastinate_jobs") == "succeeded|2", "taken twice, succeeded once"
        assert f.stop(again) == 0


@pytest.mark.root
def test_two_workers_of_one_name_race_for_one_unit_and_one_runs_it(fleet_lab, tmp_path):
    with fleet(fleet_lab, tmp_path) as f:
        twins = [f.start(i, "twin") for i in range(2)]
        f.wait("both workers", registered(f, 2))
        study_run_id = dispatched(f, tmp_path, "twin", 1)
        f.wait("the study run finished", lambda: status_of(f, study_run_id) == "finished")
        assert stored(f, study_run_id) == [("twin", "ext4", "seq_write", "1", "1")]
        took = [w.output().count("took unit") for w in twins]
        assert sorted(took) == [0, 1], [w.output() for w in twins]
        assert "in serve" in stacks_of(f, twins[0]), "kill -USR1: each thread's stack, and the worker goes on"
        assert [f.stop(w) for w in twins] == [0] * 2


def overlapping(f, first: int, second: int) -> list[str]:
    """The runs of study run `first` and of `second` that were under way at the same time (from
    their stored start and end), one line a pair."""
    return f.sql(
        "SELECT a.id || ' ' || a.started_at || '..' || a.finished_at || ' overlaps ' "
        "|| b.id || ' ' || b.started_at || '..' || b.finished_at "
        "FROM runs a JOIN runs b ON a.started_at < b.finished_at AND b.started_at < a.finished_at "
        f"WHERE a.study_run_id = {first} AND b.study_run_id = {second}"
    ).splitlines()


@pytest.mark.root
def test_two_workers_of_one_name_never_benchmark_at_once_across_study_runs_and_the_second_says_so(fleet_lab, tmp_path):
    """Issue 33, item 2: two workers started with one --name (two namespaces, two work
    directories) and a unit of each of two study runs on that host: the host lock makes them
    take turns — no run of one study run under way while a run of the other is — and the second
    worker says at start which other worker of its name runs, where and since when."""
    with fleet(fleet_lab, tmp_path) as f:
        first = f.start(0, "twin")
        f.wait("the first worker", registered(f, 1))
        second = f.start(1, "twin")
        f.wait("both workers", registered(f, 2))
        started = second.output()
        study_runs = [dispatched(f, tmp_path, "twin", 3) for _ in range(2)]
        f.wait("both study runs finished", lambda: all(status_of(f, s) == "finished" for s in study_runs))
        for study_run_id in study_runs:
            planned = [("twin", "ext4", "seq_write", str(r), "1") for r in (1, 2, 3)]
            assert stored(f, study_run_id) == planned, "every planned run stored once"
        assert overlapping(f, *study_runs) == [], "one benchmark at a time on host twin"
        assert sorted(w.output().count("took unit") for w in (first, second)) == [1, 1], "each worker took a unit"
        assert "host twin is busy" in first.output() + second.output(), "one of them waited for the other's host lock"
        said = (
            f"warning: another worker named twin is running: fslab worker pid {first.process.pid} "
            f"on {socket.gethostname()} from {f.hosts[0].address}, up since 20"
        )
        assert said in started, started
        assert "another worker named" not in first.output()
        assert [f.stop(w) for w in (first, second)] == [0] * 2


@pytest.mark.root
def test_a_host_lock_whose_session_ends_is_taken_again_by_its_holder_or_lost_before_the_next_run(fleet_lab):
    """The host lock of two workers of one name (hostlock.py, in this process) when the holder's
    lock session is ended: taken again at once, before the waiting twin; and, when the holder
    cannot connect again in time, lost — the twin has it, and the holder's next run is refused."""
    from fslab.fleet.hostlock import HOST_LOCKS, HostLock, HostLockLost

    url = fleet_lab.pg.new_database("hostlock")
    said: list[str] = []

    def telling(who: str) -> Callable[[str], None]:
        return lambda line: said.append(f"{who}: {line}")

    holder, twin = HostLock(url, "twin", 4.0, telling("holder")), HostLock(url, "twin", 4.0, telling("twin"))
    holder.start()
    found = [str(h) for h in twin.start()]
    assert len(found) == 1 and found[0].startswith(f"fslab worker pid {os.getpid()} on "), "the twin finds the holder"
    end_holders_session = (  # from the cluster's default database: this one may refuse connections
        "SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
        "WHERE database = (SELECT oid FROM pg_database WHERE datname = 'hostlock') "
        f"AND locktype = 'advisory' AND classid = {HOST_LOCKS} AND granted"
    )
    took: list[str] = []
    leave = threading.Event()

    def twin_takes_it(label: str) -> None:
        with twin.held(lambda why: said.append(f"twin: {why}")):
            took.append(label)
            leave.wait(60)

    def twin_waits(times: int) -> bool:
        return sum("twin: host twin is busy" in line for line in said) == times

    with holder.held(said.append):
        waiting = threading.Thread(target=twin_takes_it, args=("at its turn",))
        waiting.start()
        wait_for("the twin waiting", lambda: twin_waits(1), deadline=30)
        assert fleet_lab.pg.sql(end_holders_session) == "1"
        taken_again = "holder: host lock of twin taken again on a new database session"
        wait_for("the lock taken again", lambda: taken_again in said, deadline=30)
        holder.check(said.append)
        assert took == [], "the twin waited on"
    wait_for("the twin's turn", lambda: took == ["at its turn"], deadline=30)
    leave.set()
    waiting.join(timeout=30)
    leave.clear()

    with holder.held(said.append):
        waiting = threading.Thread(target=twin_takes_it, args=("the holder cut off",))
        waiting.start()
        wait_for("the twin waiting again", lambda: twin_waits(2), deadline=30)
        # The holder cannot connect again; the twin's session goes on.
        fleet_lab.pg.sql("ALTER DATABASE hostlock ALLOW_CONNECTIONS false")
        try:
            assert fleet_lab.pg.sql(end_holders_session) == "1"
            wait_for("the twin holding it", lambda: took == ["at its turn", "the holder cut off"], deadline=30)
        finally:
            fleet_lab.pg.sql("ALTER DATABASE hostlock ALLOW_CONNECTIONS true")
        lost = "host lock of twin lost with its database session: fslab worker pid .* holds it now"
        with pytest.raises(HostLockLost, match=lost):
            holder.check(said.append)  # waits until its session answers again, then finds the lock lost
    leave.set()
    waiting.join(timeout=30)
    holder.stop()
    twin.stop()


@pytest.mark.root
def test_a_busy_work_directory_delays_a_unit_and_loses_nothing(fleet_lab, tmp_path):
    """Issue 33, item 3: a unit whose work directory another fslab holds (its lock, as a local
    `fslab run` holds it) waits — the worker and `fslab status` say so — and runs once it is free."""
    with fleet(fleet_lab, tmp_path) as f:
        worker = f.start(0, "h")
        f.wait("the worker", registered(f, 1))
        state = "SELECT state FROM fleet_units"
        with worker.workdir.claim():
            study_run_id = dispatched(f, tmp_path, "h", 2)
            f.wait("the unit taken", lambda: f.sql(state) not in ("queued", "running"))
            assert f.sql(state) == "waiting", f.sql("SELECT state, why FROM fleet_units")
            busy = f"another fslab (pid {os.getpid()}) is using {worker.workdir.root}"
            f.wait("a second try", lambda: worker.output().count(busy) >= 2)
            assert "unit waits: study run" in worker.output() and "trying again in" in worker.output()
            shown = f.fslab_in_process("status", str(study_run_id))
            assert shown.returncode == 0 and re.search(r"\bh\s+waiting\b", shown.stdout), shown.stdout
            assert "another fslab" in shown.stdout, shown.stdout
        f.wait("the study run finished", lambda: status_of(f, study_run_id) == "finished")
        assert stored(f, study_run_id) == [("h", "ext4", "seq_write", str(r), "1") for r in (1, 2)], "none lost"
        assert f.sql("SELECT state, why FROM fleet_units") == "done|"
        assert f.stop(worker) == 0


@pytest.mark.root
def test_the_database_connection_cut_mid_run_loses_nothing(fleet_lab, tmp_path):
    with fleet(fleet_lab, tmp_path) as f:
        worker = f.start(0, "h")
        f.wait("the worker", registered(f, 1))
        study_run_id = dispatched(f, tmp_path, "h", 3)
        f.wait(
            "a run stored, the next under way",
            lambda: runs_of(f, study_run_id) == 1 and under_way(f, study_run_id, "run 2")(),
        )
        # Cut the worker's connections and keep the database closed until it has had a run to store meanwhile.
        f.pg.sql("ALTER DATABASE fleet ALLOW_CONNECTIONS false")
        cut = (
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            f"WHERE datname = 'fleet' AND client_addr = '{f.hosts[0].address}'"
        )
        assert int(f.pg.sql(cut)) > 0
        f.wait("a run to store while the database is closed", lambda: "database connection lost" in worker.output())
        f.pg.sql("ALTER DATABASE fleet ALLOW_CONNECTIONS true")
        f.wait("a second cut", lambda: under_way(f, study_run_id, "run 3")())
        assert int(f.pg.sql(cut)) > 0
        f.wait("the study run finished", lambda: status_of(f, study_run_id) == "finished")
        assert stored(f, study_run_id) == [("h", "ext4", "seq_write", str(r), "1") for r in (1, 2, 3)], (
            "nothing lost, nothing twice"
        )
        assert worker.process.poll() is None, "the worker carried on"
        assert f.stop(worker) == 0


@pytest.mark.root
@pytest.mark.parametrize(
    ("signum", "exit_status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)], ids=["ctrl-c", "systemctl-stop"]
)
def test_a_worker_stopped_mid_run_releases_the_run_and_gives_its_unit_back(fleet_lab, tmp_path, signum, exit_status):
    """Ctrl-C ends it as an interrupted command (130); SIGTERM, a service manager's stop, ends it
    normally (0: systemd would report 143 as a failure). Either way nothing is lost."""
    with fleet(fleet_lab, tmp_path) as f:
        first, study_run_id = mid_run(f, tmp_path, 2)
        first.stopped = True
        first.process.send_signal(signum)
        try:
            status = first.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the worker did not stop; its threads:\n{stacks_of(f, first)}") from None
        assert status == exit_status, first.output()
        assert f.sql(f"SELECT state FROM fleet_units WHERE study_run_id = {study_run_id}") == "released"
        assert f.sql("SELECT status FROM procrastinate_jobs") == "todo", "given back to the queue"
        assert "worker stopped" in first.output() and held_by(first.workdir.root) == [], (
            "nothing left attached or mounted"
        )
        again = f.start(0, "h", workdir=first.workdir)
        f.wait("the study run finished", lambda: status_of(f, study_run_id) == "finished")
        assert stored(f, study_run_id) == [("h", "ext4", "seq_write", str(r), "1") for r in (1, 2)]
        assert "left by an interrupted fslab" not in again.output(), "the first released all it held"
        assert f.stop(again) == 0


def test_a_fleet_is_asked_for_plainly_or_refused_with_what_to_do(tmp_path):
    from conftest import fslab_in_process
    from fslab.fleet.units import NotSelfContained, check_self_contained

    detached = fslab_in_process("run", "quick", "--detach", "--db", str(tmp_path / "r.db"))
    assert detached.returncode == 2 and "--detach goes with --on" in detached.stderr
    on_sqlite = fslab_in_process("run", study_file(tmp_path), "--on", "all", "--db", str(tmp_path / "r.db"))
    assert on_sqlite.returncode == 2 and "a fleet's queue lives in PostgreSQL" in on_sqlite.stderr, on_sqlite.stderr
    with pytest.raises(NotSelfContained, match="'mine' name a job_file"):
        check_self_contained('[[workload]]\nname = "mine"\njob_file = "/etc/fio.job"\n', "s.toml")
    check_self_contained(short_study("fleet", EXT4), "s.toml")  # nothing to refuse


def documented_fleet_commands() -> list[list[str]]:
    """The commands of docs/fleet.md's "In short" block, each split as a shell would."""
    document = (Path(__file__).parent.parent / "docs" / "fleet.md").read_text()
    block = document.split("## In short: two hosts, one study", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


@pytest.mark.root
def test_the_documented_fleet_commands_run_then_a_study_across_three_workers_and_on_a_label(fleet_lab, tmp_path):
    """docs/fleet.md's fleet in short, as written but for the database's address: its URL comes as FSLAB_DB
    (the password by PGPASSWORD, as it advises); each worker line on its own host (a namespace,
    its own work directory); the rest here. Also issue 22's check: the quick study on two workers,
    every run stored once, a report with a chart per host. Then a third host (labelled hdd) joins
    its two (both labelled ssd): a study across the three workers, and one on label:ssd."""
    commands = documented_fleet_commands()
    assert commands[0][0] == "export" and commands[0][1].startswith("FSLAB_DB=postgresql://")
    workers = [c for c in commands if c[:2] == ["fslab", "worker"]]
    rest = [c for c in commands[1:] if c[:2] != ["fslab", "worker"]]
    assert len(workers) == 2 and [c[1] for c in rest] == ["run", "report", "history"]
    with fleet(fleet_lab, tmp_path) as f:
        env = f.env() | {"FSLAB_DB": f.url}

        def start(
            index: int, argv: list[str]
        ) -> None:  # as docs/fleet.md starts a worker: its heartbeat lapse the default
            workdir = f.undo.enter_context(fresh_workdir())
            log = tmp_path / f"{argv[3]}.log"
            with log.open("w") as out:
                process = f.hosts[index].popen(
                    [sys.executable, "-m", *argv],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env | {"FSLAB_WORKDIR": str(workdir.root)},
                )
            f.workers.append(Worker(argv[3], process, log, workdir))

        for index, argv in enumerate(workers):
            start(index, argv)
        f.wait("two workers", registered(f, 2))
        done = {
            c[1]: subprocess.run(
                [sys.executable, "-m", *c], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900
            )
            for c in rest
        }
        for command, result in done.items():
            assert result.returncode == 0, f"fslab {command}:\n{result.stdout}\n{result.stderr}"
        study_run = int(f.sql("SELECT max(id) FROM study_runs"))
        counts = stored(f, study_run)
        assert {row[0] for row in counts} == {"nvme-box", "sata-box"} and len(counts) == 2 * 4 * 4, (
            "each host: 4 targets × 4 workloads, 1 run"
        )
        assert {row[4] for row in counts} == {"1"}, "every run stored once"
        page = (tmp_path / "reports" / f"quick-{study_run}" / "report.html").read_text()
        assert (
            "<h3>Hosts</h3>" in page
            and "chart-seq_read-read_iops-nvme-box" in page
            and "chart-seq_read-read_iops-sata-box" in page
        ), "a chart per host"
        assert "ext4 @ nvme-box" in page and "ext4 @ sata-box" in page, "each host's cells"
        assert (
            "rand_read · ext4 · read IOPS — host nvme-box" in done["history"].stdout
            and "— host sata-box" in done["history"].stdout
        )

        # A quick lapse beside the documented default (60 s: a heartbeat every 15 s): each worker is
        # judged by its own, so hdd-box never takes the others, running, for dead.
        start(2, ["fslab", "worker", "--name", "hdd-box", "--labels", "hdd", "--heartbeat-lapse", LAPSE])
        f.wait("three workers", registered(f, 3))
        across = f.fslab_in_process("run", study_file(tmp_path, 1), "--no-ceiling", "--on", "all")
        assert across.returncode == 0, across.stdout + across.stderr
        first = int(f.sql("SELECT max(id) FROM study_runs"))
        assert stored(f, first) == [
            (host, "ext4", "seq_write", "1", "1") for host in ("hdd-box", "nvme-box", "sata-box")
        ], "every run once, each host's named by host"
        assert status_of(f, first) == "finished" and "seq_write" in across.stdout and "ext4" in across.stdout, (
            "then the summary, as fslab run prints it"
        )
        assert (
            f.sql(f"SELECT string_agg(name, ',' ORDER BY name) FROM hosts WHERE study_run_id = {first}")
            == "hdd-box,nvme-box,sata-box"
        )

        second = dispatched(f, tmp_path, "label:ssd", 1)
        assert second == first + 1
        f.wait("the labelled hosts' units done", lambda: status_of(f, second) == "finished")
        assert [row[0] for row in stored(f, second)] == ["nvme-box", "sata-box"], "only the hosts labelled ssd"
        shown = f.fslab_in_process("status", str(second))
        assert shown.returncode == 0, shown.stderr
        hosts, workers = shown.stdout.split("3 worker(s); the database is at schema", 1)  # then every worker
        assert re.search(r"nvme-box\s+done\s+1\s+1", hosts) and re.search(r"sata-box\s+done\s+1\s+1", hosts), hosts
        assert "hdd-box" not in hosts, hosts
        assert [line.split()[0] for line in workers.splitlines()[-3:]] == ["hdd-box", "nvme-box", "sata-box"], workers
        assert [f.stop(w) for w in f.workers] == [0] * 3
        said = "".join(w.output() for w in f.workers) + "".join(
            r.stdout + r.stderr for r in (*done.values(), across, shown)
        )
        assert postgres.PASSWORD not in said
        assert (
            "queued again" not in said and f.sql("SELECT count(*) FROM procrastinate_jobs WHERE attempts <> 1") == "0"
        ), "no unit taken from a live worker"


@pytest.mark.root
def test_a_unit_whose_runs_fail_alike_stops_once_with_its_cause_and_is_not_taken_again(
    fleet_lab, tmp_path, monkeypatch
):
    from conftest import path_without

    bin_dir = Path(path_without("fslab-none", tmp_path / "bin"))
    monkeypatch.setenv("PATH", str(bin_dir))  # the worker's PATH (Fleet.env): fio is taken from it mid-study
    path = tmp_path / "alike.toml"
    noatime = '[[target]]\nname = "ext4-noatime"\nfilesystem = "ext4"\nmount_options = "noatime"\n'
    path.write_text(short_study("alike", EXT4 + noatime, 3))
    with fleet(fleet_lab, tmp_path) as f:
        worker = f.start(0, "h")
        f.wait("the worker", registered(f, 1))
        queued = f.fslab_in_process("run", str(path), "--no-ceiling", "--on", "h", "--detach")
        assert queued.returncode == 0, queued.stderr
        study_run_id = int(queued.stdout.strip())
        f.wait("a run stored", lambda: runs_of(f, study_run_id) >= 1)
        (bin_dir / "fio").unlink()
        state = f"SELECT state FROM fleet_units WHERE study_run_id = {study_run_id}"
        f.wait("the unit ended", lambda: f.sql(state) in ("done", "failed"))
        why = f.sql(f"SELECT why FROM fleet_units WHERE study_run_id = {study_run_id}")
        assert f.sql(state) == "failed" and "runs in a row failed alike on 2 targets" in why, why
        assert "fio: command not found" in why and "\n" not in why
        assert f.sql("SELECT status, attempts FROM procrastinate_jobs") == "failed|1", "failed once, never queued again"
        by_status = f"SELECT status, count(*) FROM runs WHERE study_run_id = {study_run_id} GROUP BY 1 ORDER BY 1"
        statuses = f.sql(by_status).splitlines()
        assert statuses[0].startswith("ok|") and statuses[1].startswith("superseded|") and len(statuses) == 2, statuses
        assert status_of(f, study_run_id) == "finished" and worker.process.poll() is None, "the worker goes on"
        assert "ended with status: Error" in worker.output() and "Traceback" not in worker.output(), (
            "procrastinate's word on the job: one line"
        )
        assert f.stop(worker) == 0
