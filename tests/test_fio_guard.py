"""fio options and job files through the guard (fio/jobs.py): every kind of harm a shared
study file or job file could carry is refused, with where and why, before anything is attached;
a job file that keeps to the rules runs for real, in the target."""

import os
from pathlib import Path

import pytest

from conftest import fslab_in_process, held_by, write_study
from fslab.core.errors import Refused
from fslab.core.names import file_name
from fslab.fio import workload as fio
from fslab.fio.jobs import (
    expected_seconds,
    option_problem,
    parse_job_file,
    render,
    single_job,
)
from fslab.results import ResultsDB
from fslab.running.runner import run_study
from fslab.study import StudyError, load_study, parse_study

STUDY = """\
[study]
name = "guarded"
repetitions = 1
image_size = "512MiB"
image_fill = "sparse"

[[target]]
filesystem = "xfs"

[[workload]]
name = "mine"
job_file = "mine.fio"
"""

GOOD_JOB = (
    "[global]\ndirectory=/somewhere/else\nioengine=libaio\n[job1]\n"
    "rw=randread\nbs=8k\ndirect=1\nsize=16m\nruntime=1\ntime_based\n"
)


def refused_run(workdir, tmp_path: Path, study_text: str, job: str | None = None) -> str:
    """`fslab run` on a study (and its job file) that must be refused before anything is made:
    returns what it said. (In this process: a refusal needs no process of its own, and each of
    these would cost a Python's start and fslab's imports.)"""
    if job is not None:
        (tmp_path / "mine.fio").write_text(job)
    study = write_study(tmp_path, study_text)
    result = fslab_in_process("run", str(study), "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root))
    assert result.returncode == 2, result.stdout + result.stderr
    assert held_by(workdir.root) == [], "refused before any loop device was attached"
    assert not list(workdir.images.glob("*.img")), "refused before any image was made"
    return " ".join(result.stderr.split())  # rich wraps long lines


# (a line added to job1 of the job file, as its line 9; what the refusal says)
JOB_FILE_HARMS = {
    "device": ("filename=/dev/loop5", "filename='/dev/loop5' is refused: a job file may name only a plain file"),
    "parent": ("filename=../x", "filename='../x' is refused"),
    "several files": ("filename=a:b", "filename='a:b' is refused"),
    "absolute": ("filename=/var/tmp/x", "filename='/var/tmp/x' is refused: a job file may name only a plain file"),
    "dot-dot": ("filename=..", "filename='..' is refused"),
    "stdout": ("filename=-", "filename='-' is refused"),
    "filename_format": (
        "filename_format=/etc/x",
        "filename_format is refused: it makes fio name files at paths of the job's choosing",
    ),
    "opendir": ("opendir=/etc", "opendir is refused: it makes fio use every file under a directory"),
    "include": ("include /etc/other.fio", "include is refused: it makes fio read another file"),
    "exec_prerun": ("exec_prerun=rm -rf /", "exec_prerun is refused: it runs a shell command as root"),
    "exec_postrun": ("exec_postrun=sh", "exec_postrun is refused: it runs a shell command as root"),
    "write_iolog": (
        "write_iolog=/etc/cron.d/x",
        "write_iolog is refused: it writes a file at a path of the job's choosing",
    ),
    "read_iolog": ("read_iolog=/etc/shadow", "read_iolog is refused: it reads a file at a path of the job's choosing"),
    "write_bw_log": ("write_bw_log=/root/x", "write_bw_log is refused: it writes log files"),
    "write_iops_log": ("write_iops_log=../../etc/x", "write_iops_log is refused: it writes log files"),
    "log_avg_msec": (
        "log_avg_msec=1",
        "log_avg_msec is refused: it writes log files",
    ),  # fslab sets it: a window of its choosing
    "per_job_logs": ("per_job_logs=0", "per_job_logs is refused: it writes log files"),
    "write_lat_log": ("write_lat_log=x", "write_lat_log is refused: it writes log files"),
    "write_hist_log": ("write_hist_log=x", "write_hist_log is refused: it writes log files"),
    "verify_state_save": (
        "verify_state_save=1",
        "verify_state_save is refused: it writes a state file outside the target",
    ),
    "verify_state_load": ("verify_state_load=1", "verify_state_load is refused"),
    "trigger": ("trigger_cmd=reboot", "trigger_cmd is refused: it runs a command"),
    "cgroup": ("cgroup=x", "cgroup is refused"),
    "ioscheduler": ("ioscheduler=none", "ioscheduler is refused"),
    "mem": ("mem=mmapshared:/etc/passwd", "mem is refused"),
    "net": ("ioengine=net", "ioengine=net is refused: it opens a network connection"),
    "sg": ("ioengine=sg", "ioengine=sg is refused: it opens a device"),
    "external": (
        "ioengine=external:/tmp/evil.so",
        "ioengine=external:/tmp/evil.so is refused: it loads a library of the job's choosing",
    ),
    "pattern file": ("buffer_pattern='/etc/shadow'", "buffer_pattern takes a literal pattern"),
    "bracket": ("bs=4k]", "bs='4k]' is refused: fio reads [ and ] as a section header"),
    "variable": ("description=${HOME}", "is refused: fio replaces $ncpus, $mb_memory and ${VARIABLE}"),
    "unknown": ("blocksiz=4k", "unknown fio option 'blocksiz' (did you mean 'blocksize'?)"),
    "bad value": ("numjobs=100000", "numjobs takes a whole number up to 1024"),
}


@pytest.mark.slow
@pytest.mark.parametrize("line, message", JOB_FILE_HARMS.values(), ids=JOB_FILE_HARMS.keys())
def test_a_harmful_job_file_line_is_refused_before_anything_is_attached(workdir, tmp_path, line, message):
    job = GOOD_JOB.replace("size=16m\n", f"size=16m\n{line}\n")
    said = refused_run(workdir, tmp_path, STUDY, job)
    assert "study.toml:12: workload[0].job_file: mine.fio:9 [job1]: " in said
    assert message in said


@pytest.mark.slow
@pytest.mark.parametrize("header", ["[a/b]", "[../x]", "[x..y]", "[ok] [evil]"])
def test_a_job_name_that_is_not_plain_is_refused(workdir, tmp_path, header):
    said = refused_run(workdir, tmp_path, STUDY, GOOD_JOB.replace("[job1]", header))
    assert "study.toml:12: workload[0].job_file: mine.fio:4: " in said
    assert "is refused: fio makes files named after it" in said or "is not a section header [name]" in said


def test_a_binary_or_unreadable_job_file_is_a_study_error(tmp_path):
    (tmp_path / "mine.fio").write_bytes(b"[job1]\nrw=read\x00\n")
    with pytest.raises(StudyError, match=r"s.toml:12: workload\[0\].job_file: .*mine.fio is binary"):
        parse_study(STUDY, "s.toml", base_dir=tmp_path)
    (tmp_path / "mine.fio").unlink()
    os.mkfifo(tmp_path / "mine.fio")  # read as is, it would hang fslab
    with pytest.raises(StudyError, match="mine.fio is not a regular file"):
        parse_study(STUDY, "s.toml", base_dir=tmp_path)


def test_job_file_rules_without_fio():
    with pytest.raises(Refused, match=r"^j.fio:1: 'rw=read' comes before any \[section\]"):
        parse_job_file("rw=read\n[a]\n", "j.fio")
    with pytest.raises(Refused, match="j.fio: defines no job"):
        parse_job_file("[global]\nrw=read\n", "j.fio")
    with pytest.raises(Refused, match=r"j.fio:3 \[a\]: rw needs a value"):
        parse_job_file("; a comment\n[a]\nrw\n", "j.fio")
    # fio ends a line at ; or #: what follows is a comment, never part of the value
    job = parse_job_file("[a]\nrw=randread ; exec_prerun=sh\nbs=4k # [evil]\nblocksize_range=4k-8k\n", "j.fio")
    assert job.sections[0].options == (("rw", "randread"), ("bs", "4k"), ("bsrange", "4k-8k"))


def test_render_points_the_checked_job_at_the_target():
    job = parse_job_file(
        "[global]\ndirectory=/elsewhere\n[a]\nfilename=data.1\nrw=write\nruntime=2s\n[b]\nstonewall\nruntime=1\nramp_time=500ms\n",
        "j.fio",
    )
    text = render(job, directory=Path("/mnt/t"), device=None, fixed={"group_reporting": "1"})
    assert (
        text == "[global]\ndirectory=/mnt/t\n[global]\n[a]\nfilename=data.1\nrw=write\nruntime=2s\n"
        "group_reporting=1\n[b]\nstonewall\nruntime=1\nramp_time=500ms\ngroup_reporting=1\n"
    )
    on_device = render(job, directory=None, device="/dev/loop7")
    assert "filename=/dev/loop7" in on_device and "data.1" not in on_device, (
        "on a raw device every job works on the device"
    )
    assert expected_seconds(job) == 3.5, "b starts after a (stonewall): 2 s + 0.5 + 1"


@pytest.mark.parametrize(
    "value",
    ["sub/data", "../data", "/dev/sda", "/mnt/data", ".", "..", "-", "-x", "a:b", "a b", "a\\:b", "~/x", "$HOME"],
)
def test_a_filename_that_would_leave_the_targets_directory_is_refused(value):
    assert option_problem("filename", value, in_job_file=True).startswith(f"filename={value!r} is refused")
    assert option_problem("filename", value).startswith("filename") and "refused" in option_problem("filename", value)


def test_a_shared_file_is_a_plain_file_whatever_the_workload_is_named():
    for name in ("metadata", "a+b", "x.y-z", "a..b", "9lives"):
        assert option_problem("filename", file_name(name), in_job_file=True) is None
    job = single_job("a+b", {"rw": "randread", "filename": file_name("a+b")})
    assert "filename=a+b\n" in render(job, directory=Path("/mnt/t"), device=None)
    assert "a+b" not in render(job, directory=None, device="/dev/loop7").replace("[a+b]", ""), (
        "on a raw device the jobs work on the device"
    )
    with pytest.raises(Refused, match="filename='../x' is refused"):
        single_job("w", {"filename": "../x"})


STUDY_OPTIONS = """\
[study]
name = "opts"
workloads = ["rand_read"]

[fio]
options = { OPTION }

[[target]]
filesystem = "xfs"
"""

STUDY_OPTION_HARMS = {
    "filename": ('filename = "/dev/sda"', "filename is refused: fslab points fio at the target's files"),
    "directory": ('directory = "/etc"', "directory is refused: fslab points fio at the target's directory"),
    "newline": (
        'description = "x\\n[evil]\\nexec_prerun=sh"',
        "description='x\\n[evil]\\nexec_prerun=sh' is refused: a newline would start a new line",
    ),
    "bracket": ('bs = "4k]"', "bs='4k]' is refused: fio reads [ and ] as a section header"),
    "comment": ('description = "a;b"', "description='a;b' is refused: fio reads the rest of the line as a comment"),
    "exec_prerun": ('exec_prerun = "sh"', "exec_prerun is refused: it runs a shell command as root"),
    "engine": ('ioengine = "rbd"', "ioengine=rbd is refused: it opens a network connection"),
    "unknown": ("norandomap = true", "unknown fio option 'norandomap' (did you mean 'norandommap'?)"),
    "bad value": ('rwmixread = "lots"', "rwmixread takes a whole percentage"),
}


@pytest.mark.parametrize("option, message", STUDY_OPTION_HARMS.values(), ids=STUDY_OPTION_HARMS.keys())
def test_a_harmful_fio_table_option_is_refused_before_anything_is_attached(workdir, tmp_path, option, message):
    said = refused_run(workdir, tmp_path, STUDY_OPTIONS.replace("OPTION", option))
    assert f"study.toml:6: fio.options: {message}" in said


def test_a_harmful_workload_option_names_its_workload_and_line():
    text = (
        STUDY_OPTIONS.replace("options = { OPTION }", "")
        + '[[workload]]\nname = "w"\nrw = "read"\noptions = { write_iolog = "/root/x" }\n'
    )
    with pytest.raises(
        StudyError, match=r"^s.toml:13: workload\[0\].options: write_iolog is refused: it writes a file at a path"
    ):
        parse_study(text, "s.toml", base_dir=Path("."))
    for field, value in (("ioengine", '"external:/x.so"'), ("bs", '"4k\\n[x]"')):
        text = STUDY_OPTIONS.replace("options = { OPTION }", f"{field} = {value}")
        with pytest.raises(StudyError, match=rf"^s.toml:6: fio.{field}: .* is refused"):
            parse_study(text, "s.toml", base_dir=Path("."))


def test_allowed_options_reach_the_job_under_fios_main_names():
    text = STUDY_OPTIONS.replace("OPTION", 'end_fsync = true, blocksize = "8k", percentile_list = "99:99.9"')
    workload = parse_study(text, "s.toml", base_dir=Path(".")).workloads[0]
    assert {"end_fsync": "1", "bs": "8k", "percentile_list": "99:99.9"}.items() <= workload.tool.fio_options.items()


@pytest.mark.parametrize(
    "field, option", [('size = "64MiB"', "size=64m"), ('runtime = "5s"', "runtime=5s"), ("iodepth = 4", "iodepth=4")]
)
def test_fio_fields_beside_a_job_file_rewrite_its_jobs_not_ignored(tmp_path, field, option):
    (tmp_path / "mine.fio").write_text(GOOD_JOB)
    assert f"\n{option}\n" in parse_study(STUDY + field + "\n", "s.toml", base_dir=tmp_path).workloads[0].spec()["job"]


def test_options_beside_a_job_file_are_refused_not_ignored(tmp_path):
    (tmp_path / "mine.fio").write_text(GOOD_JOB)
    with pytest.raises(
        StudyError,
        match=r"s.toml:13: workload\[0\].options: options beside a job_file is refused: put them in the job file",
    ):
        parse_study(STUDY + "options = { end_fsync = 1 }\n", "s.toml", base_dir=tmp_path)


@pytest.mark.parametrize(
    "job",
    [
        "ioengine=filedelete\nnrfiles=4\nfilesize=4k\n",
        "ioengine=e4defrag\ndonorname=donor.def\n",
        "donorname=donor.def\n",
    ],
)
def test_a_job_that_works_on_files_by_name_is_refused_on_a_raw_device(tmp_path, job):
    """On a raw device every job's file is the device: filedelete would unlink its node, and
    e4defrag's donor file would be made wherever fio runs, outside the target."""
    (tmp_path / "mine.fio").write_text(f"[mine]\nrw=write\nsize=16m\n{job}")
    raw = STUDY.replace('filesystem = "xfs"', 'filesystem = "raw"')
    with pytest.raises(
        StudyError, match=r"workload 'mine' \(fio\) works in a filesystem's directory, and target 'raw' is a raw device"
    ):
        parse_study(raw, "s.toml", base_dir=tmp_path)
    assert parse_study(STUDY, "s.toml", base_dir=tmp_path).workloads[0].tool.needs_directory, (
        "in a filesystem's directory: as fio reads it"
    )


def test_what_only_fio_knows_is_refused_before_anything_is_attached(workdir, tmp_path):
    said = refused_run(workdir, tmp_path, STUDY, GOOD_JOB.replace("size=16m\n", "size=16m\nhipri\n"))
    assert "workload 'mine' (mine.fio): fio does not accept the job: Bad option <hipri>" in said


@pytest.mark.root
def test_a_plain_filename_runs_in_the_target_and_fio_leaves_nothing_in_the_cwd(workdir, tmp_path, monkeypatch):
    job = GOOD_JOB.replace(
        "rw=randread\n", "rw=randwrite\nfilename=data.1\nverify=crc32c\n"
    )  # verify: fio writes a state file
    (tmp_path / "mine.fio").write_text(job)
    study = load_study(write_study(tmp_path, STUDY))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    seen = []

    def run_and_look(journal, job_path: Path, **kw):
        output = real_run_fio(journal, job_path, **kw)
        directory = next(
            line.split("=", 1)[1] for line in job_path.read_text().splitlines() if line.startswith("directory=")
        )
        seen.append({path.name: path.stat().st_size for path in Path(directory).iterdir()})
        return output

    real_run_fio = fio.run_fio
    monkeypatch.setattr(fio, "run_fio", run_and_look)
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = run_study(study, db, workdir)
    run = db.runs(study_run)[0]
    assert run["status"] == "ok", run["error"]
    # the file grows as fio writes it, for its runtime or up to its 16 MiB: a busy machine writes less
    assert seen and 0 < seen[-1].get("data.1", 0) <= 16 * 2**20, f"fio's file is in the mounted target: {seen}"
    assert f"directory={workdir.mounts / 'xfs'}\n" in run["job_file"] and "/somewhere/else" not in run["job_file"]
    assert list(cwd.iterdir()) == [], "no fio side file (verify state, …) in the current directory"


@pytest.mark.parametrize(
    ("text", "is_direct"),
    [
        ("[a]\nrw=read\ndirect=1\n", True),
        ("[a]\nrw=read\n", False),
        ("[a]\nrw=read\ndirect=1\nbuffered=1\n", False),  # fio: the later one wins
        ("[a]\nrw=read\nbuffered=1\ndirect=1\n", True),
        ("[global]\ndirect=1\n[a]\nrw=read\nbuffered=1\n", False),
        ("[global]\nbuffered=0\n[a]\nrw=read\n", True),
        ("[a]\nrw=read\ndirect=1\n[b]\nrw=read\n", False),  # every job, or the workload is buffered
    ],
)
def test_direct_io_is_read_as_fio_applies_direct_and_buffered(text, is_direct):
    from fslab.fio.jobs import direct

    assert direct(parse_job_file(text, "j.fio")) is is_direct


# ---- fio's own table (fio/options.py): what fio reads as a dangerous option never passes ----


def _fio33():
    from fslab.fio.options import table

    return table()  # the real fio 3.33's (conftest)


def test_every_spelling_fio_reads_as_a_refused_option_is_refused_for_the_same_reason():
    from fslab.fio.options import refused_options

    fio, refused = _fio33(), refused_options()
    assert {
        "exec_prerun",
        "filename",
        "read_iolog",
        "ioscheduler",
        "gtod_reduce",
        "disable_bw",
        "cgroup_weight",
        "lockmem",
    } <= set(refused)
    for spelling, main in fio.spellings.items():
        if main in refused:
            assert spelling in refused, f"{spelling}: fio's other name for {main}"
            for value in ("1", "/etc/passwd", None):
                said = option_problem(spelling, value)
                assert said is not None and f"{main} is refused: {refused[main]}" in said, (spelling, value, said)


@pytest.mark.parametrize("name", ["exec_prerun", "filename", "write_iolog", "ioscheduler", "stats", "fill_fs", "ss"])
def test_a_spelling_fio_does_not_read_as_an_option_is_not_one(name):
    """fio finds an option by its exact name or alias (parse.c o_match: strcmp — no prefix, case
    counts, '-' is not '_'): any other spelling is refused as no option of fio's."""
    for spelling in {
        name.upper(),
        name.capitalize(),
        name.replace("_", "-"),
        name[:-1],
        name + "s",
        f"{name[0]}_{name[1:]}",
    } - {name}:
        said = option_problem(spelling, "1")
        assert said is not None and ("unknown fio option" in said or " is refused: " in said), (spelling, said)


@pytest.mark.parametrize(
    "line, says",
    [
        (
            "  exec_prerun = touch /tmp/x",
            "exec_prerun is refused: it runs a shell command as root",
        ),  # fio trims the blanks: it reads exec_prerun
        ("exec_prerun\t=sh", "exec_prerun is refused"),
        ("exec_prerun=sh\r", "exec_prerun is refused"),
        ("iomem=mmapshared:/etc/passwd", "mem is refused: its mmap, mmapshared and mmaphuge forms"),
        ("mem=mmap:data", "mem is refused"),  # a plain name too: fio maps that file, wherever fio runs
        ("include_x=1", "include is refused"),  # fio reads any line beginning "include" as an include (init.c)
        ("includes /etc/fio.fio", "include is refused"),
        ("include\t/etc/fio.fio", "include is refused"),
        ("rw=read:/etc/passwd", "rw after 'read:' takes an offset or a count"),
        ("random_distribution=zoned:a/b", "random_distribution after 'zoned:' takes numbers"),
        ("file_service_type=random:/x", "file_service_type after 'random:' takes a number"),
        ("rw=read,/etc", "rw=read,/etc is refused: fslab does not know what fio reads after 'read,' here"),
        (
            "lockfile=readwrite:/x",
            "lockfile=readwrite:/x is refused: fslab does not know what fio reads after 'readwrite:' here",
        ),
        ("donorname=../outside", "donorname='../outside' is refused: a job file may name only a plain file"),
        ("ioengine=Libaio", "ioengine=Libaio is refused"),  # fio's engine names are exact too
        ("EXEC_PRERUN=sh", "unknown fio option 'EXEC_PRERUN'"),
        ("threads=1", "unknown fio option 'threads' (did you mean 'thread'?): fio-3.33 lists no such option"),
    ],
)
def test_a_job_file_line_that_reaches_outside_in_any_spelling_is_refused(line, says):
    with pytest.raises(Refused) as refused:
        parse_job_file(f"[a]\nrw=read\n{line}\n", "j.fio")
    assert f"j.fio:3 [a]: {says}" in str(refused.value)


def test_a_section_fio_would_read_as_global_is_refused():
    with pytest.raises(
        Refused,
        match=r"j.fio:1: job name 'globalx' is refused: fio reads every "
        r"section whose name begins with 'global' as \[global\]",
    ):
        parse_job_file("[globalx]\nrw=read\n[a]\nrw=write\n", "j.fio")


def test_what_fio_has_and_no_danger_is_accepted():
    """What fio's own examples use and fslab refused as unknown to its list (issue 23)."""
    job = parse_job_file(
        "[global]\nfill_device=1\ndedupe_mode=working_set\ndedupe_percentage=50\nss=iops_slope:0.1%\nss_dur=30s\ntimeout=60\n"
        "[backwards]\nrw=read:-8k\nrandom_distribution=zoned:50/5:30/15:20/80\nfile_service_type=random:4\nmem=shm\n"
        "[burn_2x50%_qsort]\nioengine=cpuio\ncpuload=50\ncpumode=qsort\n"
        "[punch hole-fuzzer]\nioengine=falloc\nrw=randtrim\n"
        "[defrag]\nioengine=e4defrag\ndonorname=file.def\ninplace=0\n"
        "[others]\nioengine=ftruncate\n[s]\nioengine=splice\n",
        "j.fio",
    )
    assert (
        job.sections[0].options[0] == ("fill_device", "1")
        and ("steadystate", "iops_slope:0.1%") in job.sections[0].options
    )
    assert ("runtime", "60") in job.sections[0].options, "under fio's main names"
    assert [s.name for s in job.sections][2:4] == ["burn_2x50%_qsort", "punch hole-fuzzer"]


def test_engines_that_do_no_io_on_the_target_measure_nothing_of_it():
    """null does no I/O at all: refused, as it always was. cpuio loads the CPU beside jobs that do
    I/O (fio's cpuio example): accepted there, refused as a job file's only engine."""
    with pytest.raises(
        Refused, match=r"ioengine=null is refused: it does no I/O, so its numbers say nothing about the target"
    ):
        parse_job_file("[n]\nioengine=null\nsize=1m\n", "n.fio")
    with pytest.raises(Refused, match=r"c.fio: no job does I/O on the target"):
        parse_job_file("[global]\nioengine=cpuio\n[burn]\ncpuload=50\n[burn2]\ncpuload=20\n", "c.fio")
    beside = parse_job_file("[burn]\nioengine=cpuio\ncpuload=50\n[reader]\nioengine=psync\nrw=read\nsize=1m\n", "b.fio")
    assert [s.name for s in beside.sections] == ["burn", "reader"]


def _with_option(name: str, help_text: str) -> object:
    """fio 3.33's table and one option more, as a newer fio would list it."""
    from conftest import fio_options_answers
    from fslab.fio.help import table_from_answers
    from fslab.fio.options import ENGINES

    answers = fio_options_answers()
    answers["--cmdhelp=all"] += f"{name:<24}: A newer option\n"
    answers[f"--cmdhelp={name}"] = (
        f"{name:>20}: A newer option\n{'type':>20}: {help_text}\n{'default':>20}: no default\n"
    )
    return table_from_answers(answers, tuple(ENGINES))


@pytest.mark.parametrize(
    "fio_type, value, says",
    [
        (
            "string (opt=bla)",
            "/etc/passwd",
            "newopt is refused: fio takes any text here and fslab does not know what it names",
        ),
        ("string (opt=bla)", "plain", "newopt is refused: fio takes any text here"),
        (
            "frobnicated value (opt=?)",
            "1",
            "newopt is refused: fio describes its value as 'frobnicated value (opt=?)', a form fslab does not know",
        ),
        ("integer value (opt=100)", "/etc/passwd", "newopt takes a number"),
        ("integer value (opt=100)", "64k", None),
        ("string with time postfix (opt=10s)", "10s", None),
    ],
)
def test_a_newer_fios_option_is_accepted_by_its_type_and_free_text_only_once_reviewed(fio_type, value, says):
    from fslab.fio.table import given_table

    with given_table(_with_option("newopt", fio_type)):
        said = option_problem("newopt", value)
    assert said == says if says is None else says in said


def test_fslab_list_fio_shows_fios_table_and_what_it_refuses():
    from conftest import fslab_in_process

    listed = fslab_in_process("list", "fio", "--json")
    assert listed.returncode == 0, listed.stderr
    (options,) = [
        o for kind in __import__("json").loads(listed.stdout)["kinds"] if kind["name"] == "fio" for o in kind["options"]
    ]
    accepted, refused = (
        {a["name"]: a["value"] for a in options["accepted"]},
        {r["name"]: r["value"] for r in options["refused"]},
    )
    assert (
        accepted["fill_fs"].startswith("0 or 1 — Write until an ENOSPC error occurs")
        and "fio's other name for fill_device" in accepted["fill_fs"]
    )
    assert accepted["rw"].startswith("one of read, write, trim") and "read:-8k" in accepted["rw"]
    assert refused["exec_prerun"] == "it runs a shell command as root" and refused["disable_bw"].endswith(
        "(fio's other name for disable_bw_measurement)"
    )
    assert "fio's other name for mem" in accepted["iomem"] and "never with ':'" in accepted["iomem"]
    assert not set(accepted) & set(refused) and set(accepted) | set(refused) == set(_fio33().spellings)
    text = fslab_in_process("list", "fio").stdout
    assert "fio workload: fio options fslab refuses" in text and "unique_filename" in text


def test_a_newer_fios_other_name_for_a_refused_option_is_refused():
    from conftest import fio_options_answers
    from fslab.fio.help import table_from_answers
    from fslab.fio.options import ENGINES
    from fslab.fio.table import given_table

    answers = fio_options_answers()
    answers["--cmdhelp=exec_prerun"] = answers["--cmdhelp=exec_prerun"].replace(
        "\n", f"\n{'alias':>20}: before_job\n", 1
    )
    with given_table(table_from_answers(answers, tuple(ENGINES))):
        assert option_problem("before_job", "rm -rf /") == "exec_prerun is refused: it runs a shell command as root"


def test_what_the_fio_at_hand_mishandles_is_refused_on_it_alone():
    """fio 3.33 hangs at random as a job with io_submit_mode=offload starts (fixed in 3.42): its
    runs could not be trusted to end, so that value is refused with 3.33, and accepted with 3.42."""
    from dataclasses import replace

    from fslab.fio.options import table
    from fslab.fio.table import given_table

    with pytest.raises(
        Refused, match=r"io_submit_mode=offload is refused with fio-3\.33: fio before 3\.42 hangs at random"
    ):
        parse_job_file("[a]\nrw=read\nsize=1m\nio_submit_mode=offload\n", "a.fio")
    assert option_problem("io_submit_mode", "inline") is None
    with given_table(replace(table(), version="fio-3.42")):
        assert option_problem("io_submit_mode", "offload") is None
