"""rsync ingestion (workloads/rsync.py): its output read on real rsync --stats (tests/fixtures/rsync),
the generated set's sizes, what the study file refuses, and a run end to end on an ext4 loop
image with the source image released afterwards."""

import statistics
import zlib
from contextlib import ExitStack, contextmanager

import pytest

from conftest import FIXTURES, MACHINE_NOTES, held_by, ran_study
from fslab.core.errors import Refused
from fslab.model.findings import Finding
from fslab.workloads.base import StudyScope
from fslab.workloads.rsync import (
    MIB,
    RsyncIngest,
    file_sizes,
    files_for_total,
    judge,
    measured_line,
    metric_values,
    parse,
    rsync_ingest,
    source_name,
    source_set,
    write_set,
)
from kinds_helpers import read_study, refused

FIXTURE = FIXTURES / "rsync"
SET = 22020096 + 18874368 + 26214400  # the fixtures' three files


def stored(name: str, wall_s: float = 0.5) -> str:
    """A fixture as fslab stores it: its measured line above rsync's output."""
    return measured_line(wall_s, 0.02, 0.05) + "\n" + (FIXTURE / name).read_text()


def test_the_copy_is_read_from_rsyncs_stats_and_fslabs_wall_clock():
    result = parse(stored("three-files.txt", 0.5))
    assert (result.files, result.bytes, result.total_bytes) == (3, SET, SET)
    assert result.wall_s == 0.5 and result.cpu_s == pytest.approx(0.07)
    metrics = {m.name: m.value for m in metric_values(result)}
    assert metrics["mib_s"] == pytest.approx(SET / MIB / 0.5) and metrics["mb_s"] == pytest.approx(SET / 1e6 / 0.5)
    assert metrics["files"] == 3 and metrics["elapsed_s"] == 0.5


def test_rsyncs_thousands_separators_are_read_too():
    assert parse(stored("three-files-human-readable.txt")).bytes == SET


def test_output_without_fslabs_line_or_rsyncs_stats_is_refused():
    with pytest.raises(ValueError, match="no fslab-measured line"):
        parse((FIXTURE / "three-files.txt").read_text())
    with pytest.raises(ValueError, match="rsync error"):
        parse(measured_line(0.1, 0, 0) + "\nrsync error: some files could not be transferred (code 23)")


def test_a_copy_of_nothing_or_too_short_is_no_plain_result():
    assert [f.kind for f in judge(parse(stored("up-to-date.txt")), 3, SET)] == ["short_copy"]
    assert [f.kind for f in judge(parse(stored("three-files.txt", 0.5)), 3, SET + 1024)] == ["short_copy"]
    found = judge(parse(stored("three-files.txt", 0.01)), 3, SET)
    assert [f.kind for f in found] == ["too_short_to_time"] and all(
        isinstance(f, Finding) and f.implausible for f in found
    )
    assert judge(parse(stored("three-files.txt", 0.5)), 3, SET) == [], (
        "the whole set copied, long enough: a plain result"
    )


def test_what_a_study_run_keeps_is_made_once_and_released_when_it_ends():
    made, released = [], []

    @contextmanager
    def source():
        made.append(1)
        yield "/the/source"
        released.append(1)

    with ExitStack() as stack:
        scope = StudyScope(stack)
        assert scope.kept("a", source) == scope.kept("a", source) == "/the/source"
        assert made == [1] and released == []
    assert released == [1]


def test_the_sets_sizes_lie_in_17_to_28_mib_most_near_21_and_follow_the_seed():
    sizes = file_sizes(3, 5000)
    assert all(17 * MIB <= s <= 28 * MIB and s % 1024 == 0 for s in sizes)
    mode = statistics.mode(s // MIB for s in sizes)
    assert 20 <= mode <= 21, "the most common whole MiB is next to 21"
    assert sum(19 * MIB <= s <= 23 * MIB for s in sizes) > sum(24 * MIB <= s <= 28 * MIB for s in sizes)
    assert statistics.median(sizes) == pytest.approx(22 * MIB, rel=0.03)
    assert file_sizes(3, 5000) == sizes and file_sizes(3, 10) == sizes[:10], (
        "the same seed, the same set; a larger one only adds"
    )
    assert file_sizes(4, 10) != sizes[:10]


def test_the_sets_contents_follow_the_seed_and_do_not_compress(tmp_path):
    write_set(tmp_path / "a", RsyncIngest(files=1))
    write_set(tmp_path / "b", RsyncIngest(files=1))
    write_set(tmp_path / "c", RsyncIngest(files=1, seed=4))
    a, b, c = ((tmp_path / d / "photo-00000.raw").read_bytes() for d in "abc")
    assert len(a) == file_sizes(3, 1)[0] and a == b and a[:MIB] != c[:MIB]
    assert len(zlib.compress(a[:MIB])) > MIB, "random bytes: no compression wins anything"


def test_a_total_is_as_many_files_as_reach_it_and_scale_keeps_one():
    count = files_for_total(3, 2**30)
    assert sum(file_sizes(3, count)) >= 2**30 > sum(file_sizes(3, count - 1))
    assert rsync_ingest({}, total=2**30).files == count
    assert RsyncIngest(files=10).scaled(0.01, 1.0).files == 1 and RsyncIngest(files=10).scaled(0.5, 0.5).files == 5


STUDY = """\
[study]
name = "ingest"
repetitions = 2
image_size = "256MiB"
image_fill = "sparse"

[[target]]
filesystem = "ext4"

[[workload]]
name = "photos"
kind = "rsync"
files = 3
"""


def test_the_study_file_refuses_other_data_unsafe_options_and_both_sizes():
    refused(
        STUDY.replace("files = 3", 'files = 3\ndata = "zeros"'),
        r"s.toml:14: workload\[0\].data: rsync data 'zeros' is refused: only \"random\" \(photos do not compress",
    )
    refused(
        STUDY.replace("files = 3", 'options = { rsh = "ssh" }'),
        r"workload\[0\].options: rsync rsh=ssh is refused: it names a path or a program",
    )
    refused(
        STUDY.replace("files = 3", 'options = { "remove-source-files" = true }'),
        r"rsync remove-source-files=true is refused: it deletes files",
    )
    refused(
        STUDY.replace("files = 3", "options = { checksums = true }"),
        r"unknown rsync option 'checksums'.*allowed: whole-file, inplace, preallocate, fsync, sparse",
    )
    refused(
        STUDY.replace("files = 3", 'files = 3\ntotal = "1GiB"'),
        r"workload\[0\].total: rsync takes `files` or `total`, not both",
    )
    refused(
        STUDY.replace("files = 3", "files = 30"),
        r"workload 'photos' needs .* but target 'ext4' has .* free after "
        r"ext4's mkfs and mount on an image of 256MiB; an image of .* would do",
    )
    tool = (
        read_study(STUDY.replace("files = 3", "files = 4\noptions = { fsync = true, inplace = false }"), scale=0.5)
        .workloads[0]
        .tool
    )
    assert isinstance(tool, RsyncIngest) and tool.files == 2 and tool.flags() == ["--fsync", "--no-inplace"]


@pytest.mark.root
def test_rsync_ingests_into_ext4_end_to_end_and_releases_its_source(workdir, tmp_path):
    result, results, study_run = ran_study(tmp_path, STUDY, workdir)
    runs = results.runs(study_run)
    assert [r["status"] for r in runs] == ["ok", "ok"], [r["error"] for r in runs]
    assert all(
        r["job_file"].startswith("rsync -a --stats --no-human-readable '$SOURCE/' ")
        and r["job_file"].endswith("/ingest/")
        for r in runs
    )
    assert runs[0]["data_pattern"].startswith("random (incompressible generated files")
    # the whole set copied, each time (how long it took is this machine's: too_short_to_time is judged
    # on synthetic runs above)
    # (the machine's and its neighbours' notes aside: a run beside other tests' runs is disturbed)
    assert all(not [n for n in r["notes"] if n["kind"] not in ("too_short_to_time", *MACHINE_NOTES)] for r in runs), [
        r["notes"] for r in runs
    ]
    text = results.outputs(runs[0]["id"])[0].text
    assert text.startswith("fslab-measured wall_s=") and "Number of regular files transferred: 3" in text
    samples = results.sample_groups(study_run).values[("photos", "ext4")]
    assert len(samples["mib_s"]) == 2 and all(v > 0 for v in samples["mib_s"])
    assert samples["bytes"] == [float(RsyncIngest(files=3).total)] * 2 and samples["files"] == [3.0, 3.0]
    assert all(v > 0 for v in samples["cpu_s"])
    assert len(samples["write_amplification"]) == 2 and all(0.98 <= v < 3 for v in samples["write_amplification"]), (
        "device writes weighed against what rsync wrote: each file reached the device "
        "(the window ends with a sync), with ext4's metadata and journal on top"
    )
    assert held_by(workdir.root) == [], "the source image is detached and unmounted when the study ends"
    assert not list(workdir.images.glob("*.img")), "and deleted"


PLANTED = {
    "a symlink at the image": ("images", ".img", "symlink", "already exists: fslab makes its images anew"),
    "a symlink at the mount point": ("mounts", "", "symlink", "is not a directory fslab made"),
    "a file at the mount point": ("mounts", "", "file", "is not a directory fslab made"),
    "a directory of files at the mount point": ("mounts", "", "directory", "is in use"),
}


@pytest.mark.parametrize("case", PLANTED)
def test_what_is_planted_where_the_source_goes_is_refused_and_left_as_it_was(workdir, tmp_path, case):
    where, suffix, planted, says = PLANTED[case]
    victim = tmp_path / "victim"
    victim.write_text("a user's file\n")
    path = getattr(workdir, where) / (source_name("photos") + suffix)
    path.parent.mkdir(exist_ok=True)
    if planted == "symlink":
        path.symlink_to(victim)
    elif planted == "file":
        path.write_text("a user's file\n")
    else:
        path.mkdir()
        (path / "notes.txt").write_text("mine\n")
    with pytest.raises(Refused, match=says), source_set(workdir.journal, "photos", RsyncIngest(files=1)):
        pytest.fail("the source was made over what was planted")
    assert victim.read_text() == "a user's file\n"
    if planted == "symlink":
        assert path.is_symlink() and path.readlink() == victim
    elif planted == "file":
        assert path.read_text() == "a user's file\n"
    else:
        assert (path / "notes.txt").read_text() == "mine\n"
    assert held_by(workdir.root) == [], "the source's image, made before its mount point was refused, is detached"
    assert [p for p in workdir.images.glob("*.img") if p != path] == [], "and deleted"
