#!/usr/bin/env python3
"""A fleet's speed (issue 22, item 7): the same study of time-based runs, spread (`fslab run --on
… --spread`) over 1, 2 and 3 workers, each in a network namespace of its own, a PostgreSQL on
their bridge (tests/fleet.py, tests/netns.py, tests/postgres.py); then the summary at a team's
scale (bench/pg_scale.py).

Printed, per number of workers N: the study run's wall time (its start to its end, as the
database records them) and its ratio to 1/N of one worker's (target: at most 1.10, the division
costing at most 10 %); then the queue's own time per block, from a worker claiming it to its
first run starting (fleet_blocks, schema 12: median and max; target at most 0.2 s), and per
host's unit (claimed to its first run: the study read and checked as well). The runs are
rate-limited fio (rate_iops) with a 2 s runtime, so that what limits them is time, not this
machine's CPU: N workers on a 2-core machine can still run N at once. Printed figures: no target
is asserted (timings belong here, not in the tests).

Run (as root): .venv/bin/python bench/fleet_scale.py [--repetitions 6] [--skip-scale]
`--smoke`: 1 and 2 workers, the first target alone, 2 runs of 1 s (and bench/pg_scale.py
--smoke): proves the script runs; its figures are printed, not judged against the targets.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]
import postgres  # noqa: E402  (the tests' own cluster)
from fleet import fleet, wait_for  # noqa: E402  (the tests' own fleet: namespaces, workers)

STUDY = """\
[study]
name = "fleet-bench"
repetitions = {repetitions}
workloads = ["seq_write"]
image_size = "256MiB"
image_fill = "sparse"

[fio]
size = "{size}"
runtime = "{runtime}"
options = {{ rate_iops = 16 }}

[[target]]
name = "ext4"
filesystem = "ext4"
"""
SECOND_TARGET = """
[[target]]
name = "ext4-nojournal"
filesystem = "ext4"
mkfs_options = "-O ^has_journal"
"""


def seconds(f, query: str) -> list[float]:
    return [float(v) for v in f.sql(query).split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--repetitions",
        type=int,
        default=6,
        help="runs per cell (one block each): 6 divides among 1, 2 and 3 workers alike",
    )
    parser.add_argument(
        "--skip-scale", action="store_true", help="leave out bench/pg_scale.py's 1,000,000-run summary figure"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args()
    workers: tuple[int, ...] = (1, 2, 3)
    repetitions, size, runtime = args.repetitions, "64MiB", "2s"
    if args.smoke:
        workers, repetitions, size, runtime = (1, 2), 2, "16MiB", "1s"

    def target(said: str) -> str:
        return "smoke: not judged" if args.smoke else said

    reason = postgres.unavailable_reason()
    if reason:
        sys.exit(f"fleet: {reason}")
    with tempfile.TemporaryDirectory(prefix="fslab-bench-fleet-", dir="/var/tmp") as scratch:
        directory = Path(scratch)
        study = directory / "fleet-bench.toml"
        text = STUDY.format(repetitions=repetitions, size=size, runtime=runtime)
        study.write_text(text if args.smoke else text + SECOND_TARGET)
        walls: dict[int, float] = {}
        figures: list[str] = []  # printed again once the workers' logs (tests/fleet.py prints them) are out of the way

        def say(line: str) -> None:
            figures.append(line)
            print(line, flush=True)

        with fleet(max(workers), directory) as f:
            for i in range(max(workers)):
                f.start(i, f"h{i}")
            wait_for(
                "the workers",
                lambda: (
                    f.sql("SELECT to_regclass('procrastinate_workers')")
                    and f.sql("SELECT count(*) FROM procrastinate_workers") == str(max(workers))
                ),
                120,
            )
            for n in workers:
                # The study's own runs, as before a study without a raw target got a ceiling (issue
                # 32): what divides among workers is the same either way, and fewer runs are faster.
                on = ",".join(f"h{i}" for i in range(n))
                done = f.fslab("run", str(study), "--on", on, "--spread", "--detach", "--no-ceiling")
                if done.returncode != 0:
                    sys.exit(f"fleet: fslab run failed:\n{done.stdout}{done.stderr}")
                study_run_id = int(done.stdout.strip())

                def finished(run_id: int = study_run_id) -> bool:
                    return f.sql(f"SELECT status FROM study_runs WHERE id = {run_id}") == "finished"

                f.wait(f"the study run on {n} worker(s)", finished, 1800)
                walls[n] = seconds(
                    f, f"SELECT extract(epoch FROM finished_at - started_at) FROM study_runs WHERE id = {study_run_id}"
                )[0]
                hosts = f.sql(
                    "SELECT string_agg(host || ':' || n, ' ') FROM (SELECT host, count(*) AS n FROM "
                    f"runs WHERE study_run_id = {study_run_id} GROUP BY host ORDER BY host) AS h"
                )
                ratio = walls[n] / (walls[1] / n)
                said = f"ratio to 1/{n} of one worker's: {ratio:.3f}   ({target('target ≤ 1.10')})"
                say(f"{n} worker(s): {walls[n]:7.1f} s wall   {said}   runs per host: {hosts}")
            blocks = seconds(
                f, "SELECT extract(epoch FROM started_at - claimed_at) FROM fleet_blocks WHERE started_at IS NOT NULL"
            )
            units = seconds(
                f, "SELECT extract(epoch FROM started_at - claimed_at) FROM fleet_units WHERE started_at IS NOT NULL"
            )
            took = f"median {statistics.median(blocks):.3f} s, max {max(blocks):.3f} s"
            say(f"claim to start, per block ({len(blocks)}): {took}   ({target('target ≤ 0.2 s')})")
            say(
                f"claim to start, per host's unit ({len(units)}, the study read and checked "
                f"too): median {statistics.median(units):.3f} s, max {max(units):.3f} s"
            )
            for w in f.workers:
                f.stop(w)
        print("\n".join(["", "fleet figures:", *figures]), flush=True)
    if not args.skip_scale:
        print("the summary at a team's scale (bench/pg_scale.py):", flush=True)
        smoke = ["--smoke"] if args.smoke else []
        subprocess.run([sys.executable, str(ROOT / "bench" / "pg_scale.py"), *smoke], check=True)


if __name__ == "__main__":
    main()
