"""Scenarios: several phases on one target sharing one file, each phase's metrics stored under its
name; run for real on Btrfs and ext4 loop images at small scale (64 MiB, 1–2 s phases)."""

from conftest import fslab, write_study
from kinds_helpers import read_study, refused

from fslab.results import ResultsDB
from fslab.study import Workload
from fslab.workloads.base import RawOutput
from fslab.workloads.data import DataPattern
from fslab.workloads.scenario import SCENARIOS, Phase, Scenario, scenario

AGEING = """\
[study]
name = "ageing"
repetitions = 1
image_size = "1GiB"

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
"""


def test_cow_ageing_stores_both_reads_and_both_extent_counts(workdir, tmp_path):
    db = tmp_path / "r.db"
    result = fslab("run", str(write_study(tmp_path, AGEING)), "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    study_run = results.study_run()["id"]
    groups = results.sample_groups(study_run)
    btrfs, ext4 = groups.values[("ageing", "btrfs")], groups.values[("ageing", "ext4")]
    for cell in (btrfs, ext4):
        assert {"write.write_mb_s", "before.read_mb_s", "overwrite.write_iops", "after.read_mb_s", "before.extents", "after.extents"} <= set(cell)
    # What copy-on-write does to a file overwritten in place, counted by the filesystem itself (filefrag).
    assert btrfs["after.extents"][0] > 10 * btrfs["before.extents"][0], "Btrfs scatters the overwritten blocks"
    assert ext4["after.extents"][0] == ext4["before.extents"][0], "ext4 overwrites in place"
    runs = {(r["workload"], r["target"]): r for r in results.runs(study_run)}
    outputs = {(o.phase, o.tool) for o in results.outputs(runs[("ageing", "btrfs")]["id"])}
    assert outputs == {("write", "fio"), ("before", "fio"), ("before", "filefrag"), ("overwrite", "fio"), ("after", "fio"), ("after", "filefrag")}
    assert "# phase overwrite: fio" in runs[("ageing", "btrfs")]["job_file"] and "rw=randwrite" in runs[("ageing", "btrfs")]["job_file"]
    # seed 002's pass: every phase measured, what it wrote recorded
    iozone = groups.values[("iozone", "ext4")]
    assert {"write.write_mb_s", "rewrite.write_mb_s", "read.read_mb_s", "reread.read_mb_s"} <= set(iozone)
    assert runs[("iozone", "ext4")]["data_pattern"].startswith("zeros") and runs[("iozone", "ext4")]["buffered"]
    assert "after.extents" in result.stdout and "overwrite.write_iops" in result.stdout


def test_snapshots_under_load_takes_and_counts_its_snapshots(workdir, tmp_path):
    study = AGEING.replace('["btrfs", "ext4"]', '"btrfs"').replace('"cow-ageing"', '"snapshots-under-load"').replace('runtime = "1s"', 'runtime = "1.5s"\nsnapshot_every = "0.4s"')
    db = tmp_path / "r.db"
    result = fslab("run", str(write_study(tmp_path, study)), "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    study_run = results.study_run()["id"]
    cell = results.sample_groups(study_run).values[("ageing", "btrfs")]
    assert cell["overwrite.snapshots"][0] >= 1
    [run] = [r for r in results.runs(study_run) if r["workload"] == "ageing"]
    [taken] = [o.text.split() for o in results.outputs(run["id"]) if o.tool == "snapshots"]
    assert taken[0].endswith("/.snapshots/fslab-1") and len(taken) == cell["overwrite.snapshots"][0], "each snapshot named by fslab"


def test_a_snapshot_scenario_on_a_target_without_snapshots_is_refused_before_anything_is_made(workdir, tmp_path):
    study = AGEING.replace('"cow-ageing"', '"snapshots-under-load"')
    refused(study, r"s.toml:9: workload\[0\]: workload 'ageing' takes snapshots, and target 'ext4' \(ext4\) has none: run it on btrfs or zfs targets")
    result = fslab("run", str(write_study(tmp_path, study)), "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root))
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
    assert s.job(s.phases[0]).sections[0].options[-2:] == (("filename", "mine"), ("size", str(32 * 2**20))), "fslab names the shared file"
    assert s.data.kind == "compressible"
    refused(PHASES.replace('iodepth = 4,', 'iodepth = 4, filename = "/etc/passwd",'), r"s.toml:2\d: workload\[0\].phase\[2\].fio: .*filename")
    refused(PHASES.replace('name = "fill"', 'name = "read"'), r"phase names must differ: read repeated")
    refused(PHASES.replace('action = "sleep"', 'action = "sleep"\nfio = { rw = "read" }'), r"phase\[1\]: .*one of them")
    refused(PHASES.replace('extents = true', 'measured = false').replace('seconds = 1', 'seconds = 1\nmeasured = false'), r"no phase is measured")


def test_a_phases_time_is_its_runtime_as_fio_reads_it_and_too_few_snapshots_are_noted():
    # fio reads a runtime in any of its units: a phase written "3s" lasts 3 s, as one a study scaled to "1500ms" lasts 1.5
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
