"""A user's fio job file fitted to its study (fio/rewrite.py): the sizes and times the
study asks for, numjobs/iodepth/bs set or swept beside a job_file, and --scale, every job
rewritten through the parsed records; the stored job says what ran and the workload from what.
fio's own examples (tests/fixtures/fio/examples: 900 s on 10 GiB) run small under --scale."""

import json
from pathlib import Path

import pytest

from conftest import fslab_in_process, held_by, write_study
from fslab.fio.jobs import job_text, parse_all, parse_job_file, render
from fslab.study import StudyError, parse_study, short_runs

EXAMPLES = Path(__file__).parent / "fixtures" / "fio" / "examples"
SEQ_READ = (EXAMPLES / "fio-seq-read.fio").read_text()  # [global] runtime=900, [file1] size=10G
AIO_READ = (EXAMPLES / "aio-read.fio").read_text()  # [global] size=512m, four jobs at iodepths 4, 32, 8, 16


def rewrite(text: str, asked: dict[str, tuple[str, str]] | None = None, scale: float = 1.0, time_scale: float = 1.0):
    from fslab.fio.rewrite import Asked, rewritten

    job = parse_job_file(text, "j.fio")
    return rewritten(job, {option: Asked(*value) for option, value in (asked or {}).items()}, scale, time_scale)


def sections_of(job) -> list[tuple[str, list[tuple[str, str | None]]]]:
    return [(section.name, list(section.options)) for section in job.sections]


# ---- the rewriting itself: pure ----------------------------------------------------------------


def test_fios_900s_example_is_scaled_in_its_job_and_its_global_keeps_the_rest():
    job, rewrites = rewrite(SEQ_READ, scale=0.01, time_scale=0.01)
    assert job_text(job) == (
        "[global]\nname=fio-seq-reads\nfilename=fio-seq-reads\nrw=read\nbs=256K\ndirect=1\nnumjobs=1\ntime_based\n"
        "[file1]\nioengine=libaio\niodepth=16\nsize=102m\nruntime=9s\n"
    ), "runtime leaves [global] for the job, time_based stays as the job file set it"
    from fslab.fio.rewrite import described

    assert described([r.spec() for r in rewrites]) == "size 10GiB → 102MiB (scale 0.01); runtime 900s → 9s (scale 0.01)"
    sizes_only, _ = rewrite(
        SEQ_READ, scale=0.01, time_scale=1.0
    )  # --scale-sizes-only: the times as the job file has them
    assert sizes_only.jobs()[0]["runtime"] == "900" and sizes_only.jobs()[0]["size"] == "102m"
    unchanged, nothing = rewrite(SEQ_READ)
    assert nothing == () and unchanged == parse_job_file(SEQ_READ, "j.fio"), (
        "nothing asked, no scale: the job file as written"
    )


def test_a_value_asked_reaches_every_job_over_its_own_and_its_globals():
    text = (
        "[global]\nsize=1g\nruntime=60\ntime_based\n[a]\nsize=2g\n"
        "runtime=10\n[b]\nrw=write\n[global]\niodepth=4\n[c]\nrw=read\n"
    )
    job, rewrites = rewrite(text, {"runtime": ("5s", "workload"), "iodepth": ("8", "workload")})
    assert sections_of(job) == [
        ("global", [("size", "1g"), ("time_based", None)]),  # what every job now sets leaves both [global]s
        ("a", [("size", "2g"), ("runtime", "5s"), ("iodepth", "8")]),
        ("b", [("rw", "write"), ("runtime", "5s"), ("iodepth", "8")]),
        ("global", []),
        ("c", [("rw", "read"), ("runtime", "5s"), ("iodepth", "8")]),
    ]
    assert [(o["runtime"], o["iodepth"], o["size"]) for o in job.jobs()] == [
        ("5s", "8", "2g"),
        ("5s", "8", "1g"),
        ("5s", "8", "1g"),
    ]
    assert [(r.option, r.jobs, r.was, r.now) for r in rewrites] == [
        ("runtime", ("a",), "10", "5s"), ("runtime", ("b", "c"), "60", "5s"), ("iodepth", ("a", "b"), None, "8"),
        ("iodepth", ("c",), "4", "8"),
    ]  # fmt: skip


def test_jobs_that_set_none_get_a_value_asked_and_keep_none_when_only_scaled():
    job, _ = rewrite("[a]\nrw=read\nsize=64m\n[b]\nrw=write\nsize=32m\nruntime=4\n", scale=0.5, time_scale=0.5)
    assert [(o.get("size"), o.get("runtime")) for o in job.jobs()] == [("32m", None), ("16m", "2s")], (
        "a runtime none set is not made up"
    )
    job, rewrites = rewrite(
        "[a]\nrw=read\nsize=64m\n", {"runtime": ("30s", "[fio]"), "ramp_time": ("2s", "[fio]")}, time_scale=0.1
    )
    assert (job.jobs()[0]["runtime"], job.jobs()[0]["ramp_time"]) == ("3s", "200ms") and "time_based" not in job.jobs()[
        0
    ]
    from fslab.fio.rewrite import described

    assert (
        described([r.spec() for r in rewrites]) == "runtime unset → 3s ([fio] runtime = 30s, scale 0.1); "
        "ramp_time unset → 200ms ([fio] ramp_time = 2s, scale 0.1)"
    )


def test_what_is_measured_in_bytes_and_seconds_scales_with_the_size_and_time_and_the_jobs_shape_is_kept(tmp_path):
    text = (
        "[a]\nrw=randread\nsize=50%\nio_size=10%\noffset=1g\noffset_increment=256m\nnumber_ios=1000\nstartdelay=10-20\n"
        "nrfiles=100\nfilesize=4k-64k\nloops=3\nthinktime=5ms\nrate=10m\nbs=4k\n"
        "[b]\nrw=write\nfilesize=1g:2g\noffset=25%\nio_size=2g\n"
    )
    job, _ = rewrite(text, scale=0.1, time_scale=0.1)
    a, b = job.jobs()
    assert {k: a[k] for k in ("size", "io_size", "offset", "offset_increment", "number_ios", "startdelay")} == {
        "size": "50%",
        "io_size": "10%",  # a percentage of the target, which --scale shrank already
        "offset": "102m",
        "offset_increment": "26m",
        "number_ios": "100",
        "startdelay": "1000ms-2s",
    }  # fmt: skip  (a range's first end in ms: fio reads 1s-2s as 1 µs to 2 s)
    assert {k: a[k] for k in ("nrfiles", "filesize", "loops", "thinktime", "rate", "bs")} == {
        "nrfiles": "10", "filesize": "4k-64k", "loops": "3", "thinktime": "5ms", "rate": "10m", "bs": "4k",
    }, ("small files stay small (never rounded up to a MiB): their count takes the scale; "
        "a pass of a percentage, and the pace, are the job's shape")  # fmt: skip
    assert (b["filesize"], b["offset"], b["io_size"]) == ("102m:205m", "25%", "205m"), "each end of a range"
    assert (
        parse_all([(render(job, directory=tmp_path, device=None), "the job")], directory=tmp_path) == []
    )  # fio reads every value written


def test_counts_take_the_share_of_the_scale_that_sizes_held_at_their_floor_could_not():
    from fslab.fio.rewrite import described

    # fio's fsx.fio: 500000 passes over 256k (kept: under a MiB); filecreate-ioengine.fio: 31250 files of 4k a job
    job, rewrites = rewrite(
        "[file]\nrw=randrw\nsize=256k\nbs=4k\nloops=500000\n[t0]\nioengine=filecreate\nfilesize=4k\nnrfiles=31250\n",
        scale=0.002,
    )
    (fsx, files) = job.jobs()
    assert (fsx["size"], fsx["loops"], files["filesize"], files["nrfiles"]) == ("256k", "1000", "4k", "62")
    assert (
        described([r.spec() for r in rewrites]) == "nrfiles 31250 → 62 (scale 0.002); loops 500000 → 1000 (scale 0.002)"
    )
    # held at a MiB: 2m × 0.1 is 1m, not 205k; the passes take the rest (2 × 1m = 0.1 × 10 × 2m)
    job, _ = rewrite("[a]\nrw=read\nsize=2m\nloops=10\n", scale=0.1)
    assert (job.jobs()[0]["size"], job.jobs()[0]["loops"]) == ("1m", "2")
    # sizes that shrank by the scale (to whole MiB) leave the counts as written; so does no scale, or a larger one
    for text, scale in (("[a]\nrw=read\nsize=10g\nloops=4\nnrfiles=8\n", 0.01),
                        ("[a]\nrw=read\nsize=1536m\nloops=4\n", 0.001),
                        ("[a]\nrw=read\nfilesize=4k\nnrfiles=100\nloops=3\n", 1.0),
                        ("[a]\nrw=read\nfilesize=4k\nnrfiles=100\n", 2.0),
                        ("[a]\nrw=read\nsize=50%\nloops=3\n", 0.01)):  # fmt: skip
        job, _ = rewrite(text, scale=scale)
        assert (job.jobs()[0].get("loops"), job.jobs()[0].get("nrfiles")) == (
            parse_job_file(text, "j.fio").jobs()[0].get("loops"),
            parse_job_file(text, "j.fio").jobs()[0].get("nrfiles"),
        ), text
    job, _ = rewrite("[a]\nrw=read\nfilesize=4k\nnrfiles=100\n", scale=0.001)
    assert job.jobs()[0]["nrfiles"] == "1", "at least one"


def test_fios_other_names_are_rewritten_under_the_main_one():
    job, rewrites = rewrite(
        "[a]\nrw=read\nblocksize=64k\nio_limit=1g\nsize=2g\n", {"bs": ("4k", "workload")}, scale=0.5
    )
    assert sections_of(job) == [("a", [("rw", "read"), ("size", "1g"), ("io_size", "512m"), ("bs", "4k")])]
    assert [(r.option, r.was, r.now) for r in rewrites] == [
        ("size", "2g", "1g"),
        ("io_size", "1g", "512m"),
        ("bs", "64k", "4k"),
    ]


def test_sizes_are_read_as_fio_reads_them():
    from fslab.fio.rewrite import fio_bytes, fio_size, fio_time

    # fio's default kb_base=1024: k/m/g and kb/mb are binary, kib/mib decimal; a fraction is cut with its unit
    assert [fio_bytes(v) for v in ("4k", "4K", "1m", "1mb", "1mi", "1MiB", "10G", "4096", "1.5m")] == [
        4096,
        4096,
        2**20,
        2**20,
        2**20,
        10**6,
        10 * 2**30,
        4096,
        1,
    ]
    assert [fio_size(n) for n in (2**20, 102 * 2**20, 3 * 2**30, 4096, 1000)] == ["1m", "102m", "3g", "4k", "1000"]
    assert [fio_time(s) for s in (9, 0.9, 1.35, 0.0001)] == ["9s", "900ms", "1350ms", "1ms"]


def test_a_hexadecimal_size_is_scaled_and_counted_as_fio_reads_it():
    """fio reads 0x40000000 as 1 GiB: split by the guard's own reading of numbers, not a second
    one that saw 0 and then x40000000 (the space check counted nothing, --scale wrote 0x19m)."""
    from fslab.fio.space import room_needed

    job, _ = rewrite("[a]\nrw=write\nsize=0x40000000\n", scale=0.5)
    assert job.jobs()[0]["size"] == "512m"
    assert room_needed(parse_job_file("[a]\nrw=write\nsize=0x40000000\n", "j.fio"), False) == 2**30


def test_a_runtime_of_zero_asked_leaves_the_jobs_to_end_with_their_size():
    job, rewrites = rewrite("[global]\nruntime=60\n[a]\nrw=write\nsize=8m\n", {"runtime": ("0s", "workload")})
    assert "runtime" not in job.jobs()[0] and [(r.was, r.now) for r in rewrites] == [("60", None)]


def test_bs_asked_where_a_job_sets_what_fio_uses_instead_is_refused():
    from fslab.core.errors import Refused

    for other in ("bssplit=4k/50:64k/50", "bsrange=4k-64k"):
        with pytest.raises(
            Refused, match=rf"job 'b' of j.fio: it sets {other.split('=')[0]}, which fio uses instead of bs"
        ):
            rewrite(f"[a]\nrw=read\n[b]\nrw=read\n{other}\n", {"bs": ("8k", "workload")})


def test_fio_reads_the_rewritten_job(tmp_path):
    job, _ = rewrite(AIO_READ, {"iodepth": ("2", "workload"), "runtime": ("1s", "[fio]")}, scale=0.01)
    rendered = render(job, directory=tmp_path, device=None)
    assert parse_all([(rendered, "the job")], directory=tmp_path) == []
    assert [(o["iodepth"], o["size"], o["runtime"]) for o in job.jobs()] == [("2", "5m", "1s")] * 4


# ---- in a study file: precedence, refusals, sweeps, the short-run warning ----------------------

STUDY = """\
[study]
name = "s"
image_size = "300GiB"
image_fill = "sparse"
[fio]
FIO
[[target]]
filesystem = "xfs"
[[workload]]
name = "mine"
job_file = "mine.fio"
"""


def study(tmp_path: Path, beside: str = "", fio: str = "", job: str = SEQ_READ, **kw):
    (tmp_path / "mine.fio").write_text(job)
    return parse_study(STUDY.replace("FIO", fio) + beside, "s.toml", base_dir=tmp_path, **kw)


def test_the_workloads_own_fields_win_over_fio_which_wins_over_the_job_file(tmp_path):
    fio = 'size = "64MiB"\nruntime = "20s"\nramp_time = "1s"\nio_size = "128MiB"\niodepth = 4\nbs = "1m"\nnumjobs = 2'
    mine = study(tmp_path, 'runtime = "30s"\nbs = "64k"\n', fio).workloads[0]
    options = mine.tool.job.jobs()[0]
    assert {k: options[k] for k in ("size", "runtime", "ramp_time", "io_size", "bs", "iodepth", "numjobs")} == {
        "size": "64m", "runtime": "30s", "ramp_time": "1s", "io_size": "128m", "bs": "64k",
        # [fio]'s iodepth, bs and numjobs are the parameter workloads': a job file says its own
        "iodepth": "16", "numjobs": "1",
    }  # fmt: skip
    assert mine.seconds == 31 and mine.tool.measured_seconds() == 30
    rewritten = {r["option"]: r for r in mine.spec()["rewritten"]}
    assert rewritten["runtime"] == {
        "option": "runtime",
        "jobs": ["file1"],
        "was": "900",
        "now": "30s",
        "asked": "30s",
        "by": "workload",
        "scale": None,
    }
    assert rewritten["size"] == {
        "option": "size",
        "jobs": ["file1"],
        "was": "10G",
        "now": "64m",
        "asked": "64MiB",
        "by": "[fio]",
        "scale": None,
    }
    assert "size=64m\n" in mine.spec()["job"] and "runtime=900" not in mine.spec()["job"], (
        "the stored job says what ran"
    )
    scaled = study(tmp_path, 'runtime = "30s"\n', fio, scale=0.5).workloads[0].tool.job.jobs()[0]
    assert (scaled["size"], scaled["runtime"], scaled["ramp_time"]) == ("32m", "15s", "500ms"), (
        "--scale scales what is asked too"
    )
    as_written = study(tmp_path, job="[a]\nrw=read\nsize=16m\nruntime=2\n").workloads[0]
    assert "rewritten" not in as_written.spec(), (
        "nothing asked, no scale: stored as every workload before (absent: run as written)"
    )


def test_scale_reaches_a_job_file_and_the_short_run_warning_sees_it(tmp_path):
    mine = study(tmp_path, scale=0.001)
    assert mine.workloads[0].tool.measured_seconds() == 0.9 and mine.workloads[0].tool.job.jobs()[0]["size"] == "10m"
    warning = short_runs(mine)
    assert warning and "mine (900ms)" in warning and "--scale 0.001 shortened them" in warning
    kept = study(tmp_path, scale=0.001, scale_sizes_only=True)
    assert kept.workloads[0].tool.measured_seconds() == 900 and short_runs(kept) is None


@pytest.mark.parametrize(
    "field, says",
    [
        ("direct = true", "direct beside a job_file is refused: a job file says how each job does its I/O"),
        ('ioengine = "psync"', "ioengine beside a job_file is refused: a job file's engine options go with its engine"),
        ("rwmixread = 70", "rwmixread beside a job_file is refused: set rwmixread in the job file's mixed jobs"),
        ("randseed = 3", "randseed beside a job_file is refused: set randseed in the job file"),
        ('data = "zeros"', "data beside a job_file is refused: a job file's data is what its buffer options set"),
        ("shared_file = true", "shared_file beside a job_file is refused: a job file's jobs share a file by naming it"),
        ("options = { end_fsync = 1 }", "options beside a job_file is refused: put them in the job file"),
    ],
)
def test_what_a_job_file_says_itself_is_refused_beside_it_saying_what_to_do(tmp_path, field, says):
    with pytest.raises(StudyError) as refused:
        study(tmp_path, field + "\n")
    name = field.split(" ")[0]
    assert str(refused.value).startswith(f"s.toml:12: workload[0].{name}: {says}"), str(refused.value)
    assert "fslab sets only size, io_size, runtime, ramp_time, numjobs, iodepth, bs, in every job" in str(refused.value)


def test_a_list_beside_a_job_file_sweeps_it_one_workload_a_value(tmp_path):
    swept = study(tmp_path, "iodepth = [1, 8, 32]\n", job=AIO_READ).workloads
    assert [w.name for w in swept] == ["mine[iodepth=1]", "mine[iodepth=8]", "mine[iodepth=32]"]
    assert [{o["iodepth"] for o in w.tool.job.jobs()} for w in swept] == [{"1"}, {"8"}, {"32"}], "every job of each"
    both = study(tmp_path, 'numjobs = [1, 4]\nbs = ["4k", "1m"]\n', job=AIO_READ).workloads
    assert [w.name for w in both] == [
        "mine[bs=4k, numjobs=1]",
        "mine[bs=4k, numjobs=4]",
        "mine[bs=1m, numjobs=1]",
        "mine[bs=1m, numjobs=4]",
    ]
    assert [(w.tool.job.jobs()[3]["bs"], w.tool.job.jobs()[3]["numjobs"]) for w in both] == [
        ("4k", "1"),
        ("4k", "4"),
        ("1m", "1"),
        ("1m", "4"),
    ]
    one = study(tmp_path, "iodepth = 2\n", job=AIO_READ).workloads
    assert [w.name for w in one] == ["mine"] and {o["iodepth"] for o in one[0].tool.job.jobs()} == {"2"}, (
        "a single value: every job, no sweep"
    )
    on_xfs = study(tmp_path, 'iodepth = [1, 2]\ntargets = ["xfs"]\n', job=AIO_READ)
    assert [(c.workload.name, c.target.name) for c in on_xfs.cells] == [
        ("mine[iodepth=1]", "xfs"),
        ("mine[iodepth=2]", "xfs"),
    ]


def test_a_workload_of_parameters_sweeps_the_same_fields(tmp_path):
    text = STUDY.replace("FIO", "").replace(
        'job_file = "mine.fio"\n', 'rw = "randread"\nsize = "16MiB"\nbs = ["4k", "64k"]\niodepth = [1, 16]\n'
    )
    swept = parse_study(text, "s.toml", base_dir=tmp_path).workloads
    assert [w.name for w in swept] == [
        "mine[bs=4k, iodepth=1]",
        "mine[bs=4k, iodepth=16]",
        "mine[bs=64k, iodepth=1]",
        "mine[bs=64k, iodepth=16]",
    ]
    assert [(w.tool.fio_options["bs"], w.tool.fio_options["iodepth"]) for w in swept] == [
        ("4k", "1"),
        ("4k", "16"),
        ("64k", "1"),
        ("64k", "16"),
    ]
    from fslab.core.names import NAME

    assert all(NAME.fullmatch(section.name) for w in swept for section in w.tool.job.sections), (
        "fio's job names stay plain"
    )


@pytest.mark.parametrize(
    "beside, says",
    [
        ("iodepth = []\n", r"s.toml:12: workload\[0\].iodepth.*at least 1 item"),
        ("iodepth = [1, 0]\n", r"s.toml:12: workload\[0\].iodepth.*greater than or equal to 1"),
        ('bs = ["4k", "4k\\n[x]"]\n', r"s.toml:12: workload\[0\].bs.* is refused"),
        ("iodepth = [8, 8]\n", r"two workloads are named 'mine\[iodepth=8\]'"),
    ],
)
def test_a_sweep_that_cannot_be_run_is_refused_where_it_is_written(tmp_path, beside, says):
    with pytest.raises(StudyError, match=says):
        study(tmp_path, beside)


def test_bs_beside_a_job_file_whose_job_sets_bssplit_is_refused_at_bs(tmp_path):
    with pytest.raises(
        StudyError,
        match=r"^s.toml:12: workload\[0\].bs: bs beside a job_file would "
        r"change nothing in job 'a' of mine.fio: it sets bssplit",
    ):
        study(tmp_path, 'bs = "8k"\n', job="[a]\nrw=read\nsize=8m\nbssplit=4k/50:64k/50\n")


def test_the_summary_says_what_was_rewritten_from_what(tmp_path):
    from fslab.results import ResultsDB
    from synthetic import stored_study

    (tmp_path / "mine.fio").write_text(SEQ_READ)
    db = tmp_path / "r.db"
    stored_study(
        tmp_path, STUDY.replace("FIO", 'size = "64MiB"') + 'runtime = "3s"\niodepth = [1, 4]\n', ResultsDB(str(db))
    )
    said = " ".join(fslab_in_process("summary", "--db", str(db)).stdout.split())
    assert (
        "Its job file as fslab ran it: size 10GiB → 64MiB ([fio] size = 64MiB); runtime 900s "
        "→ 3s (the workload's runtime = 3s); iodepth 16 → 4 (the workload's iodepth = 4)." in said
    )


# ---- for real: fio's 900 s example, scaled, on an XFS loop image ----------------------------------


@pytest.mark.root
def test_fios_own_example_runs_scaled_and_fio_ran_what_the_stored_job_says(workdir, tmp_path):
    (tmp_path / "fio-seq-read.fio").write_text(SEQ_READ)
    text = (
        '[study]\nname = "example"\nrepetitions = 1\nimage_size = '
        '"256GiB"\nimage_fill = "sparse"\n[[target]]\nfilesystem = "xfs"\n'
    )
    study = write_study(tmp_path, text + '[[workload]]\nname = "seq"\njob_file = "fio-seq-read.fio"\niodepth = 4\n')
    db = tmp_path / "r.db"
    result = fslab_in_process(
        "run", str(study), "--no-ceiling", "--db", str(db), "--workdir", str(workdir.root), "--scale", "0.0015"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "seq (1.35s)" in " ".join((result.stdout + result.stderr).split()), (
        "the short-run warning saw the scaled job"
    )
    from fslab.results import ResultsDB

    results = ResultsDB(str(db))
    run = results.runs(results.study_run()["id"])[0]
    assert run["status"] == "ok", run["error"]
    assert "[file1]\nioengine=libaio\nsize=15m\nruntime=1350ms\niodepth=4\n" in run["job_file"], run["job_file"]
    assert "runtime=900" not in run["job_file"] and "size=10G" not in run["job_file"]
    document = json.loads(next(o.text for o in results.outputs(run["id"]) if o.tool == "fio"))
    ran = document["jobs"][0]["job options"]
    assert (ran["size"], ran["runtime"], ran["iodepth"]) == ("15m", "1350ms", "4") and "runtime" not in document[
        "global options"
    ]
    assert document["jobs"][0]["read"]["io_bytes"] > 0 and 1000 <= document["jobs"][0]["read"]["runtime"] <= 1500, (
        "fio ran 1.35 s, not 900"
    )
    stored = results.workloads(results.study_run()["id"])[0]["spec"]
    assert [(r["option"], r["was"], r["now"]) for r in stored["rewritten"]] == [
        ("size", "10G", "15m"),
        ("runtime", "900", "1350ms"),
        ("iodepth", "16", "4"),
    ]
    assert held_by(workdir.root) == []


def test_fslab_list_says_which_fields_sweep_and_each_does(tmp_path):
    from fslab.cli.catalogue import catalogue

    listed = {entry.name: entry.swept for entry in catalogue().kinds}
    assert listed["fio"] == ["bs", "iodepth", "numjobs"] and listed["dd"] == []
    values = {"bs": '["4k", "8k"]', "iodepth": "[1, 2]", "numjobs": "[1, 2]"}
    for field in listed["fio"]:
        assert len(study(tmp_path, f"{field} = {values[field]}\n", job=AIO_READ).workloads) == 2, field
    shown = fslab_in_process("list", "kinds").stdout
    assert "a list sweeps" in shown and "bs, iodepth, numjobs" in shown


def test_io_size_is_a_field_of_every_fio_workload_scaled_with_the_sizes(tmp_path):
    text = STUDY.replace("FIO", 'io_size = "256MiB"').replace(
        'job_file = "mine.fio"\n', 'rw = "randread"\nsize = "64MiB"\n'
    )
    assert parse_study(text, "s.toml", base_dir=tmp_path).workloads[0].tool.fio_options["io_size"] == str(256 * 2**20)
    assert parse_study(text + 'io_size = "1GiB"\n', "s.toml", base_dir=tmp_path, scale=0.5).workloads[
        0
    ].tool.fio_options["io_size"] == str(512 * 2**20)


def test_a_workload_sweep_too_large_to_ever_run_is_refused_before_it_is_expanded(tmp_path):
    many = lambda n: "[" + ", ".join(str(i + 1) for i in range(n)) + "]"  # noqa: E731
    with pytest.raises(StudyError) as refused:
        study(tmp_path, f"iodepth = {many(1000)}\nnumjobs = {many(1000)}\n")  # a million workloads: never made
    assert str(refused.value) == (
        "s.toml: the study's workload sweeps make 1,000,000 workloads "
        "(workload[0], line 9 makes 1,000,000), more than the 100,000 cells "
        "a study may have, and more than could ever be run: sweep fewer values, or split it into several studies"
    )


def test_a_job_files_steady_state_window_scales_with_its_runtime_and_is_judged_as_rewritten(tmp_path):
    text = (
        "[a]\nrw=randread\nsize=1g\ntime_based\nruntime=900\nsteadystate=iops_slope:0.3%\n"
        "steadystate_duration=300\nsteadystate_ramp_time=60\n"
    )
    job, _ = rewrite(text, scale=0.01, time_scale=0.01)
    assert [job.jobs()[0][k] for k in ("runtime", "steadystate_duration", "steadystate_ramp_time")] == [
        "9s",
        "3s",
        "600ms",
    ]
    job, _ = rewrite(text, time_scale=0.001)
    assert job.jobs()[0]["steadystate_duration"] == "2s", "no shorter than fio can judge"
    with pytest.raises(
        StudyError, match=r"workload\[0\].job_file: mine.fio: .*steadystate.*\(as the study rewrote it\)"
    ):
        study(tmp_path, 'runtime = "3s"\n', job=text)  # 60 s of ramp and a 300 s window in 3 s
