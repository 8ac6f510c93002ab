"""A fleet for real: `fslab worker`s in network namespaces, a PostgreSQL on the bridge, studies
run on them with `fslab run --on` (tests/fleet.py). Every wait is for a state, never a sleep."""

from __future__ import annotations

import re
import signal

import pytest
from fleet import fleet, wait_for
from short_studies import short_study

EXT4 = '[[target]]\nname = "ext4"\nfilesystem = "ext4"\n'


def study_file(tmp_path, repetitions: int = 2):
    path = tmp_path / "fleet.toml"
    path.write_text(short_study("fleet", EXT4, repetitions))
    return str(path)


def stored(f, study_run_id: int) -> list[tuple[str, ...]]:
    """Each (host, target, workload, repetition) stored, with how many times."""
    rows = f.sql(f"SELECT host, target, workload, repetition, count(*) FROM runs WHERE study_run_id = {study_run_id} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4")
    return [tuple(line.split("|")) for line in rows.splitlines()]


def status_of(f, study_run_id: int) -> str:
    return f.sql(f"SELECT status FROM study_runs WHERE id = {study_run_id}")


def registered(f, count: int):
    return lambda: f.sql("SELECT count(*) FROM procrastinate_workers") == str(count) if f.sql("SELECT to_regclass('procrastinate_workers')") else False


@pytest.mark.root
def test_a_study_across_three_workers_and_on_a_label(needs_root, tmp_path):
    with fleet(3, tmp_path) as f:
        for i, labels in enumerate(["ssd,nvme", "ssd", "hdd"]):
            f.start(i, f"host{i}", "--labels", labels)
        f.wait("three workers", registered(f, 3))
        done = f.fslab("run", study_file(tmp_path), "--on", "all")
        assert done.returncode == 0, done.stdout + done.stderr
        first = int(f.sql("SELECT max(id) FROM study_runs"))
        assert stored(f, first) == [(f"host{i}", "ext4", "seq_write", str(r), "1") for i in range(3) for r in (1, 2)], "every run once, each host's named by host"
        assert status_of(f, first) == "finished" and "seq_write" in done.stdout and "ext4" in done.stdout, "then the summary, as fslab run prints it"
        assert f.sql(f"SELECT string_agg(name, ',' ORDER BY name) FROM hosts WHERE study_run_id = {first}") == "host0,host1,host2"

        detached = f.fslab("run", study_file(tmp_path), "--on", "label:ssd", "--detach")
        assert detached.returncode == 0, detached.stderr
        second = int(detached.stdout.strip())
        assert second == first + 1
        f.wait("the labelled hosts' units done", lambda: status_of(f, second) == "finished")
        assert [row[0] for row in stored(f, second)] == ["host0", "host0", "host1", "host1"], "only the hosts labelled ssd"
        shown = f.fslab("status", str(second))
        assert shown.returncode == 0, shown.stderr
        assert re.search(r"host0\s+done\s+2\s+2", shown.stdout) and re.search(r"host1\s+done\s+2\s+2", shown.stdout) and "host2" not in shown.stdout, shown.stdout
        assert [f.stop(w) for w in f.workers] == [128 + signal.SIGTERM] * 3
        assert f.pg.url(password=True).split("@")[0].split(":")[-1] not in "".join(w.output() for w in f.workers) + done.stdout + done.stderr
