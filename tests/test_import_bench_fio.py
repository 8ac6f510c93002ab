"""`fslab import` of bench-fio's output tree (tests/fixtures/import/bench-fio, made by bench-fio
itself: see that folder's README): one study run whose targets are bench-fio's target directories
and whose workloads are its runs' rw × block size × iodepth × numjobs, fio's logs beside the JSON
and bench-fio's preconditioning runs passed over, a malformed part of the tree skipped saying why."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, fslab_in_process
from fslab.fio.bench_tree import Place, place
from fslab.results import ResultsDB
from fslab.results.importer import FIO_LOG, import_files

IMPORT = FIXTURES / "import"
TREE = IMPORT / "bench-fio"  # run1/: the whole matrix on a.img and b.img; run2/: two of a.img's cells again
PRECONDITIONED = IMPORT / "bench-fio-precondition"
JSON = sorted(TREE.rglob("*.json"))
LOGS = sorted(p for p in TREE.rglob("*") if p.is_file() and p.suffix == ".log")
DIMENSIONS = ("rw", "bs", "iodepth", "numjobs")


def _options(path: Path) -> dict[str, str]:
    return json.loads(path.read_text())["jobs"][0]["job options"]


def _device_directory(path: Path) -> str:
    """The target's directory, as bench-fio lays the tree out: run1/a.img/4k/…, run1/a.img/randrw75/4k/…"""
    return path.relative_to(TREE).parts[1]


def test_a_bench_fio_tree_is_one_study_run_of_its_targets_and_its_dimensions():
    assert len(JSON) == 34 and len(LOGS) == 250, "the fixture: bench-fio's JSON and fio's logs beside it"
    assert (TREE / "run1" / "b.img" / "randrw75" / "64k" / "randrw-8-2.json").is_file(), "a mixed mode's directory"
    assert {json.loads(p.read_text())["jobs"][0]["jobname"] for p in JSON} == {"FIOJOB"}, (
        "bench-fio names every job alike"
    )
    study = import_files("bench", [TREE])
    assert not study.skipped
    assert [t.name for t in study.targets] == ["a.img", "b.img"], (
        "the target directories, not the block sizes' or the modes'"
    )
    assert study.files == [str(p) for p in JSON] and len(study.runs) == 34
    assert len(study.workloads) == 16, "2 modes × 2 block sizes × 2 iodepths × 2 numjobs"
    for run in study.runs:
        path = Path(run.source["file"])
        options = _options(path)
        assert run.target == _device_directory(path)
        assert run.workload == "FIOJOB " + " ".join(f"{k}={options[k]}" for k in DIMENSIONS), (
            "named by bench-fio's dimensions, as fio lists them"
        )
    again = [(r.target, r.workload, r.repetition) for r in study.runs if r.repetition > 1]
    assert again == [
        ("a.img", "FIOJOB rw=randread bs=4k iodepth=1 numjobs=1", 2),
        ("a.img", "FIOJOB rw=randrw bs=4k iodepth=1 numjobs=1", 2),
    ], "run2: bench-fio run again"
    assert study.repetitions == 2
    assert sorted(s.path for s in study.passed_over) == sorted(map(str, LOGS))
    assert {s.why for s in study.passed_over} == {"fio's log file, not its JSON output"}


def test_importing_a_bench_fio_tree_says_how_and_exits_0(tmp_path):
    db = tmp_path / "fslab.db"
    result = fslab_in_process("import", "--db", str(db), str(TREE), "--study", "bench")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("34 file(s) → 16 workload(s)")
    assert "  FIOJOB rw=randrw bs=4k iodepth=1 numjobs=1: a.img 2 runs, b.img 1 run" in lines
    assert "  FIOJOB rw=randread bs=64k iodepth=8 numjobs=2: a.img 1 run, b.img 1 run" in lines
    assert "passed over 250 file(s): fio's log file, not its JSON output" in lines
    assert "skipped" not in result.stderr, "fio's logs are no fault of the tree"
    stored = ResultsDB(str(db))
    study_run = stored.study_run("bench")
    assert study_run["settings"]["imported"]["skipped"] == [] and study_run["settings"]["imported"]["passed_over"] == {
        "fio's log file, not its JSON output": 250
    }
    assert {(r["target"], r["workload"]) for r in stored.runs(study_run["id"])} >= {
        ("b.img", "FIOJOB rw=randrw bs=64k iodepth=8 numjobs=2")
    }


def test_part_of_a_tree_or_one_file_of_it_is_of_the_same_target():
    # fio-plot is given a block size's directory (bench-fio's docs: -i ./IBM1015/RAID10/4k/)
    for named in (TREE / "run1" / "b.img" / "4k", TREE / "run1" / "b.img" / "randrw75" / "64k" / "randrw-8-2.json"):
        study = import_files("bench", [named])
        assert {r.target for r in study.runs} == {"b.img"}, named
    assert {r.target for r in import_files("bench", [TREE / "run1" / "b.img" / "4k"], target="nvme").runs} == {
        "nvme"
    }, "--target names every run's target"


def test_bench_fio_driving_a_fio_server_is_of_its_target_on_that_host():
    # bench-fio --remote host.list: fio --client output, its logs named ….log.HOST
    study = import_files("bench", [IMPORT / "bench-fio-remote"])
    assert [(r.target, r.workload, r.source["host"]) for r in study.runs] == [
        ("a.img@localhost", "FIOJOB iodepth=1", "localhost"),
        ("a.img@localhost", "FIOJOB iodepth=8", "localhost"),
    ]
    assert not study.skipped and study.passed_over_by_why() == {"fio's log file, not its JSON output": 10}


def test_preconditioning_runs_are_passed_over():
    study = import_files("bench", [PRECONDITIONED])
    condition = PRECONDITIONED / "precondition" / "a.img" / "1m" / "run-1" / "write-64-1.json"
    assert json.loads(condition.read_text())["jobs"][0]["jobname"] == "precondition", (
        "bench-fio's own job, before the benchmark"
    )
    assert [(r.target, r.workload) for r in study.runs] == [("a.img", "FIOJOB")] and not study.skipped
    assert [(s.path, s.why) for s in study.passed_over if not FIO_LOG.fullmatch(Path(s.path).name)] == [
        (str(condition), "bench-fio's preconditioning run (run-N), not a measurement")
    ]


def test_a_malformed_part_of_a_tree_is_skipped_saying_why_and_the_rest_imported(tmp_path):
    tree = tmp_path / "bench"
    shutil.copytree(TREE / "run1", tree)
    cut = tree / "a.img" / "4k" / "randread-8-2.json"
    cut.write_text("")  # bench-fio stopped while fio ran: fio opens its --output first
    (tree / "a.img" / "notes.txt").write_text("the disk was warm\n")
    outside = tmp_path / "elsewhere.json"
    shutil.copy(TREE / "run2" / "a.img" / "4k" / "randread-1-1.json", outside)
    (tree / "b.img" / "4k" / "randread-1-4.json").symlink_to(outside)
    renamed = tree / "b.img" / "64k" / "randread-1-1.json"
    options = json.loads(renamed.read_text())
    options["jobs"][0]["job options"]["rw"] = "randwrite"  # its name no longer says what it ran
    renamed.write_text(json.dumps(options))
    result = fslab_in_process("import", "--db", str(tmp_path / "fslab.db"), str(tree), "--study", "bench")
    said = {(Path(path), why) for path, why in re.findall(r"^skipped (.+?): (.+)$", result.stderr, re.M)}
    assert said == {
        (tree / "b.img" / "4k" / "randread-1-4.json", f"a symbolic link out of {tree}: not followed"),
        (tree / "a.img" / "notes.txt", "no JSON in it: not fio's JSON output"),
        (cut, "no JSON in it: not fio's JSON output"),
    }, result.stderr
    assert result.returncode == 1, "some were skipped"
    stored = ResultsDB(str(tmp_path / "fslab.db"))
    runs = stored.runs(stored.study_run("bench")["id"])
    assert len(runs) == 31 and {r["target"] for r in runs} == {"a.img", "b.img", "64k"}
    assert [(r["target"], r["source"]["file"]) for r in runs if r["target"] == "64k"] == [("64k", str(renamed))], (
        "not bench-fio's as named: its directory's name, the importer's rule"
    )


@pytest.mark.parametrize(
    ("path", "options", "expected"),
    [
        (
            "/o/md0/4k/randread-1-8.json",
            {"rw": "randread", "bs": "4k", "iodepth": "1", "numjobs": "8"},
            Place("md0", False),
        ),
        (
            "/o/md0/randrw75/4k/randrw-16-8.json",
            {"rw": "randrw", "bs": "4k", "iodepth": "16", "numjobs": "8", "rwmixread": "75"},
            Place("md0", False),
        ),
        (
            "/o/md0/1m/run-3/write-64-1.json",
            {"rw": "write", "bs": "1m", "iodepth": "64", "numjobs": "1"},
            Place("md0", True),
        ),
        # fio-plot's published data: bench-fio's older tree, no block-size directory
        (
            "/data/MX200/randread-4-8.json",
            {"rw": "randread", "bs": "4k", "iodepth": "4", "numjobs": "8"},
            Place("MX200", False),
        ),
        ("/o/md0/4k/randread-1-8.json", {"rw": "randread", "bs": "4k", "iodepth": "2", "numjobs": "8"}, None),
        ("/o/md0/4k/randread-1-8.json", {"rw": "randwrite", "bs": "4k", "iodepth": "1", "numjobs": "8"}, None),
        ("/o/md0/4k/run.json", {"rw": "randread", "bs": "4k", "iodepth": "1", "numjobs": "8"}, None),
        ("/o/md0/4k/randread-1-8.json", {}, None),  # fio 2.2.10 listed no options
    ],
)
def test_a_file_is_bench_fios_only_when_its_name_and_its_options_agree(path, options, expected):
    assert place(path, [options]) == expected
    assert place(path, [options, {**options, "rw": "trim"}]) is None, "every job of the file, not the first"


def test_fio_log_files_are_known_by_the_names_fio_gives_them():
    for name in (
        "randread-iodepth-1-numjobs-2_clat.2.log",
        "job_bw.log",
        "job_clat_hist.1.log",
        "job_lat.1.log.fz",
        "job_iops.1.log.localhost",
        "x-read_bw.log",
    ):
        assert FIO_LOG.fullmatch(name), name
    for name in ("randread-1-1.json", "fio.log", "bw.1.log", "notes_bw.txt"):
        assert not FIO_LOG.fullmatch(name), name
    assert all(FIO_LOG.fullmatch(p.name) for p in LOGS) and not any(FIO_LOG.fullmatch(p.name) for p in JSON)
