"""Ratios from almost nothing, speed from not syncing (issue 32, item 4): a write amplification is
not given where the workload wrote under 64 MiB, and said why, in the tables and in the chart; a
window whose fsyncs the devices' flush counter did not follow says "fsync did not reach the
device" wherever its cell is judged. The rules on synthetic numbers and stored synthetic samples;
the counters on real fio and sysbench output; one real run: ext4 with barrier=0 beside its
defaults under an fsyncing fio job."""

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import vl_convert
from altair.vegalite.v6.schema.core import TopLevelSpec

from conftest import FIXTURES, fresh_workdir, ran_study
from fslab.filesystems import Provisioned
from fslab.fio.workload import FIO
from fslab.model import Metric, RawOutput
from fslab.model.findings import Finding
from fslab.monitors.base import Found, Sample, WorkloadSaid
from fslab.monitors.traffic import (
    AMPLIFICATION_FROM,
    FSYNC_CAVEAT,
    FSYNC_NOT_FLUSHED,
    Counted,
    TrafficMonitor,
    amplification_withheld,
    counts_flushes,
    fsync_not_flushed,
    judged,
    parse_block_stat,
    withheld_amplifications,
)
from fslab.report.chart_parts import VEGA_LITE
from fslab.report.charts import study_charts
from fslab.report.conclusions import conclusions
from fslab.report.details import RunDetails
from fslab.report.formats.markdown import to_markdown
from fslab.report.formats.summary_json import to_json
from fslab.report.formatting import metric_label
from fslab.report.sections import sections
from fslab.report.summary import summarize_study_run
from fslab.report.view import SectionKind
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.running.runner import Windows
from fslab.statistics.stats import summarize
from fslab.study import parse_study
from fslab.workloads.base import FSYNCS
from fslab.workloads.sysbench import METRICS, SYSBENCH

MiB = 2**20
# A kernel of 5.5 or later: 17 fields, the 16th the flushes completed (a loop device seen here).
STAT = "  122 1 4404 9 2129 1141 58952 729 0 728 1202 2 0 1048584 0 1044 464\n"
OLD_STAT = "  122 1 4404 9 2129 1141 58952 729 0 728 1202\n"  # before 5.4: 11 fields, no flushes


def values(found: Found) -> dict[str, float]:
    return {v.name: v.value for v in found.values}


# --- the counters --------------------------------------------------------------------------------


def test_the_flush_counter_is_read_where_the_kernel_has_it_and_means_something():
    assert parse_block_stat(STAT) == Counted(4404 * 512, 58952 * 512, 1044)
    assert parse_block_stat(OLD_STAT) == Counted(4404 * 512, 58952 * 512, 0)
    assert counts_flushes(STAT, "write back\n", partition=False)
    assert not counts_flushes(OLD_STAT, "write back\n", partition=False), "a kernel before 5.5 counts no flush"
    assert not counts_flushes(STAT, "write through\n", partition=False), "no volatile cache: the kernel sends none"
    assert not counts_flushes(STAT, None, partition=False), "no queue to say"
    assert not counts_flushes(STAT, "write back\n", partition=True), "a partition's flushes are counted on its disk"


def test_fio_counts_its_fsync_calls_from_its_own_json():
    """fio's real output of four jobs: fsync=4, fdatasync=2, sync_file_range and sync=1. Its
    "sync" part's total_ios counts the fsyncs alone; the rest are not counted (a lower bound)."""
    text = (FIXTURES / "fio" / "syncs.json").read_text()
    jobs = {job["jobname"]: job["sync"] for job in json.loads(text)["jobs"]}
    assert jobs["fdatasyncing"]["total_ios"] == 0 < jobs["fdatasyncing"]["lat_ns"]["N"], "fdatasyncs: in N alone"
    assert jobs["ranging"]["lat_ns"]["N"] > 0, "sync_file_range, which flushes nothing, in N too"
    got = {m.name: m.value for m in FIO.parse([RawOutput("", "fio", text)])}
    assert got[FSYNCS] == jobs["fsyncing"]["total_ios"] == 63 and FSYNCS in FIO.metrics and FSYNCS in SYSBENCH.metrics
    plain = {m.name for m in FIO.parse([RawOutput("", "fio", (FIXTURES / "fio" / "fslab-seq_write.json").read_text())])}
    assert "fsyncs" not in plain, "none issued: none stored"


def test_sysbench_counts_its_fsyncs_from_its_rate_and_time():
    text = (FIXTURES / "sysbench" / "run-seed000-random.txt").read_text()
    got = {m.name: m.value for m in SYSBENCH.parse([RawOutput("", "sysbench", text)])}
    assert got["fsyncs"] == round(34290.93 * 46.1147)


# --- the rule ------------------------------------------------------------------------------------


def test_flushes_not_in_step_with_fsyncs_on_synthetic_numbers():
    assert fsync_not_flushed(16249, 0), "ext4 barrier=0"
    assert fsync_not_flushed(535350, 504), "Btrfs skipping clean files: 0.0009 a fsync"
    assert not fsync_not_flushed(16249, 8317) and not fsync_not_flushed(58347, 7653), "ext4, 4 and 16 threads"
    assert fsync_not_flushed(1000, 9) and not fsync_not_flushed(1000, 10), "fewer than 1 per 100"
    assert not fsync_not_flushed(9, 0), "too few fsyncs to make a speed: no claim"
    found = judged(Counted(0, 10 * MiB, 0), WorkloadSaid(written_bytes=10 * MiB, fsyncs=2000), flushes=True)
    assert values(found)["device_flushes"] == 0
    [flag] = found.flags
    assert (flag.kind, flag.caveat, flag.implausible) == (FSYNC_NOT_FLUSHED, FSYNC_CAVEAT, False)
    assert flag.says.startswith("fsync did not reach the device: the workload issued 2,000 fsyncs")
    assert "completed 0 flushes" in flag.says
    assert judged(Counted(0, 10 * MiB, 900), WorkloadSaid(fsyncs=2000), flushes=True).flags == []
    assert judged(Counted(0, 10 * MiB, 0), WorkloadSaid(), flushes=True).flags == [], "fsyncs not counted: no claim"
    uncounted = judged(Counted(0, 10 * MiB, 0), WorkloadSaid(fsyncs=2000), flushes=False)
    assert uncounted.flags == [] and "device_flushes" not in values(uncounted), "flushes not counted: no claim"


def test_a_window_holds_its_fio_jobs_fsyncs_against_its_devices_flushes():
    text = (FIXTURES / "fio" / "syncs.json").read_text()
    windows = Windows(Provisioned(top="loop0", directory=None, bottom=("loop0",)), None, lambda: None)
    for flushes, flagged in ((0, True), (60, False)):
        traffic = TrafficMonitor([])
        traffic.flushes = True
        traffic.sampler.samples = [Sample(0.0, Counted(0, 0, 0)), Sample(1.0, Counted(0, 4 * MiB, flushes))]
        windows.watched[""] = [traffic]
        metrics, findings = windows.found(FIO, [RawOutput("", "fio", text)])
        assert {m.key: m.value for m in metrics}["device_flushes"] == flushes
        assert [f.kind for f in findings] == ([FSYNC_NOT_FLUSHED] if flagged else [])


def test_a_write_amplification_of_almost_nothing_is_not_given():
    small = amplification_withheld([60 * MiB, 70 * MiB, 50 * MiB], [20.0, 20.0, 20.0])
    assert small is not None and small.startswith(
        "write amplification not given: the workload wrote 3MiB, under the 64MiB"
    )
    assert amplification_withheld([130 * MiB] * 3, [2.0] * 3) is None, "65 MiB written: given"
    assert amplification_withheld([AMPLIFICATION_FROM * 1.25] * 2, [1.25] * 2) is None, "exactly 64 MiB: given"
    assert amplification_withheld([60 * MiB, 70 * MiB], [20.0], "write") is not None, "runs not paired: the medians'"
    assert "of sync not given" in (amplification_withheld([MiB], [4.0], "sync") or "")
    assert amplification_withheld([], []) is None and amplification_withheld([0.0], [0.0]) is None, "nothing to go by"
    cell = {"write_amplification": [20.0], "device_written_bytes": [60 * MiB]}
    withheld = withheld_amplifications(cell | {"a.write_amplification": [1.1], "a.device_written_bytes": [300 * MiB]})
    assert list(withheld) == ["write_amplification"]


# --- the summary, its tables, rankings, conclusions and charts ------------------------------------

STUDY = """\
[study]
name = "mail"
repetitions = 3
[[target]]
filesystem = "ext4"
mount_options = ["defaults", "barrier=0"]
[[target]]
filesystem = "xfs"
[[workload]]
name = "mail-server"
kind = "sysbench"
options = { "file-num" = 100, "file-total-size" = "4000K", "file-test-mode" = "rndrw", threads = 4, time = 5 }
"""
W, DEFAULTS, NO_BARRIER = "mail-server", "ext4[defaults]", "ext4[barrier=0]"
# events/s as seed 000's mail server measured them: barrier=0 142× the defaults; ~0.005 MB/s written
EVENTS = {DEFAULTS: [240.0, 236.0, 244.0], NO_BARRIER: [34000.0, 34300.0, 33900.0], "xfs": [260.0, 250.0, 255.0]}
WRITTEN = 0.005e6 * 5  # bytes each run wrote: 25 kB over 5 s


def stored(tmp_path: Path) -> tuple[ResultsDB, int]:
    """The study's runs, each with its monitors' figures; ext4[barrier=0]'s judged as the traffic
    monitor judges a window of fsyncs the devices did not flush."""
    study = parse_study(STUDY, "s.toml", base_dir=Path("."))
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = db.begin_study_run(study, 1, {}, {}, {}, Owner.current(tmp_path))
    start = datetime(2026, 1, 1)
    for repetition in range(3):
        for position, (target, events) in enumerate(EVENTS.items(), start=1):
            flushes = 0 if target == NO_BARRIER else 3000
            written = WorkloadSaid(written_bytes=WRITTEN, fsyncs=30000)
            moved = judged(Counted(0, round(WRITTEN * 20), flushes), written, flushes=True)
            own = [METRICS[m].of(m, v) for m, v in (("events_per_s", events[repetition]), ("lat_p95_ms", 0.3))]
            db.record_run(study_run, RunRecord(
                target=target, workload=W, repetition=repetition + 1, warmup=False, block=repetition + 1,
                position=position, started_at=start, finished_at=start + timedelta(seconds=5), status="ok",
                buffered=True, notes=moved.flags,
                metrics=[*own, *(Metric(v.name, v.value, v.unit, v.higher_is_better) for v in moved.values)],
            ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    return db, study_run


def test_a_cell_whose_fsyncs_did_not_reach_the_device_says_so_wherever_it_is_judged(tmp_path):
    s = summarize_study_run(*stored(tmp_path))
    assert {c.target: c.caveats for c in s.cells} == {DEFAULTS: [], NO_BARRIER: [FSYNC_CAVEAT], "xfs": []}
    flagged = f"{NO_BARRIER} ({FSYNC_CAVEAT})"
    [ranking] = [line for section in sections(s) if section.kind is SectionKind.RANKING for line in section.lines[:1]]
    assert ranking.startswith(f"Ranking by {metric_label('events_per_s')}: {flagged} > "), "never first without it"
    comparisons = [row for section in sections(s) if section.kind is SectionKind.COMPARISON for row in section.rows]
    assert [row[0] for row in comparisons if row[0].startswith(NO_BARRIER)] == [flagged, flagged], "events/s and p95"
    said = [c.text for c in conclusions(s)[W]]
    assert any(text.startswith(f"{flagged} leads in {metric_label('events_per_s')}") for text in said)
    assert all(FSYNC_CAVEAT in text for text in said if NO_BARRIER in text)
    assert all(FSYNC_CAVEAT in chart.caption for chart in study_charts(s, RunDetails()))
    assert f"{FSYNC_CAVEAT}: the workload issued 30,000 fsyncs" in to_markdown(s), "its notes say it in full"
    document = json.loads(to_json(s))
    assert [c.get("caveats") for c in document["cells"]] == [None, [FSYNC_CAVEAT], None]


def test_a_write_amplification_of_a_few_kilobytes_is_absent_with_why_in_table_and_chart(tmp_path):
    s = summarize_study_run(*stored(tmp_path))
    for cell in s.cells:
        assert "write_amplification" not in cell.metrics and "device_written_bytes" in cell.metrics
        assert list(cell.withheld) == ["write_amplification"]
        assert any(note.startswith("write amplification not given: the workload wrote 24.4KiB") for note in cell.notes)
    [monitors] = [section for section in sections(s) if section.kind is SectionKind.MONITORS]
    column = monitors.columns.index("write ampl.")
    assert [row[column] for row in monitors.rows] == ["–"] * 3, "no 20× of 25 kB"
    [chart] = [c for c in study_charts(s, RunDetails()) if c.name.endswith("write-amplification")]
    assert "No bar where the workload wrote under 64MiB" in chart.caption
    bars, absent = (chart.spec["datasets"][f"rows-{i}"] for i in (0, 1))
    assert bars == [] and [row["label"] for row in absent] == list(EVENTS), "its place says why, for every target"
    assert chart.spec["layer"][0]["encoding"]["x"]["sort"] == list(EVENTS), "in the cells' order"
    xfs = s.cells[-1]  # had it written enough: a bar, after the two gaps
    xfs.metrics["write_amplification"], xfs.withheld = summarize([1.2, 1.3, 1.25], higher_is_better=False), {}
    [mixed] = [c for c in study_charts(s, RunDetails()) if c.name.endswith("write-amplification")]
    assert [row["label"] for row in mixed.spec["datasets"]["rows-0"]] == ["xfs"]
    assert mixed.spec["layer"][0]["encoding"]["x"]["sort"] == list(EVENTS)
    assert all(row["why"].startswith("write amplification not given") for row in absent)
    assert chart.spec["layer"][1]["mark"]["text"] == "not given: wrote under 64MiB"
    TopLevelSpec.validate(chart.spec)
    drawn = vl_convert.vegalite_to_svg(chart.spec, vl_version=VEGA_LITE, allowed_base_urls=[])
    assert drawn.count("not given: wrote under 64MiB") == 3 and "<path" in drawn, "a text in each place, no bar"


def test_the_fio_results_table_names_a_cell_with_its_caveat(tmp_path):
    """fio's real output of an fsyncing job stored for both targets; barrier=0's runs judged as
    the traffic monitor judges devices that completed no flush."""
    study = parse_study(FSYNCING, "s.toml", base_dir=Path("."))
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = db.begin_study_run(study, 1, {}, {}, {}, Owner.current(tmp_path))
    metrics = FIO.parse([RawOutput("", "fio", (FIXTURES / "fio" / "syncs.json").read_text())])
    start = datetime(2026, 1, 1)
    for position, target in enumerate((DEFAULTS, NO_BARRIER), start=1):
        notes = judged(
            Counted(0, 8 * MiB, 0 if target == NO_BARRIER else 130), WorkloadSaid(fsyncs=63), flushes=True
        ).flags
        db.record_run(study_run, RunRecord(
            target=target, workload="fsync-writes", repetition=1, warmup=False, block=1, position=position,
            started_at=start, finished_at=start + timedelta(seconds=1), status="ok", buffered=True, notes=notes,
            metrics=metrics,
        ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    s = summarize_study_run(db, study_run)
    [overview] = [section for section in sections(s) if section.kind is SectionKind.OVERVIEW]
    assert [row[0] for row in overview.rows] == [DEFAULTS, f"{NO_BARRIER} ({FSYNC_CAVEAT})"]


def test_a_finding_stored_before_caveats_were_reads_as_none():
    """A run's notes stored before a finding had a caveat (no such key) carry none."""
    old = [{"kind": "served_by_cache", "says": "reads were served by a cache", "implausible": False}]
    runs = [{"status": "ok", "warmup": False, "workload": W, "target": "xfs", "notes": old}]
    from fslab.report.summary import _caveats

    assert _caveats(runs) == {}
    assert Finding("k", "s", False).caveat == ""


# --- for real ------------------------------------------------------------------------------------

# 4 KiB random writes with an fsync after each, size-bound (the same work however fast the
# machine), on ext4 as made and with barrier=0: ext4 flushes the loop device's cache at each fsync
# (2 flushes per fsync seen here) unless barrier=0 (none).
FSYNCING = """\
[study]
name = "fsyncing"
repetitions = 1
image_size = "256MiB"
image_fill = "sparse"

[[target]]
filesystem = "ext4"
mount_options = ["defaults", "barrier=0"]

[[workload]]
name = "fsync-writes"
rw = "randwrite"
bs = "4k"
size = "1MiB"
runtime = "0s"
direct = false
options = { fsync = 1 }
"""


@pytest.mark.root
def test_ext4_with_barrier_0_is_flagged_and_as_made_is_not(tmp_path):
    with fresh_workdir() as workdir:
        result, results, study_run = ran_study(tmp_path, FSYNCING, workdir)
    samples = results.sample_groups(study_run).values
    defaults, no_barrier = ({k: v[0] for k, v in samples[("fsync-writes", t)].items()} for t in (DEFAULTS, NO_BARRIER))
    assert defaults["fsyncs"] == no_barrier["fsyncs"] == 255, "an fsync after each 4 KiB write but the last (fio)"
    flushes = defaults["device_flushes"], no_barrier["device_flushes"]
    assert flushes[0] >= 255 and flushes[1] == 0, f"flushes as made, with barrier=0: {flushes} (seen here: 512, 0)"
    notes = {r["target"]: [n["kind"] for n in r["notes"] or []] for r in results.runs(study_run)}
    assert FSYNC_NOT_FLUSHED in notes[NO_BARRIER] and FSYNC_NOT_FLUSHED not in notes[DEFAULTS]
    assert f"{NO_BARRIER} ({FSYNC_CAVEAT})" in result.stdout, "the summary names it with its caveat"
