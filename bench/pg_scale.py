#!/usr/bin/env python3
"""The summary at a team's scale, on PostgreSQL: how long `fslab summary` of one 2,000-run study
run takes in a database of 1,000,000 runs (issue 22's target: at most 1.5 s).

A PostgreSQL cluster of the tests' own is started (tests/postgres.py: Debian's postgresql, run as
postgres, on loopback), removed afterwards. The study run summarised is stored through fslab's
own API, as the runner stores runs (tests/synthetic.py, the study of bench/report_scale.py: 10
targets × 20 workloads × 10 runs); its summary is timed first on its own. Then the database is
filled, inside the server (INSERT … SELECT from generate_series: a bench, not fslab's way), with
other study runs of the same study — its runs again, under their own ids, with METRICS of each
run's metrics — up to RUNS runs, and the summary is timed again, as a user runs it, in a process
of its own: wall time (median, min), peak RSS and the median CPU time. Each time its parts are
printed too: the time a process takes to start and load the modules a summary loads, then, in
this process (its modules loaded), the summary's time reading the database (ResultsDB's
methods), computing the statistics, printing the console's tables and writing the report files
— all but the reading the same on SQLite.

Run: .venv/bin/python bench/pg_scale.py [--runs 1000000] [--metrics 10] [--repeat 5]
(5 times, as issue 22's figure is measured: on a machine others share, compare medians of runs
made one after another, or the CPU time, which the others' load moves less.)
`--smoke`: a study run of 2 targets × 1 workload × 2 runs, filled to 40 runs, its figures once,
among them only (the study run alone is timed by the same code): proves the script runs, in
seconds; its figures are printed, not judged against the target.
`--db URL`: an empty PostgreSQL database to fill instead of a cluster of its own (the tests' own
cluster, started once for all their PostgreSQL tests); its password, if any, from PGPASSWORD.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]
import postgres  # noqa: E402  (the tests' own cluster)
from fslab.results import ResultsDB  # noqa: E402
from fslab.running import environment  # noqa: E402
from fslab.study import parse_study  # noqa: E402
from report_scale import SCALE, line, study_text, timed  # noqa: E402
from synthetic import store_study_run  # noqa: E402


def store_the_study_run(url: str, directory: Path, shape: tuple[int, int, int]) -> int:
    """The study run summarised: `shape` its targets, workloads and runs per cell."""
    study = parse_study(study_text(*shape), "scale.toml", base_dir=directory)
    study = replace(study, path=str(directory / "scale.toml"))
    db = ResultsDB(url)
    study_run_id = store_study_run(
        db, study, seed=5, rng=random.Random(5), scale=SCALE, env=environment.collect(directory)
    )
    db.engine.dispose()
    return study_run_id


def fill(url: str, study_run_id: int, runs: int, metrics: int) -> tuple[int, int]:
    """Other study runs of the same study up to `runs` runs in all; the runs and metrics now stored."""
    db = ResultsDB(url)
    with db.engine.begin() as conn:
        own = conn.execute(
            sa.text("SELECT count(*) FROM runs WHERE study_run_id = :id"), {"id": study_run_id}
        ).scalar_one()
        others = max(0, (runs - own) // own)
        conn.execute(
            sa.text("""INSERT INTO study_runs (study, study_path, study_source, scale, repetitions, plan_seed,
                       started_at, finished_at, status, environment, settings, outcome, owner, fslab_version, uid)
                   SELECT study, study_path, study_source, scale, repetitions, plan_seed + g,
                       started_at - g * interval '1 day', finished_at - g * interval '1 day', status, environment,
                       settings, outcome, owner, fslab_version, md5(g::text)
                   FROM study_runs, generate_series(1, :n) g WHERE id = :id"""),
            {"n": others, "id": study_run_id},
        )
        for table in ("targets", "workloads"):
            columns = [c for c in sa.inspect(conn).get_columns(table) if c["name"] != "study_run_id"]
            names = ", ".join(c["name"] for c in columns)
            selected = ", ".join("t." + c["name"] for c in columns)
            conn.execute(
                sa.text(
                    f"INSERT INTO {table} (study_run_id, {names}) SELECT s.id, {selected} "
                    f"FROM {table} t CROSS JOIN study_runs s WHERE t.study_run_id = :id AND s.id <> :id"
                ),
                {"id": study_run_id},
            )
        # The runs' lean columns (their job files, outputs and details are not what a summary of another
        # study run reads).
        conn.execute(
            sa.text("""INSERT INTO runs (study_run_id, target, workload, repetition, warmup, block, position,
                       started_at, finished_at, status, buffered, timings)
                   SELECT s.id, r.target, r.workload, r.repetition, r.warmup, r.block, r.position, r.started_at,
                       r.finished_at, r.status, r.buffered, r.timings
                   FROM runs r CROSS JOIN study_runs s WHERE r.study_run_id = :id AND s.id <> :id
                   ORDER BY s.id, r.id"""),
            {"id": study_run_id},
        )
        # The planner's figures for the runs just stored: without them it joins a million runs with
        # the study run's 2,000 in a nested loop (hours of CPU where a hash join takes seconds).
        conn.execute(sa.text("ANALYZE runs"))
        kept = [
            name
            for (name,) in conn.execute(
                sa.text(
                    "SELECT name FROM metrics GROUP BY name ORDER BY "
                    'bool_or("primary") DESC, bool_or(compared) DESC, name LIMIT :n'
                ),
                {"n": metrics},
            )
        ]
        conn.execute(
            sa.text("""INSERT INTO metrics (run_id, phase, name, value, unit, higher_is_better, "primary", compared)
                   SELECT f.id, m.phase, m.name, m.value * (0.9 + random() * 0.2), m.unit, m.higher_is_better,
                       m."primary", m.compared
                   FROM runs f JOIN runs r ON r.study_run_id = :id
                       AND (r.target, r.workload, r.repetition, r.warmup)
                           = (f.target, f.workload, f.repetition, f.warmup)
                   JOIN metrics m ON m.run_id = r.id AND m.name = ANY(:kept)
                   WHERE f.study_run_id <> :id"""),
            {"id": study_run_id, "kept": kept},
        )
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE"))
        counts = conn.execute(sa.text("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM metrics)")).one()
    db.engine.dispose()
    return counts[0], counts[1]


def phases(url: str, study_run_id: int, directory: Path) -> dict[str, float]:
    """Where a summary's time goes past its start, in this process (its modules loaded, scipy's
    too): reading the database (ResultsDB's methods), the statistics (the rest of
    summarize_study_run), the console (print_summary, into a pipe's width) and the report files
    (write_reports, into `directory`). Each the median of three, seconds."""
    import io

    from rich.console import Console

    from fslab.report.console import CONSOLE_WIDTH, print_summary
    from fslab.report.files import write_reports
    from fslab.report.summary import summarize_study_run

    db = ResultsDB(url)
    reading = [0.0]
    for name in (
        "study_run",
        "targets",
        "workloads",
        "runs",
        "stored_runs",
        "run_metrics",
        "sample_groups",
        "host_samples",
        "metric_values",
        "outputs_of_study_run",
        "hosts",
        "outputs",
    ):
        method = getattr(db, name)

        def timed_method(*args, _method=method, **kwargs):  # noqa: ANN002, ANN003, ANN202
            start = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                reading[0] += time.perf_counter() - start

        setattr(db, name, timed_method)
    found: dict[str, list[float]] = {
        "reading the database": [],
        "statistics": [],
        "the console": [],
        "the report files": [],
    }
    for _ in range(3):
        reading[0] = 0.0
        start = time.perf_counter()
        summary = summarize_study_run(db, study_run_id)
        computed = time.perf_counter()
        print_summary(Console(file=io.StringIO(), width=CONSOLE_WIDTH, soft_wrap=True), summary)
        printed = time.perf_counter()
        write_reports(db, summary, directory / "phases")
        written = time.perf_counter()
        for name, seconds in zip(
            found, (reading[0], computed - start - reading[0], printed - computed, written - printed)
        ):
            found[name].append(seconds)
    db.engine.dispose()
    return {name: statistics.median(seconds) for name, seconds in found.items()}


def timed_summaries(argv: list[str], env: dict, cwd: Path, repeat: int) -> tuple[list[tuple[float, int, float]], float]:
    """Each summary's wall time and peak RSS, and the median of their CPU seconds (user + system):
    on a machine others share, the CPU a summary costs is the steadier figure. Each summary is
    worked out: the view the one before kept is removed first (its report files, current, stay:
    report/kept.py), as issue 22's figure has always been measured."""
    from fslab.report.kept import VIEW

    results, cpu = [], []
    for _ in range(repeat):
        for view in (cwd / "reports").glob(f"*/{VIEW}"):  # a database server's reports: the current directory's
            view.unlink()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        results.append(timed(argv, env, cwd))  # reaps its child: its usage is added to RUSAGE_CHILDREN
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return results, statistics.median(cpu)


def start_up(env: dict, cwd: Path) -> float:
    """Seconds a process takes to start and load what `fslab summary` loads before it reads a
    row (fslab's modules, SQLAlchemy and psycopg, numpy, scipy.special for Student's t and rich's
    Markdown), as fslab loads them (OpenBLAS without its threads, __main__.py): the part of the
    figure no query or statistic can shorten."""
    modules = (
        "fslab.cli, fslab.report.formats, fslab.report.sections, "
        "sqlalchemy.dialects.postgresql.psycopg, scipy.special, rich.markdown"
    )
    return timed([sys.executable, "-c", f"import {modules}"], {**env, "OPENBLAS_NUM_THREADS": "1"}, cwd)[0]


def print_phases(env: dict, directory: Path, url: str, study_run_id: int, repeat: int) -> None:
    """The figure's parts: starting (a process of its own), then the summary's phases in this one."""
    print(
        "  of which starting (Python, the modules it loads): "
        f"{statistics.median(start_up(env, directory) for _ in range(repeat)):.2f} s"
    )
    print(
        "  then, in-process: "
        + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in phases(url, study_run_id, directory).items())
    )


@contextmanager
def database(given: str | None) -> Iterator[str]:
    """The URL of the database filled: `given`, else a new one in a cluster of the tests' own,
    started for this run and removed after it."""
    if given:
        yield given
        return
    with postgres.cluster() as cluster:
        yield cluster.new_database("scale")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1_000_000, help="runs in the database in all")
    parser.add_argument(
        "--metrics",
        type=int,
        default=10,
        help="metrics of each other run (the study run summarised keeps all of its own)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    parser.add_argument(
        "--db",
        metavar="URL",
        help="an empty PostgreSQL database to use instead of a cluster of its own (password: PGPASSWORD)",
    )
    args = parser.parse_args()
    shape = (10, 20, 10)  # targets, workloads, runs per cell: 2,000 runs
    if args.smoke:
        shape, args.runs, args.metrics, args.repeat = (2, 1, 2), 40, 2, 1
    reason = None if args.db else postgres.unavailable_reason()
    if reason:
        sys.exit(f"pg_scale: {reason}")
    with tempfile.TemporaryDirectory(prefix="fslab-pg-scale-", dir="/var/tmp") as scratch, database(args.db) as url:
        directory = Path(scratch)
        env = {**os.environ, "FSLAB_DB": url}
        summary = [sys.executable, "-m", "fslab", "summary"]
        start = time.perf_counter()
        study_run_id = store_the_study_run(url, directory, shape)
        its_runs = shape[0] * shape[1] * shape[2]
        took = time.perf_counter() - start
        print(f"stored study run {study_run_id} ({its_runs:,} runs, through fslab's API) in {took:.0f} s")
        if not args.smoke:  # the same code as among the others, below: a smoke run times it there alone
            alone, cpu = timed_summaries([*summary, str(study_run_id)], env, directory, args.repeat)
            print(line("summary, the study run alone", alone) + f"; CPU median {cpu:.2f} s")
            print_phases(env, directory, url, study_run_id, args.repeat)
        start = time.perf_counter()
        runs, metrics = fill(url, study_run_id, args.runs, args.metrics)
        print(f"filled to {runs:,} runs and {metrics:,} metrics in {time.perf_counter() - start:.0f} s")
        among, cpu = timed_summaries([*summary, str(study_run_id)], env, directory, args.repeat)
        target = None if args.smoke else 1.5  # seconds; a smoke run judges nothing
        print(line(f"summary, among {runs:,} runs", among, seconds=target) + f"; CPU median {cpu:.2f} s")
        print_phases(env, directory, url, study_run_id, args.repeat)


if __name__ == "__main__":
    main()
