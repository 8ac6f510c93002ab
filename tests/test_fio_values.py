"""fio's values — sizes and times — mean to fio what they mean to fslab (fio/values.py):
fslab's port of fio's reading prints what fio 3.33 printed of every probe in
tests/fixtures/fio-parse (`fio --debug=parse`, its make.py), a value fio reads otherwise than its
text says is refused naming what fio reads, the values fslab writes itself are read by fio as
fslab means them, and `fslab run` checks fio's own account against fslab's before a study runs."""

import json
import re
from pathlib import Path

import pytest

from conftest import FIXTURES, write_study
from fslab.fio import jobs as fio_jobs, values as fio_values
from fslab.fio.jobs import expected_seconds, fio_seconds, parse_all, parse_job_file, render
from fslab.fio.options import FioRefused, option_problem, table
from fslab.fio.values import SIZE, Handled, disagreement, fio_reading, numbers_of, parse_debug, plain_reading
from fslab.study import StudyError, load_study, parse_study

PROBES = json.loads((FIXTURES / "fio-parse" / "fio-3.33.json").read_text())["probes"]


def handled_of(probe: dict) -> list[Handled]:
    return parse_debug(probe["stdout"])


def probe_of(option: str, value: str) -> dict:
    return next(p for p in PROBES if p["job"].endswith(f"\n{option}={value}\n"))


def read_of(probe: dict) -> list[Handled]:
    """What fio read of the probed value itself (not an engine option's default, read before)."""
    option, value = probe["job"].splitlines()[-1].split("=", 1)
    return [h for h in handled_of(probe) if h.option == option and h.out is not None and value.endswith(h.ptr)]


def probed(option: str, value: str) -> list[int]:
    """What fio 3.33 printed (`out=`) of each part of option=value, in order."""
    return [h.out for h in read_of(probe_of(option, value)) if h.out is not None]


def numbers(option: str) -> fio_values.Numbers:
    found = table().options[option]
    return (
        numbers_of(found.name, found.form, low=found.low) or SIZE
    )  # a "string" of fio's table: filesize, zonesize (STR_VAL)


def test_fslabs_port_of_fios_reading_prints_what_fio_printed_of_every_probe():
    compared = 0
    for probe in PROBES:
        for handled in handled_of(probe):
            if handled.out is not None and handled.option in table().options:
                assert fio_reading(handled.ptr, numbers(handled.option)) == handled.out, (probe["job"], handled)
                compared += 1
    assert compared > 300


def test_which_options_are_times_and_which_unit_a_bare_one_has_is_fios_own():
    """fio reads 1m as 60 s in a time, as 1024² anywhere else; a bare 1 of a time as 1 s or 1 µs."""
    checked = set()
    for probe in PROBES:
        option, value = probe["job"].splitlines()[-1].split("=", 1)
        outs = [h.out for h in read_of(probe)]
        if value not in ("1", "1m") or not outs or option not in table().options:
            continue
        read = numbers(option)
        if value == "1m":
            assert (outs[0] == 60 * 10**6) is read.time and (outs[0] == 2**20) is (not read.time), option
        elif read.time:
            assert outs[0] == (10**6 if read.seconds else 1), option
        checked.add(option)
    assert {"runtime", "thinktime", "max_latency", "thinktime_iotime", "bs", "size", "bwavgtime"} <= checked and len(
        checked
    ) > 80


@pytest.mark.parametrize(
    ("option", "value", "fio_reads", "says"),
    [
        ("runtime", "2sec", [2], "fio reads 2sec as 2 µs; write 2s"),
        ("runtime", "1min", [1], "fio reads 1min as 1 µs; write 60s"),
        ("runtime", "1.5", [10**6], "fio reads 1.5 as 1 s; write 1500ms"),
        ("runtime", "1.5s", [10**6], "fio reads 1.5s as 1 s; write 1500ms"),
        ("runtime", "1.5ms", [10**6], "fio reads 1.5ms as 1 s; write 1500us"),
        ("steadystate_duration", "30sec", [30], "fio reads 30sec as 30 µs; write 30s"),
        ("startdelay", "1s-5s", [1, 5 * 10**6], "fio reads 1s as 1 µs here"),
        ("startdelay", "1-5ms", [1000, 5000], "fio reads 1 as 1 ms here"),
        ("size", "1.5m", [1], "fio reads 1.5m as 1; write 1536k"),
        ("io_size", "1.5M", [1], "write 1536k"),
        ("offset", "1.5%", [1], "fio reads 1.5% as 1"),
        ("size", "4KiB", [4000], "KiB, MiB, … are powers of 1000: fio reads 4KiB as 4000; write 4k"),
        ("bs", "4KiB", [4000], "fio reads 4KiB as 4000; write 4k"),
        ("bs", "4k-64k", [4096, 65536], "bs takes no range"),
        ("rate", "50%", [2**64 - 51], "fio takes no percentage here"),
        ("thinktime", "1.5ms", [1], "fio reads 1.5ms as 1 µs; write 1500us"),
        ("bwavgtime", "500ms", [500 * 2**20], "not a time to fio"),
        ("rate_cycle", "1s", [1], "not a time to fio but a plain number: fio reads 1s as 1"),
        ("buffer_compress_chunk", "4KiB", [4000], "write 4k"),
        ("iodepth", "1.5", [1], "fio reads 1.5 as 1"),
    ],
)
def test_a_value_fio_reads_otherwise_than_it_says_is_refused_saying_what_fio_reads(option, value, fio_reads, says):
    assert probed(option, value) == fio_reads, "as fio 3.33 read it (the fixture)"
    problem = option_problem(option, value)
    assert problem and problem.startswith(f"{option}={value} is refused: ") and says in problem, problem


@pytest.mark.parametrize(
    ("option", "value"),
    [("runtime", v) for v in ("2s", "2", "1m", "1500ms", "10MS", "1h", "2d", "100us", "100usec", "100msec")]
    + [("startdelay", v) for v in ("1-5s", "1-5", "1000ms-5s", "1ms-5ms", "1000ms-2s")]
    + [("size", v) for v in ("4kb", "4KB", "4kB", "4k", "4K", "1g", "10%", "4b", "1048576", "0x10", "10z")]
    + [("bs", v) for v in ("4k", "4k,64k", ",4k", "512")]
    + [
        ("steadystate_duration", "30s"),
        ("thinktime", "1s"),
        ("thinktime", "500us"),
        ("max_latency", "1s,2ms"),
        ("nice", "-10"),
        ("filesize", "1k-4k"),
        ("zonesize", "256M"),
    ],
)
def test_a_value_fio_reads_as_it_says_is_accepted_and_read_by_fslab_as_fio_read_it(option, value):
    assert option_problem(option, value) is None
    read = read_of(probe_of(option, value))
    assert (read or value == "10z") and all(
        plain_reading(next(fio_values.tokens(h.ptr))[0], numbers(option)) == h.out for h in read
    ), read


def test_every_probed_value_the_guard_accepts_reads_alike_to_fio_and_to_fslab():
    """The guard's acceptance and fio's reading, over every probe: accepted ⇒ no disagreement."""
    accepted = 0
    for probe in PROBES:
        option, value = probe["job"].splitlines()[-1].split("=", 1)
        if option in table().options and option_problem(option, value) is None:
            accepted += 1
            for handled in read_of(probe):
                assert (
                    fio_reading(handled.ptr, numbers(option))
                    == plain_reading(next(fio_values.tokens(handled.ptr))[0], numbers(option))
                    == handled.out
                ), (probe["job"], handled)
    assert accepted > 150


def test_a_steady_state_bandwidth_is_a_size_to_fio():
    said = {p["job"].split("=", 1)[1].strip(): p["stdout"] for p in PROBES if "\nsteadystate=" in p["job"]}
    assert "BW threshold to 1\n" in said["bw:1.5m"] and "BW threshold to 1048576\n" in said["bw:1m"]
    assert "1.5m as 1" in option_problem("steadystate", "bw:1.5m") and option_problem("steadystate", "bw:1m") is None
    assert option_problem("steadystate", "iops:1.5") is None, "an IOPS limit is a float to fio"


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("rw", "randread:8k", "takes a whole number"),  # fio's atoi: 8 I/Os
        ("rw", "read:1.5k", "1.5k as 1"),
        ("bssplit", "4KiB/50:64k/50", "4KiB as 4000"),
        ("bssplit", "4k/10.5:64k/89.5", "size/percentage pairs"),  # fio's atoi: 10 and 89
        ("random_distribution", "zoned_abs:60/20KiB:40/100g", "20KiB as 20000"),
        ("file_service_type", "random:4.5", "takes a whole number"),
        ("filesize", "1k-4KiB", "4KiB as 4000"),
        ("filesize", "1k,4k", "takes a size or a range of sizes"),
    ],
)
def test_a_number_inside_a_longer_value_is_refused_where_fio_misreads_it(option, value, says):
    problem = option_problem(option, value)
    assert problem and says in problem, problem


def test_a_job_file_line_fio_misreads_is_refused_naming_file_line_and_option():
    with pytest.raises(FioRefused) as refused:
        parse_job_file("[global]\nioengine=libaio\n[a]\nrw=read\nruntime=2sec\n", "mine.fio")
    assert str(refused.value) == (
        "mine.fio:5 [a]: runtime=2sec is refused: fio 3.33 knows no time unit 'sec' "
        "(its HOWTO lists sec, its code does not): fio reads 2sec as 2 µs; write 2s"
    )


# ---- fslab's readers are fio's reading ----------------------------------------------------------


def test_fslabs_readers_of_fio_times_and_sizes_are_fios_reading():
    """A stored job (read without the guard) is said to have run what fio ran."""
    assert [fio_seconds(v) for v in ("2sec", "1.5s", "1.5", "1m", "1500ms", "2")] == [2e-6, 1.0, 1.0, 60.0, 1.5, 2.0]
    assert [fio_values.size_bytes(v) for v in ("1.5m", "4KiB", "4kb", "1mi", "10G")] == [
        1,
        4000,
        4096,
        2**20,
        10 * 2**30,
    ]
    stored = fio_jobs._parsed("[a]\nruntime=2sec\n[b]\nruntime=3\nstartdelay=1-5ms\n", "stored", check=False)
    assert expected_seconds(stored) == pytest.approx(3.005), "jobs run together: the longer is b's 5 ms delay and 3 s"


STUDY = """\
[study]
name = "v"
repetitions = 1
image_size = "512MiB"

[[target]]
filesystem = "ext4"

[[workload]]
name = "w"
rw = "randread"
"""


def test_a_studys_bs_reaches_fio_as_fslab_reads_it(tmp_path):
    """A study file's sizes are fslab's (KiB is 1024): its bs reaches fio in a form fio reads so."""
    study = parse_study(
        STUDY + 'bs = ["4KiB", "4k,64KiB", "1M"]\nsize = "64MiB"\nruntime = "1500ms"\n', "s.toml", base_dir=tmp_path
    )
    written = {w.name: w.tool.job.jobs()[0] for w in study.workloads}
    assert [job["bs"] for job in written.values()] == ["4k", "4k,64k", "1M"], (
        "as written where fio reads it as fslab does"
    )
    assert list(written) == ["w[bs=4KiB]", "w[bs=4k,64KiB]", "w[bs=1M]"], "the names say what the study says"
    assert {job["runtime"] for job in written.values()} == {"1500ms"} and study.workloads[0].seconds == 1.5


def test_a_job_file_beside_a_studys_bs_and_times_gets_them_as_fio_reads_them(tmp_path):
    (tmp_path / "j.fio").write_text("[a]\nrw=read\nsize=256m\nstartdelay=10-20\nruntime=30\n")
    study = parse_study(
        STUDY.replace('rw = "randread"', 'job_file = "j.fio"\nbs = "4KiB"'), "s.toml", base_dir=tmp_path, scale=0.1
    )
    (job,) = study.workloads[0].tool.job.jobs()
    assert (job["bs"], job["startdelay"], job["runtime"]) == ("4k", "1000ms-2s", "3s"), (
        "1s-2s would be 1 µs to 2 s to fio"
    )
    assert study.workloads[0].seconds == pytest.approx(2 + 3)


def test_a_study_option_fio_misreads_is_refused_at_its_line(tmp_path):
    with pytest.raises(StudyError) as refused:
        parse_study(STUDY + 'options = { thinktime = "1.5ms" }\n', "s.toml", base_dir=tmp_path)
    assert "s.toml:12: workload[0].options: thinktime=1.5ms is refused: fio cuts a number at its '.'" in str(
        refused.value
    )
    with pytest.raises(StudyError) as refused:
        parse_study(STUDY + 'bs = "4k;x"\n', "s.toml", base_dir=tmp_path)
    assert "comment" in str(refused.value), "what the guard refuses in it is said first"


# ---- fio's own account, before a study runs -----------------------------------------------------

GOOD = "[a]\nrw=read\nsize=1m\nruntime=2\nbs=4k\n"


def test_fio_parses_every_job_at_once_and_once_more_after_each_it_refuses(tmp_path, monkeypatch):
    started = []
    real_run = fio_jobs.run
    monkeypatch.setattr(fio_jobs, "run", lambda argv, **kw: started.append(argv) or real_run(argv, **kw))
    jobs = [
        (GOOD, "one"),
        (GOOD + "iodepth=0\n", "two"),
        (GOOD, "three"),
        (GOOD, "four"),
        (GOOD + "hipri\n", "five"),
        (GOOD, "six"),
    ]
    problems = parse_all(jobs, directory=tmp_path)
    assert [p.split(":")[0] for p in problems] == ["two", "five"], problems
    assert "iodepth: min value out of range" in problems[0] and "Bad option <hipri>" in problems[1]
    assert [len([a for a in argv if a.endswith(".fio")]) for argv in started] == [6, 4, 1], (
        "one fio, then one after each refusal"
    )
    assert parse_all([(GOOD, "one"), (GOOD, "two")], directory=tmp_path) == []


def test_a_fio_that_reads_a_value_otherwise_than_fslab_is_caught_before_the_study_runs(tmp_path, monkeypatch):
    """As a newer fio reading runtime otherwise would be: here fslab's reading is made to differ."""
    real = fio_values.plain_reading
    monkeypatch.setattr(
        fio_values,
        "plain_reading",
        lambda token, numbers: real(token, numbers) * 2 if numbers.time else real(token, numbers),
    )
    problems = parse_all([(GOOD, "workload 'w'")], directory=tmp_path)
    assert problems == [
        "workload 'w': this fio reads runtime=2 as 2 s, fslab as 4 s: fslab's figures "
        "would not be what fio ran (fslab reads fio's values as fio 3.33 does)"
    ]


def test_fios_account_is_read_from_its_debug_output():
    text = next(p for p in PROBES if p["job"] == "[probe]\nstartdelay=1s-5s\n")["stdout"]
    assert parse_debug(text) == [
        Handled("probe.fio", "startdelay", "OPT_STR_VAL_TIME", "1s-5s", 1),
        Handled("probe.fio", "startdelay", "OPT_STR_VAL_TIME", "5s", 5 * 10**6),
    ]
    assert "fslab as 1 s" in disagreement(parse_debug(text)[0]) and disagreement(parse_debug(text)[1]) is None


def test_every_job_of_a_study_fslab_renders_reads_alike_to_fio_and_fslab(tmp_path):
    """Through `fslab run`'s check (job_problems): the values fslab writes itself — sizes in bytes,
    runtimes in ms, scaled steady-state windows, a precondition's — agree with fio's account."""
    from fslab.core.workdir import Workdir
    from fslab.fio.workload import job_problems

    text = STUDY + (
        'bs = "4KiB"\nsize = "15.5MiB"\nruntime = "31.5s"\nramp_time = "2.5s"\n'
        'options = { steadystate = "iops_slope:1%", steadystate_duration = "20s", steadystate_ramp_time = "5s" }\n'
        'precondition = [ { rw = "randwrite", bs = "64KiB", runtime = "2.5s" } ]\n'
    )
    study = parse_study(text, "s.toml", base_dir=tmp_path, scale=0.1)
    assert job_problems(list(study.workloads), Workdir(tmp_path)) == []
    rendered = render(study.workloads[0].tool.job, directory=tmp_path, device=None)
    assert (
        re.search(r"^bs=4k$", rendered, re.M)
        and re.search(r"^size=\d+$", rendered, re.M)
        and "runtime=3150ms" in rendered
    )


# ---- a real run: what fio ran is what fslab says ------------------------------------------------

RUN = """\
[study]
name = "values"
repetitions = 1
image_size = "256MiB"
image_fill = "sparse"

[[target]]
filesystem = "ext4"

[[workload]]
name = "built"
rw = "randwrite"
bs = "4KiB"
size = "16MiB"
runtime = "1500ms"

[[workload]]
name = "file"
job_file = "mine.fio"
"""


@pytest.mark.root
def test_the_block_size_and_runtime_fio_ran_are_those_fslab_says(workdir, tmp_path):
    """A study's bs = "4KiB" is 4096-byte blocks to fio (4000 would fail direct I/O), and both
    workloads — built, and a job file — run as long as fslab says they do."""
    from fslab.results import ResultsDB
    from fslab.running.runner import run_study

    (tmp_path / "mine.fio").write_text(
        "[a]\nrw=randwrite\nioengine=libaio\ndirect=1\nbs=4k\nsize=16m\ntime_based\nruntime=1500ms\n"
    )
    study = load_study(write_study(tmp_path, RUN))
    assert [w.seconds for w in study.workloads] == [1.5, 1.5]
    db = ResultsDB(str(tmp_path / "r.db"))
    runs = db.runs(run_study(study, db, workdir))
    assert [r["status"] for r in runs] == ["ok", "ok"], [r["error"] for r in runs]
    for run in runs:
        (job,) = json.loads(next(o for o in db.outputs(run["id"]) if o.tool == "fio").text)["jobs"]
        assert job["write"]["io_bytes"] == 4096 * job["write"]["total_ios"] > 0, "every block 4096 bytes"
        assert 1500 <= job["job_runtime"] < 1500 + 500, f"fio ran {job['job_runtime']} ms"


def test_the_refusal_docs_study_format_shows_is_fslabs_own(tmp_path):
    docs = (Path(__file__).parent.parent / "docs" / "study-format.md").read_text()
    shown = next(
        line for line in docs.split("## Sizes and durations", 1)[1].splitlines() if line.startswith("study.toml:")
    )
    (tmp_path / "mine.fio").write_text("[global]\nioengine=libaio\n[a]\nrw=read\nruntime=2sec\n")
    study = STUDY.replace('rw = "randread"', 'job_file = "mine.fio"').replace(
        'image_size = "512MiB"', 'image_size = "512MiB"\nimage_fill = "sparse"'
    )
    with pytest.raises(StudyError) as refused:
        parse_study(study, "study.toml", base_dir=tmp_path)
    assert str(refused.value) == shown
