"""What a summary claims, read as a user reads it: options in effect or not (read back from the
kernel and zfs get), targets this machine cannot run skipped and listed, bandwidth in the unit
the study or the reader chose, short runs warned of before anything runs."""

import json
import socket
from pathlib import Path

import pytest

from conftest import FIXTURES, fresh_workdir, fslab, fslab_in_process, write_study
from fslab.core.units import Bandwidth
from fslab.devices import layers
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.zfs import properties_not_in_effect
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.running import environment
from fslab.running.resume import resumable
from fslab.study import parse_study, short_runs
from synthetic import study_run_of

# /proc/mounts as Linux 6.18 shows each filesystem mounted with these options (measured).
BTRFS_DEFAULTS = "rw,relatime,discard=async,space_cache=v2,subvolid=5,subvol=/"
BTRFS_NODATACOW = "rw,relatime,nodatasum,nodatacow,discard=async,space_cache=v2,subvolid=5,subvol=/"
EXT4_DEFAULTS = "rw,relatime"
XFS_DEFAULTS = "rw,relatime,inode64,logbufs=8,logbsize=32k,noquota"


def not_in_effect(kind: str, requested: str, effective: str) -> list[str]:
    return FILESYSTEMS[kind].not_in_effect(requested, {}, effective, "")


@pytest.mark.parametrize(
    ("kind", "requested", "effective"),
    [
        ("btrfs", "datacow", BTRFS_DEFAULTS),
        ("btrfs", "datacow,datasum,barrier,treelog,acl,commit=30,noautodefrag", BTRFS_DEFAULTS),
        ("btrfs", "nodiscard,compress=no,max_inline=2048", "rw,relatime,space_cache=v2,subvolid=5,subvol=/"),
        (
            "btrfs",
            "compress=zstd,noatime",
            "rw,noatime,compress=zstd:3,discard=async,space_cache=v2,subvolid=5,subvol=/",
        ),
        ("btrfs", "nodatacow", BTRFS_NODATACOW),
        (
            "ext4",
            "data=ordered,barrier=1,delalloc,commit=5,errors=continue,auto_da_alloc,journal_ioprio=5,nodiscard",
            EXT4_DEFAULTS,
        ),
        ("ext4", "barrier=0,dioread_lock", "rw,relatime,nobarrier,nodioread_nolock"),
        (
            "xfs",
            "inode64,logbufs=8,logbsize=32768,nodiscard,nolargeio,allocsize=4096",
            "rw,relatime,inode64,allocsize=4k,logbufs=8,logbsize=32k,noquota",
        ),
        ("ext4", "atime,nostrictatime,diratime,defaults,rw", EXT4_DEFAULTS),
    ],
)
def test_defaults_the_kernel_does_not_echo_are_in_effect(kind, requested, effective):
    assert not_in_effect(kind, requested, effective) == []


@pytest.mark.parametrize(
    ("kind", "requested", "effective", "expected"),
    [
        ("btrfs", "datacow", BTRFS_NODATACOW, ["datacow (is nodatacow)"]),
        ("btrfs", "datasum", BTRFS_NODATACOW, ["datasum (is nodatasum)"]),
        ("btrfs", "nodiscard", BTRFS_DEFAULTS, ["nodiscard (is discard=async)"]),
        (
            "btrfs",
            "nodatacow,compress=zstd",
            "rw,relatime,compress=zstd:3,discard=async,space_cache=v2,subvolid=5,subvol=/",
            ["nodatacow (absent)"],
        ),
        ("ext4", "data=ordered", "rw,relatime,data=journal", ["data=ordered (is data=journal)"]),
        ("ext4", "barrier", "rw,relatime,nobarrier", ["barrier (is nobarrier)"]),
        ("ext4", "norelatime", EXT4_DEFAULTS, ["norelatime (is relatime)"]),
        ("ext4", "noatime", EXT4_DEFAULTS, ["noatime (is relatime)"]),
        ("xfs", "inode32", XFS_DEFAULTS, ["inode32 (absent)"]),
        ("xfs", "logbufs=4", XFS_DEFAULTS, ["logbufs=4 (is logbufs=8)"]),
    ],
)
def test_what_the_read_back_contradicts_is_not_in_effect(kind, requested, effective, expected):
    assert not_in_effect(kind, requested, effective) == expected


def test_zfs_properties_at_their_default_and_in_zfs_forms_are_in_effect():
    """zfs-fuse's own `zfs get` (tests/fixtures/zfs: a real run's stored details, with
    recordsize=131072 compression=on atime=on checksum=on copies=1 primarycache=all xattr=on
    dedup=off asked for)."""
    details = (FIXTURES / "zfs" / "zfs-fuse-details.txt").read_text()
    asked = {
        "recordsize": "131072",
        "compression": "on",
        "atime": "on",
        "checksum": "on",
        "copies": "1",
        "primarycache": "all",
        "xattr": "on",
        "dedup": "off",
    }
    assert properties_not_in_effect(asked, details) == []
    assert (
        properties_not_in_effect(
            {"recordsize": "128k", "secondarycache": "all", "logbias": "latency", "sync": "always"}, details
        )
        == []
    ), "defaults and what zfs get leaves out"
    assert properties_not_in_effect({"recordsize": "64k", "compression": "gzip-1"}, details) == [
        "recordsize=64k (is 128K)",
        "compression=gzip-1 (is on)",
    ]
    assert FILESYSTEMS["zfs"].not_in_effect("", {"atime": "off"}, "rw,relatime,user_id=0,group_id=0", details) == [
        "atime=off (is on)"
    ]


STUDY = """\
[study]
name = "reading"
repetitions = 1
image_size = "256MiB"
units = "MiB/s"
baseline = "ext4-md"

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
name = "btrfs-cow"
filesystem = "btrfs"
mount_options = "datacow,datasum"

[[target]]
name = "btrfs-overridden"
filesystem = "btrfs"
mount_options = "nodatacow,compress=zstd"  # compress, last, wins: the kernel drops nodatacow

[[target]]
name = "ext4-md"
filesystem = "ext4"
devices = 2
layers = ["md-raid1", "luks"]

[[workload]]
name = "write"
rw = "write"
bs = "1M"
"""


SHORT = """\
[study]
name = "short"
image_size = "1GiB"

[fio]
size = "64MiB"
runtime = "5s"
ramp_time = "1s"

[[target]]
name = "ext4"
filesystem = "ext4"

[[target]]
name = "ext4-md"
filesystem = "ext4"
devices = 2
layers = ["md-raid1"]

[[workload]]
name = "write"
rw = "write"
"""


@pytest.fixture(scope="module")
def reading(tmp_path_factory):
    """One tiny study run with --skip-unsupported and --scale 0.5 --scale-sizes-only."""
    if layers.missing("md-raid1") is None:
        pytest.skip("this kernel has md: the md-raid1 target would run, not be skipped")
    root = tmp_path_factory.mktemp("reading")
    db = root / "results.db"
    with fresh_workdir() as workdir:
        result = fslab(
            "run",
            str(write_study(root, STUDY)),
            "--no-ceiling",
            "--db",
            str(db),
            "--workdir",
            str(workdir.root),
            "--skip-unsupported",
            "--scale",
            "0.5",
            "--scale-sizes-only",
        )
        yield result, ResultsDB(str(db)), root


def report(root: Path, db: ResultsDB) -> Path:
    return root / "reports" / f"reading-{study_run_of(db)['id']}"


@pytest.mark.root
def test_a_btrfs_datacow_target_is_not_reported_as_not_in_effect(reading):
    result, db, root = reading
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {
        line.split("|")[1].strip(): line
        for line in (report(root, db) / "summary.md").read_text().splitlines()
        if line.startswith("| btrfs-") and "| btrfs |" in line
    }
    assert "| datacow,datasum |" in rows["btrfs-cow"] and rows["btrfs-cow"].split("|")[7].strip() == "–"
    assert "nodatacow (absent)" in rows["btrfs-overridden"], "what the kernel overrode is still said"
    stored = {r["target"]: r["options_applied"] for r in db.runs(db.study_run()["id"])}
    assert stored["btrfs-cow"] == {"requested": "datacow,datasum", "not_in_effect": [], "compresses": False}
    overridden = stored["btrfs-overridden"]
    assert overridden["compresses"] and "nodatacow (absent)" in overridden["not_in_effect"], (
        "judged when it ran, stored with the run"
    )


@pytest.mark.root
def test_every_run_names_the_host_it_ran_on_and_the_host_is_kept_once(reading):
    _, db, _ = reading
    study_run = db.study_run()["id"]
    assert db.hosts(study_run) == [environment.host()], "this machine, by its host name, with what tells it apart"
    assert {r["host"] for r in db.runs(study_run)} == {socket.gethostname()}


@pytest.mark.root
def test_unsupported_targets_are_skipped_recorded_and_listed(reading):
    result, db, root = reading
    study_run = db.study_run()
    assert {t["name"] for t in db.targets(study_run["id"])} == {"btrfs-cow", "btrfs-overridden"}
    assert {r["target"] for r in db.runs(study_run["id"]) if r["status"] == "ok"} == {"btrfs-cow", "btrfs-overridden"}
    [skipped] = study_run["settings"]["skipped"]  # once, whatever it lacks
    assert skipped["target"] == "ext4-md" and skipped["why"].startswith("it needs md-raid1, and ")
    assert ("; it needs luks, and " in skipped["why"]) == (layers.missing("luks") is not None)
    said = " ".join(result.stdout.split())
    assert "reading: 2 targets × 1 workloads × 1 = 2 runs, about " in said, "the runs that are made are announced"
    assert "; 1 target(s) skipped, this machine cannot run them: ext4-md" in said
    assert (
        "Skipped: 1 target(s) this machine cannot run (--skip-unsupported):" in said
        and f"ext4-md: {skipped['why']}" in said
    )
    # the study's baseline skipped: its targets are compared with none, not with a substitute
    assert (
        f"ext4-md: {skipped['why']} — it is the baseline of btrfs-cow, btrfs-overridden, so they are compared with none"
        in said
    )
    assert "compared with btrfs-cow" not in said and not summarize_study_run(db, study_run["id"]).analysis.rows
    markdown = (report(root, db) / "summary.md").read_text()
    assert "## Skipped targets" in markdown and f"- ext4-md: {skipped['why']}" in markdown
    assert json.loads((report(root, db) / "summary.json").read_text())["skipped"] == [skipped]


@pytest.mark.root
def test_sizes_only_scaling_keeps_runtimes_and_is_recorded(reading):
    result, db, _ = reading
    study_run = db.study_run()
    assert study_run["scale"] == 0.5 and study_run["settings"]["scale_sizes_only"] is True
    run = db.runs(study_run["id"])[0]
    assert "runtime=1000ms" in run["job_file"] and f"size={16 * 2**20}" in run["job_file"]
    assert "scale 0.5 (sizes only)" in " ".join(result.stdout.split())
    warning = " ".join(result.stderr.split())
    assert (
        "1 workload(s) measure for less than 2s" in warning
        and "write (1s)" in warning
        and "raise their runtime" in warning
    )


@pytest.mark.root
def test_bandwidth_in_the_unit_the_study_or_the_reader_chose(reading):
    result, db, root = reading
    said = " ".join(result.stdout.split())
    assert "bandwidth in MiB/s (2^20 bytes per second)" in said and " MiB/s " in said and "MB/s" not in said
    run = next(r for r in db.runs(db.study_run()["id"]) if r["target"] == "btrfs-cow")
    bw_bytes = json.loads(db.outputs(run["id"])[0].text)["jobs"][0]["write"]["bw_bytes"]

    def row(markdown: str) -> list[str]:
        """btrfs-cow's row in the workload's own table (not the fio results' above it)."""
        table = markdown.split("\n## write (", 1)[1]
        return next(line for line in table.splitlines() if line.startswith("| btrfs-cow | write |")).split(" | ")

    figure = row((report(root, db) / "summary.md").read_text())[6]
    assert float(figure.replace(",", "")) == pytest.approx(
        bw_bytes / 2**20, abs=0.05 if bw_bytes / 2**20 < 100 else 0.5
    )
    decimal = fslab_in_process("summary", "--db", str(root / "results.db"), "--units", "MB/s")
    assert decimal.returncode == 0 and "bandwidth in MB/s (10^6 bytes per second)" in " ".join(decimal.stdout.split())
    markdown = (report(root, db) / "summary.md").read_text()
    assert "| MB/s median |" in markdown and float(row(markdown)[6].replace(",", "")) == pytest.approx(
        bw_bytes / 1e6, abs=0.05 if bw_bytes / 1e6 < 100 else 0.5
    )
    assert json.loads((report(root, db) / "summary.json").read_text())["bandwidth_unit"] == "MB/s"


def test_a_short_scaled_study_is_warned_of_and_the_refusal_names_the_skip_flag(tmp_path, workdir):
    """Refused before anything runs (this kernel has no md), and warned first: fast."""
    if layers.missing("md-raid1") is None:
        pytest.skip("this kernel has md")
    study = write_study(tmp_path, SHORT)
    result = fslab_in_process(
        "run", str(study), "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root), "--scale", "0.1"
    )
    said = " ".join(result.stderr.split())
    assert result.returncode == 2 and "Traceback" not in said
    assert (
        "warning: 1 workload(s) measure for less than 2s" in said
        and "write (500ms)" in said
        and "--scale-sizes-only" in said
    )
    assert (
        "target 'ext4-md': it needs md-raid1" in said
        and "`fslab run --skip-unsupported` skips the targets this machine cannot run" in said
    )
    assert said.index("warning:") < said.index("cannot run here")


def test_skipping_never_passes_over_a_refusal(tmp_path, workdir):
    """A user's device named without --destroy-data is a refusal, not something the machine lacks."""
    study = write_study(
        tmp_path, STUDY + '\n[[target]]\nname = "disk"\nfilesystem = "ext4"\ndevice = "/dev/fslab-no-such-disk"\n'
    )
    result = fslab_in_process(
        "run", str(study), "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root), "--skip-unsupported"
    )
    said = " ".join(result.stderr.split())
    assert (
        result.returncode == 2
        and "cannot run here; nothing was attached or formatted" in said
        and "/dev/fslab-no-such-disk" in said
    )
    assert not (tmp_path / "r.db").exists() or ResultsDB(str(tmp_path / "r.db")).study_runs() == []


def test_scale_sizes_only_keeps_runtimes():
    study = parse_study(SHORT, "s.toml", base_dir=Path("."), scale=0.1, scale_sizes_only=True)
    write = study.workloads[0]
    assert (write.tool.fio_options["runtime"], write.tool.fio_options["ramp_time"], write.tool.fio_options["size"]) == (
        "5000ms",
        "1000ms",
        str(6 * 2**20),
    )
    assert study.targets[0].image_size == 102 * 2**20 and study.scale_sizes_only
    assert short_runs(study) is None
    shrunk = parse_study(SHORT, "s.toml", base_dir=Path("."), scale=0.1)
    assert (shrunk.workloads[0].tool.fio_options["runtime"], shrunk.workloads[0].tool.fio_options["ramp_time"]) == (
        "500ms",
        "100ms",
    )
    assert "write (500ms)" in short_runs(shrunk), "the measured window: runtime, ramp excluded"


def test_the_bandwidth_unit_is_one_typed_choice():
    assert [u.value for u in Bandwidth] == ["MB/s", "MiB/s"] and Bandwidth("MiB/s").metric == "mib_s"
    bad = fslab_in_process("summary", "--units", "GB/s", "--db", "/nonexistent/x.db")
    assert bad.returncode == 2 and "GB/s" in bad.stderr


@pytest.mark.root
def test_a_resume_keeps_the_sizes_only_scale_and_the_skipped_targets(reading):
    """Last of the module's tests on the study run: it marks it interrupted to resume it."""
    _, db, _ = reading
    study_run = db.study_run()
    db.finish_study_run(study_run["id"], "interrupted", study_run["outcome"] or {})
    found = resumable(db, str(study_run["id"]))  # refused if a workload's or target's spec differed from what ran
    assert found.study.scale == 0.5 and found.study.scale_sizes_only
    assert [t.name for t in found.study.targets] == ["btrfs-cow", "btrfs-overridden"]
    assert found.study.workloads[0].tool.fio_options["runtime"] == "1000ms"
