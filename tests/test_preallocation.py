"""How fio lays out the files of fslab's jobs (issue 20): not preallocated unless the study asks
(fio.NO_PREALLOCATION), recorded with every workload and shown in its title where they were.
fio's own default preallocates, and Btrfs writes into preallocated extents in place,
uncompressed: a study of compression measured none. Study files read here; a real compressing
Btrfs shows the difference."""

from pathlib import Path

import pytest

from conftest import fresh_workdir, ran_study
from fslab.fio import jobs as fio_jobs, preallocation as fio_preallocation
from fslab.report.sections import workload_title
from fslab.report.summary import summarize_study_run
from fslab.study import StudyError, parse_study

STUDY = """\
[study]
name = "laid-out"
repetitions = 1
workloads = ["seq_write"]

[[target]]
filesystem = "btrfs"
"""


def test_a_workload_stored_before_fslab_recorded_its_preallocation_is_read_from_its_job():
    """Before fslab set fallocate=none its jobs ran with fio's default (native): a workload stored
    then says so in its title, read from its stored job, or from its options where no job was
    stored (schema 1 and 2); as recorded where it was."""
    stored = fio_preallocation.stored_preallocation
    assert stored({"preallocation": "none", "job": "[w]\nrw=write\n"}) == "none", "as recorded"
    assert stored({"job": "[w]\nrw=write\n", "fio_options": {"rw": "write"}}) == "native"
    assert stored({"job": "[global]\nfallocate=posix\n[w]\nrw=write\n"}) == "posix"
    assert stored({"fio_options": {"rw": "randread", "size": "16777216"}, "job_file": None}) == "native"
    assert stored({"fio_options": {"rw": "write", "fallocate": "none"}}) == "none"
    assert stored({"job": "[w]\nioengine=external:/tmp/x.so\n"}) == "", "a job refused today says nothing"
    assert stored({"fio_options": {}, "job_file": "mine.fio"}) == stored({"phases": []}) == "", "nothing stored says it"


def workloads(text: str, base_dir: Path = Path(".")) -> dict:
    return {w.name: w for w in parse_study(text, "s.toml", base_dir=base_dir).workloads}


def job_fallocate(workload) -> list[str | None]:  # noqa: ANN001
    return [options.get("fallocate") for options in workload.tool.job.jobs()]


def test_fslabs_fio_jobs_do_not_preallocate_unless_the_study_asks():
    own = STUDY + '[[workload]]\nname = "mine"\nrw = "randwrite"\n'
    found = workloads(own)
    for workload in found.values():
        assert workload.tool.fio_options["fallocate"] == "none" and job_fallocate(workload) == ["none"]
        assert workload.spec()["preallocation"] == "none", "recorded with the workload"
    asked = workloads(own.replace("[[target]]", '[fio]\noptions = { fallocate = "native" }\n[[target]]', 1))
    assert {name: w.spec()["preallocation"] for name, w in asked.items()} == {"seq_write": "native", "mine": "native"}
    own_asks = workloads(own + 'options = { fallocate = "posix" }\n')
    assert (own_asks["seq_write"].spec()["preallocation"], own_asks["mine"].spec()["preallocation"]) == (
        "none",
        "posix",
    )
    with pytest.raises(
        StudyError,
        match=r"s.toml:\d+: workload\[0\].options: fallocate takes one of "
        r"none, native, posix, keep, truncate, 0, 1, not 'always'",
    ):
        workloads(own + 'options = { fallocate = "always" }\n')


def test_a_job_file_without_fallocate_takes_fslabs_default_and_one_with_it_is_respected(tmp_path):
    study = STUDY.replace('workloads = ["seq_write"]\n', "") + '[[workload]]\nname = "mine"\njob_file = "mine.fio"\n'
    (tmp_path / "mine.fio").write_text("[a]\nrw=write\nsize=8m\n[b]\nrw=randwrite\nsize=8m\n")
    [mine] = workloads(study, tmp_path).values()
    assert job_fallocate(mine) == ["none", "none"] and mine.spec()["preallocation"] == "none"
    assert "[global]\nfallocate=none\n" in mine.spec()["job"], "the default is part of the job stored"
    rendered = fio_jobs.render(mine.tool.job, directory=tmp_path, device=None)
    assert (
        fio_jobs.parse_all([(rendered, "the job")], directory=tmp_path) == []
    )  # fio reads fslab's [global] and the default's, in order
    (tmp_path / "mine.fio").write_text("[a]\nrw=write\nsize=8m\nfallocate=keep\n[b]\nrw=randwrite\nsize=8m\n")
    [mine] = workloads(study, tmp_path).values()
    assert job_fallocate(mine) == ["keep", None], "as written: job b takes fio's own default"
    assert mine.spec()["preallocation"] == "keep, native" and fio_preallocation.preallocates(
        mine.spec()["preallocation"]
    )


def test_scenario_phases_do_not_preallocate_unless_a_phase_asks():
    scenario = (
        STUDY.replace('workloads = ["seq_write"]\n', "")
        + '[[workload]]\nname = "iozone"\nkind = "scenario"\nscenario = "write-rewrite-read-reread"\nsize = "64MiB"\n'
    )
    [iozone] = workloads(scenario).values()
    assert {o.get("fallocate") for p in iozone.tool.phases if p.action == "fio" for o in iozone.tool.job(p).jobs()} == {
        "none"
    }
    assert iozone.spec()["preallocation"] == "none"
    own = STUDY.replace('workloads = ["seq_write"]\n', "") + (
        '[[workload]]\nname = "own"\nkind = "scenario"\nsize = "64MiB"\n'
        '[[workload.phase]]\nname = "w"\nfio = { rw = "write", bs = "1m", fallocate = "native" }\n'
        '[[workload.phase]]\nname = "r"\nfio = { rw = "read", bs = "1m" }\n'
    )
    [mine] = workloads(own).values()
    assert mine.spec()["preallocation"] == "native, none"


@pytest.mark.parametrize(
    ("recorded", "preallocated"),
    [
        ("none", False),
        ("0", False),
        ("truncate", False),
        ("native", True),
        ("1", True),
        ("none, keep", True),
        ("", False),
    ],
)
def test_what_counts_as_preallocated(recorded, preallocated):
    assert fio_preallocation.preallocates(recorded) is preallocated


# Zeros written once (size-bound) to a Btrfs that compresses: with fslab's default, and with the
# study asking fio to preallocate.
COMPRESSING = """\
[study]
name = "compressing"
repetitions = 1
image_size = "256MiB"

[[target]]
name = "zstd"
filesystem = "btrfs"
mount_options = "compress=zstd"

[fio]
bs = "1m"
iodepth = 4
size = "48MiB"
runtime = "0s"
data = "zeros"

[[workload]]
name = "zeros"
rw = "write"

[[workload]]
name = "zeros-preallocated"
rw = "write"
options = { fallocate = "native" }
"""


@pytest.mark.root
def test_zeros_compress_on_btrfs_unless_preallocated_and_the_notes_follow_the_ratio(tmp_path):
    with fresh_workdir() as workdir:
        result, results, study_run = ran_study(tmp_path, COMPRESSING, workdir, "--warmup", "0", "--no-ceiling")
    values = results.sample_groups(study_run).values
    default, preallocated = values[("zeros", "zstd")], values[("zeros-preallocated", "zstd")]
    assert default["write_bytes"] == preallocated["write_bytes"] == [48 * 2**20], "one pass over the file each"
    assert default["compression_ratio"][0] > 1.5, "not preallocated: Btrfs compresses the zeros"
    assert preallocated["compression_ratio"][0] == pytest.approx(1.0, abs=0.1), (
        "preallocated extents written in place, uncompressed"
    )
    jobs = {r["workload"]: r["job_file"] for r in results.runs(study_run)}
    assert "fallocate=none\n" in jobs["zeros"] and "fallocate=native\n" in jobs["zeros-preallocated"]
    s = summarize_study_run(results, study_run)
    assert workload_title(s, "zeros") == "zeros (direct I/O; data: zeros)"
    assert (
        workload_title(s, "zeros-preallocated")
        == "zeros-preallocated (direct I/O; data: zeros; files preallocated (fio fallocate=native))"
    )
    notes = {c.workload: " ".join(c.notes) for c in s.cells}
    assert "which compressed it" in notes["zeros"] and "the figures flatter it" in notes["zeros"]
    assert "stored it uncompressed" in notes["zeros-preallocated"] and "flatter" not in notes["zeros-preallocated"]
    printed = " ".join(result.stdout.split())
    assert "files preallocated (fio fallocate=native)" in printed and "its files were preallocated" in printed
