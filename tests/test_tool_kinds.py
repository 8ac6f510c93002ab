"""Workload kinds beyond fio, through the study file and the `fslab` command: sysbench fileio and
dd on a real ext4 loop image (small files, 1 s), their metrics stored with their own roles, and
what the study file refuses before anything is made."""

import pytest

from conftest import fslab, write_study
from fslab import workloads
from fslab.results import ResultsDB
from fslab.workloads.dd import DdOptions
from fslab.workloads.sysbench import SysbenchOptions
from kinds_helpers import read_study, refused

KINDS = """\
[study]
name = "kinds"
repetitions = 1
image_size = "512MiB"

[[target]]
filesystem = "ext4"

[[workload]]
name = "mail"
kind = "sysbench"
options = { "file-num" = 100, "file-total-size" = "400K", time = 1 }

[[workload]]
name = "sanity"
kind = "dd"
data = "zeros"
options = { bs = "1M", count = 32 }

[[workload]]
name = "fio-read"
rw = "read"
size = "32MiB"
runtime = "1s"
"""


@pytest.mark.root
def test_sysbench_and_dd_run_end_to_end_with_their_own_metrics_and_roles(workdir, tmp_path):
    study = write_study(tmp_path, KINDS)
    db = tmp_path / "r.db"
    result = fslab("run", str(study), "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    study_run = results.study_run()["id"]
    runs = {r["workload"]: r for r in results.runs(study_run)}
    assert (
        runs["mail"]["job_file"].startswith("sysbench fileio --file-num=100 --file-total-size=400K")
        and runs["mail"]["buffered"]
    )
    assert runs["mail"]["data_pattern"].startswith("random (sysbench --validate=on")
    assert (
        runs["sanity"]["job_file"].splitlines()[0].startswith("dd if=/dev/zero of=")
        and "oflag=direct" in runs["sanity"]["job_file"]
    )
    assert {(o.phase, o.tool) for o in results.outputs(runs["sanity"]["id"])} == {("write", "dd"), ("read", "dd")}, (
        "each measured step kept as it came"
    )
    assert "events" in results.outputs(runs["mail"]["id"])[0].text
    groups = results.sample_groups(study_run)
    mail, dd, fio = (groups.values[(w, "ext4")] for w in ("mail", "sanity", "fio-read"))
    assert mail["events_per_s"][0] > 0 and mail["fsyncs_per_s"][0] > 0
    assert dd["write_mb_s"][0] > 0 and dd["read_mb_s"][0] > 0 and dd["write_elapsed_s"][0] > 0
    assert fio["read_iops"][0] > 0
    # Kinds share names: dd's read_mb_s decides its cell, fio's does not.
    assert groups.roles.primary_in("sanity", dd) == ["read_mb_s", "write_mb_s"]
    assert groups.roles.primary_in("fio-read", fio) == ["read_iops"]
    assert groups.roles.primary_in("mail", mail) == ["events_per_s"]
    notes = {n["kind"] for n in runs["mail"]["notes"]}
    assert "fsync_sweep" in notes, "--file-fsync-freq=1 over 100 files: the sweep is named on the run"
    assert "fsyncs per write with 100 files" in result.stdout, "and shown on its cell"


def test_a_workload_of_an_unknown_kind_is_refused_where_it_is_written():
    refused(
        KINDS.replace('"sysbench"', '"sysbenh"'),
        r"s.toml:11: workload\[0\].kind: unknown workload kind 'sysbenh' \(did you mean 'sysbench'\?\); allowed: "
        + ", ".join(workloads.names()),
    )


def test_a_tools_options_go_through_its_allow_list():
    refused(
        KINDS.replace("count = 32 }", 'count = 32, of = "/dev/sda" }'),
        r"s.toml:18: workload\[1\].options: dd of=/dev/sda is refused",
    )
    refused(
        KINDS.replace("time = 1 }", 'time = 1, "config-file" = "/etc/x" }'), r"workload\[0\].options: .*--config-file"
    )
    refused(
        KINDS.replace('kind = "sysbench"\n', 'kind = "sysbench"\nrw = "read"\n'),
        r"unknown field 'rw'.* \(in workload\[0\].rw\)",
    )


def test_random_sysbench_data_needs_whole_blocks_per_file_and_scaling_keeps_them():
    refused(KINDS.replace('"400K"', '"40M"'), r"a whole number of blocks: 40M over 100 files is 419430 bytes a file")
    read_study(KINDS.replace('"400K"', '"40M"').replace('kind = "sysbench"\n', 'kind = "sysbench"\ndata = "zeros"\n'))
    mail = read_study(KINDS.replace('"400K"', '"40000K"'), scale=0.1).workloads[0].tool
    assert (
        isinstance(mail, SysbenchOptions)
        and mail.file_size % 4096 == 0
        and mail.file_size == 40960
        and mail.seconds == 1
    )
    dd = read_study(KINDS, scale=0.5).workloads[1].tool
    assert isinstance(dd, DdOptions) and dd.count == 16


def test_a_tool_that_needs_a_directory_is_refused_on_a_raw_target():
    refused(
        KINDS.replace('filesystem = "ext4"\n', 'filesystem = "ext4"\nraw_baseline = true\n'),
        r"workload 'mail' \(sysbench\) works in a filesystem's directory, and target 'ext4/raw' is a raw device",
    )


def test_a_workload_runs_on_the_targets_it_names():
    study = read_study(
        KINDS.replace('filesystem = "ext4"\n', 'filesystem = "ext4"\nraw_baseline = true\n')
        .replace('kind = "sysbench"\n', 'kind = "sysbench"\ntargets = ["ext4"]\n')
        .replace('kind = "dd"\n', 'kind = "dd"\ntargets = ["ext4"]\n')
    )
    assert sorted(c.key for c in study.cells) == [
        ("fio-read", "ext4"),
        ("fio-read", "ext4/raw"),
        ("mail", "ext4"),
        ("sanity", "ext4"),
    ]
    refused(
        KINDS.replace('kind = "sysbench"\n', 'kind = "sysbench"\ntargets = ["xfs"]\n'),
        r"s.toml:12: workload\[0\].targets: unknown target 'xfs'; allowed: ext4",
    )
