"""`fslab run --kernel K --boots 2` for real (lab/study.py, under QEMU: TCG here): a tiny study's
plan run in two boots of one cached kernel package, stored as runs of two boots, and the summary's
boot-to-boot variation (statistics/boots.py) as those runs make it. Two boots, each running fslab
in the guest, take minutes under emulation (6 min 43 s here on 2026-11-29, beside other sessions'
work): `long` (make test-long)."""

from __future__ import annotations

import json
import statistics

import pytest

from conftest import fresh_workdir, ran_study
from fslab.lab import vm
from short_studies import short_study

pytestmark = [pytest.mark.long, pytest.mark.root, pytest.mark.guest]

RELEASE = "6.1.0-56-amd64"
STUDY = short_study("boots", '[[target]]\nfilesystem = "ext4"\n')  # 2 runs of a 16 MiB write, 1 s


@pytest.fixture(scope="module")
def two_boots(tmp_path_factory, needs_root):
    reason = vm.unavailable_reason()
    if reason:
        pytest.skip(f"no lab VM here: {reason}")
    directory = tmp_path_factory.mktemp("lab-boots")
    with fresh_workdir() as workdir:
        result, results, study_run = ran_study(
            directory, STUDY, workdir, "--kernel", RELEASE, "--boots", "2", "--no-ceiling"
        )
    reports = directory / "reports" / f"boots-{study_run}"
    return result, results, study_run, reports


def test_each_boot_stores_its_runs_under_its_own_boot_id(two_boots):
    result, results, study_run, _ = two_boots
    runs = [r for r in results.runs(study_run) if not r["warmup"]]
    assert {(r["host"], r["target"], r["status"]) for r in runs} == {(RELEASE, "ext4", "ok")}, result.stdout
    by_boot: dict[str, list[int]] = {}
    for r in runs:
        by_boot.setdefault(r["boot_id"], []).append(r["repetition"])
    assert len(by_boot) == 2 and None not in by_boot and "" not in by_boot, by_boot
    assert sorted(by_boot.values()) == [[1, 2], [3, 4]], "each boot's runs together, numbered after the boot before"
    assert f"{RELEASE}, boot 1 of 2: booting" in result.stdout and f"{RELEASE}, boot 2 of 2: booting" in result.stdout


def test_the_summary_says_the_boot_to_boot_variation_the_runs_show(two_boots):
    _, results, study_run, reports = two_boots
    runs = {r["id"]: r for r in results.runs(study_run) if not r["warmup"]}
    iops = {run_id: v for (run_id, _, name), v in results.metric_values(study_run, ["write_iops"]).items()}
    by_boot: dict[str, list[float]] = {}
    for run_id, run in runs.items():
        by_boot.setdefault(run["boot_id"], []).append(iops[run_id])
    means = [statistics.fmean(v) for v in by_boot.values()]
    between = statistics.stdev(means) / statistics.fmean(means)
    within = statistics.fmean(statistics.stdev(v) / statistics.fmean(v) for v in by_boot.values())

    document = json.loads((reports / "summary.json").read_text())["kernels"]
    assert document["boots_asked"] == 2 and document["failed"] == []
    (spread,) = [b for b in document["boot_spreads"] if b["metric"] == "write_iops"]
    assert (spread["host"], spread["target"], spread["boots"], spread["runs"]) == (RELEASE, "ext4", 2, 4)
    assert spread["between_cv"] == pytest.approx(between) and spread["within_cv"] == pytest.approx(within)
    text = (reports / "summary.md").read_text()
    assert f"Kernels: {RELEASE} (2 boots)" in text
    assert f"Boot to boot on {RELEASE} (CV of the boot means): " in text
    assert f"ext4 · seq_write write_iops {between:.1%} (within a boot {within:.1%})" in text
