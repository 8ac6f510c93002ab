"""When fio's own figures began (its epoch), which the monitors count from: found from a real
fio run's JSON and logs (tests/fixtures/fio/epoch: two jobs reported as one group, a 300 ms ramp,
windows of 100 ms, stamped on the monotonic clock), and from synthetic stamps."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from fslab.fio.epoch import job_epoch_ms, stamps_of
from fslab.fio.output import throughput_over_time
from fslab.fio.workload import epoch_ms, stored_logs, taken_logs

EPOCH = FIXTURES / "fio" / "epoch"
OUTPUT = (EPOCH / "ramped-2jobs.json").read_text()
FILES = {p.name: p.read_text() for p in sorted(EPOCH.glob("fslab_*.log"))}
WALL_LESS_MONOTONIC_MS = float((EPOCH / "wall_less_monotonic_ms").read_text())
[GROUP] = json.loads(OUTPUT)["jobs"]  # group_reporting: fio sums the two jobs' run times
RUN_TIME_MS = GROUP["job_runtime"] / 2


def job_stamps(job: int, kinds: tuple[str, ...] = ("bw", "lat")) -> list[int]:
    return sorted(s for kind in kinds for s in stamps_of(FILES[f"fslab_{kind}.{job}.log"]))


def test_the_epoch_is_the_last_stamp_less_the_run_time_on_the_windows_grid():
    """Each job's latency log ends with the window it was in when it ended, stamped at its run
    time: its last stamp less its run time is its epoch (to within the jobs' few ms apart), and
    its windows, logged late or not, end at whole windows after it."""
    epoch = epoch_ms(OUTPUT, FILES, 100, WALL_LESS_MONOTONIC_MS)
    for job in (1, 2):
        assert job_stamps(job)[-1] - RUN_TIME_MS == pytest.approx(epoch, abs=40)
        assert min((s - epoch) % 100 for s in job_stamps(job, ("bw",))) <= 2, "some window logged on time"
    assert epoch == min(job_epoch_ms(job_stamps(job), 100, RUN_TIME_MS) for job in (1, 2))
    assert all(s > epoch for job in (1, 2) for s in job_stamps(job)), "no window ends before it"


def shifted(job: int, ms: int) -> dict[str, str]:
    """The fixture's logs with job `job`'s stamps `ms` later, as if it had begun then."""

    def later(text: str) -> str:
        return "".join(f"{int(line.split(',')[0]) + ms},{line.split(',', 1)[1]}\n" for line in text.splitlines())

    return {name: later(text) if f".{job}." in name else text for name, text in FILES.items()}


def test_the_run_counts_from_its_earliest_job():
    assert epoch_ms(OUTPUT, shifted(2, 300), 100, WALL_LESS_MONOTONIC_MS) == job_epoch_ms(
        job_stamps(1), 100, RUN_TIME_MS
    )
    assert epoch_ms(OUTPUT, shifted(1, 300), 100, WALL_LESS_MONOTONIC_MS) == job_epoch_ms(
        job_stamps(2), 100, RUN_TIME_MS
    )


def test_a_job_that_logged_nothing_falls_back_on_fios_report():
    """fio's report, stamped on the wall clock after it reaped its jobs, less a job's run time,
    turned to the monotonic clock: the moment, late by tens of ms."""
    silent = {name: "" for name in FILES}
    fallback = epoch_ms(OUTPUT, silent, 100, WALL_LESS_MONOTONIC_MS)
    assert fallback == pytest.approx(json.loads(OUTPUT)["timestamp_ms"] - WALL_LESS_MONOTONIC_MS - RUN_TIME_MS)
    logged = epoch_ms(OUTPUT, FILES, 100, WALL_LESS_MONOTONIC_MS)
    assert logged <= fallback < logged + 500
    one = {name: ("" if ".2." in name else text) for name, text in FILES.items()}
    assert epoch_ms(OUTPUT, one, 100, WALL_LESS_MONOTONIC_MS) == min(
        job_epoch_ms(job_stamps(1), 100, RUN_TIME_MS), fallback
    ), "the jobs still two"
    assert epoch_ms("fio: no JSON at all", FILES, 100, WALL_LESS_MONOTONIC_MS) is None


def test_windows_fio_skipped_or_logged_late_are_seen_through():
    """Synthetic stamps of a job whose epoch is at 10 000 ms, windows of 100 ms: most logged on
    time or 1 ms early, some late, the first two skipped (under load), and the window it ended
    in logged at its run time."""
    stamps = [10_300, 10_399, 10_500, 10_647, 10_700, 10_801, 10_900, 10_990 + 43, 11_100, 11_163]
    assert job_epoch_ms(stamps, 100, 1_163) == 10_000
    assert job_epoch_ms(stamps, 100, 1_163 + 2) == 10_000, "its run time measured a ms or two before"
    assert job_epoch_ms(stamps, 100, None) == 10_200, (
        "without its run time: the first window logged taken for the first"
    )
    assert job_epoch_ms([], 100, 1_000) is None


def test_stored_logs_chart_from_the_epoch_and_logs_stored_before_from_their_own_stamps(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    files = taken_logs(tmp_path)
    assert list(tmp_path.iterdir()) == [], "every log taken, the latency logs too"
    epoch = epoch_ms(OUTPUT, files, 100, WALL_LESS_MONOTONIC_MS)
    [output] = stored_logs("", files, 100, epoch)
    assert sorted(json.loads(output.text)["files"]) == [
        "fslab_bw.1.log",
        "fslab_bw.2.log",
        "fslab_iops.1.log",
        "fslab_iops.2.log",
    ]
    [write] = throughput_over_time(output.text)
    assert 0.1 <= write.seconds[0] < 0.2 and write.seconds[-1] == pytest.approx(1.0, abs=0.1), (
        "windows from fio's epoch"
    )
    before = json.dumps(
        {"log_avg_msec": 100, "files": {"fslab_bw.1.log": "100, 4, 1, 0, 0\n200, 4, 1, 0, 0\n"}}
    )  # no epoch_ms
    assert throughput_over_time(before)[0].seconds == [0.1, 0.2]
