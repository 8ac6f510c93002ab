"""The fio JSON parser on output produced by real fio (tests/fixtures/fio, see regenerate.sh)."""

import json
import shutil

import pytest

from conftest import FIXTURES
from fslab.fio.jobs import option_problem
from fslab.fio.output import (
    BINS_TOOL,
    LATENCIES,
    LOG_TOOL,
    PERCENTILES,
    bin_columns,
    latency_bins,
    load_json,
    parse_metrics,
    percentile_from_bins,
    stored_bins,
    stored_latency_bins,
    throughput_over_time,
)
from fslab.fio.workload import (
    FIXED_OPTIONS,
    MEASUREMENT_OPTIONS,
    log_interval_ms,
    log_options,
    stored_logs,
    taken_logs,
)

FIO = FIXTURES / "fio"


def fixture(name: str) -> tuple[str, dict]:
    text = (FIO / f"{name}.json").read_text()
    return text, json.loads(text)


def by_name(metrics):
    return {m.name: m for m in metrics}


def fio_percentile(clat: dict, percent: float) -> float:
    return clat["percentile"][f"{percent:.6f}"]


def test_single_job_random_read():
    text, raw = fixture("randread-qd16")
    job = raw["jobs"][0]
    metrics = by_name(parse_metrics(text))
    assert metrics["read_iops"].value == pytest.approx(job["read"]["iops"])
    assert metrics["read_mb_s"].value == pytest.approx(job["read"]["bw_bytes"] / 1e6)
    assert metrics["read_mib_s"].value == pytest.approx(job["read"]["bw_bytes"] / 2**20)
    assert metrics["read_lat_mean_us"].value == pytest.approx(job["read"]["lat_ns"]["mean"] / 1e3)
    assert metrics["read_clat_mean_us"].value == pytest.approx(job["read"]["clat_ns"]["mean"] / 1e3)
    assert metrics["read_slat_mean_us"].value == pytest.approx(job["read"]["slat_ns"]["mean"] / 1e3)
    assert metrics["cpu_usr_pct"].value == pytest.approx(job["usr_cpu"])
    assert metrics["cpu_sys_pct"].value == pytest.approx(job["sys_cpu"])
    assert not any(name.startswith("write_") for name in metrics), "a read-only job has no write metrics"


def test_percentiles_from_bins_reproduce_fios_own():
    for name in ("randread-qd16", "seqwrite-1m", "randrw-2jobs", "buffered-randwrite"):
        _, raw = fixture(name)
        for job in raw["jobs"]:
            for direction in ("read", "write"):
                for kind in LATENCIES:
                    stats = job[direction][f"{kind}_ns"]
                    if not stats["N"] or "bins" not in stats:
                        continue
                    for percent in PERCENTILES.values():
                        assert percentile_from_bins(stats["bins"], percent) == fio_percentile(stats, percent), (
                            name,
                            direction,
                            kind,
                            percent,
                        )


def test_units_and_directions():
    metrics = by_name(parse_metrics(fixture("buffered-randwrite")[0]))
    assert (metrics["write_iops"].unit, metrics["write_iops"].higher_is_better) == ("IOPS", True)
    assert (metrics["write_mb_s"].unit, metrics["write_mib_s"].unit) == ("MB/s", "MiB/s")
    for kind in LATENCIES:
        assert (metrics[f"write_{kind}_p99_us"].unit, metrics[f"write_{kind}_p99_us"].higher_is_better) == ("µs", False)
    assert metrics["cpu_sys_pct"].higher_is_better is False


def test_latency_is_total_latency_where_submission_dominates():
    # buffered libaio writes: io_submit does the whole I/O, so slat is most of each I/O's time
    text, raw = fixture("buffered-randwrite")
    jobs = raw["jobs"]
    metrics = {name: m.value for name, m in by_name(parse_metrics(text)).items()}
    assert metrics["write_lat_mean_us"] == pytest.approx(
        metrics["write_slat_mean_us"] + metrics["write_clat_mean_us"], rel=0.01
    )
    assert metrics["write_slat_mean_us"] > 2 * metrics["write_clat_mean_us"], (
        "the fixture is one where submission dominates"
    )
    for name, percent in PERCENTILES.items():
        merged: dict[str, int] = {}
        for job in jobs:
            for value, n in job["write"]["lat_ns"]["bins"].items():
                merged[value] = merged.get(value, 0) + n
        assert metrics[f"write_lat_{name}_us"] == percentile_from_bins(merged, percent) / 1e3, (
            "total-latency percentiles come from lat bins"
        )
    assert metrics["write_lat_p99_us"] > 3 * metrics["write_clat_p99_us"], (
        "clat's p99 would understate what the application waits"
    )
    assert metrics["write_slat_p99_us"] > metrics["write_clat_p99_us"]


def test_a_run_without_total_latency_bins_has_no_total_latency_percentiles():
    # the older fixtures ran without lat_percentiles, as runs stored before fslab set it
    text, raw = fixture("seqwrite-1m")
    assert "bins" not in raw["jobs"][0]["write"]["lat_ns"]
    metrics = by_name(parse_metrics(text))
    assert metrics["write_lat_mean_us"].value == pytest.approx(raw["jobs"][0]["write"]["lat_ns"]["mean"] / 1e3)
    assert "write_clat_p99_us" in metrics
    assert not [name for name in metrics if name.startswith("write_lat_p")], (
        "never clat's percentiles in total latency's place"
    )


def test_fslabs_own_options_are_on_the_allow_list():
    assert MEASUREMENT_OPTIONS.items() <= FIXED_OPTIONS.items()
    assert all(option_problem(name, value) is None for name, value in FIXED_OPTIONS.items())


def test_separately_reported_jobs_are_merged():
    text, raw = fixture("randrw-2jobs")
    jobs = raw["jobs"]
    assert len(jobs) == 2, "the fixture has two jobs without group_reporting"
    metrics = by_name(parse_metrics(text))
    for direction in ("read", "write"):
        parts = [j[direction] for j in jobs]
        assert metrics[f"{direction}_iops"].value == pytest.approx(sum(p["iops"] for p in parts))
        assert metrics[f"{direction}_mb_s"].value == pytest.approx(sum(p["bw_bytes"] for p in parts) / 1e6)
        weighted = sum(p["lat_ns"]["mean"] * p["lat_ns"]["N"] for p in parts) / sum(p["lat_ns"]["N"] for p in parts)
        assert metrics[f"{direction}_lat_mean_us"].value == pytest.approx(weighted / 1e3)
        per_job = [fio_percentile(p["clat_ns"], 99.0) / 1e3 for p in parts]
        assert min(per_job) <= metrics[f"{direction}_clat_p99_us"].value <= max(per_job)
    assert metrics["cpu_usr_pct"].value == pytest.approx(sum(j["usr_cpu"] for j in jobs))


def test_notices_before_the_json_are_skipped():
    text, _ = fixture("randread-qd16")
    assert load_json("fio: some notice\n" + text)["jobs"]


def test_output_without_json_is_an_error():
    with pytest.raises(ValueError, match="no JSON"):
        load_json("fio: file hash not empty on exit\n")


def test_the_summary_says_when_submission_dominates():
    from fslab.report.sections import table_rows
    from fslab.report.summary import CellSummary
    from fslab.statistics.stats import summarize

    def cell(name: str) -> CellSummary:
        metrics = parse_metrics(fixture(name)[0])
        return CellSummary("w", "t", 0, {m.name: summarize([m.value, m.value], m.higher_is_better) for m in metrics})

    buffered = table_rows(cell("buffered-randwrite"))[0]
    assert (
        "write: submission takes" in buffered[-1]
        and "(slat dominates: the I/O is done while it is submitted" in buffered[-1]
    )
    assert buffered[-5:-1] != ["–"] * 4, "total-latency percentiles shown"
    assert "submission" not in table_rows(cell("randread-qd16"))[0][-1], "direct reads at QD16 wait in completion"
    assert table_rows(cell("randread-qd16"))[0][-5:-1] == ["–"] * 4, (
        "a run without lat bins shows no total-latency percentile, not clat's"
    )


# --- throughput over time: fio's bandwidth and IOPS logs -------------------------------------


def logs_of(tmp_path, *names):
    """The logs of randrw-logged.fio (two jobs, windows of 100 ms, stamped from fio's epoch as fio
    did before fslab asked for its monotonic clock) as a run stores them, collected from its
    scratch directory, which also holds what is no log of fslab's, and a latency log."""
    for name in names:
        shutil.copy(FIO / "logs" / name, tmp_path / name)
    (tmp_path / "job.fio").write_text("[job]\n")
    (tmp_path / "other_bw.1.log").write_text("100, 5, 0, 0, 0\n")  # a log fslab never asks for
    (tmp_path / "fslab_lat.1.log").write_text("100, 5, 0, 0, 0\n")  # read for the epoch, not stored
    return stored_logs("", taken_logs(tmp_path), log_interval_ms(2), None)


def test_logs_are_collected_and_removed_from_the_scratch_directory(tmp_path):
    [output] = logs_of(tmp_path, *(p.name for p in (FIO / "logs").iterdir()))
    assert output.tool == LOG_TOOL and output.phase == ""
    stored = json.loads(output.text)
    assert stored["log_avg_msec"] == log_interval_ms(2) == 100
    assert list(stored["files"]) == ["fslab_bw.1.log", "fslab_bw.2.log", "fslab_iops.1.log", "fslab_iops.2.log"]
    assert stored["files"]["fslab_bw.1.log"] == (FIO / "logs" / "fslab_bw.1.log").read_text(), "as fio wrote it"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.fio", "other_bw.1.log"]
    assert stored_logs("", taken_logs(tmp_path), 100, None) == [], "nothing logged, nothing stored"


def test_throughput_over_time_adds_the_jobs_up_window_by_window(tmp_path):
    [output] = logs_of(tmp_path, *(p.name for p in (FIO / "logs").iterdir()))
    _, raw = fixture("randrw-logged")
    [job] = raw["jobs"]  # group_reporting: both jobs as one
    found = {t.direction: t for t in throughput_over_time(output.text)}
    assert set(found) == {"read", "write"}
    for direction, t in found.items():
        assert len(t.seconds) >= 15 and all(abs(second - 0.1 * k) < 0.01 for k, second in enumerate(t.seconds, 1)), (
            "100 ms windows, stamped a little late"
        )
        mean_iops, mean_bytes_s = sum(t.iops) / len(t.iops), sum(t.bytes_s) / len(t.bytes_s)
        assert mean_iops == pytest.approx(job[direction]["iops"], rel=0.03), "the windows average to fio's own figure"
        assert mean_bytes_s == pytest.approx(job[direction]["bw_bytes"], rel=0.03)
    first = {
        name: (FIO / "logs" / name).read_text().splitlines()[0] for name in ("fslab_iops.1.log", "fslab_iops.2.log")
    }
    assert found["read"].iops[0] == sum(float(line.split(",")[1]) for line in first.values()), "both jobs' first window"


def test_one_job_logged_alone_is_its_own_throughput(tmp_path):
    [output] = logs_of(tmp_path, "fslab_bw.1.log")
    found = throughput_over_time(output.text)
    assert [t.direction for t in found] == ["read", "write"]
    assert all(iops == 0 for t in found for iops in t.iops), "no IOPS log: none, not guessed"


def test_log_windows_fit_the_run():
    assert [log_interval_ms(s) for s in (0, 1, 2, 10, 60, 61, 3600)] == [100, 100, 100, 100, 600, 700, 36000]
    assert log_options(60) == {
        "write_bw_log": "fslab", "write_iops_log": "fslab", "write_lat_log": "fslab", "log_avg_msec": "600",
        "write_hist_log": "fslab", "log_hist_msec": "1200", "log_hist_coarseness": "2", "clat_percentiles": "1",
        "log_alternate_epoch": "1", "log_alternate_epoch_clock_id": "1",
    }, "histograms in windows of two of the other logs', of the bins fio keeps of completion latency"  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps({"log_avg_msec": 0, "files": {}}),
        json.dumps({"log_avg_msec": "100", "files": {}}),
        json.dumps({"log_avg_msec": 100, "files": {"../etc/passwd": "100, 1, 0, 0, 0\n"}}),
        json.dumps({"log_avg_msec": 100, "files": {"fslab_bw.1.log": "100, 1\n"}}),
        json.dumps({"log_avg_msec": 100, "files": {"fslab_bw.1.log": "100, lots, 0, 0, 0\n"}}),
        json.dumps({"log_avg_msec": 100}),
        json.dumps([100]),
        json.dumps({"log_avg_msec": 100, "files": ["fslab_bw.1.log"]}),
    ],
)
def test_stored_logs_that_are_not_fios_are_refused(text):
    with pytest.raises(ValueError):
        throughput_over_time(text)


def test_windows_stamped_late_are_still_one_each():
    """A run of fslab's (logs-late/job.fio, by the fio here) whose windows fio stamped 47 ms into
    each 100 ms and later as it went (1450, 1550, 1650 ms): each window is its own, none counted
    twice nor left out, whatever its stamp."""
    files = {p.name: p.read_text() for p in (FIO / "logs-late").glob("*.log")}
    found = {t.direction: t for t in throughput_over_time(json.dumps({"log_avg_msec": 100, "files": files}))}
    for direction, column in (("read", 0), ("write", 1)):
        lines = [
            line.split(", ") for line in files["fslab_bw.1.log"].splitlines() if line.split(", ")[2] == str(column)
        ]
        assert found[direction].bytes_s == [float(line[1]) * 1024 for line in lines]
        assert found[direction].seconds == [int(line[0]) / 1000 for line in lines]


@pytest.mark.parametrize("name", ["fslab-rand_read.json", "fslab-seq_write.json", "buffered-randwrite.json"])
def test_a_runs_bins_kept_apart_read_as_fios_json_holds_them(name):
    text = (FIO / name).read_text()
    [kept] = stored_bins("phase", text)
    assert (kept.phase, kept.tool) == ("phase", BINS_TOOL) and len(kept.text) < len(text) / 4
    assert (
        stored_latency_bins(kept.text)
        == {k: bin_columns(b) for k, b in latency_bins(text, kinds=("lat", "clat")).items()}
        != {}
    )
    assert stored_latency_bins(kept.text, kinds=("clat",)) == {
        k: bin_columns(b) for k, b in latency_bins(text, kinds=("clat",)).items()
    }


def test_no_bins_are_kept_of_an_output_without_them_or_unreadable():
    assert stored_bins("", "fio: command not found") == []
    assert (
        stored_bins("", json.dumps({"jobs": [{"jobname": "j", "read": {"io_bytes": 0}, "write": {"io_bytes": 0}}]}))
        == []
    )
    with pytest.raises(ValueError, match="not two columns of one length"):
        stored_latency_bins(json.dumps({"read lat": [[12, 13], [1]]}))
