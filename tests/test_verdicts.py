"""What a summary says from stored samples: rankings read from the verdicts' own family, no flag
on noise, no figure from too few runs, each target against its own baseline. Synthetic and
stored samples only: never this machine's speed."""

import json
import re
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from fslab.core.checks import Unsupported
from fslab.model.records import SampleGroups
from fslab.report.formats.summary_csv import to_csv
from fslab.report.formats.summary_json import to_json
from fslab.report.formatting import fmt_mean_ci
from fslab.report.sections import comparison_groups, comparison_rows, header_lines, method_line, skipped_lines
from fslab.report.summary import CellSummary, StudySummary, stored_baselines
from fslab.statistics.analysis import analyse, ranking_line
from fslab.statistics.raw_reference import FLASH_READ_US, CachedReference, cached_references
from fslab.statistics.stats import INTERVAL_MIN_RUNS, compare, interval_text, summarize
from fslab.study import StudyError, load_study, parse_study

DIRECTIONS = {"write_iops": True, "write_lat_p99_us": False, "read_iops": True, "read_lat_p99_us": False}

# baseline-paper's rand_write as it went wrong: the ranking (its own family of 6 pairs) read
# "raw = xfs > ext4 = btrfs" while the verdicts (their family of 6 rows) found xfs and raw not
# detectably different from ext4.
RAND_WRITE = {
    ("rand_write", "ext4"): {"write_iops": [29403.9, 30182.7, 28783.1], "write_lat_p99_us": [1178.2, 1330.9, 893.0]},
    ("rand_write", "xfs"): {"write_iops": [31840.8, 31698.2, 31191.0], "write_lat_p99_us": [806.1, 601.6, 1422.8]},
    ("rand_write", "btrfs"): {"write_iops": [28266.3, 30142.0, 28890.6], "write_lat_p99_us": [1071.9, 848.4, 1416.4]},
    ("rand_write", "raw"): {"write_iops": [31597.5, 33280.9, 31682.9], "write_lat_p99_us": [1047.6, 683.4, 1796.4]},
}


def contradictions(analysis) -> list[str]:
    """Every verdict row the ranking of its workload contradicts: told apart when the verdict
    found no difference, not told apart (or in the wrong order) when it found one."""
    found = []
    for r in analysis.rows:
        ranking = analysis.rankings.get((r.workload, r.metric, None))
        if ranking is None:
            continue
        apart = not set(ranking.letters[r.target]) & set(ranking.letters[r.baseline])
        ahead = ranking.order.index(r.target) < ranking.order.index(r.baseline)
        if apart != r.comparison.differs or (apart and ahead != (r.comparison.verdict == "faster")):
            found.append(
                f"{r.workload} {r.target} vs {r.baseline}: {r.comparison.verdict}, ranking {ranking_line(ranking)}"
            )
        if ranking.tiers is not None:  # '>' and '=' must say the same as the letters
            tier = {name: i for i, names in enumerate(ranking.tiers) for name in names}
            if (tier[r.target] != tier[r.baseline]) != apart:
                found.append(f"tiers of {r.target} and {r.baseline}")
    return found


def test_the_ranking_never_contradicts_a_verdict():
    analysis = analyse(RAND_WRITE, DIRECTIONS, ["ext4", "xfs", "btrfs", "raw"], ["rand_write"])
    assert contradictions(analysis) == []
    verdicts = {r.target: r.comparison.verdict for r in analysis.rows if r.metric == "write_iops"}
    line = ranking_line(analysis.rankings[("rand_write", "write_iops", None)])
    for target in ("xfs", "raw"):
        if verdicts[target] == "no detectable difference":
            assert not re.search(rf"{target} [>=].*> ext4|{target} > ext4", line), line
    # one family: every pair of targets per workload and metric, the same p in the row and the pair
    assert analysis.family_size == 2 * 6
    for r in analysis.rows:
        assert r.comparison.p_adjusted == analysis.comparison(r.workload, r.metric, r.baseline, r.target).p_adjusted


@pytest.mark.parametrize("seed", range(40))
def test_rankings_and_verdicts_agree_on_random_studies(seed):
    rng = np.random.default_rng(seed)
    names = [f"t{i}" for i in range(int(rng.integers(3, 7)))]
    samples = {}
    for workload in ("a", "b"):
        for name in names:
            level, sigma = 1000 * float(rng.choice([1.0, 1.03, 1.06, 1.1, 1.2])), float(rng.uniform(0.01, 0.08))
            samples[(workload, name)] = {
                "read_iops": list(rng.lognormal(np.log(level), sigma, int(rng.integers(3, 6)))),
                "read_lat_p99_us": list(rng.lognormal(np.log(200), 0.2, 3)),
            }
    baseline = str(rng.choice(names))
    analysis = analyse(samples, DIRECTIONS, names, ["a", "b"], baselines={n: baseline for n in names})
    assert contradictions(analysis) == []


def _summary(**fields) -> StudySummary:
    study_run = {
        "study": "s",
        "id": 1,
        "status": "finished",
        "started_at": datetime(2026, 1, 1),
        "plan_seed": 1,
        "scale": 1.0,
        "repetitions": 2,
        "settings": {},
        "environment": {"tools": {}, "image_directory": {}},
    }
    return StudySummary(
        **{
            "study_run": study_run,
            "targets": [],
            "workloads": [],
            "cells": [],
            "analysis": analyse({}, {}, ["x"], []),
            **fields,
        }
    )


def test_the_method_line_names_the_family_it_corrected():
    s = _summary()
    s.analysis = analyse(RAND_WRITE, DIRECTIONS, ["ext4", "xfs", "btrfs", "raw"], ["rand_write"])
    assert "one family of 12 comparisons (all pairs of this study run)" in method_line(s)


# --- "a cache answered" only when the interval says so; a cached raw reference said once ---------


def test_a_raw_reference_too_fast_for_a_disk_is_named_once_in_the_header():
    targets = [{"name": "raw", "filesystem": "raw", "spec": {}}, {"name": "xfs", "filesystem": "xfs", "spec": {}}]
    workloads = {
        "RND4K_Q1T1_read": {"rw": "randread", "bs": "4k", "iodepth": "1", "numjobs": "1"},
        "RND4K_Q1T1_write": {"rw": "randwrite", "bs": "4k", "iodepth": "1", "numjobs": "1"},
        "SEQ1M_Q8T1_write": {"rw": "write", "bs": "1m", "iodepth": "8", "numjobs": "1"},
        "rand_read": {"rw": "randread", "bs": "4k", "iodepth": "16", "numjobs": "1"},
    }
    # this machine's host cache, as stored: 50–64k 4 KiB reads at queue depth 1, ~3 GB/s writes
    cached = {
        ("RND4K_Q1T1_read", "raw"): {"read_iops": [50210.0, 63950.0, 58800.0]},
        ("RND4K_Q1T1_write", "raw"): {
            "write_iops": [52000.0, 61000.0, 57500.0]
        },  # an SSD's write cache acknowledges this fast
        ("SEQ1M_Q8T1_write", "raw"): {
            "write_iops": [2900.0, 3050.0, 2990.0],
            "write_mb_s": [3041.0, 3198.0, 3135.0],
        },  # an NVMe disk does this
        ("rand_read", "raw"): {"read_iops": [64000.0, 60000.0, 66000.0]},  # 16 in flight: 250 µs each, a disk's pace
        ("RND4K_Q1T1_read", "xfs"): {"read_iops": [90000.0, 95000.0, 93000.0]},  # not a raw reference
    }
    found = cached_references(cached, targets, workloads)
    assert [(c.target, c.workload) for c in found] == [("raw", "RND4K_Q1T1_read")]
    assert (
        "answered random reads in 17 µs each" in found[0].finding and f"at least {FLASH_READ_US:g} µs" in found[0].limit
    )
    lines = [line for line in header_lines(_summary(cached_reference=found)) if "cached" in line]
    assert (
        len(lines) == 1
        and "Absolute figures here are not disk figures; ratios measured in one study run are." in lines[0]
    )
    disk = {
        ("RND4K_Q1T1_read", "raw"): {"read_iops": [14800.0, 15100.0, 14950.0]},
        ("SEQ1M_Q8T1_write", "raw"): {"write_mb_s": [3100.0, 3150.0]},
    }
    assert cached_references(disk, targets, workloads) == []
    assert not [line for line in header_lines(_summary()) if "cached" in line]
    assert cached_references({("x", "raw"): {"read_mb_s": [21000.0, 22000.0]}}, targets, {"x": {}})[0].limit.startswith(
        "beyond a PCIe 5.0 x4"
    )


def test_a_raw_reference_writing_far_faster_than_it_reads_is_said_to_cache_its_writes():
    """Seed 001's btrfs-vs-zfs run: the raw device wrote 5,830 MB/s sequentially and read 2,355."""
    targets = [{"name": "raw", "filesystem": "raw", "spec": {}}, {"name": "btrfs", "filesystem": "btrfs", "spec": {}}]
    workloads = {
        "SEQ1M_Q8T1_read": {"rw": "read", "bs": "1m", "iodepth": "8"},
        "SEQ1M_Q8T1_write": {"rw": "write", "bs": "1m", "iodepth": "8"},
        "SEQ1M_Q1T1_read": {"rw": "read", "bs": "1m", "iodepth": "1"},
        "SEQ1M_Q1T1_write": {"rw": "write", "bs": "1m", "iodepth": "1"},
        "RND4K_Q1T1_write": {"rw": "randwrite", "bs": "4k", "iodepth": "1"},
    }
    cached = {
        ("SEQ1M_Q8T1_read", "raw"): {"read_mb_s": [2340.0, 2355.0, 2370.0]},
        ("SEQ1M_Q8T1_write", "raw"): {"write_mb_s": [5790.0, 5830.0, 5900.0]},
        ("SEQ1M_Q1T1_read", "raw"): {"read_mb_s": [1500.0, 1520.0]},
        ("SEQ1M_Q1T1_write", "raw"): {"write_mb_s": [2000.0, 2100.0]},  # 1.4×: within what a disk does
        ("RND4K_Q1T1_write", "raw"): {"write_mb_s": [9000.0, 9100.0]},  # random: no sequential read of its shape
        ("SEQ1M_Q8T1_write", "btrfs"): {"write_mb_s": [9000.0, 9100.0]},  # not a raw reference
        ("SEQ1M_Q8T1_read", "btrfs"): {"read_mb_s": [1000.0, 1100.0]},
    }
    found = cached_references(cached, targets, workloads)
    assert [(c.target, c.workload, c.writes_only) for c in found] == [("raw", "SEQ1M_Q8T1_write", True)]
    assert "5,830 MB/s, 2.5× its sequential reads (2,355 MB/s, SEQ1M_Q8T1_read)" in found[0].finding
    [line] = [line for line in header_lines(_summary(cached_reference=found)) if "cached" in line]
    assert line.startswith("**The raw reference's writes are cached**: raw · SEQ1M_Q8T1_write wrote sequentially")
    assert (
        "a volatile cache below acknowledged the writes" in line
        and "Absolute write figures here are not disk figures" in line
    )
    # a disk: writes at most as fast as its reads, or a little over (1.5× is the line)
    disk = cached | {("SEQ1M_Q8T1_write", "raw"): {"write_mb_s": [3400.0, 3500.0, 3530.0]}}
    assert cached_references(disk, targets, workloads) == []
    # beside a read no disk could answer: each said on its own line
    both = found + [
        CachedReference("raw", "RND4K_Q1T1_read", "answered random reads in 17 µs each", "a disk takes at least 25 µs")
    ]
    lines = [line for line in header_lines(_summary(cached_reference=both)) if "cached" in line]
    assert [line.split("**")[1] for line in lines] == [
        "The raw reference is cached",
        "The raw reference's writes are cached",
    ]


# --- no absurd figure from two runs --------------------------------------------------------------


def test_a_two_run_cell_says_how_many_runs_it_needs_and_a_comparison_no_absurd_figure():
    # two runs that differ 30-fold: t with 1 degree of freedom made "±105893647537.9%"-like figures
    base, other = [1200.0, 36000.0], [900.0, 41000.0]
    cell = summarize(base)
    assert cell.needs_runs is not None and cell.needs_runs >= INTERVAL_MIN_RUNS
    assert fmt_mean_ci(cell) == f"18,600 (interval needs {cell.needs_runs} runs)"
    c = compare(base, other)  # its verdict is read from its interval, printed however wide: undecided
    assert c.verdict == "undecided" and c.reason.startswith(f"2 runs: interval {interval_text(c.interval)}")
    analysis = analyse(
        {("w", "a"): {"read_iops": base}, ("w", "b"): {"read_iops": other}}, DIRECTIONS, ["a", "b"], ["w"]
    )
    compared = analysis.rows[0].comparison
    row = " ".join(comparison_rows(analysis.rows)[0])
    assert interval_text(compared.interval) in row and "undecided" in row, row
    assert not re.search(r"\d{5,}", row), f"two significant digits far from 1, not an absurd figure: {row}"
    # a tight pair of runs still needs the minimum: t(1) is 12.7 × the standard error
    assert summarize([1000.0, 1001.0]).needs_runs == INTERVAL_MIN_RUNS
    assert summarize([1000.0, 1001.0, 999.0]).needs_runs is None
    # three runs each whose ratio interval is still too wide to decide say how many would
    wide = compare([1000.0, 1400.0, 2000.0], [700.0, 720.0, 710.0])  # Welch: 1 noisy side, t with ~2 df
    assert wide.verdict == "undecided" and wide.runs_to_decide is not None and wide.runs_to_decide > 3, wide
    # machine formats keep the numbers and carry the flag
    s = _summary(
        cells=[CellSummary("w", "a", 0, {"read_iops": cell})], samples=SampleGroups({}, {"read_iops": "IOPS"}, {})
    )
    s.analysis = analysis
    assert to_csv(s).splitlines()[0].endswith("ci_high,needs_runs,warnings")
    document = json.loads(to_json(s))
    assert document["cells"][0]["metrics"]["read_iops"]["needs_runs"] == cell.needs_runs
    assert document["comparisons"][0]["interval"] == pytest.approx(list(compared.interval))


# --- each target against its own baseline -------------------------------------------------------


def test_tuning_paper_compares_each_filesystem_with_its_own_defaults():
    study = load_study("tuning-paper")
    baselines = {t.name: t.baseline for t in study.targets}
    assert baselines["ext4[noatime]"] == baselines["ext4[barrier=0]"] == "ext4[defaults]"
    assert baselines["xfs[noatime]"] == "xfs[defaults]" and baselines["btrfs[noatime]"] == "btrfs[defaults]"
    assert all(t.spec()["baseline"] == t.baseline for t in study.targets), "stored with the target"
    names = [t.name for t in study.targets]
    rng = np.random.default_rng(1)
    samples = {("rand_write", n): {"write_iops": list(rng.lognormal(np.log(1000), 0.02, 4))} for n in names}
    stored = [{"name": t.name, "filesystem": t.filesystem, "spec": t.spec()} for t in study.targets]
    analysis = analyse(samples, DIRECTIONS, names, ["rand_write"], baselines=stored_baselines(stored, None))
    compared = {r.target: r.baseline for r in analysis.rows}
    assert compared["xfs[noatime]"] == "xfs[defaults]" and compared["btrfs[noatime]"] == "btrfs[defaults]"
    assert compared["ext4[data=writeback]"] == "ext4[defaults]" and "ext4[defaults]" not in compared
    groups = dict(comparison_groups(analysis.rows))
    assert [r.target for r in groups["xfs[defaults]"]] == ["xfs[noatime]"]
    # --baseline overrides every target's own
    overridden = analyse(
        samples, DIRECTIONS, names, ["rand_write"], baselines=stored_baselines(stored, None), baseline="xfs[defaults]"
    )
    assert {r.baseline for r in overridden.rows} == {"xfs[defaults]"}


def test_a_target_names_its_baseline_which_must_exist():
    study = """\
[study]
name = "b"
workloads = ["rand_read"]
baseline = "raw"

[[target]]
filesystem = "raw"

[[target]]
name = "ext4"
filesystem = "ext4"
mount_options = ["defaults", "noatime"]

[[target]]
filesystem = "xfs"
baseline = "ext4[noatime]"
"""
    targets = {t.name: t.baseline for t in parse_study(study, "s.toml", base_dir=Path(".")).targets}
    assert targets == {"raw": "raw", "ext4[defaults]": "raw", "ext4[noatime]": "ext4[defaults]", "xfs": "ext4[noatime]"}
    with pytest.raises(StudyError) as error:
        parse_study(study.replace('"ext4[noatime]"', '"ext4[noatime"'), "s.toml", base_dir=Path("."))
    assert "s.toml:16: target[2].baseline: unknown target 'ext4[noatime'" in str(error.value)


def test_summaries_of_targets_stored_before_baselines_use_the_study_baseline():
    stored = [{"name": "a", "spec": {}}, {"name": "b", "spec": {}}, {"name": "c", "spec": {"baseline": "b"}}]
    assert stored_baselines(stored, None) == {"a": "a", "b": "a", "c": "b"}
    assert stored_baselines(stored, "b") == {"a": "b", "b": "b", "c": "b"}


def test_btrfs_options_compares_every_option_with_default_btrfs():
    """Seed 002 compares compression, nodatasum and nodatacow with default Btrfs, not with the
    sweep's first option."""
    study = load_study("btrfs-options")
    by_name = {t.name: t for t in study.targets}
    default = by_name["btrfs"]
    assert (default.filesystem, default.mkfs_options, default.mount_options, default.devices) == ("btrfs", (), "", 1), (
        "default Btrfs is a target"
    )
    assert study.baseline == "btrfs" and default.baseline == "btrfs", (
        "compared with none: the others are compared with it"
    )
    swept = [n for n in by_name if n.startswith("btrfs-opts[")]
    assert swept == ["btrfs-opts[nodatasum]", "btrfs-opts[nodatacow]", "btrfs-opts[compress=zstd]"]
    assert {n: t.baseline for n, t in by_name.items() if n != "btrfs"} == {n: "btrfs" for n in by_name if n != "btrfs"}
    rng = np.random.default_rng(2)
    samples = {("rand_write", n): {"write_iops": list(rng.lognormal(np.log(1000), 0.02, 3))} for n in by_name}
    stored = [{"name": t.name, "filesystem": t.filesystem, "spec": t.spec()} for t in study.targets]
    analysis = analyse(
        samples, DIRECTIONS, list(by_name), ["rand_write"], baselines=stored_baselines(stored, study.baseline)
    )
    assert {r.target: r.baseline for r in analysis.rows} == {n: "btrfs" for n in by_name if n != "btrfs"}


def test_the_study_baseline_of_a_sweeps_filesystem_wins_over_its_first_value():
    study = """\
[study]
name = "b"
workloads = ["rand_read"]
baseline = "ext4"

[[target]]
filesystem = "ext4"

[[target]]
name = "ext4-tuned"
filesystem = "ext4"
mount_options = ["noatime", "data=writeback"]

[[target]]
name = "xfs"
filesystem = "xfs"
mount_options = ["defaults", "noatime"]

[[target]]
name = "ext4-named"
filesystem = "ext4"
mount_options = ["noatime", "nodiratime"]
baseline = "ext4-tuned[noatime]"
"""
    targets = {t.name: t.baseline for t in parse_study(study, "s.toml", base_dir=Path(".")).targets}
    assert targets == {
        "ext4": "ext4",
        "ext4-tuned[noatime]": "ext4",
        "ext4-tuned[data=writeback]": "ext4",  # the reference the study declared for ext4
        "xfs[defaults]": "ext4",
        "xfs[noatime]": "xfs[defaults]",  # no XFS is declared: XFS against its own defaults
        "ext4-named[noatime]": "ext4-tuned[noatime]",
        "ext4-named[nodiratime]": "ext4-tuned[noatime]",  # a table's own wins over both
    }


def test_a_skipped_baseline_leaves_its_targets_uncompared_and_says_why():
    """nas-stack without ext4-stack (no md or device-mapper here): its targets were to be
    compared with ext4-stack; they are compared with none, not with a bare image instead, and
    the skip list says so, each skipped target once."""
    study = load_study("nas-stack").without({"ext4-stack"})
    names = [t.name for t in study.targets]
    assert names == ["ext4-stack/raw-1", "ext4-stack/raw-2", "zfs-mirror", "zfs-mirror-encrypted"]
    assert {t.baseline for t in study.targets} == {"ext4-stack"}, "the baseline the study gave them, kept"
    rng = np.random.default_rng(3)
    samples = {
        ("backup-write", n): {"write_iops": list(rng.lognormal(np.log(level), 0.02, 3))}
        for n, level in zip(names, (900, 950, 400, 300))
    }
    stored = [{"name": t.name, "filesystem": t.filesystem, "spec": t.spec()} for t in study.targets]
    baselines = stored_baselines(stored, study.baseline)
    analysis = analyse(samples, DIRECTIONS, names, ["backup-write"], baselines=baselines)
    assert analysis.rows == [], "no comparison with a substitute"
    assert analysis.rankings[("backup-write", "write_iops", None)].order[0] in names[:2], (
        "the rankings still order them"
    )
    from fslab.core.checks import by_target

    why = "it needs md-raid1, and this kernel has no md RAID1"
    skipped = [
        Unsupported("ext4-stack", why),
        Unsupported("ext4-stack", "it needs luks, and no dm-crypt"),
        Unsupported("ext4-stack", why),
        Unsupported("zfs-mirror-encrypted", "encryption needs OpenZFS"),
    ]
    s = _summary(
        targets=stored[:3],
        skipped=by_target(skipped),
        analysis=analyse(samples, DIRECTIONS, names[:3], ["backup-write"], baselines=baselines),
    )
    lines = skipped_lines(s)
    assert lines[0] == "Skipped: 2 target(s) this machine cannot run (--skip-unsupported):" and len(lines) == 3
    assert lines[1].startswith(
        f"ext4-stack: {why}; it needs luks, and no dm-crypt — it is the baseline of "
        "ext4-stack/raw-1, ext4-stack/raw-2, zfs-mirror, so they are compared with none"
    )
    assert lines[2] == "zfs-mirror-encrypted: encryption needs OpenZFS"
    # --baseline compares every target with one that ran, and then nothing is said to be uncompared
    s.analysis = analyse(samples, DIRECTIONS, names[:3], ["backup-write"], baselines=baselines, baseline="zfs-mirror")
    assert {r.target for r in s.analysis.rows} == {
        "ext4-stack/raw-1",
        "ext4-stack/raw-2",
    } and "baseline of" not in " ".join(skipped_lines(s))


def test_one_rule_says_who_is_compared_with_whom():
    from fslab.statistics.analysis import compared_with

    present = ["a", "b", "c"]
    assert compared_with("b", "a", present) == "a"
    assert compared_with("a", "a", present) is None, "its own baseline: compared with none"
    assert compared_with("b", "gone", present) is None, "a baseline not measured here: none, not a substitute"
    assert (
        compared_with("b", "a", present, override="c") == "c" and compared_with("c", "a", present, override="c") is None
    )
    assert compared_with("b", "a", present, override="gone") == "a", (
        "--baseline where it was measured, else each target's own"
    )
    assert compared_with("b", None, present) == "a", "stored without one: the first"
