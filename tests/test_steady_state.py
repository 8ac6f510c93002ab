"""Steady state and preconditioning of fio workloads (issue 23, item 3): fio's steadystate
options through the guard, its verdict read from its JSON (real fio 3.33 output:
tests/fixtures/fio/steadystate, see regenerate.sh), a workload's `precondition` and its
refusals, what the summary says of both; and real short runs on loop images showing that a
precondition runs before the measured window, outside its figures, and that a measured job
ended by steady state is still counted over one interval."""

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from conftest import FIXTURES, MACHINE_NOTES, fslab_in_process, ran_study
from fslab.fio.jobs import option_problem, parse_job_file, single_job, steadystate_problem
from fslab.fio.output import METRICS, PRECONDITION_TOOL, parse_metrics, precondition_output, steady_states
from fslab.fio.steady import not_steady
from fslab.fio.steady_notes import steady_notes
from fslab.fio.workload import FIO, FioJob, layout_options
from fslab.model import RawOutput
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.study import StudyError, parse_study

STEADY = FIXTURES / "fio" / "steadystate"


def fixture(name: str) -> str:
    return (STEADY / f"{name}.json").read_text()


def values(metrics) -> dict[str, float]:
    return {m.key: m.value for m in metrics}


# ---- fio's verdict, read -------------------------------------------------------------------------


def test_a_group_that_reached_steady_state_is_read_with_how_long_it_took():
    text = fixture("attained")
    job = json.loads(text)["jobs"][0]
    (state,) = steady_states(text)
    assert state.attained and state.job == "steady"
    assert (state.criterion, state.setting, state.window_s) == ("iops:50.000000%", "iops:50%", 2)
    assert state.seconds == job["write"]["runtime"] / 1000, "its run time: it stopped once steady"
    assert state.seconds < 20 / 2, "long before its 20 s runtime"
    assert state.iops == job["steadystate"]["data"]["iops"] and len(state.bw_bytes) == 2
    assert state.reached == job["steadystate"]["criterion"]
    found = values(parse_metrics(text))
    assert found["steady_state"] == 1.0 and found["steady_state_s"] == state.seconds
    assert found["write_iops"] > 0, "its figures as any run's"


def test_a_job_that_never_reached_it_has_no_time_to_steady_state():
    text = fixture("not-attained")
    (state,) = steady_states(text)
    assert not state.attained and state.setting == "iops:0.01%" and state.seconds == pytest.approx(5, abs=0.1)
    found = values(parse_metrics(text))
    assert found["steady_state"] == 0.0 and "steady_state_s" not in found


def test_a_run_without_steady_state_reports_none():
    found = values(parse_metrics((FIXTURES / "fio" / "seqwrite-1m.json").read_text()))
    assert not {"steady_state", "steady_state_s"} & set(found)
    assert steady_states((FIXTURES / "fio" / "randrw-2jobs.json").read_text()) == []


def test_what_was_not_steady_is_a_note_on_the_run():
    attained, never = fixture("attained"), fixture("not-attained")
    assert not_steady([RawOutput("", "fio", attained)]) == []
    (measured,) = not_steady([RawOutput("", "fio", never)])
    assert measured.kind == "not_steady" and not measured.implausible
    assert measured.says.startswith("the measured run never reached steady state (iops:0.01% over 2 s) in its 5 s")
    (phase,) = not_steady([precondition_output(2, 6.5, never), precondition_output(1, 3.0, attained)])
    assert phase.kind == "precondition-2_not_steady" and phase.says.startswith(
        "precondition phase 2 never reached steady state"
    )
    assert FIO.judge(None, [RawOutput("", "fio", never), RawOutput("", "fio_log", "{}")]) == [measured]


def test_a_precondition_phase_is_kept_whole_and_read_as_its_phases_metrics():
    stored = precondition_output(1, 41.25, fixture("attained"))
    assert (stored.phase, stored.tool) == ("precondition-1", PRECONDITION_TOOL)
    assert json.loads(stored.text)["output"] == fixture("attained"), "fio's output as it came"
    found = values(FIO.parse([RawOutput("", "fio", (FIXTURES / "fio" / "seqwrite-1m.json").read_text()), stored]))
    assert found["precondition-1.precondition_s"] == 41.25
    assert found["precondition-1.steady_state"] == 1.0 and found["precondition-1.steady_state_s"] == pytest.approx(
        3.897
    )
    assert "steady_state" not in found and found["write_iops"] > 0, (
        "the measured run's own figures are the measured job's alone"
    )
    assert all(
        not METRICS[name].primary and not METRICS[name].compared
        for name in ("steady_state", "steady_state_s", "precondition_s")
    )


# ---- the options, checked -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, value",
    [("steadystate", "iops_slope:0.3%"), ("ss", "iops:2"), ("steadystate", "bw:10m"), ("steadystate", "bw_slope:1%"),
     ("steadystate_duration", "5m"), ("ss_dur", "30"), ("steadystate_ramp_time", "10s"), ("ss_ramp", "500ms")],
)  # fmt: skip
def test_fios_steady_state_options_are_allowed(name, value):
    assert option_problem(name, value) is None


@pytest.mark.parametrize(
    "name, value",
    [
        ("steadystate", "iops_slope:abc"),
        ("ss", "latency:1%"),
        ("steadystate", "iops"),
        ("steadystate", "bw:-3"),
        ("ss_dur", "5 min"),
    ],
)
def test_their_values_are_checked(name, value):
    assert "steadystate" in (option_problem(name, value) or "") and "takes" in option_problem(name, value)


@pytest.mark.parametrize(
    "options, says",
    [
        ({"steadystate": "iops:1%"}, "without steadystate_duration is never judged"),
        ({"steadystate": "iops:1%", "steadystate_duration": "1"}, "under 2s"),
        (
            {"steadystate": "iops:1%", "steadystate_duration": "5s", "steadystate_ramp_time": "2s", "runtime": "6s"},
            "(7s) is longer than runtime (6s)",
        ),
    ],
)
def test_a_steady_state_fio_could_never_judge_is_refused(options, says):
    assert says in steadystate_problem(single_job("w", {"rw": "randwrite", **options}))
    assert (
        steadystate_problem(single_job("w", {"rw": "randwrite", "runtime": "60s", "ss": "iops:1%", "ss_dur": "30s"}))
        is None
    )


def test_a_job_files_refusal_names_the_job():
    job = parse_job_file("[global]\nrw=write\n[a]\nruntime=60\nss=iops:1%\nss_dur=10\n[b]\nss=bw:1%\n", "two.fio")
    assert steadystate_problem(job).startswith("[b] steadystate=bw:1% without steadystate_duration")


def test_the_layout_never_stops_at_steady_state():
    laid = layout_options(
        {
            "rw": "randread",
            "size": "1m",
            "runtime": "60s",
            "steadystate": "iops:1%",
            "steadystate_duration": "30s",
            "steadystate_ramp_time": "5s",
        }
    )
    assert not {"steadystate", "steadystate_duration", "steadystate_ramp_time", "runtime"} & set(laid), (
        "it writes the whole region"
    )


# ---- a workload's steady state and precondition in a study file ---------------------------------

HEAD = """\
[study]
name = "s"
[[target]]
filesystem = "ext4"
"""


def study(workload: str, **kwargs):
    return parse_study(HEAD + '[[workload]]\nname = "w"\n' + workload, "s.toml", base_dir=Path("."), **kwargs)


def fio_of(workload: str, **kwargs) -> tuple:
    found = study(workload, **kwargs).workloads[0]
    return found, found.tool


def test_a_measured_job_ended_by_steady_state_is_timed_by_its_runtime():
    workload, fio = fio_of('rw = "randwrite"\nruntime = "60s"\noptions = { ss = "iops_slope:0.3%", ss_dur = "20s" }\n')
    assert fio.job.jobs()[0]["steadystate"] == "iops_slope:0.3%" and fio.job.jobs()[0]["steadystate_duration"] == "20s"
    assert workload.seconds == fio.measured_seconds() == 60, "at most its runtime"
    assert workload.timeout == 2 * 60 + 300, "the time-out allows for the whole runtime"
    scaled = fio_of(
        'rw = "randwrite"\nruntime = "60s"\noptions = { ss = "iops_slope:0.3%", ss_dur = "20s", ss_ramp = "10" }\n',
        scale=0.1,
    )[1].job.jobs()[0]
    assert (scaled["runtime"], scaled["steadystate_duration"], scaled["steadystate_ramp_time"]) == (
        "6000ms",
        "2000ms",
        "1000ms",
    ), "scaled with the runtime"
    assert (
        fio_of('rw = "randwrite"\nruntime = "60s"\noptions = { ss = "iops:1%", ss_dur = "3s" }\n', scale=0.1)[
            1
        ].job.jobs()[0]["steadystate_duration"]
        == "2000ms"
    ), "never below what fio can judge"


def test_fill_is_the_layouts_sequential_pass_over_the_workloads_own_files():
    workload, fio = fio_of('rw = "randread"\nnumjobs = 2\nsize = "64MiB"\nruntime = "10s"\nprecondition = "fill"\n')
    (phase,) = fio.precondition.phases
    options = phase.jobs()[0]
    assert phase.sections[0].name == fio.job.sections[0].name == "w", "the same job name: the same files"
    assert {k: options[k] for k in ("rw", "bs", "iodepth", "direct", "numjobs", "size")} == {
        "rw": "write",
        "bs": "1m",
        "iodepth": "16",
        "direct": "1",
        "numjobs": "2",
        "size": str(64 * 2**20),
    }
    assert not {"runtime", "time_based", "loops"} & set(options)
    assert workload.timeout == 2 * 10 + 300 + 3600, "a phase of unknown length adds the hour fslab gives one"
    assert workload.seconds == 10, "what is measured, not what preconditions it"
    assert FioJob.spec(fio)["precondition"] == [options]


def test_a_swept_workloads_phases_write_the_files_it_measures():
    """A sweep's name (w[iodepth=8]) is no file name: its jobs are named as its files are, and so
    are its precondition's, or fill writes files the measured job never reads."""
    for workload in study(
        'rw = "randread"\niodepth = [1, 8]\nsize = "64MiB"\nruntime = "10s"\nprecondition = "fill"\n'
    ).workloads:
        (phase,) = workload.tool.precondition.phases
        assert phase.sections[0].name == workload.tool.job.sections[0].name != workload.name, workload.name


def test_phases_are_scaled_and_seeded_apart_from_the_measured_run():
    text = """rw = "randwrite"
size = "1GiB"
runtime = "60s"

[[workload.precondition]]
rw = "write"
bs = "128k"
loops = 2

[[workload.precondition]]
rw = "randwrite"
bs = "4k"
iodepth = 32
runtime = "30m"
steadystate = "iops_slope:0.3%"
steadystate_duration = "5m"
steadystate_ramp_time = "1m"
"""
    workload, fio = fio_of(text, scale=0.01)
    fill, random = (job.jobs()[0] for job in fio.precondition.phases)
    assert (fill["rw"], fill["bs"], fill["loops"], fill["size"]) == ("write", "128k", "2", fio.fio_options["size"])
    assert (random["rw"], random["iodepth"], random["time_based"], random["runtime"]) == (
        "randwrite",
        "32",
        "1",
        "18000ms",
    )
    assert (random["steadystate"], random["steadystate_duration"], random["steadystate_ramp_time"]) == (
        "iops_slope:0.3%",
        "3000ms",
        "600ms",
    )
    seeds = [int(fio.fio_options["randseed"]), int(fill["randseed"]), int(random["randseed"])]
    assert len(set(seeds)) == 3, "each phase's offsets its own"
    assert workload.timeout == pytest.approx(2 * 0.6 + 300 + 2 * 18 + 3600)
    explicit = fio_of('timeout = "2h"\n' + text)[0]
    assert explicit.timeout == 7200, "a study's own time-out is taken as it is"


@pytest.mark.parametrize(
    "precondition, where, says",
    [
        ('"fil"', "workload[0].precondition:", 'is "fill"'),
        ("[]", "workload[0].precondition:", "preconditions nothing"),
        ('[ { rw = "randread" } ]', "workload[0].precondition[0].rw:", "a precondition phase writes"),
        (
            '[ { rw = "write", fill = 1 } ]',
            "unknown field 'fill'",
            "allowed: rw, bs, iodepth, numjobs, loops, runtime, steadystate",
        ),
        ('[ { rw = "write", loops = 2, runtime = "1m" } ]', "workload[0].precondition[0].loops:", "not both"),
        ('[ "fill", { rw = "write" } ]', "workload[0].precondition[0]", "valid dictionary"),
        (
            '[ { rw = "randwrite", steadystate = "iops:1%" } ]',
            "workload[0].precondition[0].steadystate:",
            "goes with steadystate_duration",
        ),
        (
            '[ { rw = "randwrite", steadystate_duration = "1m" } ]',
            "workload[0].precondition[0].steadystate_duration:",
            "goes with steadystate",
        ),
        (
            '[ { rw = "randwrite", steadystate = "iops:x", steadystate_duration = "1m" } ]',
            "workload[0].precondition[0].steadystate:",
            "takes a limit",
        ),
        ('[ { rw = "randwrite", bs = "4k;x" } ]', "workload[0].precondition[0].bs:", "comment"),
        ('[ { rw = "randwrite", numjobs = 4 } ]', "workload[0].precondition[0].numjobs:", "shared_file = true"),
        (
            '[ { rw = "randwrite", runtime = "1m", steadystate = "iops:1%", steadystate_duration = "2m" } ]',
            "workload[0].precondition[0]:",
            "never judge",
        ),
    ],
)
def test_a_precondition_that_makes_no_sense_is_refused_at_its_field(precondition, where, says):
    with pytest.raises(StudyError) as refused:
        study(f'rw = "randwrite"\nprecondition = {precondition}\n')
    assert where in str(refused.value) and says in str(refused.value), str(refused.value)


@pytest.mark.parametrize(
    "workload, says",
    [
        ('job_file = "j.fio"\nprecondition = "fill"\n', "workload[0].precondition: fslab cannot tell which files"),
        (
            'rw = "randread"\nclients = ["host-a"]\nprecondition = "fill"\n',
            "workload[0].precondition: a workload run from clients",
        ),
        (
            'rw = "randwrite"\noptions = { steadystate = "iops:1%" }\n',
            "workload[0].options: steadystate=iops:1% without steadystate_duration",
        ),
    ],
)
def test_a_precondition_where_fslab_cannot_make_one_is_refused(workload, says, tmp_path):
    (tmp_path / "j.fio").write_text("[j]\nrw=randread\nsize=1m\n")
    with pytest.raises(StudyError, match=says.replace("[", r"\[").replace("]", r"\]")):
        parse_study(HEAD + '[[workload]]\nname = "w"\n' + workload, "s.toml", base_dir=tmp_path)


def test_the_studys_fio_options_are_checked_for_the_built_in_workloads_too():
    with pytest.raises(StudyError, match=r"s.toml:\d+: fio.options: steadystate=iops:1% without steadystate_duration"):
        parse_study(
            '[study]\nname = "s"\nworkloads = ["rand_write"]\n[fio]\n'
            'options = { ss = "iops:1%" }\n[[target]]\nfilesystem = "ext4"\n',
            "s.toml",
            base_dir=Path("."),
        )


def test_an_unknown_field_in_a_nested_table_is_told_that_tables_fields():
    with pytest.raises(StudyError) as refused:
        study('kind = "scenario"\n[[workload.phase]]\nname = "a"\naction = "sync"\nbar = 2\n')
    assert (
        "unknown field 'bar'; allowed: name, fio, sysbench, dd, action, seconds, "
        "measured, snapshot_every, extents (in workload[0].phase[0].bar)" in str(refused.value)
    )


def test_numjobs_is_a_phases_own_where_the_jobs_share_one_file():
    fio = fio_of(
        'rw = "randwrite"\nnumjobs = 4\nshared_file = true\nprecondition '
        '= [ { rw = "randwrite", numjobs = 2 }, { rw = "write" } ]\n'
    )[1]
    many, fill = (job.jobs()[0] for job in fio.precondition.phases)
    assert many["numjobs"] == "2" and many["filename"] == fill["filename"] == fio.fio_options["filename"]
    assert fill["numjobs"] == "1", "the shared file laid out once, as the layout does"


def test_fslab_list_shows_a_preconditions_fields():
    listed = " ".join(fslab_in_process("list", "fio").stdout.split())
    assert 'precondition ("fill", or a list of phases), precondition.rw, precondition.bs,' in listed
    assert (
        "precondition.steadystate_duration" in listed and "steadystate_duration" in listed.split("option value", 1)[1]
    )


# ---- what the summary says ------------------------------------------------------------------------


def test_the_cells_note_counts_the_runs_that_reached_steady_state_and_after_how_long():
    spec = {"job": "[w]\nrw=randwrite\nruntime=60s\nsteadystate=iops_slope:0.3%\nsteadystate_duration=20s\n"}
    assert steady_notes({"steady_state": [1.0, 0.0, 1.0], "steady_state_s": [30.0, 50.0]}, spec) == [
        "steady state (iops_slope:0.3%): 2 of 3 runs, after 40 s (median; 30 s–50 s)"
    ]
    assert steady_notes({"steady_state": [0.0]}, spec) == ["steady state (iops_slope:0.3%): 0 of 1 runs"]
    assert steady_notes({"write_iops": [1.0]}, spec) == []


def test_the_cells_note_says_how_it_was_preconditioned():
    spec = {"precondition": [
        {"rw": "write", "bs": "128k", "loops": "2"},
        {"rw": "randwrite", "bs": "4k", "iodepth": "32", "runtime": "1800000ms", "steadystate": "iops_slope:0.3%"},
    ]}  # fmt: skip
    steady = {"precondition-1.precondition_s": [40.0, 42.0], "precondition-2.precondition_s": [330.0, 310.0],
              "precondition-2.steady_state": [1.0, 1.0], "precondition-2.steady_state_s": [320.0, 300.0]}  # fmt: skip
    assert steady_notes(steady, spec) == [
        "preconditioned: fill ×2 (41 s); random writes 4k qd32 for "
        "30 min (5.3 min): steady after 5.2 min (iops_slope:0.3%)"
    ]
    never = steady | {"precondition-2.precondition_s": [1800.0, 1801.0], "precondition-2.steady_state": [0.0, 0.0]}
    assert steady_notes(never, spec)[0].endswith(
        "random writes 4k qd32 for 30 min (30 min): not steady after 30 min (iops_slope:0.3%)"
    )
    some = steady | {"precondition-2.steady_state": [1.0, 0.0], "precondition-2.steady_state_s": [320.0]}
    assert steady_notes(some, spec)[0].endswith(": steady after 5.3 min (iops_slope:0.3%) in 1 of 2 runs")


STUDY = """\
[study]
name = "settling"
repetitions = 2
[[target]]
filesystem = "raw"
[[workload]]
name = "w"
rw = "randwrite"
runtime = "60s"
options = { steadystate = "iops:50%", steadystate_duration = "2s" }
precondition = [ { rw = "write", loops = 2 } ]
"""


def test_the_summary_shows_steady_state_and_the_runs_that_missed_it(tmp_path):
    """A stored study run (real fio output, synthetic runs): the cell's table says how many of its
    runs reached steady state, and the one that did not is a note counted on the cell."""
    parsed = parse_study(STUDY, "s.toml", base_dir=tmp_path)
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = db.begin_study_run(parsed, 1, {}, {}, {}, Owner.current(tmp_path))
    start = datetime(2026, 1, 1)
    for repetition, name in enumerate(("attained", "not-attained"), start=1):
        outputs = [
            RawOutput("", "fio", fixture(name)),
            precondition_output(1, 12.0, (FIXTURES / "fio" / "seqwrite-1m.json").read_text()),
        ]
        db.record_run(study_run, RunRecord(
            target="raw", workload="w", repetition=repetition, warmup=False, block=repetition, position=1,
            started_at=start, finished_at=start + timedelta(seconds=9), status="ok", buffered=False, outputs=outputs,
            metrics=FIO.parse(outputs), notes=FIO.judge(parsed.workloads[0], outputs),
        ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    (cell,) = summarize_study_run(db, study_run).cells
    assert "steady state (iops:50%): 1 of 2 runs, after 3.9 s" in cell.notes
    assert "preconditioned: fill ×2 (12 s)" in cell.notes
    assert any(
        n.startswith("the measured run never reached steady state (iops:0.01% over 2 s)")
        and n.endswith("(1 of 2 runs)")
        for n in cell.notes
    )
    assert not cell.implausible, "a note, not a flag: its figures are real"
    shown = fslab_in_process("summary", "--db", str(tmp_path / "r.db"), cwd=tmp_path)
    assert "preconditioned: fill ×2 (12 s)" in " ".join(shown.stdout.split()), shown.stdout


# ---- real runs ----------------------------------------------------------------------------------

MiB = 2**20

# A random read measured after a precondition of two sequential passes and random writes until
# steady (every IOPS sample of a 2 s window within 90 % of their mean: reached in seconds), on a
# raw loop device (every byte written reaches it once) and on ext4.
PRECONDITIONED = """\
[study]
name = "preconditioned"
repetitions = 1
image_size = "256MiB"
image_fill = "sparse"

[[target]]
filesystem = ["raw", "ext4"]

[[workload]]
name = "read"
rw = "randread"
size = "16MiB"
runtime = "1s"

[[workload.precondition]]
rw = "write"
loops = 2

[[workload.precondition]]
rw = "randwrite"
bs = "4k"
iodepth = 8
runtime = "30s"
steadystate = "iops:90%"
steadystate_duration = "2s"
"""


@pytest.mark.root
def test_a_precondition_runs_before_the_measured_window_and_its_outcome_is_stored_and_shown(tmp_path, workdir):
    result, results, study_run = ran_study(tmp_path, PRECONDITIONED, workdir)
    samples = results.sample_groups(study_run).values
    for run in results.runs(study_run, ("id", "target", "timings", "job_file")):
        outputs = {(o.phase, o.tool): o for o in results.outputs(run["id"])}
        measured = json.loads(outputs[("", "fio")].text)
        phases = [json.loads(outputs[(f"precondition-{n}", PRECONDITION_TOOL)].text) for n in (1, 2)]
        fill, random = (json.loads(p["output"])["jobs"][0] for p in phases)
        assert fill["write"]["io_bytes"] == 2 * 16 * MiB, "the workload's region, written twice"
        assert random["steadystate"]["attained"] == 1 and random["write"]["runtime"] < 30_000, "ended once steady"
        assert measured["jobs"][0]["write"]["io_bytes"] == 0, (
            "the measured job read; nothing of the precondition is in its figures"
        )
        # fio stamps its report as it ends: each phase ended before the measured job began
        began = measured["timestamp_ms"] - measured["jobs"][0]["job_runtime"]
        assert json.loads(phases[1]["output"])["timestamp_ms"] <= began
        assert run["timings"]["layout"] >= sum(p["seconds"] for p in phases), (
            "unmeasured, before the caches were dropped"
        )
        assert "precondition" not in run["job_file"] and "steadystate" not in run["job_file"], (
            "the stored job is the measured one"
        )
        cell = samples[("read", run["target"])]
        assert cell["precondition-1.precondition_s"] == [phases[0]["seconds"]] and cell[
            "precondition-2.steady_state"
        ] == [1.0]
        assert 0 < cell["precondition-2.steady_state_s"][0] < 30
        assert cell["read_bytes"][0] > 0
    raw = samples[("read", "raw")]
    # the monitors watched the measured window alone: the 32 MiB fill and the random writes are not in it
    assert raw["device_written_bytes"] == [0.0]
    shown = " ".join(result.stdout.split())
    assert (
        "preconditioned: fill ×2 (" in shown
        and "random writes 4k qd8 for 30 s (" in shown
        and "steady after" in shown
        and "(iops:90%)" in shown
    )


# Measured jobs with fio's steady state on a raw loop device: one reached in seconds, which ends
# long before its 20 s runtime; one never reached (every sample within 0.01 % of the mean).
SETTLING = """\
[study]
name = "settling"
repetitions = 1
image_size = "256MiB"
image_fill = "sparse"

[[target]]
filesystem = "raw"

[[workload]]
name = "settles"
rw = "write"
bs = "64k"
iodepth = 4
size = "128MiB"
runtime = "20s"
options = { steadystate = "iops:90%", steadystate_duration = "2s" }

[[workload]]
name = "never"
rw = "write"
bs = "64k"
size = "64MiB"
runtime = "3s"
options = { steadystate = "iops:0.01%", steadystate_duration = "2s" }
"""


@pytest.mark.root
def test_a_measured_job_ended_by_steady_state_is_counted_over_one_interval(tmp_path, workdir):
    result, results, study_run = ran_study(tmp_path, SETTLING, workdir)
    samples = results.sample_groups(study_run).values
    runs = {r["workload"]: r for r in results.runs(study_run, ("id", "workload", "timings", "notes", "status"))}
    settles = {k: v[0] for k, v in samples[("settles", "raw")].items()}
    assert settles["steady_state"] == 1.0 and settles["steady_state_s"] < 10
    assert runs["settles"]["timings"]["workload"] < 15, "it ended once steady, well before its 20 s"
    # fio's bytes and the device's over the same interval, however short: as test_run_monitors'
    # ramped write (a window counted from fio's start, or to its runtime, reads otherwise)
    assert settles["write_amplification"] == pytest.approx(1.0, abs=0.12)
    assert settles["device_written_bytes"] == pytest.approx(settles["write_bytes"], rel=0.12)
    never = {k: v[0] for k, v in samples[("never", "raw")].items()}
    assert never["steady_state"] == 0.0 and "steady_state_s" not in never
    kinds = {w: [n["kind"] for n in r["notes"] if n["kind"] not in MACHINE_NOTES] for w, r in runs.items()}
    assert kinds["never"] == ["not_steady"] and kinds["settles"] == [], "the machine's and neighbours' notes aside"
    shown = " ".join(result.stdout.split())
    assert "steady state (iops:90%): 1 of 1 runs, after" in shown
    assert "the measured run never reached steady state (iops:0.01% over 2 s)" in shown
