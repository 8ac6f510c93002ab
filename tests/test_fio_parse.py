"""The fio JSON parser on output produced by real fio (tests/fixtures/fio, see regenerate.sh)."""

import json

import pytest
from conftest import FIXTURES

from fslab.workloads.fio import PERCENTILES, load_json, parse_metrics, percentile_from_bins

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
    assert metrics["read_lat_mean_us"].value == pytest.approx(job["read"]["clat_ns"]["mean"] / 1e3)
    assert metrics["cpu_usr_pct"].value == pytest.approx(job["usr_cpu"])
    assert metrics["cpu_sys_pct"].value == pytest.approx(job["sys_cpu"])
    assert not any(name.startswith("write_") for name in metrics), "a read-only job has no write metrics"


def test_percentiles_from_bins_reproduce_fios_own():
    for name in ("randread-qd16", "seqwrite-1m", "randrw-2jobs"):
        _, raw = fixture(name)
        for job in raw["jobs"]:
            for direction in ("read", "write"):
                clat = job[direction]["clat_ns"]
                if not clat["N"]:
                    continue
                for percent in PERCENTILES.values():
                    assert percentile_from_bins(clat["bins"], percent) == fio_percentile(clat, percent), (name, direction, percent)


def test_units_and_directions():
    metrics = by_name(parse_metrics(fixture("seqwrite-1m")[0]))
    assert (metrics["write_iops"].unit, metrics["write_iops"].higher_is_better) == ("IOPS", True)
    assert (metrics["write_mb_s"].unit, metrics["write_mib_s"].unit) == ("MB/s", "MiB/s")
    assert (metrics["write_lat_p99_us"].unit, metrics["write_lat_p99_us"].higher_is_better) == ("µs", False)
    assert metrics["cpu_sys_pct"].higher_is_better is False


def test_separately_reported_jobs_are_merged():
    text, raw = fixture("randrw-2jobs")
    jobs = raw["jobs"]
    assert len(jobs) == 2, "the fixture has two jobs without group_reporting"
    metrics = by_name(parse_metrics(text))
    for direction in ("read", "write"):
        parts = [j[direction] for j in jobs]
        assert metrics[f"{direction}_iops"].value == pytest.approx(sum(p["iops"] for p in parts))
        assert metrics[f"{direction}_mb_s"].value == pytest.approx(sum(p["bw_bytes"] for p in parts) / 1e6)
        weighted = sum(p["clat_ns"]["mean"] * p["clat_ns"]["N"] for p in parts) / sum(p["clat_ns"]["N"] for p in parts)
        assert metrics[f"{direction}_lat_mean_us"].value == pytest.approx(weighted / 1e3)
        per_job = [fio_percentile(p["clat_ns"], 99.0) / 1e3 for p in parts]
        assert min(per_job) <= metrics[f"{direction}_lat_p99_us"].value <= max(per_job)
    assert metrics["cpu_usr_pct"].value == pytest.approx(sum(j["usr_cpu"] for j in jobs))


def test_notices_before_the_json_are_skipped():
    text, _ = fixture("randread-qd16")
    assert load_json("fio: some notice\n" + text)["jobs"]


def test_output_without_json_is_an_error():
    with pytest.raises(ValueError, match="no JSON"):
        load_json("fio: file hash not empty on exit\n")
