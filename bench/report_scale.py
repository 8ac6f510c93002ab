#!/usr/bin/env python3
"""Reports at scale: how long `fslab summary` and `fslab report` take, and how much memory, on a
database of issue 11's size — 5 study runs of one study, each 10 targets × 20 workloads × 10
runs (10,000 runs).

The database is built through fslab's own API, as the runner stores runs, by the tests' own
builder (tests/synthetic.py: real fio output with seeded noise, the monitors' metrics, fio's
logs, device facts, job files). The study itself (raw, ext4, XFS and Btrfs variants under
built-in and own fio workloads) is stored as its text, as `fslab run` stores it.

Then the real command line runs as a user runs it, each command several times, in a process of
its own: wall time (median, min) and the child's peak RSS (os.wait4's ru_maxrss), each against
issue 11's target —
  - `fslab summary ID`           at most 1 s,
  - `fslab report ID -o DIR`     at most 3 s and 500 MB,
  - `fslab report ID -o DIR --figures` (the statistics' charts also as SVG figures; those of a run's
    course over time only with --time-figures, docs/report.md) at most 10 s (issue 32),
  - the database's room per run, every raw output, log and bin kept, at most 36 KB (issue 32);
each line with the load average as its runs began and ended (→): the wall times are only as good
as the machine was quiet (its CPU time, printed beside, is steadier), and every judged line again
together at the end ("each target, side by side").
Then a team's database (--team, 100,000 runs unless told; 0: left out): the same database with
its study runs copied in it, by SQL, until it holds that many runs, where the newest study run's
`fslab summary` and `fslab report` must still meet their targets, and `fslab history` (the list of
study runs) is timed as information. It is built beside the first (team.db) and deleted after,
unless --keep.
And, as information (no target), `fslab summary ID` with its report files deleted first (it
works the summary out and writes them all again; `fslab run` writes them as it ends, so a summary
asked for later finds them current — the runs files while the runs are the same, summary.* and
comparisons.csv while what they are made of is — and prints the view it kept beside them,
docs/reports.md), and with only that view removed (worked out, its files current: the summary's
figure before it kept one), `fslab report ID --time-figures` (every chart of the page as a figure)
and `fslab report ID --png` (each figure of --figures as PNG too). ID is the last study run.

Run: .venv/bin/python bench/report_scale.py [--keep DIR] [--repeat 3] [--team RUNS (100000)]
                                            [--study-runs 5 --targets 10 --workloads 20 --runs 10]
The database goes into a temporary directory in /var/tmp, deleted afterwards, unless --keep
names a directory to build it in and keep it (DIR/scale.db, used as it is when it is there).
`--smoke`: one study run of 2 targets × 1 workload × 2 runs (a team's database of 3 copies of it),
`fslab summary` and `fslab report` once each — not the summary with its report files deleted (no
target), nor --figures or --png (drawing every chart again, which tests/test_report_html.py
proves): proves the script runs, in seconds; its figures are printed, not judged against the
targets.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import sqlalchemy as sa

from fslab.core.names import file_name
from fslab.report.kept import VIEW
from fslab.results import ResultsDB, schema as tables
from fslab.running import environment
from fslab.study import parse_study

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from synthetic import store_study_run, study_run_of  # noqa: E402  (the tests' builder of stored study runs)

# Targets as a study would name them: the raw device (the physical reference), then ext4, XFS
# and Btrfs with and without options; the first N are taken.
TARGETS = [
    ("raw", "raw", None),
    ("ext4", "ext4", "defaults"),
    ("xfs", "xfs", "defaults"),
    ("btrfs", "btrfs", "defaults"),
    ("ext4-noatime", "ext4", "noatime"),
    ("xfs-noatime", "xfs", "noatime"),
    ("btrfs-zstd", "btrfs", "compress=zstd"),
    ("ext4-writeback", "ext4", "noatime,data=writeback"),
    ("btrfs-nodatacow", "btrfs", "nodatacow"),
    ("xfs-logbufs", "xfs", "noatime,logbufs=8"),
]
# Built-in workloads, then the study's own; the first N are taken.
BUILTIN = [
    "seq_read", "seq_write", "rand_read", "rand_write",
    "SEQ1M_Q8T1_read", "SEQ1M_Q8T1_write", "SEQ1M_Q1T1_read", "SEQ1M_Q1T1_write",
    "RND4K_Q32T1_read", "RND4K_Q32T1_write", "RND4K_Q1T1_read", "RND4K_Q1T1_write",
    "video_read", "video_write", "nas_metadata", "nas_mixed",
]  # fmt: skip
OWN = {
    "mixed_128k": {"rw": "randrw", "rwmixread": 60, "bs": "128k", "iodepth": 16},
    "rand_read_64k": {"rw": "randread", "bs": "64k", "iodepth": 8},
    "seq_write_qd1": {"rw": "write", "bs": "128k", "iodepth": 1},
    "oltp_8k": {"rw": "randrw", "rwmixread": 70, "bs": "8k", "iodepth": 32},
}
# Target scale of throughput (latency by its inverse): targets differ as filesystems do.
SCALE = {
    "raw": 1.0,
    "ext4": 0.93,
    "xfs": 0.95,
    "btrfs": 0.78,
    "ext4-noatime": 0.94,
    "xfs-noatime": 0.96,
    "btrfs-zstd": 0.7,
    "ext4-writeback": 0.97,
    "btrfs-nodatacow": 0.86,
    "xfs-logbufs": 0.95,
}


PER_RUN = 36e3  # issue 32's target: the database's bytes per run, every raw output kept


def study_text(targets: int, workloads: int, runs: int) -> str:
    builtin = BUILTIN[:workloads]
    own = list(OWN)[: max(0, workloads - len(BUILTIN))]
    lines = [
        "[study]", 'name = "scale"', f"repetitions = {runs}", f"workloads = {json.dumps(builtin)}",
        'image_size = "16GiB"', "",
        "[fio]", 'size = "2GiB"', 'runtime = "30s"', 'ramp_time = "2s"', "",
    ]  # fmt: skip
    for name, filesystem, options in TARGETS[:targets]:
        lines += (
            ["[[target]]", f'name = "{name}"', f'filesystem = "{filesystem}"']
            + ([f'mount_options = "{options}"'] if options else [])
            + [""]
        )
    for name in own:
        lines += ["[[workload]]", f'name = "{name}"'] + [f"{k} = {json.dumps(v)}" for k, v in OWN[name].items()] + [""]
    return "\n".join(lines)


def build(path: Path, args: argparse.Namespace) -> int:
    """The synthetic database; returns the last study run's id."""
    study = parse_study(study_text(args.targets, args.workloads, args.runs), "scale.toml", base_dir=path.parent)
    study = replace(study, path=str(path.parent / "scale.toml"))
    env = environment.collect(path.parent)
    db = ResultsDB(str(path))
    rng = random.Random(11)
    last = 0
    for _ in range(args.study_runs):
        last = store_study_run(db, study, seed=rng.randrange(2**32), rng=rng, scale=SCALE, env=env)
    db.engine.dispose()
    return last


# What a copy of a study run shifts, by table: its id and every id that points at one (a study
# run's, a run's), and its uid (unique). Every table of the schema but schema_info is here: a
# table added without a line here fails the copy (grown_team).
SHIFTED = {
    "study_runs": {"id": "study_run", "uid": "uid"},
    "targets": {"study_run_id": "study_run"},
    "workloads": {"study_run_id": "study_run"},
    "hosts": {"study_run_id": "study_run"},
    "runs": {"id": "run", "study_run_id": "study_run"},
    "metrics": {"run_id": "run"},
    "run_outputs": {"run_id": "run"},
    "run_histograms": {"run_id": "run"},
    "fleet_units": {"study_run_id": "study_run"},
    "fleet_blocks": {"study_run_id": "study_run"},
    "fleet_workers": {},
}


def grown_team(source: Path, team: Path, runs_wanted: int) -> tuple[int, int]:
    """`team`: `source` (an SQLite results database) with its study runs copied into it, shifted
    past the last, until it holds at least `runs_wanted` runs; its newest study run's id and its
    runs. By SQL in the database itself (INSERT … SELECT): storing 100,000 runs through the API
    would take most of an hour, and the copies are the same rows a run stores."""
    team.unlink(missing_ok=True)
    with sqlite3.connect(source) as src, sqlite3.connect(team) as dst:
        src.backup(dst)
    con = sqlite3.connect(team)
    try:
        left = set(tables.metadata.tables) - set(SHIFTED) - {"schema_info"}
        if left:
            sys.exit(f"bench/report_scale.py: SHIFTED says nothing of table(s) {', '.join(sorted(left))}: add them")
        last_study_run, last_run, runs = con.execute(
            "SELECT (SELECT max(id) FROM study_runs), (SELECT max(id) FROM runs), (SELECT count(*) FROM runs)"
        ).fetchone()
        for copy in range(1, math.ceil(runs_wanted / runs)):
            shift = {"study_run": last_study_run * copy, "run": last_run * copy}
            for name, shifted in SHIFTED.items():
                columns = [c.name for c in tables.metadata.tables[name].columns]
                chosen = [
                    f"uid || '-{copy}'"
                    if shifted.get(c) == "uid"
                    else f'"{c}" + {shift[shifted[c]]}'
                    if c in shifted
                    else f'"{c}"'
                    for c in columns
                ]
                listed = ", ".join(f'"{c}"' for c in columns)
                con.execute(
                    f'INSERT INTO "{name}" ({listed}) SELECT {", ".join(chosen)} FROM "{name}" '
                    f"WHERE {_originals(name, shifted, last_study_run, last_run)}"
                )
            con.commit()
        newest, total = con.execute("SELECT max(id), (SELECT count(*) FROM runs) FROM study_runs").fetchone()
    finally:
        con.close()
    return newest, total


def _originals(table: str, shifted: dict[str, str], last_study_run: int, last_run: int) -> str:
    """The rows of the source's own study runs (the copies are copied from them, not copied again)."""
    if "study_run_id" in shifted or table == "study_runs":
        return f"{'id' if table == 'study_runs' else 'study_run_id'} <= {last_study_run}"
    if "run_id" in shifted:
        return f"run_id <= {last_run}"
    return "0"  # fleet_workers: a worker's row is its host's, not a study run's


def load() -> float:
    """The machine's load average over the last minute: beside each figure, as the wall times are
    only as good as the machine was quiet (2 cores shared with other work: CPU time is steadier)."""
    return os.getloadavg()[0]


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (bytes) and CPU seconds of one command, in a process of its own
    (os.wait4 returns that very child's resource usage): on a busy machine the CPU time is the
    steadier figure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        if child.returncode != 0:
            err.seek(0)
            out.seek(0)
            sys.exit(
                f"{' '.join(argv)} failed ({child.returncode}):\n"
                f"{out.read().decode()[-2000:]}\n{err.read().decode()[-4000:]}"
            )
    return seconds, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def stored(path: Path) -> tuple[int, int]:
    """Study runs and runs in the database."""
    db = ResultsDB(str(path))
    with db.engine.connect() as conn:
        runs = conn.execute(sa.select(sa.func.count()).select_from(tables.runs)).scalar_one()
    return len(db.study_runs()), runs


# Each judged figure's line, gathered as they are measured, printed again together at the end.
JUDGED: list[str] = []


def measured(
    name: str,
    argv: list[str],
    env: dict,
    cwd: Path,
    times: int,
    seconds: float | None = None,
    memory: float | None = None,
) -> str:
    """A command run `times` times, its line (line), with the load average before and after."""
    before = load()
    results = [timed(argv, env, cwd) for _ in range(times)]
    return line(name, results, seconds, memory, (before, load()))


def line(
    name: str,
    results: list[tuple[float, int, float]],
    seconds: float | None = None,
    memory: float | None = None,
    loads: tuple[float, float] | None = None,
) -> str:
    """A command's figures: wall time (median, min of the runs), CPU time (median) and peak RSS, against its
    targets, with the load average as it began and ended; a judged one is kept for the closing lines (JUDGED)."""
    times = [t for t, _, _ in results]
    peak = max(r for _, r, _ in results)
    cpu = statistics.median(c for _, _, c in results)
    said = (
        f"{name:<40} {len(results)}×: median {statistics.median(times):6.2f} s, "
        f"min {min(times):6.2f} s, CPU {cpu:6.2f} s, peak RSS {peak / 1e6:4.0f} MB"
    )
    if loads is not None:
        said += f", load {loads[0]:.1f}→{loads[1]:.1f}"
    if seconds is not None:
        said += f"   target ≤ {seconds:g} s: {'met' if statistics.median(times) <= seconds else 'OVER'}"
    if memory is not None:
        said += f"; ≤ {memory / 1e6:.0f} MB: {'met' if peak <= memory else 'OVER'}"
    if seconds is not None or memory is not None:
        JUDGED.append(said)
    return said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="build the database in DIR and keep it (reused if it is there)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command")
    parser.add_argument("--study-runs", type=int, default=5)
    parser.add_argument("--targets", type=int, default=10, choices=range(2, len(TARGETS) + 1))
    parser.add_argument("--workloads", type=int, default=20, choices=range(1, len(BUILTIN) + len(OWN) + 1))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--team", type=int, default=100_000, metavar="RUNS", help="runs in the team's database (0: left out)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args()
    if args.smoke:
        args.repeat, args.study_runs, args.targets, args.workloads, args.runs, args.team = 1, 1, 2, 1, 2, 12
    with tempfile.TemporaryDirectory(prefix="fslab-report-scale-", dir="/var/tmp") as tmp:
        root = args.keep.absolute() if args.keep else Path(tmp)
        root.mkdir(exist_ok=True)
        path = root / "scale.db"
        reused = path.exists()
        start = time.perf_counter()
        last = study_run_of(ResultsDB(str(path)))["id"] if reused else build(path, args)
        built = time.perf_counter() - start
        study_runs, runs = stored(path)
        size = sum(p.stat().st_size for p in root.glob("scale.db*"))
        shape = "" if reused else f" ({args.targets} targets × {args.workloads} workloads × {args.runs} runs each)"
        print(
            f"database: {study_runs} study runs{shape}, {runs} runs, {size / 1e6:.0f} MB, "
            + (f"reused: {path}" if reused else f"built in {built:.0f} s")
        )
        per_run = size / runs
        judged = "" if args.smoke else f"   target ≤ {PER_RUN / 1e3:g} KB: {'met' if per_run <= PER_RUN else 'OVER'}"
        print(f"room per run (every raw output, log and bin kept): {per_run / 1e3:.1f} KB{judged}")
        if judged:
            JUDGED.append(f"{'room per run':<40} {per_run / 1e3:.1f} KB{judged}")
        env = os.environ | {"PYTHONPATH": str(ROOT / "src"), "FSLAB_DB": str(path)}
        # As an installed fslab starts: from compiled bytecode (pip compiles it as it installs;
        # without it every start compiles fslab's modules again, a tenth of a second).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        compileall.compile_dir(ROOT / "src" / "fslab", quiet=1)
        fslab = [sys.executable, "-m", "fslab"]
        out = Path(tmp)
        summary_files = root / "reports" / file_name(f"scale-{last}")
        kept = summary_files.exists()
        summary = [*fslab, "summary", str(last)]
        print(
            f"each command in a process of its own ({sys.executable} "
            f"-m fslab, fslab from {ROOT / 'src'}), the last study run:"
        )
        # `fslab run` writes the report files as it ends, so a summary asked for later finds them
        # current and leaves them; without them (deleted), it writes them all (no target: a smoke
        # run leaves it out).
        # Then worked out with its files current (the view it kept, report/kept.py, removed: the
        # summary's figure before it kept one), and then as kept (judged, below).
        for name, removed in (("writing its files", "*"), ("worked out, its files current", VIEW)):
            results = []
            loads = load()
            for _ in range(0 if args.smoke else args.repeat):
                for written in summary_files.glob(removed):
                    written.unlink()
                results.append(timed(summary, env, out))
            if results:
                print(line(f"fslab summary {last} ({name})", results, loads=(loads, load())), flush=True)

        def target(value: float) -> float | None:
            return None if args.smoke else value  # a smoke run judges nothing

        commands = [
            (f"fslab summary {last}", summary, target(1.0), None, args.repeat),
            (
                f"fslab report {last}",
                [*fslab, "report", str(last), "-o", str(out / "page")],
                target(3),
                target(500e6),
                args.repeat,
            ),
            # The page's drawing again, its charts as figures: tests/test_report_html.py proves
            # it, so a smoke run leaves them out. --time-figures (the charts of a run's course
            # over time too) and --png (each figure as PNG too) have no target.
            (
                f"fslab report {last} --figures",
                [*fslab, "report", str(last), "-o", str(out / "figures"), "--figures"],
                target(10.0),
                None,
                0 if args.smoke else args.repeat,
            ),
            (
                f"fslab report {last} --time-figures",
                [*fslab, "report", str(last), "-o", str(out / "time-figures"), "--time-figures"],
                None,
                None,
                0 if args.smoke else 1,
            ),
            (
                f"fslab report {last} --png",
                [*fslab, "report", str(last), "-o", str(out / "png"), "--png"],
                None,
                None,
                0 if args.smoke else 1,
            ),
        ]
        for name, argv, seconds, memory, times in commands:
            if not times:
                print(f"{name:<30} left out: a smoke run draws no figures", flush=True)
                continue
            print(measured(name, argv, env, out, times, seconds, memory), flush=True)
        if not kept:  # what `fslab summary` wrote beside the database
            shutil.rmtree(summary_files, ignore_errors=True)
            with contextlib.suppress(OSError):
                (root / "reports").rmdir()
        if args.team:
            team_database(root, args, fslab, env, out, target)
        if JUDGED:
            print("each target, side by side (wall time's median; the load average as it began→ended):")
            for said in JUDGED:
                print(f"  {said.strip()}")


def team_database(root: Path, args: argparse.Namespace, fslab: list[str], env: dict, out: Path, target) -> None:
    """The newest study run's summary and page in a team's database of args.team runs (grown_team)."""
    team = root / "team.db"
    start = time.perf_counter()
    reused = args.keep and team.exists() and stored(team)[1] >= args.team
    newest, runs = (
        (study_run_of(ResultsDB(str(team)))["id"], stored(team)[1])
        if reused
        else grown_team(root / "scale.db", team, args.team)
    )
    size = sum(p.stat().st_size for p in root.glob("team.db*"))
    print(
        f"a team's database: {runs} runs, {size / 1e6:.0f} MB, "
        + (f"reused: {team}; " if reused else f"copied in {time.perf_counter() - start:.0f} s; ")
        + "its newest study run:"
    )
    env = env | {"FSLAB_DB": str(team)}
    try:
        commands = [  # the first summary writes the report files (once), as `fslab run` does as it ends
            (f"fslab summary {newest} (writing its files)", [*fslab, "summary", str(newest)], None, None, 1),
            (f"fslab summary {newest}", [*fslab, "summary", str(newest)], target(1.0), None, args.repeat),
            ("fslab history", [*fslab, "history"], None, None, args.repeat),
            (
                f"fslab report {newest}",
                [*fslab, "report", str(newest), "-o", str(out / "team")],
                target(3),
                target(500e6),
                args.repeat,
            ),
        ]
        # a smoke run: the copy read by one summary, in seconds
        for name, argv, seconds, memory, times in commands[1:2] if args.smoke else commands:
            print(measured(f"  {name} ({runs} runs)", argv, env, out, times, seconds, memory), flush=True)
    finally:
        if not args.keep:
            for path in root.glob("team.db*"):
                path.unlink()
        shutil.rmtree(root / "reports" / file_name(f"scale-{newest}"), ignore_errors=True)
        with contextlib.suppress(OSError):
            (root / "reports").rmdir()


if __name__ == "__main__":
    main()
