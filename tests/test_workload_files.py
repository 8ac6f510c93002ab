"""What a workload writes and which files its jobs use, on a real target (xfs on a loop image,
real fio, 1 s runs): data recorded as asked, jobs sharing one file laid out once, and a job
file's phases working on the very file an earlier phase wrote."""

import json
from pathlib import Path

import pytest

from conftest import fresh_workdir, write_study
from fslab.fio import workload as fio
from fslab.results import ResultsDB
from fslab.running.runner import run_study
from fslab.study import load_study

STUDY = """\
[study]
name = "files"
repetitions = 1
image_size = "512MiB"
image_fill = "sparse"

[[target]]
filesystem = "xfs"

[[workload]]
name = "zeros"
rw = "write"
size = "8MiB"
runtime = "1s"
data = "zeros"

[[workload]]
name = "shared"
rw = "randread"
size = "16MiB"
numjobs = 4
shared_file = true
runtime = "1s"

[[workload]]
name = "phases"
job_file = "phases.fio"
"""

# A write phase, then (stonewall) a read phase verifying what it reads: fio fails the read
# unless it reads the very blocks the write phase wrote (crc32c headers with their offsets).
PHASES = """\
[global]
size=8m
bs=64k
direct=1
ioengine=libaio
filename=data
verify=crc32c

[write]
rw=write
do_verify=0

[read]
stonewall
rw=read
"""


@pytest.fixture(scope="module")
def files_study(tmp_path_factory, needs_root):
    """The study run once, in this process, with every fio run's target directory listed after
    it: {(workload, "layout.fio" or "job.fio"): {file: (size, all bytes zero)}}."""
    root = tmp_path_factory.mktemp("files")
    (root / "phases.fio").write_text(PHASES)
    study = load_study(write_study(root, STUDY))
    seen: dict[tuple[str, str], dict[str, tuple[int, bool]]] = {}
    real_run_fio = fio.run_fio

    def run_and_look(journal, job_path: Path, **kw):
        output = real_run_fio(journal, job_path, **kw)
        text = job_path.read_text()
        directory = Path(next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("directory=")))
        workload = next(
            w.name for w in study.workloads if f"[{w.name}]" in text or (w.tool.job_file and "[read]" in text)
        )
        seen[(workload, job_path.name)] = {
            p.name: (p.stat().st_size, not any(p.read_bytes())) for p in directory.iterdir() if p.is_file()
        }
        return output

    with pytest.MonkeyPatch.context() as patch, fresh_workdir() as workdir:
        patch.setattr(fio, "run_fio", run_and_look)
        db = ResultsDB(str(root / "r.db"))
        study_run = run_study(study, db, workdir)
        yield {r["workload"]: r for r in db.runs(study_run)}, seen, db, study_run


@pytest.mark.root
def test_zero_data_is_written_and_recorded_as_zeros(files_study):
    runs, seen, _, _ = files_study
    run = runs["zeros"]
    assert run["status"] == "ok", run["error"]
    assert run["data_pattern"].startswith("zeros (fio zero_buffers")
    assert "zero_buffers=1" in run["job_file"] and "refill_buffers" not in run["job_file"]
    written = seen[("zeros", "job.fio")]
    # fio's file grows as it writes (no preallocation), for 1 s or up to its 8 MiB: a busy machine writes less
    assert set(written) == {"zeros.0.0"} and 0 < written["zeros.0.0"][0] <= 8 * 2**20, written
    assert written["zeros.0.0"][1], "every byte fio wrote is 0"


@pytest.mark.root
def test_four_jobs_share_one_file_laid_out_once(files_study):
    runs, seen, db, _ = files_study
    run = runs["shared"]
    assert run["status"] == "ok", run["error"]
    assert seen[("shared", "layout.fio")] == {"shared": (16 * 2**20, False)}, "the layout wrote one file, with data"
    assert seen[("shared", "job.fio")] == {"shared": (16 * 2**20, False)}, "the four jobs made no file of their own"
    assert "filename=shared\n" in run["job_file"] and "numjobs=4\n" in run["job_file"]
    job = json.loads(db.outputs(run["id"])[0].text)["jobs"][0]
    assert job["job options"]["filename"] == "shared" and job["job options"]["numjobs"] == "4"
    assert job["read"]["total_ios"] > 0


@pytest.mark.root
def test_a_job_files_later_phase_reads_the_file_its_first_phase_wrote(files_study):
    runs, seen, db, _ = files_study
    run = runs["phases"]
    assert run["status"] == "ok", run["error"]  # fio's verify passed: the read phase read what the write phase wrote
    assert seen[("phases", "job.fio")] == {"data": (8 * 2**20, False)}, "both phases on the one file the job file names"
    assert [job["jobname"] for job in json.loads(db.outputs(run["id"])[0].text)["jobs"]] == ["write", "read"]
    assert run["data_pattern"].startswith("fio's default: random bytes filled once and reused")


@pytest.mark.root
def test_every_job_records_total_completion_and_submission_latency(files_study):
    runs, _, db, study_run = files_study
    for run in runs.values():
        assert run["job_file"].count("\nlat_percentiles=1\n") == len(
            [s for s in run["job_file"].split("\n[")[1:] if not s.startswith("global]")]
        )
    names = {m.metric for m in db.run_metrics(study_run) if m.workload == "phases"}
    for direction in ("read", "write"):
        assert {
            f"{direction}_lat_mean_us",
            f"{direction}_lat_p99_us",
            f"{direction}_clat_p99_us",
            f"{direction}_slat_mean_us",
            f"{direction}_slat_p99_us",
        } <= names
