"""Scenarios: several phases on one target sharing one file, each phase's metrics stored under its
name; run for real on Btrfs and ext4 loop images at small scale (64 MiB, 1–2 s phases), tool
phases (sysbench, dd) among them."""

from collections import Counter
from dataclasses import replace

import pytest

from conftest import FIXTURES, fslab, fslab_in_process, ran_study, write_study
from fslab.fio.hist import HIST_TOOL
from fslab.fio.output import BINS_TOOL, LOG_TOOL
from fslab.model import RawOutput, Workload, unqualified
from fslab.monitors import metric_names
from fslab.results import ResultsDB
from fslab.scenarios.builtin.cow_ageing import cow_ageing
from fslab.scenarios.kind import METRICS, SCENARIOS, Scenario, scenario
from fslab.scenarios.phases import Phase
from fslab.workloads.data import DataPattern
from fslab.workloads.dd import DD, DdOptions
from fslab.workloads.sysbench import SYSBENCH, SysbenchOptions
from kinds_helpers import read_study, refused
from short_studies import mixed_scenario

AGEING = """\
[study]
name = "ageing"
repetitions = 1
image_size = "1GiB"
image_fill = "sparse"

[[target]]
filesystem = ["btrfs", "ext4"]

[[workload]]
name = "ageing"
kind = "scenario"
scenario = "cow-ageing"
size = "32MiB"
runtime = "1s"

[[workload]]
name = "iozone"
kind = "scenario"
scenario = "write-rewrite-read-reread"
size = "32MiB"
data = "zeros"
targets = ["ext4"]
"""
ONE_SCENARIO = AGEING.split('\n[[workload]]\nname = "iozone"')[0]


@pytest.mark.root
@pytest.mark.xdist_group("scenarios-cow-ageing")  # no module fixture: its own group, to whichever worker is free
def test_cow_ageing_stores_both_reads_and_both_extent_counts(workdir, tmp_path):
    result, results, study_run = ran_study(tmp_path, AGEING, workdir)
    groups = results.sample_groups(study_run)
    btrfs, ext4 = groups.values[("ageing", "btrfs")], groups.values[("ageing", "ext4")]
    for cell in (btrfs, ext4):
        assert {
            "write.write_mb_s",
            "before.read_mb_s",
            "overwrite.write_iops",
            "after.read_mb_s",
            "before.extents",
            "after.extents",
        } <= set(cell)
    # What copy-on-write does to a file overwritten in place, counted by the filesystem itself (filefrag).
    assert btrfs["after.extents"][0] > 10 * btrfs["before.extents"][0], "Btrfs scatters the overwritten blocks"
    assert ext4["after.extents"][0] == ext4["before.extents"][0], "ext4 overwrites in place"
    runs = {(r["workload"], r["target"]): r for r in results.runs(study_run)}
    outputs = {(o.phase, o.tool) for o in results.outputs(runs[("ageing", "btrfs")]["id"])}
    fio_phases = ("write", "before", "overwrite", "after")  # each with its JSON and its throughput over time
    assert ("overwrite", HIST_TOOL) in outputs, (
        "the timed phase's latency over time (fio logs no histogram of a phase quicker than a window)"
    )
    assert outputs - {(p, HIST_TOOL) for p in fio_phases} == {
        (p, tool) for p in fio_phases for tool in ("fio", BINS_TOOL, LOG_TOOL)
    } | {("before", "filefrag"), ("after", "filefrag")}
    assert (
        "# phase overwrite: fio" in runs[("ageing", "btrfs")]["job_file"]
        and "rw=randwrite" in runs[("ageing", "btrfs")]["job_file"]
    )
    # seed 002's pass: every phase measured, what it wrote recorded
    iozone = groups.values[("iozone", "ext4")]
    assert {"write.write_mb_s", "rewrite.write_mb_s", "read.read_mb_s", "reread.read_mb_s"} <= set(iozone)
    assert runs[("iozone", "ext4")]["data_pattern"].startswith("zeros") and runs[("iozone", "ext4")]["buffered"]
    assert "after.extents" in result.stdout and "overwrite.write_iops" in result.stdout


@pytest.mark.root
def test_snapshots_under_load_takes_and_counts_its_snapshots(workdir, tmp_path):
    study = (
        ONE_SCENARIO.replace('["btrfs", "ext4"]', '"btrfs"')
        .replace('"cow-ageing"', '"snapshots-under-load"')
        .replace('runtime = "1s"', 'runtime = "1.5s"\nsnapshot_every = "0.4s"')
    )
    db = tmp_path / "r.db"
    result = fslab("run", str(write_study(tmp_path, study)), "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    study_run = results.study_run()["id"]
    cell = results.sample_groups(study_run).values[("ageing", "btrfs")]
    assert cell["overwrite.snapshots"][0] >= 1
    [run] = [r for r in results.runs(study_run) if r["workload"] == "ageing"]
    [taken] = [o.text.split() for o in results.outputs(run["id"]) if o.tool == "snapshots"]
    assert taken[0].endswith("/.snapshots/fslab-1") and len(taken) == cell["overwrite.snapshots"][0], (
        "each snapshot named by fslab"
    )


def test_a_snapshot_scenario_on_a_target_without_snapshots_is_refused_before_anything_is_made(workdir, tmp_path):
    study = AGEING.replace('"cow-ageing"', '"snapshots-under-load"')
    refused(
        study,
        r"s.toml:10: workload\[0\]: workload 'ageing' takes snapshots, and "
        r"target 'ext4' \(ext4\) has none: run it on btrfs or zfs targets",
    )
    result = fslab_in_process(
        "run", str(write_study(tmp_path, study)), "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root)
    )
    assert result.returncode != 0 and "has none" in result.stderr and not (tmp_path / "r.db").exists()
    assert not list((workdir.root / "images").glob("*")), "no image was made"


PHASES = """\
[study]
name = "mine"

[[target]]
filesystem = "btrfs"

[[workload]]
name = "mine"
kind = "scenario"
size = "64MiB"
data = { compressible = 50 }

[[workload.phase]]
name = "fill"
fio = { rw = "write", bs = "1m" }
measured = false

[[workload.phase]]
name = "rest"
action = "sleep"
seconds = 1

[[workload.phase]]
name = "read"
fio = { rw = "randread", bs = "4k", iodepth = 4, runtime = "2s" }
extents = true
"""


def test_a_scenario_of_its_own_phases_is_checked_and_scaled():
    [workload] = read_study(PHASES, scale=0.5).workloads
    s = workload.tool
    assert isinstance(s, Scenario) and [p.name for p in s.phases] == ["fill", "rest", "read"] and s.size == 32 * 2**20
    assert s.phases[2].options["runtime"] == "1000ms" and s.phases[1].seconds == 0.5 and workload.seconds == 1.5
    assert s.job(s.phases[0]).sections[0].options[-2:] == (("filename", "mine"), ("size", str(32 * 2**20))), (
        "fslab names the shared file"
    )
    assert s.data.kind == "compressible"
    refused(
        PHASES.replace("iodepth = 4,", 'iodepth = 4, filename = "/etc/passwd",'),
        r"s.toml:2\d: workload\[0\].phase\[2\].fio: .*filename",
    )
    refused(PHASES.replace('name = "fill"', 'name = "read"'), r"phase names must differ: read repeated")
    refused(PHASES.replace('action = "sleep"', 'action = "sleep"\nfio = { rw = "read" }'), r"phase\[1\]: .*one of them")
    refused(
        PHASES.replace("extents = true", "measured = false").replace("seconds = 1", "seconds = 1\nmeasured = false"),
        r"no phase is measured",
    )
    refused(
        PHASES.replace("seconds = 1", "seconds = 1\nextents = true"),
        r"s.toml:7: workload\[0\]: phase 'rest' is a sleep: fio "
        r"options, snapshot_every and extents belong to fio phases$",
    )


def test_a_phases_time_is_its_runtime_as_fio_reads_it_and_too_few_snapshots_are_noted():
    # fio reads a runtime in any of its units: a phase written "3s" lasts 3 s, as one a study scaled to
    # "1500ms" lasts 1.5
    timed = {"rw": "randwrite", "time_based": "1"}
    phases = (
        Phase("fill", "fio", options={"rw": "write"}),
        Phase("rest", "sleep", seconds=0.5),
        Phase("load", "fio", options=timed | {"runtime": "3s"}, snapshot_every=0.5),
        Phase("again", "fio", options=timed | {"runtime": "1500ms"}),
    )
    s = scenario("mine", phases, 2**20, DataPattern())
    assert [s.phase_seconds(p) for p in phases] == [0.0, 0.5, 3.0, 1.5] and s.measured_seconds() == 5.0
    workload = Workload("mine", s, s.measured_seconds(), True)

    def judged(taken: int) -> list[str]:
        names = "".join(f"/t/.snapshots/fslab-{n}\n" for n in range(1, taken + 1))
        return [f.kind for f in SCENARIOS.judge(workload, [RawOutput("load", "snapshots", names)])]

    assert judged(2) == ["few_snapshots"], "2 of the ~6 asked over 3 s"
    assert judged(3) == [], "half of them is enough"


def test_extents_that_cannot_be_measured_are_absent_and_said_why_never_0():
    """As zfs-fuse's runs store them: filefrag found 0 extents in a 31 MiB file of data."""
    s = scenario("ageing", cow_ageing(1.0), 32 * 2**20, DataPattern())
    workload = Workload("ageing", s, s.measured_seconds(), True)
    why = "on zfs (FUSE gives no FIEMAP: filefrag found 0 extents in a file of 31MiB holding 31MiB)"
    outputs = [
        RawOutput("before", "filefrag", f"/m/zfs/ageing: extents not measurable: {why}\n"),
        RawOutput("after", "filefrag", "/m/zfs/ageing: 7 extents found\n"),
    ]
    assert {m.key: m.value for m in SCENARIOS.parse(outputs)} == {"after.extents": 7}, (
        "no before.extents: absent, not 0"
    )
    assert [(f.kind, f.says, f.implausible) for f in SCENARIOS.judge(workload, outputs)] == [
        ("extents_not_measurable", f"before: extents not measurable {why}", False)
    ]
    counted = [
        RawOutput("before", "filefrag", "/m/btrfs/ageing: 0 extents found\n")
    ]  # a count: 0 of a file that holds none
    assert {m.key: m.value for m in SCENARIOS.parse(counted)} == {"before.extents": 0} and SCENARIOS.judge(
        workload, counted
    ) == []


# ---- tool phases -------------------------------------------------------------------------------

MIX = mixed_scenario(repetitions=1)


@pytest.mark.root
def test_a_scenario_runs_tool_phases_each_through_its_own_kind(workdir, tmp_path):
    result, results, study_run = ran_study(tmp_path, MIX, workdir)
    [run] = results.runs(study_run)
    assert run["status"] == "ok", run["error"]
    cell = results.sample_groups(study_run).values[("mix", "ext4")]
    assert (
        cell["fill.write_mb_s"][0] > 0
        and cell["mail.events_per_s"][0] > 0
        and cell["sanity.write_mb_s"][0] > 0
        and cell["sanity.read_mb_s"][0] > 0
    )
    # Each measured step is a window of its own, its monitors' figures under its name: dd's two steps
    # after their phase's.
    for window in ("fill", "mail", "sanity.write", "sanity.read"):
        assert cell[f"{window}.host_cpu_busy_pct"] and cell[f"{window}.device_written_bytes"], window
    assert cell["sanity.write.device_written_bytes"][0] >= 32 * 2**20, (
        "dd's direct write seen on the device, in its own window"
    )
    stored = Counter((m.phase, m.metric) for m in results.run_metrics(study_run))
    assert max(stored.values()) == 1, "no metric stored twice under one key"
    # Each phase's metrics keep the roles their own kind gives them: dd's MB/s decides, fio's does not.
    roles = results.sample_groups(study_run).roles
    assert roles.primary_in("mix", cell) == [
        "fill.write_iops",
        "mail.events_per_s",
        "sanity.read_mb_s",
        "sanity.write_mb_s",
    ]
    outputs = results.outputs(run["id"])
    found = {(o.phase, o.tool) for o in outputs} - {
        ("fill", HIST_TOOL)
    }  # its histograms when the fill took a window or more
    assert found == {
        ("fill", "fio"),
        ("fill", BINS_TOOL),
        ("fill", LOG_TOOL),
        ("mail", "sysbench"),
        ("sanity.write", "dd"),
        ("sanity.read", "dd"),
    }
    # The parse is pure: the stored outputs give the stored metrics again, the monitors' aside.
    parsed = {m.key: m.value for m in SCENARIOS.parse(outputs)}
    assert parsed == {key: values[0] for key, values in cell.items() if unqualified(key) not in metric_names()}
    command = run["job_file"]
    assert (
        "# phase mail: sysbench\nsysbench fileio --file-num=8 --file-total-size=512K" in command
        and "--validate=off" in command
    )
    assert (
        "# phase sanity: dd\ndd if=/dev/zero of=" in command
        and "/mix-sanity bs=1048576 count=32 oflag=direct" in command
    )
    assert (
        run["data_pattern"].startswith("zeros (fio zero_buffers")
        and "phase sanity: zeros (dd reads /dev/zero" in run["data_pattern"]
    )
    notes = [n for n in run["notes"] if n["kind"] == "fsync_sweep"]
    assert notes and notes[0]["says"].startswith("mail: "), "sysbench's own findings, said of its phase"


def test_tool_phase_outputs_parse_purely_into_their_phase_with_their_tools_findings():
    # As a scenario stores them (and as the database hands them back: by phase, then tool), from real output.
    mail, write, read = (
        (FIXTURES / name).read_text()
        for name in ("sysbench/run-16k-nofsync.txt", "dd/write-64m-direct-random.txt", "dd/read-1g-direct.txt")
    )
    outputs = [
        RawOutput("mail", "sysbench", mail),
        RawOutput("sanity.read", "dd", read),
        RawOutput("sanity.write", "dd", write),
    ]
    parsed = SCENARIOS.parse(outputs)
    assert parsed == SCENARIOS.parse(outputs), "pure: the same outputs, the same metrics"
    assert sorted(parsed, key=lambda m: m.key) == sorted(SCENARIOS.parse(outputs[::-1]), key=lambda m: m.key), (
        "in whatever order they come"
    )
    assert {m.key: m for m in parsed} == {
        **{f"mail.{m.name}": replace(m, phase="mail") for m in SYSBENCH.parse([RawOutput("", "sysbench", mail)])},
        **{
            f"sanity.{m.name}": replace(m, phase="sanity")
            for m in DD.parse([RawOutput("write", "dd", write), RawOutput("read", "dd", read)])
        },
    }
    assert [m.key for m in parsed if m.primary] == ["mail.events_per_s", "sanity.read_mb_s", "sanity.write_mb_s"], (
        "each with its own kind's roles"
    )
    # The runner weighs a window's traffic against that window's outputs alone: dd's write step reports what it wrote.
    assert {m.name for m in SCENARIOS.parse([outputs[2]])} >= {"write_bytes", "write_mb_s"}
    phases = (
        Phase("mail", "sysbench", tool=SysbenchOptions(files=16, total_size="64M", block_size="16k", seconds=1)),
        Phase("sanity", "dd", tool=DdOptions(count=64, direct=False)),
    )
    workload = Workload("mix", scenario("mix", phases, 2**20, DataPattern()), 1.0, False)
    says = [f.says for f in SCENARIOS.judge(workload, outputs)]
    assert any(s.startswith("sanity: dd copied 1073741824 bytes") for s in says), (
        "dd's short_copy (the read fixture is 1 GiB, not 64 MiB), said of its phase"
    )
    assert says.count("sanity: buffered without conv=fsync: the page cache answers, not the device") == 1


def test_the_scenarios_metrics_declare_each_name_once_with_every_role_a_phase_gives_it():
    assert (
        METRICS["events_per_s"] == SYSBENCH.metrics["events_per_s"]
        and METRICS["write_elapsed_s"] == DD.metrics["write_elapsed_s"]
    )
    # fio's read_mb_s is neither primary nor compared; dd's is both: a dd phase's decides its cell.
    assert METRICS["read_mb_s"].unit == "MB/s" and METRICS["read_mb_s"].primary and METRICS["read_mb_s"].compared
    assert METRICS["read_iops"].primary and METRICS["extents"].compared


def test_a_scenarios_tool_phases_are_read_and_scaled_as_workloads_of_their_tools():
    [workload] = read_study(MIX.replace('data = "zeros"\n', ""), scale=0.5).workloads
    s = workload.tool
    assert isinstance(s, Scenario) and [p.action for p in s.phases] == ["fio", "sysbench", "dd"]
    mail, sanity = s.phases[1].tool, s.phases[2].tool
    assert (
        isinstance(mail, SysbenchOptions)
        and mail.files == 8
        and mail.file_size == 32 * 1024
        and mail.seconds == 1
        and mail.data == "random"
    )
    assert isinstance(sanity, DdOptions) and sanity.count == 16 and sanity.direct and sanity.data == "random"
    assert workload.seconds == 1.0 and s.phase_seconds(s.phases[2]) == 0.0, (
        "sysbench lasts its time; dd as long as its copy takes"
    )
    assert s.bytes_needed(False) == 16 * 2**20 + 256 * 1024 + 16 * 2**20, (
        "the file, and every tool phase's files: they stay"
    )
    assert not workload.direct, "sysbench is buffered"
    assert (
        read_study(
            MIX.replace('"file-total-size" = "512K"', '"file-total-size" = "512K", "file-extra-flags" = "direct"')
        )
        .workloads[0]
        .direct
    )
    assert s.spec()["phases"][2]["tool"] == sanity.spec() and "tool" not in s.spec()["phases"][0], (
        "a fio phase's spec as before tool phases"
    )


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        # exactly one of fio, sysbench, dd and action
        (
            {"count = 32 }": "count = 32 }\nsysbench = { time = 1 }"},
            r"s.toml:23: workload\[0\].phase\[2\]: a phase runs fio .*one of them, not sysbench and dd",
        ),
        (
            {'name = "mail"\n': 'name = "mail"\naction = "sync"\n'},
            r"s.toml:19: workload\[0\].phase\[1\]: .*one of them, not sysbench and action",
        ),
        # snapshots and extents are the scenario's file's, fio phases' alone
        (
            {'name = "mail"\n': 'name = "mail"\nextents = true\n'},
            r"s.toml:9: workload\[0\]: phase 'mail' runs sysbench: fio options, snapshot_every and "
            r"extents belong to fio phases \(extents count the scenario's file, not sysbench's files\)",
        ),
        (
            {'name = "sanity"\n': 'name = "sanity"\nsnapshot_every = "1s"\n'},
            r"s.toml:9: workload\[0\]: phase 'sanity' runs dd: fio options, snapshot_every",
        ),
        # each tool's options through its own allow-list, refused at the phase's line
        (
            {"time = 1 }": 'time = 1, "config-file" = "/etc/x" }'},
            r"s.toml:21: workload\[0\].phase\[1\].sysbench: --config-file=/etc/x is refused",
        ),
        (
            {"count = 32 }": 'count = 32, of = "/dev/sda" }'},
            r"s.toml:25: workload\[0\].phase\[2\].dd: dd of=/dev/sda is refused",
        ),
        (
            {'data = "zeros"\n': "", '"512K"': '"500K"'},
            r"s.toml:20: workload\[0\].phase\[1\].sysbench: sysbench data \"random\" checks every block",
        ),
        # what sysbench and dd cannot write
        (
            {'data = "zeros"': "data = { compressible = 50 }"},
            r"s.toml:21: workload\[0\].phase\[1\].sysbench: phase 'mail' runs sysbench, which "
            r"writes random bytes or zeros and cannot write the scenario's data, compressible 50%",
        ),
        # a tool phase's steps are named after it
        (
            {'name = "sanity"': 'name = "sanity.check"'},
            r"s.toml:9: workload\[0\]: phase 'sanity.check' runs dd: its name holds no '\.'",
        ),
        (
            {'name = "fill"': 'name = "sanity.write"'},
            r"phase 'sanity.write' is named as a step of phase 'sanity', which runs dd",
        ),
    ],
)
def test_a_tool_phase_is_refused_where_it_is_written(changes, says):
    text = MIX
    for old, new in changes.items():
        assert old in text
        text = text.replace(old, new, 1)
    refused(text, says)
