"""sysbench fileio: options through the allow-list, the commands built, the report parsed from
real output (tests/fixtures/sysbench, see its README), the judgement on impossible figures, and
a short real run in a temporary directory."""

import dataclasses
import shutil

import pytest

from conftest import FIXTURES
from fslab.model import MetricKind
from fslab.model.options import OptionRefused
from fslab.workloads.sysbench import (
    METRICS,
    SysbenchOptions,
    SysbenchRun,
    cleanup_argv,
    judge,
    metric_values,
    parse_prepare,
    parse_run,
    prepare_argv,
    run_argv,
    run_step,
    sysbench_options,
)

SYSBENCH = FIXTURES / "sysbench"


def fixture(name: str) -> str:
    return (SYSBENCH / name).read_text()


def value(metrics: list, name: str) -> float:
    """The value of the one metric named `name`."""
    (found,) = [m.value for m in metrics if m.name == name]
    return found


# ---- options and commands ---------------------------------------------------------------------


def test_defaults_are_seed_000s_mail_server_as_the_fixtures_ran_it():
    seed = SysbenchOptions()
    geometry = ["--file-num=10000", "--file-total-size=40000K", "--file-block-size=4096"]
    assert prepare_argv(seed) == ["sysbench", "fileio", *geometry, "--validate=on", "prepare"]
    assert run_argv(seed) == [
        "sysbench", "fileio", *geometry, "--file-test-mode=rndrw", "--file-fsync-freq=1", "--threads=4",
        "--time=45", "--rand-seed=1", "--percentile=95", "--validate=on", "run",
    ]  # fmt: skip
    assert cleanup_argv(seed) == ["sysbench", "fileio", *geometry, "cleanup"]
    assert sysbench_options({}) == seed
    for step in (prepare_argv(seed), run_argv(seed), cleanup_argv(seed)):
        assert not any("/" in arg for arg in step), "no step names a path: sysbench works in its current directory"


def test_options_become_typed_fields_and_checked_tuning():
    options = sysbench_options(
        {"file-num": 8, "--file-total-size": "16M", "file-block-size": "16k", "threads": 2, "time": 1,
         "file-fsync-all": True, "file-extra-flags": "direct", "file-rw-ratio": 2.5},
        data="zeros",
    )  # fmt: skip
    assert (options.files, options.total_size, options.block_size, options.threads, options.seconds) == (
        8,
        "16M",
        "16k",
        2,
        1,
    )
    assert options.tuning == (("--file-fsync-all", "on"), ("--file-extra-flags", "direct"), ("--file-rw-ratio", "2.5"))
    assert options.direct and not SysbenchOptions().direct
    argv = run_argv(options)
    assert argv[-3:] == ["--percentile=95", "--validate=off", "run"], "fslab's own options come last"
    assert "--file-fsync-all=on" in argv and "zeros" in options.data_pattern()
    assert "random" in SysbenchOptions().data_pattern()


REFUSED = {
    "unknown option": ({"file-nums": 3}, "unknown sysbench fileio option '--file-nums' (did you mean '--file-num'?)"),
    "a path in a value": ({"file-test-mode": "/etc/passwd"}, "holds '/'"),
    "a config file": ({"config-file": "x"}, "--config-file=x is refused: it reads options from a file"),
    "a lua command": ({"luajit-cmd": "off"}, "is refused: it runs a LuaJIT command"),
    "validate is the data's": ({"validate": True}, "is refused: fslab sets it from the workload's data"),
    "percentile is fslab's": ({"percentile": 99}, "fslab reads the 95th percentile"),
    "report interval": ({"report-interval": 1}, "it changes the report fslab reads"),
    "a newline": ({"file-test-mode": "rndrw\n--config-file=x"}, "holds a control character"),
    "a value that is an option": ({"file-test-mode": "--config-file"}, "starts with '-'"),
    "a control character": ({"file-rw-ratio": "1\x1b[2J"}, "holds a control character"),
    "an unknown mode": ({"file-test-mode": "rndrm"}, "is not one of seqwr, seqrewr, seqrd, rndrd, rndwr, rndrw"),
    "a clock seed": ({"rand-seed": 0}, "is not a whole number from 1"),
    "too many threads": ({"threads": 100000}, "is not a whole number from 1 to 1024"),
    "a database": ({"db-driver": "mysql"}, "fileio uses no database"),
    "mysql host": ({"mysql-host": "evil"}, "unknown sysbench fileio option '--mysql-host'"),
    "a space smuggling a positional": ({"file-test-mode": "rndrw cpu"}, "holds ' '"),
    "a name with '='": ({"time=1 --config-file": "x"}, "sysbench option name time=1 --config-file is refused"),
    "a name with a newline": ({"time\n": "1"}, "sysbench option name 'time\\n' is refused"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_refused(case):
    options, says = REFUSED[case]
    with pytest.raises(OptionRefused) as info:
        sysbench_options(options)
    assert says in str(info.value)


def test_unknown_data_refused():
    with pytest.raises(OptionRefused, match="sysbench writes zeros or, validating, random bytes"):
        sysbench_options({}, data="compressible")


# ---- parsing real output ----------------------------------------------------------------------


def test_seed_run_parsed():
    run = parse_run(fixture("run-seed000-random.txt"))
    assert (run.reads_per_s, run.writes_per_s, run.fsyncs_per_s) == (5.10, 3.36, 34290.93)
    assert (run.read_mib_s, run.write_mib_s) == (0.02, 0.01)
    assert (run.total_s, run.events, run.threads) == (46.1147, 1541748, 4)
    assert (run.lat_min_ms, run.lat_avg_ms, run.lat_max_ms, run.lat_p95_ms, run.lat_sum_ms) == (
        0.01,
        0.12,
        12.44,
        0.15,
        179618.97,
    )
    metrics = metric_values(run)
    values = {m.name: m.value for m in metrics}
    assert values["events_per_s"] == pytest.approx(1541748 / 46.1147)
    assert values["lat_avg_ms"] == pytest.approx(179618.97 / 1541748)
    assert values["write_mb_s"] == pytest.approx(0.01 * 2**20 / 1e6)
    assert len(metrics) == len(values) and set(values) == set(METRICS)
    assert all(m == METRICS[m.name].of(m.name, m.value) for m in metrics), "unit, direction and roles as declared"
    assert {name for name, kind in METRICS.items() if kind.primary} == {"events_per_s"}
    assert METRICS["events_per_s"] == MetricKind("events/s", True, primary=True, compared=True)
    assert METRICS["lat_p95_ms"] == MetricKind("ms", False, compared=True, resolution=0.01), "printed to 0.01 ms"


def test_throughput_run_parsed():
    run = parse_run(fixture("run-16k-nofsync.txt"))
    assert (run.read_mib_s, run.write_mib_s, run.threads, run.events) == (396.66, 264.43, 2, 136829)
    assert value(metric_values(run), "read_mb_s") == pytest.approx(396.66 * 1.048576)
    assert judge(run, sysbench_options({"file-num": 16, "file-fsync-freq": 0})) == []


def test_zeros_run_parsed_and_the_sweep_noted():
    run = parse_run(fixture("run-seed000-zeros.txt"))
    assert run.lat_min_ms == 0.00 and run.events == 1440769
    findings = judge(run, SysbenchOptions())
    assert [f.kind for f in findings] == ["fsync_sweep"] and not findings[0].implausible
    assert "fsyncs every file" in findings[0].says


def test_prepare_parsed_and_random_data_written():
    assert parse_prepare(fixture("prepare-seed000-random.txt")).bytes_written == 10_000 * 4096
    first = fixture("prepare-random-first-bytes.txt").split()
    assert len(set(first)) > 32, "--validate=on prepare writes random bytes, not zeros"


def test_not_a_report():
    with pytest.raises(ValueError, match="lacks reads/s.*FATAL: Cannot open file"):
        parse_run("sysbench 1.0.20\nFATAL: Cannot open file errno = 2\n")
    with pytest.raises(ValueError, match="did not say what it wrote"):
        parse_prepare(fixture("cleanup.txt"))


# ---- what cannot be real (synthetic reports) --------------------------------------------------

PLAUSIBLE = SysbenchRun(
    reads_per_s=5000, writes_per_s=3000, fsyncs_per_s=3000, read_mib_s=19.5, write_mib_s=11.7, total_s=10.0,
    events=110_000, lat_min_ms=0.01, lat_avg_ms=0.36, lat_max_ms=9.0, lat_p95_ms=1.2, lat_sum_ms=39_600, threads=4,
)  # fmt: skip


def kinds(run, options=None):
    return {f.kind: f.implausible for f in judge(run, options)}


def test_plausible_run_has_no_findings():
    assert kinds(PLAUSIBLE, SysbenchOptions()) == {}


def test_zero_latency_with_huge_counts():
    # seed 000's Btrfs anomaly: latencies 0.00 and counts no thread could run
    run = dataclasses.replace(
        PLAUSIBLE, events=200_000_000, lat_min_ms=0, lat_avg_ms=0, lat_p95_ms=0, lat_max_ms=0, lat_sum_ms=0
    )
    assert kinds(run) == {"latency_unresolved": True, "events_too_fast": True}


def test_avg_below_resolution_resolved_from_the_sum():
    run = dataclasses.replace(PLAUSIBLE, events=10_000_000, lat_avg_ms=0.0, lat_sum_ms=30_000)
    assert kinds(run) == {"latency_unresolved": False}
    assert value(metric_values(run), "lat_avg_ms") == pytest.approx(0.003)


def test_busy_longer_than_the_run():
    assert kinds(dataclasses.replace(PLAUSIBLE, lat_sum_ms=41_000)) == {"busy_beyond_time": True}
    assert kinds(dataclasses.replace(PLAUSIBLE, lat_sum_ms=40_500)) == {}, "within BUSY_SLACK"


# ---- a real run -------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench is not installed")
def test_real_run_in_a_directory(workdir):
    options = sysbench_options({"file-num": 4, "file-total-size": "4M", "time": 1, "threads": 2})
    directory = workdir.root / "target"
    directory.mkdir()
    journal = workdir.journal
    prepared = parse_prepare(run_step(journal, prepare_argv(options), directory, timeout=30))
    assert prepared.bytes_written == 4 * 2**20
    assert len(set((directory / "test_file.0").read_bytes()[:4096])) > 64, "random data by default"
    result = parse_run(run_step(journal, run_argv(options), directory, timeout=30))
    assert result.threads == 2 and result.events > 0 and value(metric_values(result), "events_per_s") > 0
    run_step(journal, cleanup_argv(options), directory, timeout=30)
    assert list(directory.iterdir()) == []
