"""The metric model and the workload protocol: a metric's roles travel with it from the parser
through the database to the statistics, whatever it is named; fio behind the protocol. Synthetic
samples and fio output committed as fixtures; nothing is run."""

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from conftest import FIXTURES
from fslab.fio.output import parse_metrics
from fslab.fio.workload import FIO
from fslab.model import MetricKind, RawOutput, Roles, with_primary
from fslab.report.formats.markdown import to_markdown
from fslab.report.formats.summary_csv import to_csv
from fslab.report.sections import workload_title
from fslab.report.summary import CellSummary, StudySummary, summarize_study_run
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.running.plan import Planner, Repetitions, Tally
from fslab.study import parse_study
from fslab.workloads import declared_metrics, kind_of, registered

STUDY = """\
[study]
name = "timed"
repetitions = 6
workloads = ["seq_read"]
[[target]]
filesystem = ["ext4", "xfs", "btrfs"]
"""
ELAPSED = MetricKind(
    "s", higher_is_better=False, primary=True, compared=True
)  # as a tool timing a copy would declare it
MEDIANS = {"ext4": 10.0, "xfs": 8.0, "btrfs": 13.0}  # seconds: xfs fastest


def stored(tmp_path: Path, metrics_of) -> tuple[ResultsDB, int]:
    """A study run whose runs report only what `metrics_of(target, repetition)` gives."""
    study = parse_study(STUDY, "s.toml", base_dir=Path("."))
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = db.begin_study_run(study, 1, {}, {}, {}, Owner.current(tmp_path))
    start = datetime(2026, 1, 1)
    for repetition in range(1, 7):
        for position, target in enumerate(MEDIANS, start=1):
            db.record_run(study_run, RunRecord(
                target=target, workload="seq_read", repetition=repetition, warmup=False, block=repetition,
                position=position, started_at=start, finished_at=start + timedelta(seconds=12), status="ok",
                buffered=False, metrics=metrics_of(target, repetition),
            ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    return db, study_run


def elapsed(target: str, repetition: int) -> list:
    noise = np.random.default_rng(repetition).normal(0, 0.005)
    return [ELAPSED.of("elapsed_s", MEDIANS[target] * (1 + noise))]


def test_a_cell_with_only_elapsed_time_is_summarised_compared_and_ranked(tmp_path):
    db, study_run = stored(tmp_path, elapsed)
    s = summarize_study_run(db, study_run)
    assert {c.target: round(c.metrics["elapsed_s"].median) for c in s.cells} == {"ext4": 10, "xfs": 8, "btrfs": 13}
    rows = {r.target: r.comparison for r in s.analysis.rows if r.metric == "elapsed_s"}
    assert rows["xfs"].verdict == "faster" and rows["btrfs"].verdict == "slower", "lower is better: less time is faster"
    assert s.analysis.rankings[("seq_read", "elapsed_s", None)].tiers == (("xfs",), ("ext4",), ("btrfs",)), (
        "best (shortest) first"
    )
    assert s.analysis.runs_needed["seq_read"] is not None, "the primary metric decides the runs needed"
    markdown = to_markdown(s)
    assert "| xfs | elapsed_s | 6 |" in markdown and "IOPS median" not in markdown, (
        "a row per metric, not fio's columns"
    )
    assert "Ranking by elapsed_s: xfs > ext4 > btrfs" in markdown
    assert "elapsed_s,s," in to_csv(s)


def test_a_metric_neither_primary_nor_compared_is_only_summarised(tmp_path):
    quiet = MetricKind("s", higher_is_better=False)
    db, study_run = stored(tmp_path, lambda target, rep: [quiet.of("elapsed_s", MEDIANS[target] + rep / 100)])
    s = summarize_study_run(db, study_run)
    assert all("elapsed_s" in c.metrics for c in s.cells) and not s.analysis.rows and not s.analysis.rankings


def test_a_phase_keys_its_metrics_and_they_keep_their_roles(tmp_path):
    db, study_run = stored(
        tmp_path,
        lambda target, rep: [
            ELAPSED.of("elapsed_s", MEDIANS[target] + rep / 100, phase=phase) for phase in ("before", "after")
        ],
    )
    groups = db.sample_groups(study_run)
    assert set(groups.values[("seq_read", "xfs")]) == {"before.elapsed_s", "after.elapsed_s"}
    assert groups.roles.primary == {("seq_read", "before.elapsed_s"), ("seq_read", "after.elapsed_s")}, (
        "roles are per workload"
    )
    s = summarize_study_run(db, study_run)
    assert {r.metric for r in s.analysis.rows} == {"before.elapsed_s", "after.elapsed_s"}


def test_adaptive_runs_stop_on_a_primary_metric_whatever_its_name():
    cells = parse_study(STUDY, "s.toml", base_dir=Path(".")).cells
    planner = Planner(cells, Repetitions(runs=3, target_ci=0.05, max_runs=10), seed=1)
    tally = Tally()
    while block := planner.next_block(tally.samples, roles=tally.roles):
        for planned in block:
            [m] = elapsed(planned.cell.target.name, planned.repetition)
            tally.add(
                planned,
                True,
                {m.key: m.value},
                datetime(2026, 1, 1),
                datetime(2026, 1, 1),
                Roles.of(planned.cell.workload.name, [m]),
            )
    assert {p.status for p in planner.progress.values()} == {"converged"} and all(
        p.runs == 3 for p in planner.progress.values()
    )


def test_fio_behind_the_protocol_round_trips_through_the_database(tmp_path):
    text = (FIXTURES / "fio" / "randrw-2jobs.json").read_text()
    workload = parse_study(STUDY, "s.toml", base_dir=Path(".")).workloads[0]
    assert kind_of(workload) is FIO and registered("fio").kind is FIO
    metrics = FIO.parse([RawOutput("", "fio", text)])
    assert metrics == parse_metrics(text) and all(m.phase == "" for m in metrics)
    assert (
        {m.name for m in metrics if m.primary}
        == {"read_iops", "write_iops"}
        == {name for name, kind in FIO.metrics.items() if kind.primary}
    )
    assert {name for name, kind in FIO.metrics.items() if kind.compared} == {
        "read_iops",
        "write_iops",
        "read_lat_p99_us",
        "write_lat_p99_us",
    }
    assert {m.name for m in metrics if m.compared} == {"read_iops", "write_iops"}, (
        "this fixture's fio kept no total-latency bins"
    )
    assert declared_metrics()["read_iops"] == FIO.metrics["read_iops"]

    db, study_run = stored(tmp_path, lambda target, rep: metrics)
    run = db.runs(study_run)[0]
    db2 = ResultsDB(str(tmp_path / "again.db"))
    record = RunRecord(
        target="ext4", workload="seq_read", repetition=1, warmup=False, block=1, position=1,
        started_at=run["started_at"], finished_at=run["finished_at"], status="ok", buffered=False,
        outputs=[RawOutput("", "fio", text)], metrics=metrics,
    )  # fmt: skip
    db2.begin_study_run(parse_study(STUDY, "s.toml", base_dir=Path(".")), 1, {}, {}, {}, Owner.current(tmp_path))
    run_id = db2.record_run(1, record)
    outputs = db2.outputs(run_id)
    assert outputs == [RawOutput("", "fio", text)], "the raw output as fio wrote it"
    assert FIO.parse(outputs) == metrics, "parsed again from what is stored: the same metrics"
    [stored_run] = db2.stored_runs(1)
    assert stored_run.metrics == {m.key: m.value for m in metrics} and stored_run.roles == Roles.of(
        stored_run.workload, metrics
    )


def test_a_studys_primary_metric_is_flagged_as_each_run_is_stored_and_read_back_without_the_study(tmp_path):
    """[study] primary reaches the stored flags (with_primary, as the runner stores each run): the
    summary of the stored study run, with no study file at hand, decides precision, rank and the
    main comparisons on the metric the study named; fio's IOPS is still compared, no longer primary."""
    chosen = STUDY.replace('workloads = ["seq_read"]', 'workloads = ["seq_read"]\nprimary = ["read_lat_p99_us"]')
    [workload] = parse_study(chosen, "s.toml", base_dir=Path(".")).workloads
    assert workload.primary == ("read_lat_p99_us",)

    def measured(target: str, repetition: int) -> list:
        noise = 1 + np.random.default_rng(repetition).normal(0, 0.005)
        seconds = MEDIANS[target] * noise
        fio = [FIO.metrics[name].of(name, value) for name, value in (("read_iops", 1e4 / seconds),
               ("read_lat_p99_us", 100 * seconds), ("cpu_sys_pct", 3.0 + repetition))]  # fmt: skip
        return with_primary(fio, workload.primary)

    db, study_run = stored(tmp_path, measured)
    roles = db.sample_groups(study_run).roles
    assert roles.primary == {("seq_read", "read_lat_p99_us")}
    assert roles.compared == {("seq_read", "read_iops"), ("seq_read", "read_lat_p99_us")}
    s = summarize_study_run(db, study_run)
    assert set(s.analysis.rankings) == {("seq_read", "read_lat_p99_us", None)}
    assert s.analysis.rankings[("seq_read", "read_lat_p99_us", None)].tiers == (("xfs",), ("ext4",), ("btrfs",))
    main = s.analysis.main_rows()
    assert {(r.target, r.metric) for r in main} == {("xfs", "read_lat_p99_us"), ("btrfs", "read_lat_p99_us")}
    assert {r.metric for r in s.analysis.rows} == {"read_iops", "read_lat_p99_us"}
    assert [c.primary for c in s.cells] == [["read_lat_p99_us"]] * 3


def test_with_primary_flags_the_named_metrics_alone_or_leaves_a_run_that_reports_none_of_them():
    fio = [FIO.metrics[name].of(name, 1.0) for name in ("read_iops", "read_clat_p99_us", "cpu_sys_pct")]
    flagged = with_primary(fio, ("read_clat_p99_us", "write_iops"))
    assert [(m.name, m.primary, m.compared) for m in flagged] == [
        ("read_iops", False, True), ("read_clat_p99_us", True, True), ("cpu_sys_pct", False, False),
    ], "named: primary, and compared (a main comparison); fio's own headline: compared only"  # fmt: skip
    assert with_primary(fio, ("write_iops",)) == fio == with_primary(fio, ()), "none it reported: its kind's own"


# As /proc/mounts showed them on 6.18: what the summary reads compression from.
EFFECTIVE = {
    "ext4": "rw,relatime",
    "btrfs": "rw,relatime,compress=zstd:3,discard=async,space_cache=v2,subvolid=5,subvol=/",
}


COMPRESSING = STUDY.replace(
    'filesystem = ["ext4", "xfs", "btrfs"]',
    'filesystem = "ext4"\n[[target]]\nfilesystem = "btrfs"\nmount_options = "compress=zstd"',
)
RATIO = MetricKind("×", higher_is_better=True)  # as the space monitor stores compression_ratio


def compressing(
    tmp_path: Path, ratios: list[float], study_text: str = COMPRESSING, notes_of=lambda target, repetition: []
) -> StudySummary:
    """Stored runs of zeros, two per target, the Btrfs ones with the compression ratios given
    (the space monitor's, by repetition): their summary."""
    from fslab.workloads.data import DataPattern

    study = parse_study(study_text, "s.toml", base_dir=Path("."))
    assert [t.name for t in study.targets] == ["ext4", "btrfs"]
    tmp_path.mkdir(exist_ok=True)
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = db.begin_study_run(study, 1, {}, {}, {}, Owner.current(tmp_path))
    start = datetime(2026, 1, 1)
    for repetition in (1, 2):
        for position, target in enumerate(("ext4", "btrfs"), start=1):
            ratio = [RATIO.of("compression_ratio", ratios[repetition - 1])] if target == "btrfs" and ratios else []
            db.record_run(study_run, RunRecord(
                target=target, workload="seq_read", repetition=repetition, warmup=False, block=repetition,
                position=position, started_at=start, finished_at=start + timedelta(seconds=12), status="ok",
                buffered=False, metrics=[ELAPSED.of("elapsed_s", MEDIANS[target]), *ratio],
                data_pattern=DataPattern.asked("zeros").describe(), notes=notes_of(target, repetition),
                mount_options_effective=EFFECTIVE[target],
            ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    return summarize_study_run(db, study_run)


def compressing_cells(
    tmp_path: Path, ratios: list[float], study_text: str = COMPRESSING, notes_of=lambda target, repetition: []
) -> dict[str, CellSummary]:
    return {c.target: c for c in compressing(tmp_path, ratios, study_text, notes_of).cells}


def test_zeros_on_a_compressing_target_and_what_runs_found_are_noted_on_the_cell(tmp_path):
    """Stored runs alone: zeros written to a Btrfs that compressed them (the monitor's ratio)
    flatter it (said after what its runs found); the same data on ext4 is not called out; an
    implausible finding flags the cell."""
    from fslab.model.findings import Finding

    def implausible(target: str, repetition: int) -> list[Finding]:
        return (
            [Finding("sanity", "it read more than it wrote", implausible=True)]
            if (target, repetition) == ("btrfs", 2)
            else []
        )

    cells = compressing_cells(tmp_path, [30.0, 32.0], notes_of=implausible)
    assert cells["ext4"].notes == [] and not cells["ext4"].implausible
    assert cells["btrfs"].notes == [
        "IMPLAUSIBLE: it read more than it wrote (1 of 2 runs)",
        "it wrote zeros data to a compressing target, which compressed "
        "it 31.00×: the figures flatter it, as real data would not",
    ]
    assert cells["btrfs"].implausible


def test_the_flattery_note_follows_the_compression_measured(tmp_path):
    """Issue 20: zeros on a compressing Btrfs whose files fio preallocated were stored
    uncompressed (1.00×), and the cell still said the figures flatter it. Said only where the
    monitor measured compression; where it did not, the note says so, and why when the files
    were preallocated (as the workload's record says); unmeasured, it says they may."""
    preallocating = COMPRESSING.replace("[[target]]", '[fio]\noptions = { fallocate = "native" }\n[[target]]', 1)
    s = compressing(tmp_path / "native", [1.0, 1.02], preallocating)
    assert (
        workload_title(s, "seq_read") == "seq_read (direct I/O; data: zeros; files preallocated (fio fallocate=native))"
    )
    [uncompressed] = {c.target: c for c in s.cells}["btrfs"].notes
    assert "flatter" not in uncompressed
    assert uncompressed == (
        "it wrote zeros data to a compressing target, which stored it uncompressed "
        "(1.01×): its files were preallocated (fio fallocate=native), "
        "and preallocated blocks are written in place, uncompressed; the figures are those of uncompressed data"
    )
    s = compressing(tmp_path / "none", [1.0, 1.0])
    assert workload_title(s, "seq_read") == "seq_read (direct I/O; data: zeros)", (
        "fslab's default, no preallocation, goes without saying"
    )
    [not_preallocated] = {c.target: c for c in s.cells}["btrfs"].notes
    assert (
        not_preallocated == "it wrote zeros data to a compressing target, which stored it "
        "uncompressed (1.00×): the figures are those of uncompressed data"
    )
    [compressed] = compressing_cells(tmp_path / "some", [1.05, 1.2])["btrfs"].notes
    assert "which compressed it 1.12×: the figures flatter it" in compressed, "the median of its runs"
    [unmeasured] = compressing_cells(tmp_path / "unmeasured", [])["btrfs"].notes
    assert (
        unmeasured == "it wrote zeros data to a compressing target, and no compression ratio "
        "was measured: the figures may flatter it, as real data would not"
    )
