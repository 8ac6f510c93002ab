"""The room a fio job file's jobs take (fio/space.py), read from its jobs as rewritten
and scaled, so a job file too big for its image is refused before anything is formatted, as a
workload of parameters is (study.space_problem). Pure."""

from pathlib import Path

import pytest

from fslab.fio.jobs import parse_job_file
from fslab.fio.space import room_needed
from fslab.study import StudyError, parse_study

EXAMPLES = Path(__file__).parent / "fixtures" / "fio-examples"
MiB, GiB = 2**20, 2**30


def room(text: str, block_device: bool = False) -> int:
    return room_needed(parse_job_file(text, "j.fio"), block_device)


def example(name: str, block_device: bool = False) -> int:
    return room((EXAMPLES / name).read_text(), block_device)


def test_each_job_and_clone_has_its_own_files_unless_they_name_one():
    assert room("[a]\nrw=write\nsize=64m\nnumjobs=4\n") == 256 * MiB
    assert room("[a]\nrw=write\nsize=64m\nnumjobs=4\nfilename=shared\n") == 64 * MiB, "clones naming one file share it"
    assert (
        room("[a]\nrw=write\nsize=64m\nfilename=f\n[b]\nrw=read\nsize=96m\nfilename=f\n[c]\nrw=read\nsize=8m\n")
        == 104 * MiB
    ), "one file, as far as any job reaches; c its own"
    assert room("[a]\nrw=write\nsize=64m\n[a]\nrw=read\nsize=32m\n") == 64 * MiB, (
        "fio names a job's files after it: sections of one name share them"
    )
    # fio's own: tiobench's four jobs of four clones each write their own 512m; fio-rand-RW's four clones and
    # ssd-test's four jobs one file of 10g; aio-read's four jobs 512m each
    assert (
        example("tiobench-example.fio"),
        example("fio-rand-RW.fio"),
        example("ssd-test.fio"),
        example("aio-read.fio"),
    ) == (8 * GiB, 10 * GiB, 10 * GiB, 2 * GiB)


def test_a_job_file_asking_for_billions_of_files_is_sized_without_counting_them():
    """A shared job file may ask for any nrfiles and numjobs: the room is worked out, not counted
    file by file (a dict entry a file hung the study's check, as root, before any refusal)."""
    assert room("[a]\nrw=write\nsize=1m\nnumjobs=1024\nnrfiles=4294967295\n") == 1024 * 4294967295, (
        "a byte a file, at least"
    )
    assert room("[a]\nrw=write\nfilesize=4k\nnumjobs=1000\nnrfiles=1000000000\noffset=4k\n") == 10**12 * 8192
    clones = "[a]\nrw=write\nfilesize=1m\nnumjobs=3\nnrfiles=2\noffset=1m\noffset_increment=1m\n"
    assert (
        room(clones + "[a]\nrw=read\nfilesize=4m\nnrfiles=1\noffset_increment=1m\n")
        == 2 * (2 + 3 + 4) * MiB + (4 - 2) * MiB
    ), "one name's files: each as far as any of its jobs reaches"


def test_files_are_filesize_times_nrfiles_or_size_shared_out_and_offsets_lie_before_them():
    assert room("[a]\nrw=write\nnrfiles=200\nfilesize=4k\nnumjobs=2\n") == 2 * 200 * 4096
    assert room("[a]\nrw=write\nnrfiles=10\nfilesize=1m-4m\nsize=1g\n") == 40 * MiB, (
        "a range's upper end; size then only caps the I/O"
    )
    assert room("[a]\nrw=write\nnrfiles=3\nsize=3m\n") == 3 * MiB, "size shared out among the job's files"
    assert room("[a]\nrw=write\nsize=1m\noffset=4m\n") == 5 * MiB
    assert room("[a]\nrw=write\nsize=1m\nfilename=f\nnumjobs=4\noffset_increment=1m\n") == 4 * MiB, (
        "each clone a region of its own"
    )
    assert room("[a]\nrw=write\nsize=1m\nnumjobs=2\noffset=1m\noffset_increment=1m\n") == (1 + 1) * MiB + (2 + 1) * MiB


def test_what_takes_no_room_counts_none():
    assert room("[a]\nrw=read\nsize=16m\nio_size=10g\n") == 16 * MiB, "io_size is how much I/O, not where"
    assert room("[a]\nrw=write\nsize=50%\n") == 0, "a percentage: fio sizes it from the file or device itself"
    assert room("[a]\nrw=write\nfill_device=1\nfilename=f\n") == 0, "it fills what is free, by design"
    assert example("filecreate-ioengine.fio") == 0, "the filecreate engine's 500000 files are made empty"
    assert example("surface-scan.fio") == 0, "its write phase fills the device, its verify phase reads that file"
    assert example("e4defrag.fio") == 200 * MiB, "file1 and the donor file beside it"


def test_on_a_raw_device_every_job_works_on_the_device():
    assert room("[a]\nrw=write\nsize=64m\nnumjobs=4\n[b]\nrw=read\nsize=96m\n", block_device=True) == 96 * MiB
    assert room("[a]\nrw=write\nsize=1m\nnumjobs=4\noffset=8m\noffset_increment=2m\n", block_device=True) == 15 * MiB
    assert example("tiobench-example.fio", block_device=True) == 512 * MiB


STUDY = """\
[study]
name = "s"
image_size = "SIZE"
image_fill = "sparse"
[[target]]
filesystem = "ext4"
[[workload]]
name = "tio"
job_file = "tiobench-example.fio"
"""


def test_a_job_file_too_big_for_its_image_is_refused_before_anything_is_made_and_one_that_fits_is_not():
    with pytest.raises(StudyError) as refused:
        parse_study(STUDY.replace("SIZE", "4GiB"), "study.toml", base_dir=EXAMPLES)
    assert "study.toml:3: study.image_size: " in str(refused.value)
    assert (
        "workload 'tio' needs 8GiB but target 'ext4' has 3.6GiB free "
        "after ext4's mkfs and mount on an image of 4GiB; an image of " in str(refused.value)
    )
    parse_study(STUDY.replace("SIZE", "10GiB"), "study.toml", base_dir=EXAMPLES)
    # scaled: 16 files of 512m × 0.01 (5m each) on 4GiB × 0.01
    with pytest.raises(
        StudyError,
        match=r"workload 'tio' needs 80MiB but target 'ext4' has .* "
        r"on an image of 41MiB; .*\(every size × --scale 0.01\)",
    ):
        parse_study(STUDY.replace("SIZE", "4GiB"), "study.toml", base_dir=EXAMPLES, scale=0.01)
    parse_study(STUDY.replace("SIZE", "16GiB"), "study.toml", base_dir=EXAMPLES, scale=0.01)


def test_the_layout_before_a_job_file_has_the_jobs_fio_can_lay_out_alone(tmp_path):
    """fslab lays out what a job file reads with fio's create_only (fio.layout_job_for) — but for
    the jobs that size their files themselves: fio's surface-scan.fio reads the file its write phase
    fills (fill_device), which neither can be laid out alone (fio asked for a size, and the run failed)."""
    from fslab.filesystems.base import Provisioned
    from fslab.fio.section import FioSection
    from fslab.fio.workload import job_file_workload, layout_job_for
    from fslab.workloads.data import DataPattern
    from fslab.workloads.tables import Building

    def refuse(at: tuple, why: str):
        raise AssertionError(why)

    def layout(name: str, text: str | None = None) -> str | None:
        if text is not None:
            (tmp_path / name).write_text(text)
        building = Building(
            index=0,
            scale=1.0,
            time_scale=1.0,
            base_dir=EXAMPLES if text is None else tmp_path,
            fio=FioSection(),
            data=DataPattern(),
            where=str,
            refuse=refuse,
        )
        return layout_job_for(job_file_workload("w", name, building, {}, None), Provisioned(top="", directory=tmp_path))

    assert layout("surface-scan.fio") is None
    laid = layout(
        "mine.fio",
        "[global]\nbs=64k\n[w]\nrw=write\nsize=1m\nfilename=f\n[r]\nstonewall\nrw=read\nfilename=f\n[own]\nrw=read\nsize=2m\n[pct]\nrw=read\nsize=50%\n[fill]\nrw=write\nfill_device=1\n",
    )
    assert laid is not None and "[global]\nbs=64k\n" in laid and "create_only=1" in laid
    assert [line for line in laid.splitlines() if line.startswith("[")] == [
        "[global]",
        "[global]",
        "[global]",
        "[w]",
        "[own]",
    ], laid
