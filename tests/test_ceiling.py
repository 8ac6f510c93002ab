"""The ceiling (issue 32, item 1): a study without a raw target gets a raw reference in its plan
(model/ceiling.py), a figure whose whole interval of target / ceiling lies above 1 is flagged
(statistics/raw_reference.py), and the summary shows each workload's ceiling, out of every judgement.
Judged on synthetic samples; one real short run shows the ceiling reach summary.json."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from conftest import ran_study
from fslab.core.errors import FslabError
from fslab.model.ceiling import CEILING_RUNS, LOOP_CEILING, ZRAM_CEILING, with_ceiling
from fslab.report.formats.summary_json import to_json
from fslab.report.sections import ranking_lines, workload_table
from fslab.report.summary import beyond_raw_note, summarize_study_run
from fslab.results import ResultsDB
from fslab.results.owner import Owner
from fslab.running.plan import Planner, Repetitions
from fslab.statistics.raw_reference import beyond_raw, ceilings, raw_references
from fslab.study import load_study, parse_study
from short_studies import SKIPPED_STACK
from synthetic import store_study_run

NO_RAW = """\
[study]
name = "ceiling"
repetitions = 3
workloads = ["seq_read", "rand_write"]
image_size = "1GiB"
[fio]
size = "64MiB"
runtime = "1s"
[[target]]
filesystem = ["ext4", "xfs"]
[[target]]
name = "two"
filesystem = "btrfs"
devices = 2
[[workload]]
name = "mail"
kind = "sysbench"
options = { "file-num" = 4, "file-total-size" = "4M", "file-test-mode" = "rndrw", time = 1 }
"""


def study(text: str = NO_RAW, no_ceiling: bool = False):  # noqa: ANN201
    return with_ceiling(parse_study(text, "s.toml", base_dir=Path(".")), no_ceiling)


def plan(cells, runs: int, seed: int = 3) -> list:  # noqa: ANN001
    planner, found = Planner(cells, Repetitions(runs=runs), seed), []
    while block := planner.next_block({}):
        found += block
    return found


def test_a_study_without_a_raw_target_plans_a_ceiling_for_each_block_workload():
    s = study()
    ceiling = [t for t in s.targets if t.ceiling]
    assert (
        [t.name for t in ceiling] == [LOOP_CEILING]
        and ceiling[0].filesystem == "raw"
        and ceiling[0].image_size == 2**30
    )
    assert ceiling[0].spec()["ceiling"] is True and "ceiling" not in s.targets[0].spec(), (
        "stored with the study run, absent from the study's own"
    )
    cells = sorted(c.workload.name for c in s.cells if c.target.ceiling)
    assert cells == ["rand_write", "seq_read"], (
        "fio's workloads with their own rw/bs/iodepth; sysbench needs a filesystem"
    )
    assert {c.target.name for c in s.cells if c.workload.name == "mail"} == {"ext4", "xfs", "two"}


def test_a_ceiling_runs_at_least_three_times_shuffled_among_the_study_s_runs():
    for runs in (1, 2, 3, 5):
        found = plan(study().cells, runs)
        counts = Counter(p.cell.key for p in found)
        assert all(n >= CEILING_RUNS for (w, t), n in counts.items() if t == LOOP_CEILING), (runs, counts)
        assert all(n == runs for (w, t), n in counts.items() if t != LOOP_CEILING)
        assert len({p.block for p in found}) == runs, "in the study's own blocks, not after them"
        keys = [(p.cell.target.name, p.cell.workload.name, p.repetition) for p in found]
        assert len(keys) == len(set(keys)), "each run of it numbered apart (a resume finds each)"
    one = [p.cell.target.name for p in plan(study().cells, 1)]
    assert one[0] != LOOP_CEILING or one[1] != LOOP_CEILING or one[2] != LOOP_CEILING
    assert not all(t == LOOP_CEILING for t in one[-6:]), "interleaved, not appended"


def test_no_ceiling_where_the_study_measures_a_raw_target_or_the_user_opts_out():
    with_raw = NO_RAW.split("[[workload]]")[0].replace(
        'filesystem = ["ext4", "xfs"]', 'filesystem = ["ext4", "xfs", "raw"]'
    )
    assert not any(t.ceiling for t in study(with_raw).targets)
    out = study(no_ceiling=True)
    assert out.no_ceiling and not any(t.ceiling for t in out.targets)
    only_files = NO_RAW.replace('workloads = ["seq_read", "rand_write"]', "workloads = []")
    assert not any(t.ceiling for t in study(only_files).targets), "no workload a bare device runs"


def test_a_ceiling_is_on_a_device_of_the_same_kind():
    zram = study(
        NO_RAW.replace(
            'name = "two"\nfilesystem = "btrfs"\ndevices = 2', 'name = "two"\nfilesystem = "btrfs"\nzram = true'
        )
    )
    assert [(t.name, t.zram) for t in zram.targets if t.ceiling] == [(LOOP_CEILING, False), (ZRAM_CEILING, True)]
    named = study(
        NO_RAW.replace("devices = 2", 'device = "/dev/vdx"').replace(
            'filesystem = ["ext4", "xfs"]', 'filesystem = "ext4"\ndevice = "/dev/vdx"'
        )
    )
    ceiling = [t for t in named.targets if t.ceiling]
    assert [(t.name, t.named, t.images) for t in ceiling] == [("(ceiling: /dev/vdx)", ("/dev/vdx",), ("/dev/vdx",))], (
        "the device the user confirmed"
    )
    assert raw_references([{"name": t.name, "filesystem": t.filesystem, "spec": t.spec()} for t in named.targets])[
        "ext4"
    ] == ["(ceiling: /dev/vdx)"]


def test_the_ceiling_is_nobody_s_baseline():
    s = study()
    with pytest.raises(FslabError, match="no target '\\(ceiling\\)'"):
        Planner(s.cells, Repetitions(runs=3), 1, baseline=LOOP_CEILING)
    assert all(t.baseline != LOOP_CEILING for t in s.targets if not t.ceiling)


def test_a_figure_whose_whole_interval_lies_above_its_ceiling_is_flagged():
    """1.2× the bare device, tightly measured: above it (it was flagged only beyond 1.5×). An
    interval that reaches below 1 is not; 2× is beyond, as before."""
    refs = {"near": [LOOP_CEILING], "noisy": [LOOP_CEILING], "far": [LOOP_CEILING], "two": [LOOP_CEILING] * 2}
    samples = {
        ("r", LOOP_CEILING): {"read_iops": [1000.0, 1010.0, 990.0, 1005.0]},
        ("r", "near"): {"read_iops": [1200.0, 1190.0, 1215.0, 1205.0]},
        ("r", "noisy"): {"read_iops": [700.0, 1500.0, 1100.0, 1300.0]},
        ("r", "far"): {"read_iops": [2000.0, 2020.0, 1990.0, 2010.0]},
        ("r", "two"): {"read_iops": [1900.0, 1950.0, 2010.0, 1980.0]},  # two devices: their sum is its ceiling
    }
    found = beyond_raw(samples, refs)
    assert set(found) == {("r", "near"), ("r", "far")}
    near, far = found[("r", "near")]["read_iops"], found[("r", "far")]["read_iops"]
    assert 1.0 < near.comparison.ci_low < 1.2 < near.comparison.ci_high < 1.5 and not near.beyond and far.beyond
    assert beyond_raw_note(near).startswith("above its ceiling: measured 1.20× (95 % CI 1.")
    assert beyond_raw_note(far).startswith("measured 2.0× (95 % CI") and "may have answered" in beyond_raw_note(far)


def test_each_workload_says_its_ceiling_or_why_none():
    targets = [
        {"name": "ext4", "filesystem": "ext4", "spec": {}},
        {"name": LOOP_CEILING, "filesystem": "raw", "spec": {"ceiling": True, "layers": []}},
    ]
    samples = {
        ("r", LOOP_CEILING): {"read_iops": [1000.0, 1010.0, 990.0]},
        ("r", "ext4"): {"read_iops": [900.0, 950.0, 920.0]},
    }
    found = ceilings(samples, targets, {"r": True, "mail": False, "files": True})
    assert [(c.workload, c.source, c.target, c.metric) for c in found[:1]] == [
        ("r", "raw reference", LOOP_CEILING, "read_iops")
    ]
    assert found[0].figure.n == 3 and found[0].figure.mean == pytest.approx(1000.0)
    assert [c.why for c in found[1:]] == ["no ceiling: not a block workload", "no ceiling: no raw device measured it"]
    assert ceilings({}, targets[:1], {"r": True}, no_ceiling=True)[0].why == "no ceiling: --no-ceiling was given"
    own = [{"name": "raw", "filesystem": "raw", "spec": {"layers": []}}]
    assert ceilings({("r", "raw"): samples[("r", LOOP_CEILING)]}, own, {"r": True})[0].source == "raw target"


SUMMARISED = NO_RAW.replace('[[target]]\nname = "two"\nfilesystem = "btrfs"\ndevices = 2\n', "").split("[[workload]]")[
    0
]


def test_the_summary_shows_the_ceiling_and_flags_figures_above_it_out_of_every_judgement(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(SUMMARISED)
    db = ResultsDB(str(tmp_path / "r.db"))
    # the ceiling at half the fixture's figures; xfs a fifth above it; ext4 below
    store_study_run(
        db,
        with_ceiling(load_study(path)),
        seed=2,
        rng=random.Random(2),
        scale={LOOP_CEILING: 0.5, "xfs": 0.6, "ext4": 0.45},
    )
    s = summarize_study_run(db, db.study_run()["id"])
    assert LOOP_CEILING not in {t for r in s.analysis.rows for t in (r.target, r.baseline)}
    assert all(LOOP_CEILING not in r.order for r in s.analysis.rankings.values()), "out of the rankings"
    assert {r.target for r in s.analysis.rows} == {"xfs"}, "xfs against ext4, nobody against the ceiling"
    cells = {(c.workload, c.target): c for c in s.cells}
    assert cells[("seq_read", "xfs")].above_ceiling == ["read_iops"] and cells[("seq_read", "ext4")].above_ceiling == []
    assert any("ceiling: the bare device" in n for n in cells[("seq_read", LOOP_CEILING)].notes)
    lines = ranking_lines(s, "seq_read")
    ceiling_line = next(line for line in lines if line.startswith("Ceiling"))
    assert (
        ceiling_line.startswith(f"Ceiling (raw reference: {LOOP_CEILING}, 3 runs): read IOPS ")
        and "above it" in ceiling_line
        and "xfs" in ceiling_line
    )
    rows = {(r[0], r[1]): r for r in workload_table(s, "seq_read")[1]}
    assert rows[("xfs", "read")][3].startswith("▲ ") and not rows[("ext4", "read")][3].startswith("▲")
    document = json.loads(to_json(s))
    record = next(c for c in document["ceiling"] if c["workload"] == "seq_read")
    assert (
        record["source"] == "raw reference"
        and record["target"] == LOOP_CEILING
        and record["unit"] == "IOPS"
        and record["n"] == 3
    )
    assert record["interval"][0] < record["value"] < record["interval"][1]
    assert next(c for c in document["cells"] if c["target"] == "xfs" and c["workload"] == "seq_read")[
        "above_ceiling"
    ] == ["read_iops"]


def test_no_ceiling_is_recorded_and_honoured_on_resume(tmp_path):
    from fslab.running.resume import resumable
    from fslab.running.runner import study_run_settings

    db = ResultsDB(str(tmp_path / "r.db"))
    for no_ceiling in (False, True):
        s = study(no_ceiling=no_ceiling)
        settings = {"runs": 3} | study_run_settings(s, [])
        assert settings.get("no_ceiling", False) is no_ceiling
        study_run = db.begin_study_run(s, 1, {}, {}, settings, Owner.current(tmp_path))
        db.finish_study_run(study_run, "interrupted", {})
        again = resumable(db, str(study_run)).study
        assert [t.name for t in again.targets] == [t.name for t in s.targets] and again.cells == s.cells, (
            "the same plan again"
        )
    before = parse_study(NO_RAW, "s.toml", base_dir=Path("."))  # stored before fslab added ceilings
    study_run = db.begin_study_run(before, 1, {}, {}, {"runs": 3}, Owner.current(tmp_path))
    db.finish_study_run(study_run, "interrupted", {})
    assert not any(t.ceiling for t in resumable(db, str(study_run)).study.targets)


def test_a_resumed_study_run_plans_again_without_a_skipped_targets_raw_baselines_and_with_its_ceiling(
    tmp_path, monkeypatch
):
    """As `fslab run --skip-unsupported` planned it: the stack skipped for md, its raw baselines
    with it, and fslab's ceiling beside the plain target, decided on what runs."""
    from fslab.running import doctor
    from fslab.running.resume import resumable
    from fslab.running.runner import study_run_settings

    monkeypatch.setattr(doctor.layers, "missing", lambda layer: "this kernel has no md RAID1 (the test's)")
    monkeypatch.setattr(doctor.FILESYSTEMS["ext4"], "machine_checks", lambda: [])
    parsed = parse_study(SKIPPED_STACK, "s.toml", base_dir=Path("."))
    skipped = doctor.unsupported_targets(parsed)
    assert [u.target for u in skipped] == ["stack", "stack/raw-1", "stack/raw-2"]
    names = {u.target for u in skipped}
    ran = with_ceiling(parsed, skipped=names).without(names)
    assert [t.name for t in ran.targets] == ["plain", LOOP_CEILING]
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = db.begin_study_run(
        ran, 1, {}, {}, {"runs": 3} | study_run_settings(ran, skipped), Owner.current(tmp_path)
    )
    db.finish_study_run(study_run, "interrupted", {})
    again = resumable(db, str(study_run)).study
    assert [t.name for t in again.targets] == ["plain", LOOP_CEILING] and again.cells == ran.cells, (
        "the same plan again"
    )


@pytest.mark.root
def test_a_real_run_measures_its_ceiling_and_summary_json_carries_it(workdir, tmp_path):
    text = """\
[study]
name = "ceiling-run"
repetitions = 1
workloads = ["rand_read"]
image_size = "256MiB"
image_fill = "sparse"
[fio]
size = "16MiB"
runtime = "1s"
[[target]]
filesystem = "ext4"
"""
    result, db, study_run = ran_study(tmp_path, text, workdir)
    runs = [r for r in db.runs(study_run) if r["target"] == LOOP_CEILING]
    assert len(runs) == 3 and all(r["status"] == "ok" for r in runs), "three runs at --runs 1"
    assert "Ceiling (raw reference: (ceiling), 3 runs): read IOPS" in result.stdout
    document = json.loads((tmp_path / "reports" / f"ceiling-run-{study_run}" / "summary.json").read_text())
    record = next(c for c in document["ceiling"] if c["workload"] == "rand_read")
    assert record["source"] == "raw reference" and record["n"] == 3 and record["value"] > 0 and record["unit"] == "IOPS"


def test_a_workload_run_from_clients_has_no_ceiling():
    """Its clients work in the target's shared directory, which a bare device has not: before,
    the ceiling would have run it, and the run would have failed."""
    text = (
        NO_RAW.split("[[workload]]")[0]
        + '[[workload]]\nname = "shared"\nrw = "randread"\nsize = "4MiB"\nclients = ["host-a"]\n'
    )
    s = study(text)
    assert sorted(c.workload.name for c in s.cells if c.target.ceiling) == ["rand_write", "seq_read"]
