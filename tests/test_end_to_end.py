"""Whole studies through the `fslab` command: real loop images, mkfs, mount and fio (1 s runs)."""

import json
import signal
import subprocess
import sys
import time

import pytest

from conftest import fio_children, fresh_workdir, fslab, fslab_in_process, held_by, runs_stored, write_study
from fslab.core.names import file_name
from fslab.fio.hist import HIST_TOOL, latency_over_time
from fslab.fio.output import (
    BINS_TOOL,
    LOG_TOOL,
    bin_columns,
    latency_bins,
    stored_latency_bins,
    throughput_over_time,
)
from fslab.results import ResultsDB

FOUR_KINDS = """\
[study]
name = "e2e"
repetitions = 2
workloads = ["rand_read", "seq_write"]
image_size = "512MiB"

[fio]
size = "64MiB"
runtime = "1s"

[[target]]
filesystem = ["ext4", "xfs", "btrfs", "raw"]
"""


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory, needs_root):
    """One study of ext4, XFS, Btrfs and raw, run once for all the tests that read it."""
    root = tmp_path_factory.mktemp("e2e")
    study = write_study(root, FOUR_KINDS)
    db = root / "results.db"
    with fresh_workdir() as workdir:
        result = fslab("run", str(study), "--db", str(db), "--workdir", str(workdir.root), "--seed", "11")
        yield result, ResultsDB(str(db)), root, workdir


@pytest.mark.root
def test_study_runs_every_cell_and_stores_every_run(finished_study):
    result, db, _, workdir = finished_study
    assert result.returncode == 0, result.stdout + result.stderr
    study_run = db.study_run()
    assert study_run["status"] == "finished" and study_run["plan_seed"] == 11
    runs = db.runs(study_run["id"])
    assert len(runs) == 4 * 2 * 2
    assert all(r["status"] == "ok" for r in runs), [r["error"] for r in runs]
    assert held_by(workdir.root) == [], "every loop device and mount released"
    assert not workdir.journal.path.exists(), "a finished study leaves no journal behind"


@pytest.mark.root
def test_runs_are_interleaved_in_blocks(finished_study):
    _, db, _, _ = finished_study
    runs = db.runs(db.study_run()["id"])
    blocks = [r["block"] for r in runs]
    assert blocks == sorted(blocks) and set(blocks) == {1, 2}, "block 1 entirely before block 2"
    orders = [[(r["target"], r["workload"]) for r in runs if r["block"] == b] for b in (1, 2)]
    assert sorted(orders[0]) == sorted(orders[1]) and len(set(orders[0])) == 8


@pytest.mark.root
def test_metrics_and_raw_output_are_stored(finished_study):
    _, db, _, _ = finished_study
    study_run_id = db.study_run()["id"]
    samples = db.run_metrics(study_run_id)  # every run measured: no warm-ups, none failed
    names = {(m.target, m.workload, m.metric) for m in samples}
    for target in ("ext4", "xfs", "btrfs", "raw"):
        for name in (
            "read_iops",
            "read_mb_s",
            "read_mib_s",
            "read_lat_mean_us",
            "read_lat_p50_us",
            "read_lat_p95_us",
            "read_lat_p99_us",
            "read_lat_p99_9_us",
            "cpu_usr_pct",
            "cpu_sys_pct",
        ):
            assert (target, "rand_read", name) in names
        assert (target, "seq_write", "write_mb_s") in names
    assert all(m.value > 0 for m in samples if m.metric.endswith("_iops"))
    for run in db.runs(study_run_id):
        output, bins, histograms, logs = db.outputs(
            run["id"]
        )  # fio's JSON, as fio wrote it, its bins apart, its histogram logs and its other logs
        assert (output.phase, output.tool) == ("", "fio") and json.loads(output.text)["jobs"][0]["jobname"] == run[
            "workload"
        ]
        assert (bins.phase, bins.tool) == ("", BINS_TOOL) and stored_latency_bins(bins.text) == {
            k: bin_columns(b) for k, b in latency_bins(output.text, kinds=("lat", "clat")).items()
        } != {}
        assert (logs.phase, logs.tool) == ("", LOG_TOOL) and "\nlog_avg_msec=100\n" in run["job_file"]
        [throughput] = throughput_over_time(logs.text)  # one direction: the job's own
        assert (
            throughput.direction == {"rand_read": "read", "seq_write": "write"}[run["workload"]]
            and max(throughput.bytes_s) > 0
        )
        # fio logs a window only when an I/O completed in it: how many windows a 1 s run has
        # depends on the device's speed (Btrfs's QD16 1 MiB writes here complete in bursts a few
        # tenths of a second apart, and the last of them after the runtime), so only their order
        # and span are checked: from fio's epoch, within the time fio ran.
        assert (
            throughput.seconds == sorted(throughput.seconds)
            and 0 <= throughput.seconds[0]
            and throughput.seconds[-1] <= run["timings"]["workload"]
        )
        # its completion latency over time, in windows of two of the bandwidth log's, from the same epoch
        assert (histograms.phase, histograms.tool) == (
            "",
            HIST_TOOL,
        ) and "\nwrite_hist_log=fslab\nlog_hist_msec=200\nlog_hist_coarseness=2\n" in run["job_file"]
        [latency] = latency_over_time(histograms.text)
        assert latency.direction == throughput.direction and latency.window_ms == 200 and latency.counts.shape[1] == 464
        logged, reported = (
            int(latency.counts.sum()),
            json.loads(output.text)["jobs"][0][latency.direction]["clat_ns"]["N"],
        )
        assert 0 < logged <= reported, (
            "each window's own completions (none of the last, partial window): never a running total"
        )
        assert 0 <= latency.starts_s[0] and latency.ends_s[-1] <= run["timings"]["workload"] + 0.2
        assert "refill_buffers=1" in run["job_file"] and "randseed=24301" in run["job_file"]
        assert "\nlat_percentiles=1\n" in run["job_file"] and run["data_pattern"].startswith(
            "random (fio refill_buffers"
        )
        assert run["timings"]["workload"] >= 1.0
    for target in ("ext4", "xfs", "btrfs", "raw"):  # total latency, and its two parts on their own
        for name in (
            "read_lat_p99_us",
            "read_clat_mean_us",
            "read_clat_p99_us",
            "read_slat_mean_us",
            "read_slat_p99_us",
        ):
            assert (target, "rand_read", name) in names


@pytest.mark.root
def test_targets_are_provisioned_fresh_and_recorded(finished_study):
    _, db, _, workdir = finished_study
    study_run_id = db.study_run()["id"]
    runs = {(r["target"], r["workload"], r["repetition"]): r for r in db.runs(study_run_id)}
    ext4 = runs[("ext4", "rand_read", 1)]
    assert ext4["mkfs_command"][:5] == [
        "mkfs.ext4",
        "-F",
        "-q",
        "-E",
        "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
    ]
    assert "Filesystem features:" in ext4["fs_details"]
    assert ext4["mount_options_effective"].startswith("rw,")
    assert f"directory={workdir.mounts / file_name('ext4')}" in ext4["job_file"]
    assert ext4["direct_io_loop"] is True and ext4["buffered"] is False
    xfs, btrfs = runs[("xfs", "seq_write", 2)], runs[("btrfs", "seq_write", 1)]
    assert "isize=" in xfs["fs_details"] and "Data, single" in btrfs["fs_details"]
    assert "-K" in xfs["mkfs_command"] and "-K" in btrfs["mkfs_command"], "no discard: the filled image stays filled"
    raw = runs[("raw", "rand_read", 2)]
    assert raw["mkfs_command"] == [] and raw["mount_options_effective"] is None
    assert f"filename={raw['device']}" in raw["job_file"]
    devices = {r["device"] for r in runs.values()}
    assert all(d.startswith("/dev/loop") for d in devices)


def test_each_target_has_one_image_made_before_its_first_run(finished_study):
    _, db, _, workdir = finished_study
    runs = db.runs(db.study_run()["id"])
    for target in ("ext4", "xfs", "btrfs", "raw"):
        made = [r["id"] for r in runs if r["target"] == target and "image" in r["timings"]]
        assert made == [min(r["id"] for r in runs if r["target"] == target)]
    assert not any(workdir.images.glob("*.img")), "images are deleted when the study ends"


def test_environment_is_recorded(finished_study):
    _, db, _, _ = finished_study
    env = db.study_run()["environment"]
    assert env["kernel"] and env["distribution"] and env["cpu_count"] >= 1 and env["memory_bytes"] > 0
    assert env["tools"]["fio"].startswith("fio-") and env["tools"]["mke2fs"].startswith("mke2fs")
    assert env["image_directory"]["fstype"] not in ("", "unknown")
    assert env["vm_hygiene"]["tuned"] is False and env["vm_hygiene"]["ksm_run"] in ("0", "1", "2", "not present")
    versions = {t["name"]: t["tool_version"] for t in db.targets(db.study_run()["id"])}
    assert versions["xfs"].startswith("mkfs.xfs") and versions["btrfs"].startswith("mkfs.btrfs")


@pytest.mark.root
def test_summary_table_and_report_files(finished_study):
    result, db, root, _ = finished_study
    assert "rand_read (direct I/O; data: random): read" in result.stdout and "± 95% CI" in result.stdout
    folder = root / "reports" / f"e2e-{db.study_run()['id']}"
    markdown = (folder / "summary.md").read_text()
    assert "## rand_read (direct I/O; data: random)" in markdown and "| btrfs | read | 2 |" in markdown
    rows = (folder / "summary.csv").read_text().splitlines()
    assert rows[0].startswith("study_run,workload,target,metric,unit,n,mean,median")
    assert any(",rand_read,raw,read_iops,IOPS,2," in row for row in rows)
    document = json.loads((folder / "summary.json").read_text())
    cell = next(c for c in document["cells"] if c["target"] == "xfs" and c["workload"] == "seq_write")
    written = cell["metrics"]["write_mb_s"]
    assert (
        written["n"] == 2 and written["ci_low"] is None and written["ci_high"] is None and written["needs_runs"] >= 3
    ), "no interval the tables do not print"  # 3 at least: how many more depends on the runs' noise

    assert (
        "Compared with **ext4**:" in markdown
        and "| xfs | read IOPS |" in markdown
        and "Ranking by read IOPS: " in markdown
    )
    assert "one family of 24 comparisons (all pairs of this study run)" in markdown  # 6 pairs × 2 metrics × 2 workloads
    assert "interval needs " in markdown, "2 runs: no interval printed, the runs it needs instead"
    verdicts = {c["verdict"] for c in document["comparisons"]}
    assert verdicts <= {"faster", "slower", "equivalent", "undecided"} and len(document["comparisons"]) == 12
    assert all(c["reason"] and (c["interval"] is None or len(c["interval"]) == 2) for c in document["comparisons"])
    assert "no detectable difference" not in markdown and "cannot be told apart" not in markdown

    # the summaries of the stored study run, read again: in this process (what they print is tested, not a start)
    rebased = fslab_in_process("summary", "--db", str(root / "results.db"), "--baseline", "raw", "--threshold", "10")
    assert rebased.returncode == 0 and "compared with raw" in rebased.stdout
    unknown = fslab_in_process("summary", "--db", str(root / "results.db"), "--baseline", "ext5")
    assert unknown.returncode == 2 and "no target 'ext5'" in unknown.stderr

    again = fslab_in_process("summary", "--db", str(root / "results.db"))
    assert again.returncode == 0 and "seq_write (direct I/O; data: random)" in again.stdout
    missing = fslab_in_process("summary", "999", "--db", str(root / "results.db"))
    assert missing.returncode == 2 and "no study run 999" in missing.stderr


@pytest.mark.root
def test_a_failing_run_is_recorded_and_the_study_goes_on(workdir, tmp_path):
    study = write_study(
        tmp_path,
        FOUR_KINDS.replace('["ext4", "xfs", "btrfs", "raw"]', '"xfs"')
        .replace('workloads = ["rand_read", "seq_write"]', 'workloads = ["seq_write"]')
        .replace("repetitions = 2", "repetitions = 1")
        .replace('image_size = "512MiB"', 'image_size = "512MiB"\nimage_fill = "sparse"')
        + '\n[[target]]\nname = "bad"\nfilesystem = "ext4"\nmount_options = "journal_async_commit"\n',
    )  # allowed, but the kernel refuses it under data=ordered
    db = tmp_path / "r.db"
    # --no-summary (as a lab VM's fslab runs): the runs stored, no summary nor report, the same exit status
    result = fslab("run", str(study), "--no-ceiling", "--no-summary", "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 1, "a failed run makes the exit status non-zero"
    assert "`fslab summary 1` shows it" in result.stdout and not (tmp_path / "reports").exists()
    runs = {r["target"]: r for r in ResultsDB(str(db)).runs(ResultsDB(str(db)).study_run()["id"])}
    assert runs["xfs"]["status"] == "ok"
    assert (
        runs["bad"]["status"] == "failed"
        and "mount" in runs["bad"]["error"]
        and "exited with status" in runs["bad"]["error"]
    )
    assert (
        runs["bad"]["mount_options_requested"] == "journal_async_commit"
        and "failed in provision bad · seq_write · run 1" in result.stdout
    )
    assert "1 run(s) failed" in result.stderr
    failure = runs["bad"]["failure"]
    assert (
        failure["phase"] == "provision"
        and failure["argv"][:4] == ["mount", "-t", "ext4", "-o"]
        and "journal_async_commit" in failure["argv"]
    )
    assert (
        failure["exit_status"] == 32
        and "wrong fs type, bad option" in failure["stderr_tail"]
        and "CommandError" in failure["traceback"]
    )
    assert runs["xfs"]["failure"] is None


@pytest.mark.root
def test_a_users_job_file_runs_unchanged_but_for_its_directory(workdir, tmp_path):
    (tmp_path / "mine.fio").write_text(
        "[global]\ndirectory=/somewhere/else\n[mine]\nrw=randread\nbs=8k\ndirect=1\nsize=32m\nruntime=1\ntime_based=1\n"
    )
    study = write_study(
        tmp_path,
        '[study]\nname = "jobfile"\nrepetitions = 1\nimage_size = "512MiB"\nimage_fill = "sparse"\n'
        '[[target]]\nfilesystem = "xfs"\n[[workload]]\nname = "mine"\njob_file = "mine.fio"\n',
    )
    db = tmp_path / "r.db"
    result = fslab("run", str(study), "--no-ceiling", "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    run = results.runs(results.study_run()["id"])[0]
    assert (
        "/somewhere/else" not in run["job_file"] and f"directory={workdir.mounts / file_name('xfs')}" in run["job_file"]
    )
    assert "[mine]\nrw=randread\nbs=8k" in run["job_file"]
    assert any(m.metric == "read_iops" and m.value > 0 for m in results.run_metrics(run["study_run_id"]))


def _ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def signal_while_fio_runs(proc: subprocess.Popen, db, signum: int, runs: int) -> int:
    """Send `signum` to fslab while fio runs, after a first run is stored and before the last:
    fslab is stopped (SIGSTOP) while that is checked, so the state seen is the state signalled
    in, however loaded the machine. Returns the runs stored then."""
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline and proc.poll() is None, "the study should be running fio"
        if fio_children(proc.pid) and runs_stored(db) >= 1:
            proc.send_signal(signal.SIGSTOP)
            stored = runs_stored(db)
            if fio_children(proc.pid) and 1 <= stored < runs - 1:  # fio not yet reaped: fslab waits on it
                proc.send_signal(signum)
                proc.send_signal(signal.SIGCONT)
                return stored
            proc.send_signal(signal.SIGCONT)
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("signum", "started_ignoring_sigint"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["ctrl-c", "kill", "ctrl-c-when-started-ignoring-it"],
)
@pytest.mark.slow
def test_interrupt_releases_everything_and_keeps_finished_runs(workdir, tmp_path, signum, started_ignoring_sigint):
    """Also when fslab starts with SIGINT ignored (as a background job of a non-interactive shell
    does, and so every test of a suite run there): Ctrl-C still interrupts it."""
    # 2 targets × 3 repetitions of 1 s (fio runs in 4 of them with 1 ≤ stored < runs − 1: room on
    # a loaded machine; the runs after the signal never run, so they cost nothing); sparse images
    study = write_study(
        tmp_path,
        FOUR_KINDS.replace('["ext4", "xfs", "btrfs", "raw"]', '["ext4", "xfs"]')
        .replace("repetitions = 2", "repetitions = 3")
        .replace('workloads = ["rand_read", "seq_write"]', 'workloads = ["seq_write"]')
        .replace('image_size = "512MiB"', 'image_size = "512MiB"\nimage_fill = "sparse"'),
    )
    db = tmp_path / "r.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fslab",
            "run",
            str(study),
            "--no-ceiling",
            "--db",
            str(db),
            "--workdir",
            str(workdir.root),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignoring_sigint if started_ignoring_sigint else None,
    )
    stored = signal_while_fio_runs(proc, db, signum, runs=2 * 3)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum and "interrupted" in stderr, stderr
    assert held_by(workdir.root) == []
    results = ResultsDB(str(db))
    assert results.study_run()["status"] == "interrupted"
    assert len(results.runs(results.study_run()["id"])) == stored, (
        "the runs finished before are kept; the one interrupted is not stored"
    )


# fslab's entry point, with a Ctrl-C arriving the moment it starts importing its commands (which
# takes a second or more on a busy machine): the signal is sent by the import itself, so the test
# hits that window every time.
CTRL_C_DURING_IMPORTS = """
import builtins, os, signal, sys
real_import = builtins.__import__
def importing(name, *args, **kwargs):
    if name == "fslab.cli":
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, *args, **kwargs)
builtins.__import__ = importing
from fslab.__main__ import main
sys.argv = ["fslab", "list"]
main()
"""


def test_ctrl_c_while_fslab_starts_ends_it_quietly():
    proc = subprocess.run([sys.executable, "-c", CTRL_C_DURING_IMPORTS], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr
    assert "built-in studies" not in proc.stdout, "the command did not go on"


@pytest.mark.slow
def test_a_study_too_big_for_the_disk_is_refused_before_anything_is_made(workdir, tmp_path):
    study = write_study(tmp_path, FOUR_KINDS.replace('image_size = "512MiB"', 'image_size = "100TiB"'))
    result = fslab_in_process(
        "run", str(study), "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root)
    )  # a refusal
    assert result.returncode == 2
    assert "4 filled images need 400TiB" in result.stderr.replace("\n", "") and "image_fill" in result.stderr
    assert not any(workdir.images.glob("*.img"))


# A work directory's path as a user may name it: blanks, a tab, a newline, a backslash, fio's ':'
# and '$', UTF-8 letters, a blank at its end. Every reading of a kernel's or a tool's record of a
# path (mountinfo, /proc/mounts, sysfs, fio's JSON) must find it again.
ODD_PATH = "x y\tz\nw\\q:r${HOME}/bänch ü "


@pytest.mark.root
def test_a_work_directory_whose_path_holds_any_character_runs_and_leaves_nothing(tmp_path):
    study = write_study(
        tmp_path,
        FOUR_KINDS.replace('["ext4", "xfs", "btrfs", "raw"]', '["ext4", "xfs"]')
        .replace('workloads = ["rand_read", "seq_write"]', 'workloads = ["seq_write"]')
        .replace("repetitions = 2", "repetitions = 1")
        .replace('image_size = "512MiB"', 'image_size = "320MiB"\nimage_fill = "sparse"'),
    )
    db = tmp_path / "r.db"
    with fresh_workdir(ODD_PATH) as workdir:
        result = fslab("run", str(study), "--no-ceiling", "--db", str(db), "--workdir", str(workdir.root))
        assert result.returncode == 0, result.stdout + result.stderr
        assert held_by(workdir.root) == [] and not (workdir.root / "journal.jsonl").exists()
        results = ResultsDB(str(db))
        runs = results.runs(results.study_run()["id"])
        assert {r["target"]: r["status"] for r in runs} == {"ext4": "ok", "xfs": "ok"}
        written = [m.value for m in results.run_metrics(runs[0]["study_run_id"]) if m.metric == "write_iops"]
        assert len(written) == 2 and all(value > 0 for value in written), "fio wrote on both, in the odd path"
        for run in runs:  # read back from /proc/mounts and sysfs at the path as it is
            assert run["mount_options_effective"].startswith("rw,")
            assert run["device_facts"][0]["backing_file"] == str(workdir.images / f"{run['target']}.img")
