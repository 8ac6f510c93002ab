"""`fslab import`: fio JSON output made by real fio (tests/fixtures/import, see its README) read
back into the very metrics fio.py reads from it, stored as a study run that summarises and
compares like any other; files that are not fio's output reported one by one and skipped."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import FIXTURES, fslab_in_process
from fslab.fio.hist import HIST_TOOL
from fslab.fio.output import (
    METRICS as FIO_METRICS,
    PERCENTILES,
    in_current_units,
    job_metrics,
    latency_bins,
    load_json,
    parse_metrics,
)
from fslab.results import ResultsDB
from fslab.results.import_parsing import FioOutput, NotFioOutput, parse_output
from fslab.results.importer import FoundFile, imported_study, parse_files, read_files

IMPORT = FIXTURES / "import"
PLAIN = sorted((IMPORT / "plain").glob("*.json"))
JSONPLUS = sorted((IMPORT / "jsonplus").glob("*.json"))
FIO2 = ["fio-2.2.10.json", "fio-2.18-jsonplus.json", "fio-2.21-jsonplus.json"]
FIO34 = IMPORT / "fio-3.4x"  # fio 3.41 and 3.42, built from their tags (see the README)


def values(metrics) -> dict[str, float]:
    return {m.name: m.value for m in metrics}


def only(document: dict, **keep) -> str:
    """fio's JSON with only some of its entries, under "jobs": what fio.py's parse_metrics reads."""
    entries = document.get("jobs") or document["client_stats"]
    return json.dumps({"jobs": [e for e in entries if all(e.get(k) == v for k, v in keep.items())]})


@pytest.mark.parametrize(
    "path",
    [*PLAIN, *JSONPLUS, IMPORT / "notice-before-json.json", IMPORT / "group-reporting.json"],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_a_file_of_one_job_imports_as_fio_py_parses_it(path):
    text = path.read_text()
    output = parse_output(text, "t")
    assert [(j.name, j.target, j.host, j.error) for j in output.jobs] == [
        (json.loads(text[text.index("{") :])["jobs"][0]["jobname"], "t", None, None)
    ]
    assert values(output.jobs[0].metrics) == values(parse_metrics(text))
    assert output.fio_version == "fio-3.33"


def test_plain_json_has_fios_own_percentiles_and_json_plus_its_bins():
    for path in PLAIN:
        text = path.read_text()
        read = json.loads(text)["jobs"][0]["read"]
        assert "bins" not in read["clat_ns"], "plain json: no bins"
        found = values(parse_output(text, "t").jobs[0].metrics)
        for name, pct in PERCENTILES.items():
            for kind in ("clat", "lat", "slat"):
                assert found[f"read_{kind}_{name}_us"] == read[f"{kind}_ns"]["percentile"][f"{pct:.6f}"] / 1e3, (
                    path.name,
                    kind,
                    name,
                )
    for path in JSONPLUS:
        read = json.loads(path.read_text())["jobs"][0]["read"]
        assert all("bins" in read[f"{kind}_ns"] for kind in ("clat", "lat", "slat")), (
            "json+ with the bins fslab asks for"
        )


def test_several_jobs_are_one_run_per_job_name():
    text = (IMPORT / "several-jobs.json").read_text()
    document = json.loads(text)
    output = parse_output(text, "t")
    assert [j.name for j in output.jobs] == ["seq-read", "rand-write"]
    seq_read, rand_write = output.jobs
    assert values(seq_read.metrics) == values(parse_metrics(only(document, jobname="seq-read")))
    assert values(rand_write.metrics) == values(parse_metrics(only(document, jobname="rand-write")))
    clones = [j["read"]["iops"] for j in document["jobs"] if j["jobname"] == "seq-read"]
    assert len(clones) == 2 and values(seq_read.metrics)["read_iops"] == pytest.approx(sum(clones)), (
        "numjobs=2: both clones, one run"
    )
    assert "write_iops" not in values(seq_read.metrics) and "read_iops" not in values(rand_write.metrics)


def test_group_reporting_is_one_run_of_the_group():
    document = json.loads((IMPORT / "group-reporting.json").read_text())
    assert len(document["jobs"]) == 1 and document["jobs"][0]["job options"]["numjobs"] == "4"
    found = values(parse_output(json.dumps(document), "t").jobs[0].metrics)
    assert found["read_iops"] == pytest.approx(document["jobs"][0]["read"]["iops"]) and found[
        "write_iops"
    ] == pytest.approx(document["jobs"][0]["write"]["iops"])


def test_client_server_output_is_imported_per_host():
    text = (IMPORT / "client-server.json").read_text()
    document = json.loads(text)
    output = parse_output(text, "ext4")
    assert [(j.name, j.target, j.host) for j in output.jobs] == [("randread", "ext4@localhost", "localhost")]
    assert values(output.jobs[0].metrics) == values(parse_metrics(only(document, hostname="localhost")))


def test_fios_sum_over_clients_is_left_out():
    # fio --client with two hosts adds an "All clients" entry summing them (no bins, and on the
    # first host's name): its parts are imported, never the sum beside them
    document = json.loads((IMPORT / "client-server.json").read_text())
    first = document["client_stats"][0]
    other = {**first, "hostname": "127.0.0.1"}
    total = {**first, "jobname": "All clients", "read": {**first["read"], "iops": 2 * first["read"]["iops"]}}
    output = parse_output(json.dumps({**document, "client_stats": [first, other, total]}), "t")
    assert [(j.name, j.target) for j in output.jobs] == [("randread", "t@localhost"), ("randread", "t@127.0.0.1")]
    assert values(output.jobs[0].metrics)["read_iops"] == first["read"]["iops"]


@pytest.mark.parametrize("name", FIO2)
def test_fio_2_output_is_read_in_fslabs_units(name):
    text = (IMPORT / name).read_text()
    job = json.loads(text)["jobs"][0]
    read = job["read"]
    output = parse_output(text, "t")
    assert output.fio_version == name.removesuffix(".json").removesuffix("-jsonplus")
    found = values(output.jobs[0].metrics)
    kib = 1024
    assert found["read_iops"] == read["iops"]
    assert found["read_mb_s"] == read["bw"] * kib / 1e6 and found["read_mib_s"] == read["bw"] * kib / 2**20, (
        "2.x: bandwidth in KiB/s"
    )
    assert found["read_bytes"] == (read["io_bytes"] if "io_kbytes" in read else read["io_bytes"] * kib), (
        "io_bytes: KiB before 2.19"
    )
    for kind in ("clat", "lat", "slat"):
        assert found[f"read_{kind}_mean_us"] == pytest.approx(read[kind]["mean"]), f"2.x: {kind} in µs"
    for name_, pct in PERCENTILES.items():
        # fio's own percentiles (µs), whether fslab read them from the bins (json+) or took them
        assert found[f"read_clat_{name_}_us"] == read["clat"]["percentile"][f"{pct:.6f}"], name_
    assert not any(m.startswith(("read_lat_p", "read_slat_p")) for m in found), "fio 2.x kept percentiles of clat only"
    assert found["cpu_usr_pct"] == job["usr_cpu"] and "write_iops" not in found


@pytest.mark.parametrize("version", ["3.41", "3.42"])
def test_fio_3_4x_output_is_read_and_each_servers_global_options_are_its_own(version):
    """fio 3.4x's JSON reads as 3.33's (new keys beside, none changed); with a client driving two
    servers, fio 3.39 and later list each server's global options apart (an array), where one
    server's are still one table: each host's job takes its own server's."""
    for kind, like in (("", PLAIN[0]), ("-jsonplus", JSONPLUS[0])):
        text = (FIO34 / f"fio-{version}{kind}.json").read_text()
        output = parse_output(text, "t")
        assert output.fio_version == f"fio-{version}" and not output.jobs[0].buffered
        assert (
            values(output.jobs[0].metrics) == values(parse_metrics(text))
            and values(output.jobs[0].metrics).keys() == values(parse_metrics(like.read_text())).keys()
        ), kind
    one = parse_output((FIO34 / f"fio-{version}-client-server.json").read_text(), "t")
    assert [(j.target, j.options["bs"], j.options["ioengine"], j.buffered) for j in one.jobs] == [
        ("t@localhost", "4k", "libaio", False)
    ]
    text = (FIO34 / f"fio-{version}-two-servers.json").read_text()
    assert text.startswith("<") and isinstance(load_json(text)["global options"], list), (
        "fio's client lines first, then the options per server"
    )
    document = load_json(text)
    output = parse_output(text, "t")
    assert [(j.target, j.options["bs"], j.options["ioengine"], j.buffered) for j in output.jobs] == [
        ("t@127.0.0.1", "8k", "libaio", False),
        ("t@localhost", "4k", "libaio", False),
    ]
    for job in output.jobs:
        assert values(job.metrics) == values(parse_metrics(only(document, hostname=job.host, jobname="randread"))), (
            "its own, not fio's \"All clients\" on the last host's name"
        )
    study = imported_study("s", [], [(FoundFile("f", text, datetime(2025, 1, 1), "t"), output)], [])
    assert [(r.target, r.workload) for r in study.runs] == [
        ("t@127.0.0.1", "randread bs=8k"),
        ("t@localhost", "randread bs=4k"),
    ]


def test_a_client_servers_runs_begin_at_its_timestamp_or_at_their_job_start():
    """fio writes its timestamp as it ends, a fio client as it starts the servers (before their
    jobs): a client/server run begins there — from fio 3.36 on, at its job's own job_start — and
    ends its runtime later; a run of fio's own output still ends at fio's timestamp."""
    paths = [IMPORT / "client-server.json", FIO34 / "fio-3.42-two-servers.json", FIO34 / "fio-3.42.json"]
    files, _ = read_files(paths)
    runs = imported_study("s", [], parse_files(files, "t")[0], []).runs
    documents = [load_json(p.read_text()) for p in paths]
    utc = lambda seconds: datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)  # noqa: E731

    def entry(document: dict, host: str | None = None) -> dict:
        return next(
            e
            for e in document.get("jobs") or document["client_stats"]
            if e["jobname"] == "randread" and host in (None, e.get("hostname"))
        )

    old, *two, local = runs
    first = entry(documents[0])
    assert (old.started_at, old.finished_at, old.source["finished_at_from"]) == (
        utc(documents[0]["timestamp"]),
        utc(documents[0]["timestamp"] + first["read"]["runtime"] / 1000),
        "fio client's start",
    )
    for run in two:
        began = entry(documents[1], run.source["host"])["job_start"] / 1000
        assert (run.started_at, run.source["finished_at_from"]) == (utc(began), "fio job_start") and began > documents[
            1
        ]["timestamp"], run.source
        assert run.finished_at == run.started_at + timedelta(
            seconds=entry(documents[1], run.source["host"])["read"]["runtime"] / 1000
        )
    assert (local.finished_at, local.source["finished_at_from"]) == (
        utc(documents[2]["timestamp_ms"] / 1000),
        "fio",
    ) and local.started_at < local.finished_at


def test_the_import_docs_name_every_fio_version_of_the_fixtures():
    text = " ".join((Path(__file__).parent.parent / "docs" / "import.md").read_text().split())
    listed = re.search(r"tested on the output of fio ([0-9., and]+)", text)
    tested = {load_json(p.read_text())["fio version"].removeprefix("fio-") for p in IMPORT.rglob("*.json")}
    assert listed and set(re.findall(r"[0-9]+(?:\.[0-9]+)+", listed[1])) == tested, (listed, tested)


def test_fio_2_bins_by_bucket_index_become_their_values():
    read = json.loads((IMPORT / "fio-2.18-jsonplus.json").read_text())["jobs"][0]["read"]
    assert "FIO_IO_U_PLAT_BITS" in read["clat"]["bins"], "fio 2.18 keyed its bins by bucket index"
    bins = in_current_units(read)["clat_ns"]["bins"]
    assert sum(bins.values()) == read["total_ios"] and not any(key.startswith("FIO_") for key in bins)
    assert (
        read["clat"]["min"] * 1000 <= min(map(int, bins)) and max(map(int, bins)) <= read["clat"]["max"] * 1000 * 1.02
    ), "bucket values, in ns, within what fio saw"


def test_an_imported_runs_latency_bins_are_of_its_own_jobs_in_current_units():
    # a report draws an imported run's distribution from the file it keeps whole: the run's jobs'
    # bins alone, from any fio version and from client/server output, as its metrics were read
    document = json.loads((IMPORT / "several-jobs.json").read_text())
    text = json.dumps(document)
    for name, direction in (("seq-read", "read"), ("rand-write", "write")):
        bins = latency_bins(text, job=name)
        assert bins == latency_bins(only(document, jobname=name)) and {d for d, _ in bins} == {direction}, name
    assert (
        latency_bins(text).keys()
        == latency_bins(text, job="seq-read").keys() | latency_bins(text, job="rand-write").keys()
    )
    # client/server json+ (the fixture is plain json, without bins): two hosts and fio's sum of them
    first, second = (json.loads(p.read_text())["jobs"][0] for p in JSONPLUS[:2])
    hosts = [
        {**first, "hostname": "a"},
        {**second, "hostname": "b"},
        {**first, "hostname": "a", "jobname": "All clients"},
    ]
    client_server = json.dumps({"fio version": "fio-3.33", "client_stats": hosts})
    for host, path in (("a", JSONPLUS[0]), ("b", JSONPLUS[1])):
        assert latency_bins(client_server, job="randread", host=host) == latency_bins(path.read_text()), host
    assert (
        sum(latency_bins(client_server)[("read", "clat")].values())
        == first["read"]["total_ios"] + second["read"]["total_ios"]
    ), "each host's, never fio's sum"
    for name in FIO2[1:]:  # json+
        read = json.loads((IMPORT / name).read_text())["jobs"][0]["read"]
        assert latency_bins((IMPORT / name).read_text()) == {
            ("read", "clat"): in_current_units(read)["clat_ns"]["bins"]
        }, name


def test_3x_output_before_sample_counts_is_weighted_by_its_ios():
    # fio before 3.20 wrote no "N", before 3.2 no "bw_bytes": the same run without them reads the same
    document = json.loads(JSONPLUS[0].read_text())
    read = document["jobs"][0]["read"]
    older = {k: v for k, v in read.items() if k != "bw_bytes"}
    older |= {
        f"{kind}_ns": {k: v for k, v in read[f"{kind}_ns"].items() if k != "N"} for kind in ("clat", "lat", "slat")
    }
    found, expected = (
        values(job_metrics([{**document["jobs"][0], "read": older}])),
        values(job_metrics(document["jobs"])),
    )
    assert found.keys() == expected.keys()
    assert (
        found["read_mb_s"] == pytest.approx(expected["read_mb_s"], rel=1e-3)
        and found["read_clat_mean_us"] == expected["read_clat_mean_us"]
    )


def test_text_before_and_after_the_json_is_tolerated():
    text = (IMPORT / "notice-before-json.json").read_text()
    assert text.startswith("note: both iodepth >= 1"), "fio's own note precedes its JSON"
    wrapped = "fio: {odd} error line with braces\n{ not json either\n" + text + "fio: file hash not empty on exit\n"
    assert values(parse_output(wrapped, "t").jobs[0].metrics) == values(parse_metrics(text))


def test_a_job_fio_reported_an_error_for_is_a_failed_run():
    text = (IMPORT / "job-error.json").read_text()
    assert text.startswith("fio: pid=") and "err=22" in text.splitlines()[0], "fio's error line precedes its JSON"
    document = json.loads(text[text.index("\n{") :])
    ran, failed = parse_output(text, "t").jobs
    assert (ran.name, ran.error) == ("ok-read", None) and values(ran.metrics) == values(
        parse_metrics(only(document, jobname="ok-read"))
    )
    assert (failed.name, failed.error, failed.metrics) == ("unaligned", "fio reported error 22 for job 'unaligned'", [])


def test_an_import_with_a_failed_job_lists_it_and_exits_1(tmp_path):
    result = _import(tmp_path / "fslab.db", str(IMPORT / "job-error.json"), "--target", "ext4")
    assert result.returncode == 1 and not [line for line in result.stderr.splitlines() if line.startswith("skipped")], (
        result.stderr
    )
    assert "ext4 · unaligned · run 1: fio reported error 22 for job 'unaligned'" in result.stdout
    runs = ResultsDB(str(tmp_path / "fslab.db")).runs(1)
    assert [(r["workload"], r["status"]) for r in runs] == [("ok-read", "ok"), ("unaligned", "failed")]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("just some notes\n", "no JSON in it"),
        ('{"name": "not fio", "jobs": 3}\n', "no 'jobs' or 'client_stats'"),
        ('{"fio version": "fio-3.33", "jobs": []}\n', "lists no jobs"),
        ('{"fio version": "fio-3.33", "jobs": [{"jobname": "x"}]}\n', "'error' missing where fio writes it"),
        (
            '{"fio version": "fio-3.33", "jobs": [{"jobname": "../x", "error": 0}]}\n',
            "job name '../x' is not a plain name",
        ),
        (
            '{"fio version": "fio-3.33", "jobs": [{"jobname": "x", "error": 0, "read": NaN}]}\n',
            "malformed JSON: NaN is no number fio writes",
        ),
        ('{"a": ' * 100000 + "\n", "malformed JSON: nested too deeply"),
        (
            PLAIN[0].read_text().replace('"timestamp_ms" : ', '"timestamp_ms" : 1e300, "was" : '),
            "fio's timestamp 1e\\+297 is no time",
        ),
        ('{"jobs": [{"jobname": "x", "error": "bad", "read": {}, "write": {}}]}', "'error' is not a number"),
        (
            '{"client_stats": [{"jobname": "x", "hostname": "h", "port": 1}], "global options": [{"port": 1}]}',
            "'hostname' missing where fio writes it",
        ),
    ],
)
def test_what_is_not_fio_output_says_why(text, why):
    with pytest.raises(NotFioOutput, match=why.replace("(", r"\(").replace(")", r"\)")):
        parse_output(text, "t")


@pytest.mark.parametrize("before", ["", "{stray: an error line with a brace}\n"])
def test_a_truncated_file_is_malformed(before):
    # cut inside the last of several jobs: the jobs before it are whole objects, never taken for fio's output
    text = (IMPORT / "several-jobs.json").read_text()
    cut = text[: text.rindex('"jobname" : "rand-write"') + 100]
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(cut)
    with pytest.raises(NotFioOutput) as found:
        parse_output(before + cut, "t")
    assert str(found.value) == f"malformed JSON: {expected.value}".replace(
        f"(char {expected.value.pos})", f"(char {expected.value.pos + len(before)})"
    ).replace(f"line {expected.value.lineno} ", f"line {expected.value.lineno + before.count(chr(10))} ")


def test_files_of_one_cell_are_its_repetitions(tmp_path):
    for target in ("ext4", "xfs"):
        (tmp_path / target).mkdir()
    for path in PLAIN:
        shutil.copy(path, tmp_path / "ext4" / path.name)
    shutil.copy(JSONPLUS[0], tmp_path / "xfs" / "run.json")
    files, skipped = read_files([tmp_path])
    parsed, not_fio = parse_files(files)
    study = imported_study("s", [str(tmp_path)], parsed, skipped + not_fio)
    assert not skipped and not not_fio
    assert [(r.target, r.workload, r.repetition) for r in study.runs] == [
        ("ext4", "randread", 1),
        ("ext4", "randread", 2),
        ("ext4", "randread", 3),
        ("xfs", "randread", 1),
    ]
    assert [t.name for t in study.targets] == ["ext4", "xfs"] and study.repetitions == 3
    assert [r.source["file"] for r in study.runs] == [str(tmp_path / "ext4" / p.name) for p in PLAIN] + [
        str(tmp_path / "xfs" / "run.json")
    ]
    assert all(r.outputs[0].text == p.read_text() for r, p in zip(study.runs, PLAIN)), (
        "fio's JSON kept whole as the run's raw output"
    )
    assert [t.name for t in imported_study("s", [], parse_files(files, "zfs")[0], []).targets] == ["zfs"], (
        "--target names every run's target"
    )


def test_a_symlink_out_of_a_directory_is_not_followed(tmp_path):
    outside = tmp_path / "outside.json"
    shutil.copy(PLAIN[0], outside)
    walked = tmp_path / "results"
    walked.mkdir()
    shutil.copy(PLAIN[1], walked / "a.json")
    (walked / "out.json").symlink_to(outside)
    (walked / "same.json").symlink_to(walked / "a.json")
    os.mkfifo(walked / "fifo")
    files, skipped = read_files([walked])
    assert [f.path for f in files] == [str(walked / "a.json")], "the file inside, once"
    assert [(s.path, s.why) for s in skipped] == [
        (str(walked / "fifo"), "not a regular file"),
        (str(walked / "out.json"), f"a symbolic link out of {walked}: not followed"),
    ]
    named, _ = read_files([walked / "out.json"])
    assert [f.text for f in named] == [outside.read_text()], (
        "a file named on the command line is read through its symlink"
    )


def test_links_in_a_loop_or_to_a_directory_outside_are_not_followed(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(PLAIN[0], outside / "run.json")
    walked = tmp_path / "results"
    (walked / "inner").mkdir(parents=True)
    shutil.copy(PLAIN[1], walked / "inner" / "a.json")
    (walked / "loop").symlink_to("loop")
    (walked / "ping.json").symlink_to("pong.json")
    (walked / "pong.json").symlink_to("ping.json")
    (walked / "out").symlink_to(outside, target_is_directory=True)
    (walked / "again").symlink_to("inner", target_is_directory=True)
    files, skipped = read_files([walked])
    assert [f.path for f in files] == [str(walked / "inner" / "a.json")], "the file inside, where it is"
    assert [(s.path, s.why) for s in skipped] == [
        (str(walked / "out"), f"a symbolic link out of {walked}: not followed")
    ]
    files, skipped = read_files([walked / "loop"])
    assert not files and [s.why for s in skipped] == ["cannot be read: Too many levels of symbolic links"], (
        "a loop named: said why"
    )


@pytest.mark.root
def test_only_regular_files_of_readable_size_are_opened(tmp_path, monkeypatch):
    walked = tmp_path / "results"
    walked.mkdir()
    shutil.copy(PLAIN[0], walked / "a.json")
    os.mknod(walked / "device", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    os.mkfifo(walked / "fifo")
    with open(walked / "huge.json", "wb") as huge:
        huge.truncate(64 * 2**20 + 1)  # sparse: nothing written
    opened = []
    real_open = os.open
    monkeypatch.setattr(
        os, "open", lambda path, *args, **kwargs: opened.append(Path(path).name) or real_open(path, *args, **kwargs)
    )
    files, skipped = read_files([walked, walked / "device"])
    assert [f.path for f in files] == [str(walked / "a.json")]
    assert [(Path(s.path).name, s.why) for s in skipped] == [
        ("device", "not a regular file"),
        ("fifo", "not a regular file"),
        ("huge.json", f"{64 * 2**20 + 1} bytes, larger than fio's JSON of a run (64 MiB at most here)"),
        ("device", "not a regular file"),
    ]
    assert "device" not in opened and "fifo" not in opened, (
        "a device or FIFO is never opened: opening one may act on it"
    )


def _import(db, *args):
    return fslab_in_process("import", "--db", str(db), *args)


def test_import_skips_what_is_not_fio_output_and_imports_the_rest(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    for path in PLAIN:
        shutil.copy(path, results / path.name)
    (results / "notes.txt").write_text("fio results of last week\n")
    (results / "other.json").write_text('{"name": "not fio"}\n')
    truncated = PLAIN[0].read_text()[:1000]
    (results / "truncated.json").write_text(truncated)
    with pytest.raises(json.JSONDecodeError) as cut:
        json.loads(truncated)
    (results / "binary.dat").write_bytes(b"\x00\xff\xfe" * 10)
    db = tmp_path / "fslab.db"
    result = _import(db, str(results), "--study", "old", "--target", "ext4")
    assert result.returncode == 1, result.stdout + result.stderr
    skipped = [line for line in result.stderr.splitlines() if line.startswith("skipped ")]
    assert skipped == [
        f"skipped {results / 'binary.dat'}: not UTF-8 text: not fio's JSON output",
        f"skipped {results / 'notes.txt'}: no JSON in it: not fio's JSON output",
        f"skipped {results / 'other.json'}: no 'jobs' or 'client_stats': not fio's JSON output",
        f"skipped {results / 'truncated.json'}: malformed JSON: {cut.value}",
    ], result.stderr
    assert "Traceback" not in result.stderr
    stored = ResultsDB(str(db))
    study_run = stored.study_run("old")
    assert study_run["settings"]["imported"]["files"] == [str(results / p.name) for p in PLAIN]
    assert [s["file"] for s in study_run["settings"]["imported"]["skipped"]] == [
        str(results / n) for n in ("binary.dat", "notes.txt", "other.json", "truncated.json")
    ]
    runs = stored.runs(study_run["id"])
    assert [(r["target"], r["workload"], r["repetition"], r["status"], r["buffered"]) for r in runs] == [
        ("ext4", "randread", n, "ok", False) for n in (1, 2, 3)
    ]
    assert [r["source"] for r in runs] == [
        {"file": str(results / p.name), "job": "randread", "fio_version": "fio-3.33", "finished_at_from": "fio"}
        for p in PLAIN
    ]
    for run, path in zip(runs, PLAIN):
        assert [(o.tool, o.text) for o in stored.outputs(run["id"])] == [("fio", path.read_text())]
    stored_metrics = [
        {m.metric: m.value for m in stored.run_metrics(study_run["id"]) if m.repetition == n} for n in (1, 2, 3)
    ]
    assert stored_metrics == [values(parse_metrics(p.read_text())) for p in PLAIN], "stored as fio.py parses each file"
    assert "imported from 3 file(s)" in " ".join(result.stdout.split())


def test_nothing_to_import_stores_nothing(tmp_path):
    (tmp_path / "notes.txt").write_text("no fio here\n")
    db = tmp_path / "fslab.db"
    result = _import(db, str(tmp_path / "notes.txt"), str(tmp_path / "missing.json"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"skipped {tmp_path / 'missing.json'}: cannot be read: No such file or directory" in result.stderr
    assert "nothing imported" in result.stderr and "Traceback" not in result.stderr
    assert not db.exists()


def test_names_are_checked(tmp_path):
    result = _import(tmp_path / "fslab.db", str(PLAIN[0]), "--target", "../etc")
    assert result.returncode == 2 and "--target: '../etc' is not a plain name" in result.stderr, result.stderr


def test_an_imported_study_run_summarises_and_compares(tmp_path):
    db = tmp_path / "fslab.db"
    first = _import(db, *map(str, PLAIN), "--study", "old-results", "--target", "disk")
    second = _import(db, *map(str, JSONPLUS), "--study", "old-results", "--target", "disk")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    summary = fslab_in_process("summary", "1", "--db", str(db))
    assert summary.returncode == 0, summary.stderr
    text = " ".join(summary.stdout.split())
    assert "Study old-results, study run 1, imported from 3 file(s) of fio's JSON (fio-3.33)" in text
    assert "randread (direct I/O)" in text and re.search(r"target effect ─+ disk –", text)
    markdown = (tmp_path / "reports" / "old-results-1" / "summary.md").read_text()
    assert "| disk | – | – | – | – | – | – | fio-3.33 |" in markdown, (
        "the fio version that made the imported files, in the report files (the console leaves tool versions out)"
    )
    history = [
        line for line in fslab_in_process("history", "--db", str(db)).stdout.splitlines() if "old-results" in line
    ]
    assert len(history) == 2 and all("imported" in line for line in history)

    compared = fslab_in_process("compare", "1", "2", "--db", str(db))
    assert compared.returncode in (0, 1) and "Traceback" not in compared.stderr, compared.stderr
    iops = [[json.loads(p.read_text())["jobs"][0]["read"]["iops"] for p in paths] for paths in (PLAIN, JSONPLUS)]
    ratio = math.exp(sum(map(math.log, iops[1])) / 3 - sum(map(math.log, iops[0])) / 3)
    row = next(line for line in compared.stdout.splitlines() if "read IOPS" in line)
    assert row.split()[:2] == ["randread", "disk"] and f"{ratio:.3f}" in row, row


def test_fslabs_own_runs_imported_again_are_the_same_runs(tmp_path):
    # schema-v7.db: written by fslab with schema version 7 from a real study run (test_results.py);
    # its ext4 runs' raw fio output, imported into that database, is the cell fslab measured
    db = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v7.db", db)
    exported = tmp_path / "ext4"
    exported.mkdir()
    with sqlite3.connect(db) as conn:
        outputs = conn.execute(
            "SELECT o.output FROM runs r JOIN run_outputs o ON o.run_id = r.id WHERE r.target = 'ext4' ORDER BY r.id"
        ).fetchall()
    for n, (text,) in enumerate(outputs, 1):
        (exported / f"run-{n}.json").write_text(text)
    result = _import(db, str(exported), "--study", "v7")
    assert result.returncode == 0, result.stderr
    stored = ResultsDB(str(db))
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs WHERE source IS NULL").fetchone() == (4,), (
            "the runs fslab made, kept"
        )
    measured, imported = (
        stored.sample_groups(1).values[("rand_read", "ext4")],
        stored.sample_groups(2).values[("rand_read", "ext4")],
    )
    assert {name: v for name, v in imported.items() if name in measured} == {
        name: v for name, v in measured.items() if name in FIO_METRICS
    }, "fio's every metric as fslab stored it when it ran (its monitors' are not in fio's output)"
    assert imported.keys() - measured.keys() == {"ios"}, "and the I/O count, which fio's parser reads since"
    compared = fslab_in_process("compare", "1", "2", "--db", str(db))
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert (
        "Study run 2 imported from fio's JSON (fslab import): the machine that measured it is not known."
        in compared.stdout
    )
    rows = [line.split() for line in compared.stdout.splitlines() if line.split()[:2] == ["rand_read", "ext4"]]
    assert rows and all(
        row[row.index("IOPS") + 1 if "IOPS" in row else row.index("latency") + 1] == "1.000" for row in rows
    ), compared.stdout


def test_the_examples_in_the_import_docs_run_as_written(tmp_path, monkeypatch):
    # the files docs/import.md names, made of the fixtures: 2019 and 2024 hold the same cells
    for year, ext4, xfs in (("2019", PLAIN, JSONPLUS), ("2024", JSONPLUS, PLAIN)):
        for target, paths in (("ext4", ext4), ("xfs", xfs)):
            (tmp_path / year / target).mkdir(parents=True)
            for path in paths:
                shutil.copy(path, tmp_path / year / target / path.name)
    shutil.copy(IMPORT / "client-server.json", tmp_path / "nas.json")
    # bench-fio's trees, two runs of it (the fixture's, its targets a.img and b.img named md0 and md1)
    for run, tree in (("run1", "raid"), ("run2", "raid-again")):
        for fixture, device in (("a.img", "md0"), ("b.img", "md1")):
            if (IMPORT / "bench-fio" / run / fixture).is_dir():
                shutil.copytree(IMPORT / "bench-fio" / run / fixture, tmp_path / tree / device)
    shutil.copytree(
        IMPORT / "hist" / "ext4", tmp_path / "pbench" / "sample1"
    )  # fio's JSON with its histogram logs beside it
    text = (Path(__file__).parent.parent / "docs" / "import.md").read_text()
    commands = [
        line.split("#", 1)[0].split()
        for block in text.split("```sh\n")[1:]
        for line in block.split("```", 1)[0].splitlines()
        if line.strip()
    ]
    assert [c[:2] for c in commands] == [
        ["fslab", "import"],
        ["fslab", "import"],
        ["fslab", "compare"],
        ["fslab", "summary"],
        ["fslab", "import"],
        ["fslab", "history"],
        ["fslab", "import"],
        ["fslab", "summary"],
        ["fslab", "import"],
    ]
    monkeypatch.chdir(tmp_path)
    said = {}
    for command in commands:
        result = fslab_in_process(*command[1:])
        assert result.returncode in ((0, 1) if command[1] == "compare" else (0,)), (
            command,
            result.stdout,
            result.stderr,
        )
        assert "Traceback" not in result.stderr
        said[tuple(command)] = result.stdout
    stored = ResultsDB(str(tmp_path / "fslab.db"))
    assert {r["target"] for r in stored.runs(3)} == {"nas@localhost"}
    bench_fio = stored.runs(4)
    assert {r["target"] for r in bench_fio} == {"md0", "md1"} and len({r["workload"] for r in bench_fio}) == 16
    shown = [
        line
        for block in text.split("```text\n")[1:]
        for line in block.split("```", 1)[0].splitlines()
        if line.startswith(("34 file(s)", "  fio job 'FIOJOB'", "  FIOJOB", "passed over"))
    ]
    printed = said[("fslab", "import", "raid/", "raid-again/", "--study", "raid")].splitlines()
    assert len(shown) == 5 and all(line in printed for line in shown), "the docs show what the import says"
    assert {r["target"] for r in stored.runs(5)} == {"ext4"} and {
        tuple(phases) for phases in stored.output_phases(5, HIST_TOOL).values()
    } == {("",)}, "the histogram logs, kept with the run"


def test_a_report_draws_an_imported_runs_latency_of_its_own_jobs_alone(tmp_path):
    """A file of several jobs is stored whole with each of its runs: the page's histogram of the
    seq-read cell holds its reads alone, not rand-write's writes from the same file."""
    from fslab.report.details import run_details
    from fslab.report.summary import summarize_study_run

    db = tmp_path / "fslab.db"
    assert _import(db, str(IMPORT / "several-jobs.json"), "--target", "disk").returncode == 0
    results = ResultsDB(str(db))
    details = run_details(results, summarize_study_run(results, results.study_run()["id"]))
    drawn = {(h.workload, h.direction) for h in details.histograms}
    assert drawn == {("seq-read", "read"), ("rand-write", "write")}, drawn
    assert not details.unreadable


def test_a_report_draws_the_latency_of_a_job_split_by_its_options(tmp_path):
    """A workload named by the options its files differ in (`randread iodepth=16`) is still
    fio's job `randread` in the file each run keeps: the page reads that job's bins."""
    from fslab.fio.report import LATENCY_NAMES
    from fslab.report.details import run_details
    from fslab.report.summary import summarize_study_run

    deeper = json.loads(JSONPLUS[1].read_text())
    deeper["jobs"][0]["job options"]["iodepth"] = "16"
    (tmp_path / "deeper.json").write_text(json.dumps(deeper))
    db = tmp_path / "fslab.db"
    assert _import(db, str(JSONPLUS[0]), str(tmp_path / "deeper.json"), "--target", "disk").returncode == 0
    results = ResultsDB(str(db))
    details = run_details(results, summarize_study_run(results, results.study_run()["id"]))
    drawn = {h.workload: h for h in details.histograms if h.direction == "read"}
    assert drawn.keys() == {"randread iodepth=8", "randread iodepth=16"} and not details.unreadable
    deepest = drawn["randread iodepth=16"]
    [latency] = [kind for kind, words in LATENCY_NAMES.items() if words == deepest.latency]
    assert deepest.bins == {int(ns): n for ns, n in latency_bins(json.dumps(deeper))[("read", latency)].items()}, (
        "its own file's bins"
    )


@pytest.mark.parametrize(
    ("global_options", "job_options", "buffered"),
    [
        ({}, {"direct": "1"}, False),
        ({"direct": "1"}, {"buffered": "1"}, True),
        ({"buffered": "1"}, {"direct": "1"}, False),
        ({}, {}, True),
    ],
)
def test_an_imported_jobs_buffering_is_read_as_fio_applies_its_options(global_options, job_options, buffered):
    """fio applies the later of direct and buffered (the job's after the global ones): the same
    rule, in one place (guard.fio_jobs.direct_after), as for fslab's own jobs."""
    document = json.loads((IMPORT / "several-jobs.json").read_text())
    document["global options"] = global_options
    for job in document["jobs"]:
        job["job options"] = {
            k: v for k, v in job["job options"].items() if k not in ("direct", "buffered")
        } | job_options
    assert {job.buffered for job in parse_output(json.dumps(document), "disk").jobs} == {buffered}


def test_a_hostile_name_is_reported_short_and_without_its_control_characters(tmp_path):
    """A job name of a megabyte with a terminal escape in it, and a file name with one: the
    file is skipped, said in one short line, and no escape reaches the terminal."""
    document = json.loads((IMPORT / "several-jobs.json").read_text())
    document["jobs"][0]["jobname"] = "\x1b]0;owned\x07" + "x" * 2**20
    hostile = tmp_path / "in" / "run\x1b[2J.json"
    hostile.parent.mkdir()
    hostile.write_text(json.dumps(document))
    result = _import(tmp_path / "fslab.db", str(hostile.parent))
    assert result.returncode == 2 and "\x1b" not in result.stderr and "\\x1b" in result.stderr
    skipped = [line for line in result.stderr.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 1 and "is not a plain name" in skipped[0] and len(skipped[0]) < 400, skipped


# fio-plot's published bench-fio output (tests/fixtures/import/fio-plot, see its README): fio 3.1,
# one file per rw × iodepth × numjobs, every job named random-read, on two servers
FIO_PLOT = IMPORT / "fio-plot"
SERVERS = ("HPDL380G8-H420i-Crucial-MX200", "HPDL380G8-H420i-Crucial-MX200x3_RAID0")


def _what_it_did(path: Path) -> tuple[str, str, str]:
    options = json.loads(path.read_text())["jobs"][0]["job options"]
    return options["rw"], options["iodepth"], options["numjobs"]


def test_files_whose_job_options_differ_are_never_pooled():
    files, skipped = read_files([FIO_PLOT / s for s in SERVERS])
    parsed, not_fio = parse_files(files)
    study = imported_study("s", [], parsed, skipped + not_fio)
    assert not skipped and not not_fio and len(study.runs) == 12
    assert {json.loads(f.text)["jobs"][0]["jobname"] for f in files} == {"random-read"}, "one job name in every file"
    for workload in {r.workload for r in study.runs}:
        runs = [r for r in study.runs if r.workload == workload]
        assert len({_what_it_did(Path(r.source["file"])) for r in runs}) == 1, (
            f"{workload}: files of different options pooled"
        )
        assert sorted(r.target for r in runs) == list(SERVERS), f"{workload}: one run of each server"
    assert study.repetitions == 1
    names = {_what_it_did(Path(r.source["file"])): r.workload for r in study.runs}
    assert names[("randread", "16", "32")] == "random-read rw=randread iodepth=16 numjobs=32", (
        "named by the options that differ, as fio lists them"
    )
    assert names[("randwrite", "1", "1")] == "random-read rw=randwrite iodepth=1 numjobs=1"
    assert len(set(names.values())) == 6 and all(r.source["job"] == "random-read" for r in study.runs)


def test_files_of_one_job_run_again_are_its_repetitions():
    # the same bench-fio job run twice on one disk (RUN1, RUN2): options equal but for nothing
    runs = sorted((FIO_PLOT / "WD740GD").glob("*/randread-1-1.json"))
    assert [p.parent.name for p in runs] == ["RUN1", "RUN2"]
    assert (
        json.loads(runs[0].read_text())["jobs"][0]["job options"]
        == json.loads(runs[1].read_text())["jobs"][0]["job options"]
    )
    files, _ = read_files(runs)
    study = imported_study("s", [], parse_files(files, "wd740gd")[0], [])
    assert [(r.target, r.workload, r.repetition) for r in study.runs] == [
        ("wd740gd", "random-read", 1),
        ("wd740gd", "random-read", 2),
    ]
    # and with the servers' files of the same options: the job name alone names none of them
    files, _ = read_files([*runs, FIO_PLOT / SERVERS[0]])
    study = imported_study("s", [], parse_files(files)[0], [])
    same = [r for r in study.runs if r.workload == "random-read rw=randread iodepth=1 numjobs=1"]
    assert [(r.target, r.repetition) for r in same] == [("RUN1", 1), ("RUN2", 1), (SERVERS[0], 1)]


def test_where_a_job_ran_and_what_it_logged_do_not_split_a_workload():
    """The two servers' files differ in filename (/dev/sdb, /dev/md0) and in nothing else that
    makes the workload; log names and reporting options are no difference either; any other
    option, or its absence, is."""
    text = (FIO_PLOT / SERVERS[0] / "randread-4-8.json").read_text()

    def variant(**changes) -> FioOutput:
        document = json.loads(text)
        options = document["jobs"][0]["job options"]
        for key, value in changes.items():
            if value is None:
                del options[key]
            else:
                options[key] = value
        return parse_output(json.dumps(document), "t")

    def workloads(*outputs) -> list[str]:
        found = [(FoundFile(f"f{n}", "", datetime(2024, 1, 1), "t"), output) for n, output in enumerate(outputs)]
        return [r.workload for r in imported_study("s", [], found, []).runs]

    same = variant(
        filename="/dev/md0",
        write_bw_log="other",
        log_avg_msec="1000",
        lat_percentiles="1",
        group_reporting=None,
        directory="/mnt",
    )
    assert workloads(variant(), same) == ["random-read", "random-read"]
    assert workloads(variant(), variant(bs="8k")) == ["random-read bs=4k", "random-read bs=8k"]
    assert workloads(variant(), variant(direct=None)) == ["random-read direct=1", "random-read direct=(unset)"]
    hostile = variant(bs="4k|\x1b[2J" + "x" * 100)
    odd = workloads(variant(), hostile)[1]
    assert re.fullmatch(r"random-read bs=#[0-9a-f]{8}", odd), "a value that is not plain is shown by its hash"


def test_the_import_says_how_it_grouped_the_files(tmp_path):
    result = _import(tmp_path / "fslab.db", *(str(FIO_PLOT / s) for s in SERVERS), "--study", "fio-plot")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(
        "12 file(s) → 6 workload(s); runs of one workload agree on "
        "every fio job option but where they ran and what they logged"
    )
    assert "  fio job 'random-read' ran with different options: 6 workloads, named by the options that differ" in lines
    assert f"  random-read rw=randread iodepth=16 numjobs=32: {SERVERS[0]} 1 run, {SERVERS[1]} 1 run" in lines
    assert sum(line.startswith("  random-read rw=") for line in lines) == 6
    assert "slower than the rest" not in result.stdout, "no cell pools a queue depth of 1 with one of 16 × 32 jobs"


def test_the_two_servers_are_compared_like_with_like(tmp_path):
    from fslab.report.summary import summarize_study_run

    db = tmp_path / "fslab.db"
    assert _import(db, *(str(FIO_PLOT / s) for s in SERVERS), "--study", "fio-plot").returncode == 0
    results = ResultsDB(str(db))
    summary = summarize_study_run(results, results.study_run()["id"])
    ratios = {
        (r.workload, r.metric): r.comparison.ratio for r in summary.analysis.rows if (r.baseline, r.target) == SERVERS
    }
    expected = {}
    for path in sorted((FIO_PLOT / SERVERS[0]).glob("*.json")):
        rw, iodepth, numjobs = _what_it_did(path)
        direction = "read" if rw == "randread" else "write"
        iops = [json.loads((FIO_PLOT / s / path.name).read_text())["jobs"][0][direction]["iops"] for s in SERVERS]
        expected[(f"random-read rw={rw} iodepth={iodepth} numjobs={numjobs}", f"{direction}_iops")] = iops[1] / iops[0]
    assert len(expected) == 6 and {k: ratios[k] for k in expected} == pytest.approx(expected), (
        "each server's file against the other's of the same options"
    )
    from fslab.report.sections import header_lines, method_line

    assert "One run per cell, one per file." in "\n".join(header_lines(summary)) and "Up to 1 runs" not in "\n".join(
        header_lines(summary)
    )
    assert summary.analysis.family_size == 0 and "one family of 0" not in method_line(summary)
    assert "no pair of this study run could be compared" in method_line(summary)
