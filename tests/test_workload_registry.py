"""Workload kinds are a registry: each kind is a module that registers itself with its table in a
study file, how a workload is built from it and the tool it drives; the study file, the runner,
`fslab doctor` and `fslab list` follow what is registered — a toy kind added in one file
(toys/workload_kind.py) included, run end to end."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import write_study
from fslab import workloads
from fslab.cli import app
from fslab.results import ResultsDB
from kinds_helpers import read_study, refused

TRUTH = """\
[study]
name = "truth"
repetitions = 2
image_size = "128MiB"
image_fill = "sparse"

[[target]]
filesystem = "ext4"

[[workload]]
name = "truth"
kind = "true"
times = 3
"""


@pytest.fixture
def toy_registered(toys) -> None:  # noqa: ANN001
    """The toy registered for one test (conftest.toys)."""
    toys("workload_kind")


def test_importing_the_registry_loads_no_kind_and_asking_for_one_loads_it_alone():
    code = (
        "import sys, fslab.workloads as w; before = sorted(m for m in sys.modules if m.startswith('fslab.workloads.'));"
        "w.registered('dd'); after = sorted(m for m in sys.modules if m.startswith('fslab.workloads.'));"
        "print(' '.join(before)); print(' '.join(after))"
    )
    before, after = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert not set(before.split()) & {shipped.module for shipped in workloads.SHIPPED.values()}, before
    others = {shipped.module for name, shipped in workloads.SHIPPED.items() if name != "dd"}
    assert "fslab.workloads.dd" in after.split() and not set(after.split()) & others, after


def test_fslabs_own_kinds_join_the_registry_from_their_own_modules():
    assert [k.name for k in workloads.kinds()] == list(workloads.SHIPPED)
    assert [k.name for k in workloads.kinds() if k.tool and k.tool.required] == ["fio"], (
        "fio's alone is a tool fslab refuses to start without"
    )
    assert ("sysbench", "sysbench") in [(k.name, k.tool.command) for k in workloads.kinds() if k.tool]
    for name, shipped in workloads.SHIPPED.items():
        assert type(workloads.registered(name).kind).__module__ == shipped.module, f"{name} joins from its module"
        assert workloads.metrics_of(name) == workloads.registered(name).kind.metrics, (
            f"{shipped.metrics} declares what {name} reports"
        )


def test_a_toy_kind_is_read_from_a_study_file_with_its_own_fields(toy_registered):
    study = read_study(TRUTH)
    assert [(w.name, w.kind, w.tool.spec()) for w in study.workloads] == [("truth", "true", {"times": 3})]
    refused(TRUTH.replace("times = 3", "times = 0"), r"s.toml:13: workload\[0\].times: .*greater than or equal to 1")
    refused(TRUTH.replace("times = 3", 'rw = "read"'), r"unknown field 'rw'.* \(in workload\[0\].rw\)")


def test_a_kind_not_registered_is_refused_naming_those_there_are():
    refused(
        TRUTH,
        r"s.toml:12: workload\[0\].kind: unknown workload kind 'true'; allowed: " + ", ".join(workloads.SHIPPED) + "$",
    )


@pytest.mark.root
def test_a_toy_kind_runs_end_to_end_and_its_metric_reaches_the_summary(toy_registered, workdir, tmp_path):
    """`fslab run` of a study using the toy kind, in this process: each run is stored with the
    toy's raw outputs and its metric, with the role the toy declares; `fslab summary` shows it.
    (Its series reaching the page: test_report_hook.py.)"""
    study = write_study(tmp_path, TRUTH)
    db = tmp_path / "r.db"
    ran = CliRunner().invoke(app, ["run", str(study), "--db", str(db), "--workdir", str(workdir.root)])
    assert ran.exit_code == 0, ran.output
    results = ResultsDB(str(db))
    study_run = results.study_run()["id"]
    runs = results.runs(study_run)
    assert [(r["workload"], r["target"], r["job_file"]) for r in runs] == [("truth", "ext4", "true × 3")] * 2
    outputs = results.outputs(runs[0]["id"])
    assert [o.tool for o in outputs] == ["true", "true_calls"]
    ends = [float(line.split()[0]) for line in outputs[1].text.splitlines()]
    assert len(ends) == 3 and ends == sorted(ends), "each call, at its end: the series its report hook offers"
    groups = results.sample_groups(study_run)
    assert len(groups.values[("truth", "ext4")]["true_ms"]) == 2 and all(
        v > 0 for v in groups.values[("truth", "ext4")]["true_ms"]
    )
    assert groups.roles.primary_in("truth", groups.values[("truth", "ext4")]) == ["true_ms"]
    summary = CliRunner().invoke(app, ["summary", "--db", str(db)])
    assert summary.exit_code == 0, summary.output
    assert "true_ms" in summary.output


def test_fslab_summary_loads_no_workload_kind(tmp_path):
    """Reading stored runs — `fslab summary`, in a process of its own — takes each kind's metric
    declarations from its light module, never the kind."""
    db = tmp_path / "fslab.db"
    shutil.copy(Path(__file__).parent / "fixtures" / "schema-v7.db", db)
    code = (
        "import sys; from fslab.cli import app\n"
        f"try: app(['summary', '--db', {str(db)!r}])\n"
        "except SystemExit as e: assert not e.code, e.code\n"
        "print('LOADED', ' '.join(sorted(m for m in sys.modules if m.startswith('fslab'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = out.rpartition("LOADED ")[2].split()
    assert "fslab.report.summary" in loaded, "the summary was made"
    kinds = [m for m in loaded if m in {shipped.module for shipped in workloads.SHIPPED.values()}]
    assert not kinds, f"fslab summary loads workload kinds {kinds}"
