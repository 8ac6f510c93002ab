"""fio's own examples (tests/fixtures/fio-examples: fio 3.33's) run end to end through fslab, scaled
down: one study of every example the guard accepts (by-hand.toml: guard = "accepted") but those
its `fslab` note says fslab cannot run, each a job_file workload on a small sparse ext4 image
under --scale 0.001 (fio's 900 s × 10 GiB examples: 0.9 s on 10 MiB). Every run must be stored
with status ok and fio's metrics, and fio must have run what fslab stored: each job's sizes and
times as the stored job file has them, scaled. The list comes from the table, so the two cannot
drift apart; every example that runs by hand is in it, but those whose note says why not."""

import json
import re
import shutil
import tomllib

import pytest

from conftest import FIXTURES, fresh_workdir, fslab_in_process, write_study
from fslab.fio.output import DIRECTIONS
from fslab.model.ceiling import LOOP_CEILING
from fslab.results import ResultsDB

EXAMPLES = FIXTURES / "fio-examples"
TABLE = tomllib.loads((EXAMPLES / "by-hand.toml").read_text())
ACCEPTED = sorted(name for name, entry in TABLE.items() if entry["guard"] == "accepted")
RUN = [name for name in ACCEPTED if "fslab" not in TABLE[name]]
SCALE = "0.001"
# What a study sets beside an example, before --scale: 1mbs_clients.fio's 32 jobs read at
# rate=1250 (bytes/s: 4k every 3 s), for as long as their 32m takes — 7 hours (1 MiB scaled: 14
# minutes); a second each, as asked here, shows the pace.
BESIDE = {"1mbs_clients.fio": {"runtime": "1000s", "size": "64KiB"}}
# What fio reports of a job's options that fslab rewrites (fio_rewrite.REWRITTEN) or adds
CHECKED = (
    "size",
    "io_size",
    "runtime",
    "ramp_time",
    "startdelay",
    "offset",
    "filesize",
    "nrfiles",
    "loops",
    "number_ios",
)


def test_every_example_that_runs_by_hand_runs_in_fslab_but_those_the_table_says_why_not():
    assert len(ACCEPTED) == 24 and len(RUN) == 21, (
        "an example dropped from the run, or one more the table says fslab cannot run"
    )
    assert all(name in ACCEPTED for name, entry in TABLE.items() if "fslab" in entry), (
        "a note on an example the guard refuses says nothing"
    )
    assert [name for name in ACCEPTED if name not in RUN and TABLE[name]["by_hand"] == "runs"] == [], (
        "every example that runs by hand runs in fslab"
    )
    assert all(TABLE[name]["by_hand"] == "other" for name in ACCEPTED if name not in RUN), (
        "those left out fail by hand too"
    )
    assert set(BESIDE) <= set(RUN)


def study_text() -> str:
    text = (
        '[study]\nname = "fio-examples"\nrepetitions = 1\nimage_size = '
        '"64GiB"\nimage_fill = "sparse"\n\n[[target]]\nfilesystem = "ext4"\n'
    )
    for name in RUN:
        beside = "".join(f'{field} = "{value}"\n' for field, value in BESIDE.get(name, {}).items())
        text += f'\n[[workload]]\nname = "{name.removesuffix(".fio")}"\njob_file = "{EXAMPLES / name}"\n{beside}'
    return text


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, needs_root):
    """The study of every example run once, for the tests that read it."""
    root = tmp_path_factory.mktemp("corpus")
    db = root / "r.db"
    with fresh_workdir() as workdir:  # which fails the test if anything is left attached or mounted
        result = fslab_in_process(
            "run",
            str(write_study(root, study_text())),
            "--db",
            str(db),
            "--workdir",
            str(workdir.root),
            "--scale",
            SCALE,
            "--seed",
            "7",
            "--no-ceiling",
        )
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    return results, results.study_run()["id"]


def test_every_example_runs_and_stores_fios_metrics(corpus):
    results, study_run = corpus
    stored = results.stored_runs(study_run)
    assert {r["workload"]: r["error"] for r in results.runs(study_run) if r["status"] != "ok"} == {}
    assert sorted(run.workload for run in stored) == sorted(name.removesuffix(".fio") for name in RUN)
    for run in stored:
        moved = [f"{d}_bytes" for d in DIRECTIONS if run.metrics.get(f"{d}_bytes")]
        assert moved and "cpu_sys_pct" in run.metrics, f"{run.workload}: fio's metrics: {sorted(run.metrics)}"


def test_fio_ran_what_fslab_stored_scaled(corpus):
    results, study_run = corpus
    for run in results.runs(study_run):
        stored = sections(run["job_file"])
        fio = next(o.text for o in results.outputs(run["id"]) if o.tool == "fio")
        document = json.loads(fio[fio.index("{") :])
        for entry in document["jobs"]:
            ran = {**document.get("global options", {}), **entry["job options"]}
            said = stored[entry["jobname"]]
            assert {k: ran.get(k) for k in CHECKED} == {k: said.get(k) for k in CHECKED}, (
                f"{run['workload']} [{entry['jobname']}]"
            )
            if "runtime" in said:
                assert seconds(said["runtime"]) <= 2, f"{run['workload']}: {said['runtime']}"
            if "size" in said and "%" not in said["size"]:
                assert bytes_of(said["size"]) <= 10 * 2**20, f"{run['workload']}: {said['size']}"
        if run["workload"].startswith(
            "fio-"
        ):  # time_based, runtime=900ms: fio read the time as fslab wrote it (not 900 s, nor µs)
            assert all(880 <= entry["job_runtime"] < 2000 for entry in document["jobs"]), [
                e["job_runtime"] for e in document["jobs"]
            ]
    jobs = {r["workload"]: sections(r["job_file"]) for r in results.runs(study_run)}
    assert (jobs["fio-seq-read"]["file1"]["size"], jobs["fio-seq-read"]["file1"]["runtime"]) == ("10m", "900ms"), (
        "10G and 900 s × 0.001"
    )
    assert (jobs["fsx"]["file"]["size"], jobs["fsx"]["file"]["loops"]) == ("256k", "500"), (
        "256k kept, its 500000 loops × 0.001"
    )
    assert (jobs["filecreate-ioengine"]["t0"]["filesize"], jobs["filecreate-ioengine"]["t0"]["nrfiles"]) == ("4k", "31")
    assert (jobs["1mbs_clients"]["file32"]["runtime"], jobs["1mbs_clients"]["file32"]["startdelay"]) == ("1s", "124ms")


def sections(text: str) -> dict[str, dict[str, str | None]]:
    """Each job of a stored job file with its options as fio applies them (its [global]s' first)."""
    found: dict[str, dict[str, str | None]] = {}
    defaults: dict[str, str | None] = {}
    current = None
    for line in text.splitlines():
        if m := re.fullmatch(r"\[(.+)\]", line):
            current = defaults if m[1] == "global" else found.setdefault(m[1], dict(defaults))
        elif line and current is not None:
            key, _, value = line.partition("=")
            current[key] = value
    return found


def seconds(value: str) -> float:
    read = re.fullmatch(r"([\d.]+)(ms|s)?", value)
    assert read, value
    number, unit = read.groups()
    return float(number) / (1000 if unit == "ms" else 1)


def bytes_of(value: str) -> int:
    read = re.fullmatch(r"(\d+)([kmg]?)", value.lower())
    assert read, value
    number, unit = read.groups()
    return int(number) * 1024 ** " kmg".index(unit or " ")


@pytest.mark.xdist_group("fio-corpus-docs")  # not the corpus fixture's: its own group, beside it in a parallel run
def test_the_docs_example_runs_as_written(tmp_path, needs_root):
    """docs/study-format.md, "Running fio's own examples": its study, beside fio's examples/, run
    by the command its first line gives."""
    docs = (FIXTURES.parents[1] / "docs" / "study-format.md").read_text()
    example = next(
        block for block in re.findall(r"```toml\n(.*?)```", docs, re.S) if block.startswith("# fio-examples.toml")
    )
    command = re.match(r"# fio-examples.toml: fslab (run fio-examples.toml .*)\n", example)[1].split()
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    write_study(tmp_path, example, "fio-examples.toml")
    db = tmp_path / "r.db"
    with fresh_workdir() as workdir:
        result = fslab_in_process(*command, "--db", str(db), "--workdir", str(workdir.root), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    stored = results.stored_runs(results.study_run()["id"])
    own = [
        run for run in stored if run.target != LOOP_CEILING
    ]  # the raw reference beside it runs the block workloads bare
    assert sorted(run.workload for run in own) == ["clients", "fsx", "seq-read"] and all(
        run.ok and run.metrics.get("read_bytes") for run in stored
    )
