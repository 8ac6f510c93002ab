"""Seed studies run end to end from their built-in study files, at small scale (issue 10). Every
built-in study is read and checked by test_tool_options; two of them also run here, as a user
runs them: `fslab run NAME --scale S --runs 1 --skip-unsupported`, so images, sizes and runtimes
shrink and each cell runs once.

- nas-stack (seed 003): what this machine lacks is skipped, with why (the ext4 stack needs md
  and device-mapper; ZFS encryption needs OpenZFS); the rest runs: the ZFS mirror under the
  backup, metadata and mixed fio workloads and the rsync photo ingestion, and the raw baselines
  of the stack's two images where the stack runs (else they are skipped with it, and the ceiling
  fslab adds measures a bare image instead); at --scale 0.01 the ARC, kept at its 64MiB floor, may hold the
  working set of every reading workload, and their ZFS cells say so.
- btrfs-options (seed 002): seven Btrfs and ext4 targets (and the ceiling fslab adds: it has no
  raw target) under the baseline fio jobs and the
  iozone-like write/rewrite/read/reread scenario, with zeros and with random data.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from conftest import ZFS_FUSE, fresh_workdir, fslab
from fslab.filesystems.zfs_engine import engine
from fslab.report.arc_share import MAY_HOLD
from fslab.results import ResultsDB
from synthetic import study_run_of


@dataclass
class Ran:
    result: subprocess.CompletedProcess[str]
    study_run: dict
    runs: list[dict]
    samples: dict
    report: dict  # the summary.json written beside the database


def run_builtin(name: str, scale: str, directory) -> Ran:  # noqa: ANN001
    with fresh_workdir() as workdir:  # checked afterwards for anything left attached or mounted
        db_path = directory / "results.db"
        result = fslab(
            "run",
            name,
            "--scale",
            scale,
            "--runs",
            "1",
            "--warmup",
            "0",
            "--skip-unsupported",
            "--db",
            str(db_path),
            "--workdir",
            str(workdir.root),
            timeout=900,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    db = ResultsDB(str(db_path))
    study_run = study_run_of(db)
    report = json.loads((directory / "reports" / f"{name}-{study_run['id']}" / "summary.json").read_text())
    return Ran(result, study_run, db.runs(study_run["id"]), db.sample_groups(study_run["id"]).values, report)


@pytest.fixture(scope="module")
def nas(tmp_path_factory, needs_root) -> Iterator[Ran]:  # noqa: ANN001
    if engine() is None:
        pytest.fail("nas-stack needs ZFS: make test installs zfs-fuse")
    yield run_builtin("nas-stack", "0.01", tmp_path_factory.mktemp("nas-stack"))  # its ARC kept at the 64MiB floor


@pytest.fixture(scope="module")
def btrfs_options(tmp_path_factory, needs_root) -> Iterator[Ran]:  # noqa: ANN001
    yield run_builtin("btrfs-options", "0.05", tmp_path_factory.mktemp("btrfs-options"))


@ZFS_FUSE  # zfs-fuse: one daemon on the machine (conftest); btrfs-options needs none and runs beside
@pytest.mark.root
def test_nas_stack_skips_what_this_machine_lacks_and_says_why(nas):
    skipped = {(s["target"], s["why"]) for s in nas.study_run["settings"].get("skipped", [])}
    ran = {r["target"] for r in nas.runs}
    if any(target == "ext4-stack" for target, _ in skipped):
        assert any("md" in why for target, why in skipped if target == "ext4-stack")
        assert "ext4-stack" not in ran
        for raw in ("ext4-stack/raw-1", "ext4-stack/raw-2"):  # its raw baselines with it, said so
            assert (
                raw,
                "it is the raw baseline of 'ext4-stack', which cannot "
                "run here: it measures that target's devices alone",
            ) in skipped
            assert raw not in ran
    if engine().fuse:
        assert (
            "zfs-mirror-encrypted",
            "ZFS native encryption is not supported by this ZFS engine (zfs-fuse's pool "
            "version 23 predates it); it needs OpenZFS 0.8 or later with its kernel module",
        ) in skipped
        assert "zfs-mirror-encrypted" not in ran
    assert "Skipped:" in nas.result.stdout


@ZFS_FUSE  # zfs-fuse: one daemon on the machine (conftest); btrfs-options needs none and runs beside
@pytest.mark.root
def test_nas_stack_runs_its_zfs_mirror_raw_baselines_and_photo_ingestion(nas):
    assert nas.runs and all(r["status"] == "ok" for r in nas.runs), [
        r["error"] for r in nas.runs if r["status"] != "ok"
    ]
    cells = {(r["target"], r["workload"]) for r in nas.runs}
    fio_workloads = {"backup-write", "backup-read", "metadata", "mixed-load"}
    assert {("zfs-mirror", w) for w in fio_workloads | {"photo-ingestion"}} <= cells
    if "ext4-stack" in {t for t, _ in cells}:
        assert {(f"ext4-stack/raw-{i}", w) for i in (1, 2) for w in fio_workloads} <= cells, (
            "the stack's images measured bare"
        )
    else:  # skipped, its raw baselines with it: the bare device is the ceiling's
        assert {("(ceiling)", w) for w in fio_workloads} <= cells and not any(
            t.startswith("ext4-stack/raw") for t, _ in cells
        )
    assert not any(w == "photo-ingestion" and t.startswith("ext4-stack/raw") for t, w in cells), (
        "rsync needs a filesystem: not on raw targets"
    )
    ingestion = nas.samples[("photo-ingestion", "zfs-mirror")]
    assert ingestion["mib_s"][0] > 0 and ingestion["files"][0] >= 1 and ingestion["cpu_s"][0] > 0
    assert ingestion["host_cpu_busy_pct"][0] > 0, "CPU measured system-wide while rsync ran (zfs-fuse's daemon counts)"
    mirror = next(r for r in nas.runs if r["target"] == "zfs-mirror")
    assert "arc_max:" in mirror["fs_details"] and "mirror" in mirror["fs_details"]


@ZFS_FUSE  # zfs-fuse: one daemon on the machine (conftest); btrfs-options needs none and runs beside
@pytest.mark.root
def test_nas_stack_says_where_the_arc_may_hold_the_working_set(nas):
    """At --scale 0.01 the 4GiB ARC would be 41MiB; the engines' floor keeps it at 64MiB, above the
    seed's share of every reading workload's data: their ZFS cells say so, the rest do not."""
    said = {
        (c["workload"], c["target"])
        for c in nas.report["cells"]
        if any(str(n).startswith(MAY_HOLD) for n in c.get("notes", []))
    }
    assert said == {(w, "zfs-mirror") for w in ("backup-read", "metadata", "mixed-load")}
    assert MAY_HOLD in nas.result.stdout


@pytest.mark.root
def test_btrfs_options_runs_every_target_under_fio_and_the_iozone_scenarios(btrfs_options):
    runs = btrfs_options.runs
    targets = {
        "btrfs",
        "ext4",
        "btrfs-opts[nodatasum]",
        "btrfs-opts[nodatacow]",
        "btrfs-opts[compress=zstd]",
        "btrfs-meta-single",
        "btrfs-two-disks",
    }
    fio = {"seq_read", "seq_write", "rand_read", "rand_write"}
    workloads = fio | {"iozone-zeros", "iozone-random"}
    ceiling = {
        ("(ceiling)", w) for w in fio
    }  # it has no raw target: fslab adds the bare device, the fio workloads alone
    assert {(r["target"], r["workload"]) for r in runs} == {(t, w) for t in targets for w in workloads} | ceiling
    assert sum(r["target"] == "(ceiling)" for r in runs) == 3 * len(fio), "three runs each at --runs 1"
    records = {c["workload"]: c for c in btrfs_options.report["ceiling"]}
    assert {w for w, c in records.items() if c["source"] == "raw reference" and c["n"] == 3} == fio
    assert records["iozone-zeros"]["why"] == "no ceiling: not a block workload"
    assert all(r["status"] == "ok" for r in runs), [r["error"] for r in runs if r["status"] != "ok"]
    for target in targets:
        iozone = btrfs_options.samples[("iozone-zeros", target)]
        for phase in ("write", "rewrite"):
            assert iozone[f"{phase}.write_mb_s"][0] > 0
        for phase in ("read", "reread"):
            assert iozone[f"{phase}.read_mb_s"][0] > 0
    patterns = {r["workload"]: r["data_pattern"] for r in runs}
    assert patterns["iozone-zeros"].startswith("zeros") and patterns["iozone-random"].startswith("random")


@pytest.mark.root
def test_btrfs_options_calls_out_zeros_on_the_compressing_target_only(btrfs_options):
    """Seed 002's point: zeros flatter compression. The compress=zstd cell of the zeros scenario
    says so (on the console and in the report files); no cell of random data, and no cell of a
    target that does not compress, does."""
    notes = {(c["workload"], c["target"]): c.get("notes", []) for c in btrfs_options.report["cells"]}
    flattered = {
        cell
        for cell, said in notes.items()
        if any("wrote zeros data to a compressing target" in note and "flatter it" in note for note in said)
    }
    assert flattered == {("iozone-zeros", "btrfs-opts[compress=zstd]")}
    assert "wrote zeros data to a compressing target, which compressed it" in " ".join(
        btrfs_options.result.stdout.split()
    )


@pytest.mark.root
def test_btrfs_options_compresses_the_zeros_pass_and_writes_it_unlike_the_random_pass(btrfs_options):
    """Issue 20: fio preallocated the scenario's file (its default, fallocate=native) and Btrfs
    wrote the zeros into the preallocated extents in place, uncompressed: 1.00×, the full size on
    the device. fslab's jobs do not preallocate: the zeros compress, and reach the device as a
    fraction of what the random pass writes."""
    zeros, random = (
        btrfs_options.samples[(pass_, "btrfs-opts[compress=zstd]")] for pass_ in ("iozone-zeros", "iozone-random")
    )
    assert zeros["write.compression_ratio"][0] > 1.5 and random["write.compression_ratio"][0] < 1.1
    for phase in ("write", "rewrite"):
        assert zeros[f"{phase}.device_written_bytes"][0] < random[f"{phase}.device_written_bytes"][0] / 2, phase
    assert {r["workload"]: r["job_file"].count("fallocate=none") for r in btrfs_options.runs if r["target"] == "btrfs"}[
        "iozone-zeros"
    ] == 4, "every fio phase"


def test_quick_refused_at_a_tiny_scale_runs_at_the_scale_its_refusal_names(tmp_path, needs_root):  # noqa: ANN001
    """Issue 32, item 9: the refusal of `quick --scale 0.001` names the smallest scale at which
    every image is formatted and every workload fits, and the study then runs there, every run ok."""
    where = ("--db", str(tmp_path / "refused.db"), "--workdir", str(tmp_path / "none"))
    refused = fslab("run", "quick", "--scale", "0.001", *where)
    assert refused.returncode == 2 and not (tmp_path / "refused.db").exists() and not (tmp_path / "none").exists()
    fits = "is the smallest at which every image can be formatted and every workload fits"
    scale = re.search(rf"^--scale (\S+) {fits}$", refused.stderr, re.M)
    assert scale, refused.stderr
    ran = run_builtin("quick", scale.group(1), tmp_path)
    assert len(ran.runs) == 16 and all(run["status"] == "ok" for run in ran.runs)
    assert {run["image_size"] for run in ran.runs} == {round(2048 * float(scale.group(1))) * 2**20}
