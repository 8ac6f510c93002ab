"""Failures alike (fslab.running.systematic), on synthetic failures: a failure's signature, and when runs
failing alike stop a study run or skip a target. The stop itself, for real: test_failures.py."""

from fslab.model import FAILED_ALIKE
from fslab.running.systematic import FailureWatch, Signature, Skip, Stop, missing_tool, normalised, signature_of

FIO_GONE = signature_of(
    "`fio x.fio` exited with status 127",
    ["fio", "--output-format=json", "/var/tmp/fslab/jobs/a.fio"],
    127,
    "fio: command not found\n",
)
NO_SPACE = signature_of(
    "…",
    ["fio", "/tmp/b.fio"],
    1,
    "fio: io_u error on file /mnt/x/f.0.0: No space left on device: write offset=1048576, buflen=4096\n",
)


def test_a_signature_is_the_executable_its_exit_status_and_its_last_line_made_alike():
    mkfs = ["/usr/sbin/mkfs.xfs", "-f", "/dev/loop12"]
    signature, said = signature_of("…", mkfs, 1, "mkfs.xfs: /dev/loop12 is busy\n\n")
    assert signature == Signature("mkfs.xfs", 1, "mkfs.xfs: PATH is busy")
    assert said == "`mkfs.xfs` exited 1: mkfs.xfs: /dev/loop12 is busy", "the cause as said keeps its path"
    again, _ = signature_of("…", ["mkfs.xfs", "-f", "/dev/loop7"], 1, "first line\nmkfs.xfs: /dev/loop7 is busy")
    assert again == signature, "another loop device, the same cause"
    other_status = signature_of("…", ["mkfs.xfs", "/dev/loop7"], 2, "mkfs.xfs: /dev/loop7 is busy")[0]
    assert other_status != signature, "another exit status, another cause"


def test_numbers_and_paths_are_normalised_words_are_not():
    said = "fio: io_u error on file /mnt/x/f.0.0: No space left on device: write offset=1048576, buflen=4096"
    assert normalised(said) == "fio: io_u error on file PATH: No space left on device: write offset=N, buflen=N"
    killed = "timed out after 10 s: `fio ./job.fio` was killed"
    assert normalised(killed) == "timed out after N s: `fio PATH` was killed"
    assert normalised("ext4  and   xfs2") == "ext4 and xfs2", "a name's digits stay: ext4 is not extN"


def test_a_failure_no_command_caused_is_signed_by_its_error():
    signature, said = signature_of("cannot run `true`: its working directory /x/y does not exist", None, None, None)
    assert signature == Signature(None, None, "cannot run `true`: its working directory PATH does not exist")
    assert said.endswith("/x/y does not exist")


def _watch(runs: list[tuple[str, str, tuple | None]]) -> tuple[FailureWatch, list]:
    watch = FailureWatch()
    verdicts = [
        watch.observe(i, target, workload, *(failed or (None, "")))
        for i, (target, workload, failed) in enumerate(runs, start=1)
    ]
    return watch, verdicts


def test_three_failures_alike_across_two_targets_stop_the_study_run_in_one_line():
    plan = [("ext4", "w1", None), ("xfs", "w1", FIO_GONE), ("ext4", "w2", FIO_GONE), ("xfs", "w2", FIO_GONE)]
    _, verdicts = _watch(plan)
    assert verdicts[:3] == [None, None, None]
    stop = verdicts[3]
    assert isinstance(stop, Stop) and stop.runs == (2, 3, 4) and stop.targets == ("xfs", "ext4")
    said = "3 runs in a row failed alike on 2 targets (xfs, ext4): `fio` exited 127: fio: command not found"
    assert stop.cause == said and "\n" not in stop.cause


def test_a_run_that_went_well_or_failed_otherwise_breaks_the_streak():
    plan = [
        ("a", "w1", FIO_GONE), ("b", "w1", FIO_GONE), ("c", "w1", None), ("a", "w2", FIO_GONE),
        ("b", "w2", FIO_GONE), ("c", "w2", NO_SPACE), ("d", "w1", FIO_GONE),
    ]  # fmt: skip
    _, verdicts = _watch(plan)
    assert verdicts == [None] * 7


def test_failures_alike_of_one_cell_alone_stop_nothing():
    _, verdicts = _watch([("a", "w1", NO_SPACE)] * 5)
    assert verdicts == [None] * 5, "a cell that fails every run is that cell's failure: the study goes on"


def test_failures_alike_of_one_targets_workloads_skip_that_target():
    plan = [("xfs", "w1", NO_SPACE), ("xfs", "w2", NO_SPACE), ("xfs", "w1", NO_SPACE), ("ext4", "w1", None)]
    watch, verdicts = _watch(plan)
    skip = verdicts[2]
    assert isinstance(skip, Skip) and skip.target == "xfs" and verdicts[3] is None
    assert skip.why.startswith(FAILED_ALIKE)
    assert skip.why.endswith("No space left on device: write offset=1048576, buflen=4096")


def test_a_target_failing_alike_between_the_others_runs_is_skipped():
    plan = [
        ("xfs", "w1", FIO_GONE), ("ext4", "w1", None), ("ext4", "w2", None),
        ("xfs", "w2", FIO_GONE), ("xfs", "w1", FIO_GONE), ("ext4", "w1", None),
    ]  # fmt: skip
    watch, verdicts = _watch(plan)
    assert isinstance(verdicts[4], Skip) and verdicts[4].target == "xfs" and watch.skipped == {"xfs": FIO_GONE[0]}
    assert [v for v in verdicts if v is not None] == [verdicts[4]], "said once"


def test_a_cause_that_reaches_another_target_after_a_skip_stops_the_study_run_and_the_skip_was_not_the_targets():
    plan = [("xfs", "w1", FIO_GONE), ("xfs", "w2", FIO_GONE), ("xfs", "w1", FIO_GONE), ("ext4", "w1", FIO_GONE)]
    watch, verdicts = _watch(plan)
    assert isinstance(verdicts[2], Skip)
    stop = verdicts[3]
    assert isinstance(stop, Stop) and stop.count == 4 and stop.runs == (1, 2, 3, 4)
    assert watch.skipped_for(stop.signature) == ["xfs"]


def test_a_tool_missing_is_one_cause_however_fslab_found_it_missing():
    missing = missing_tool(["fio"], 127, "fio: command not found\n")
    fill = ["fio", "--name=fill", "--filename=/dev/loop3"]
    by_command, said = signature_of("…", fill, 127, "fio: command not found", missing)
    by_check, told = signature_of("fio is not installed: fslab checks every fio option …", None, None, None, "fio")
    assert by_command == by_check == FIO_GONE[0]
    assert said == "`fio` exited 127: fio: command not found" and told == "fio: command not found"
    assert missing_tool(["fio"], 1, "fio: command not found") is None
    assert missing_tool(["/usr/bin/fio"], 127, "/usr/bin/fio: command not found") == "fio"


def test_a_words_digits_stay_whole_however_many_they_are():
    """A name's digits are not cut in two: `xfs12` was `xfs1N`, `loop12` `loop1N` while `loop3`
    stayed, so one cause read on loop10 and loop11 was alike and on loop9 and loop10 was not.
    Fails on the old code."""
    assert (
        normalised("buffer I/O error on dev loop12, logical block 4096")
        == "buffer I/O error on dev loop12, logical block N"
    )
    assert normalised("ext4 and xfs12 on md127") == "ext4 and xfs12 on md127"
    assert normalised("x86_64 job12") == "x86_64 job12"
    assert normalised("fio-3.33 took 1.5s, pid=1234, -5") == "fio-N took Ns, pid=N, N"
