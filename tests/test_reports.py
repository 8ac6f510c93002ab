"""The report files and exports of a stored study run, read back and checked against the database
itself (sqlite3, not fslab's queries), and the console summary within 120 columns. The study run is
stored as `fslab run` stores one (tests/synthetic.py), with nothing run: what is tested here is what
reads it."""

import csv
import io
import json
import os
import re
import shlex
import sqlite3
import statistics
import subprocess
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from scipy import stats as sps

import fslab
from conftest import fslab_in_process
from fslab.core.errors import Refused
from fslab.model.records import RunFailure
from fslab.report.console import CONSOLE_WIDTH, print_summary
from fslab.report.files import write_reports
from fslab.report.formats import report_files, runs as runs_format
from fslab.report.summary import StudySummary, summarize_study_run
from fslab.results import ResultsDB
from fslab.statistics.stats import summarize
from synthetic import stored_study

STUDY = """\
[study]
name = "tables"
repetitions = 3
warmup = 1
workloads = ["rand_read", "seq_write"]
image_size = "256MiB"

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
filesystem = ["ext4", "raw"]

[[target]]
name = "bad"
filesystem = "ext4"
mount_options = "journal_async_commit"  # allowed, but the kernel refuses it under data=ordered: every run fails
"""
DOCS = Path(__file__).parent.parent / "docs" / "reports.md"


# What the kernel answered a real run of "bad" (mount refuses journal_async_commit under data=ordered).
REFUSED = RunFailure(
    phase="provision",
    traceback="fslab.core.system.CommandError: mount -o journal_async_commit "
    "/dev/loop0 /var/tmp/fslab/mnt/bad: exit status 32",
    argv=["mount", "-o", "journal_async_commit", "/dev/loop0", "/var/tmp/fslab/mnt/bad"],
    exit_status=32,
    stderr_tail="mount: /var/tmp/fslab/mnt/bad: wrong fs type, bad option, bad superblock "
    "on /dev/loop0, missing codepage or helper program, or other error.",
)


@pytest.fixture(scope="module")
def study_run(tmp_path_factory):
    """ext4 and raw, a random read and a sequential write, a warm-up and 3 runs each; and a target
    whose every run fails: stored, then its files written by `fslab summary`, as `fslab run` ends."""
    root = tmp_path_factory.mktemp("reports")
    db = ResultsDB(str(root / "fslab.db"))
    study_run_id = stored_study(
        root,
        STUDY,
        db,
        scale={"raw": 1.0, "ext4": 0.93},
        failing={"bad": (f"{' '.join(REFUSED.argv)}: exit status 32", REFUSED)},
    )
    result = fslab_in_process("summary", str(study_run_id), "--db", str(root / "fslab.db"))
    assert result.returncode == 0 and "8 run(s) failed" in result.stdout, result.stdout + result.stderr
    return root, db, study_run_id


def stored(root: Path, study_run_id: int) -> dict[tuple[str, str, str], list[float]]:
    """(target, workload, metric) → its values over the measured runs, read with sqlite3 alone."""
    query = """SELECT runs.target, runs.workload, metrics.name, metrics.value
               FROM runs JOIN metrics ON metrics.run_id = runs.id
               WHERE runs.study_run_id = ? AND runs.status = 'ok' AND NOT runs.warmup AND metrics.phase = ''
               ORDER BY runs.id"""
    values: dict[tuple[str, str, str], list[float]] = {}
    with sqlite3.connect(root / "fslab.db") as conn:
        for target, workload, name, value in conn.execute(query, (study_run_id,)):
            values.setdefault((target, workload, name), []).append(value)
    return values


def markdown_table(markdown: str, heading: str) -> list[dict[str, str]]:
    """The first table under a Markdown heading, as rows keyed by column."""
    section = markdown.split(f"\n{heading}\n", 1)[1]
    lines = [line for line in section.split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    columns = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(columns, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]]


def figure(text: str) -> tuple[float, float]:
    """A printed number and how far from it the value may be, given the digits printed."""
    digits = text.replace(",", "").strip()
    decimals = len(digits.partition(".")[2])
    return float(digits), 0.5 * 10**-decimals + 1e-9


def latency(text: str) -> tuple[float, float]:
    """A printed latency in µs, and how far from it the value may be."""
    number, unit = text.split(" ")
    value, tolerance = figure(number)
    scale = {"µs": 1, "ms": 1e3, "s": 1e6}[unit]
    return value * scale, tolerance * scale


def assert_shows(text: str, value: float, read=figure) -> None:
    shown, tolerance = read(text)
    assert abs(shown - value) <= tolerance, f"{text} shows {value}"


def test_the_markdown_table_iv_equals_the_database(study_run):
    root, _, study_run_id = study_run
    markdown = (root / "reports" / f"tables-{study_run_id}" / "summary.md").read_text()
    rows = markdown_table(markdown, "## fio results")
    assert list(rows[0]) == [
        "target",
        "workload",
        "dir",
        "IOPS",
        "MB/s",
        "avg latency",
        "P50",
        "P95",
        "P99",
        "n",
        "IOPS mean ± 95% CI",
        "MB/s mean ± 95% CI",
    ]
    assert [(r["target"], r["workload"], r["dir"]) for r in rows] == [
        ("ext4", "rand_read", "read"),
        ("ext4", "seq_write", "write"),
        ("raw", "rand_read", "read"),
        ("raw", "seq_write", "write"),
        ("bad", "rand_read", "–"),
        ("bad", "seq_write", "–"),
    ], "the seed's order: filesystem first, then workload"
    assert [r["n"] for r in rows[4:]] == ["0 (4 failed)"] * 2 and {r["IOPS"] for r in rows[4:]} == {"–"}, (
        "warm-up included: every run failed"
    )
    values = stored(root, study_run_id)
    for row in rows[:4]:
        cell = lambda name, row=row: values[(row["target"], row["workload"], f"{row['dir']}_{name}")]  # noqa: E731
        assert_shows(row["IOPS"], statistics.median(cell("iops")))
        assert_shows(row["MB/s"], statistics.median(cell("mb_s")))
        for column, name in (
            ("avg latency", "lat_mean_us"),
            ("P50", "lat_p50_us"),
            ("P95", "lat_p95_us"),
            ("P99", "lat_p99_us"),
        ):
            assert_shows(row[column], statistics.median(cell(name)), read=latency)
        assert row["n"] == "3" == str(len(cell("iops")))
        for column, name in (("IOPS mean ± 95% CI", "iops"), ("MB/s mean ± 95% CI", "mb_s")):
            samples = cell(name)
            mean, shown = statistics.mean(samples), row[column]
            half = sps.t.ppf(0.975, len(samples) - 1) * statistics.stdev(samples) / len(samples) ** 0.5 / mean * 100
            if half > 100:  # wider than the figure: the runs it needs are printed instead (docs/statistics.md)
                assert re.fullmatch(r"[\d,.]+ \(interval needs \d+ runs\)", shown), shown
            else:
                printed_mean, printed_half = shown.split(" ± ")
                assert_shows(printed_mean, mean)
                assert_shows(printed_half.rstrip("%"), half)
    assert "| ext4 | read | 3 |" in markdown and "| lat p99.9 |" in markdown, (
        "the tables per workload stay, every column"
    )
    assert "Compared with **ext4**:" in markdown and "| raw | read IOPS |" in markdown, "and the verdict tables"


def test_every_run_is_in_runs_csv_and_runs_json_as_stored(study_run):
    root, _, study_run_id = study_run
    folder = root / "reports" / f"tables-{study_run_id}"
    with sqlite3.connect(root / "fslab.db") as conn:
        runs = conn.execute(
            "SELECT id, target, workload, repetition, block, status FROM runs WHERE study_run_id = ?", (study_run_id,)
        ).fetchall()
        metrics = conn.execute(
            "SELECT run_id, phase, name, value, unit FROM metrics JOIN "
            "runs ON runs.id = metrics.run_id WHERE study_run_id = ?",
            (study_run_id,),
        ).fetchall()
    rows = list(csv.DictReader(io.StringIO((folder / "runs.csv").read_text())))
    assert list(rows[0]) == [
        "study_run",
        "run_id",
        "target",
        "workload",
        "repetition",
        "block",
        "warmup",
        "status",
        "phase",
        "metric",
        "value",
        "unit",
    ]
    facts = {
        int(r["run_id"]): (r["target"], r["workload"], int(r["repetition"]), int(r["block"]), r["status"]) for r in rows
    }
    assert facts == {run_id: tuple(rest) for run_id, *rest in runs} and len(runs) == 3 * 2 * (1 + 3), (
        "every run, warm-ups and failed runs too"
    )
    measured = [r for r in rows if r["status"] == "ok"]
    assert sorted(
        (int(r["run_id"]), r["phase"], r["metric"], float(r["value"]), r["unit"]) for r in measured
    ) == sorted(metrics), "every metric, exactly"
    failed = [r for r in rows if r["status"] == "failed"]
    assert (
        len(failed) == 8
        and {r["target"] for r in failed} == {"bad"}
        and {(r["phase"], r["metric"], r["value"], r["unit"]) for r in failed} == {("", "", "", "")}
    )
    assert {r["study_run"] for r in rows} == {str(study_run_id)}
    assert {r["warmup"] for r in rows if r["block"] == "1"} == {"True"} and {
        r["warmup"] for r in rows if r["block"] != "1"
    } == {"False"}, "the warm-up block first"

    document = json.loads((folder / "runs.json").read_text())
    assert document["study_run"]["id"] == study_run_id and "study_source" not in document["study_run"]
    assert {r["id"] for r in document["runs"]} == {run_id for run_id, *_ in runs}
    for run in document["runs"]:
        assert sorted((m["phase"], m["name"], m["value"], m["unit"]) for m in run["metrics"]) == sorted(
            m[1:] for m in metrics if m[0] == run["id"]
        )
        if run["status"] == "ok":
            assert run["job_file"].startswith("[global]") and run["timings"]["workload"] > 0
        else:
            assert run["failure"]["phase"] == "provision" and "journal_async_commit" in run["failure"]["argv"]


def test_a_summary_again_leaves_the_runs_files_that_hold_its_runs(study_run, tmp_path, monkeypatch):
    """runs.csv and runs.json change only with the runs: a summary asked for again (other options)
    rewrites the summary files alone; a run more, another state of the study run, another fslab,
    or a runs file missing or not fslab's, and both are written again."""
    _, db, study_run_id = study_run
    s = summarize_study_run(db, study_run_id)
    folder = write_reports(db, s, tmp_path)[0].parent
    runs_csv, runs_json = folder / "runs.csv", folder / "runs.json"

    def runs_files() -> tuple:
        return tuple((p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in (runs_csv, runs_json))

    before = runs_files()
    again = summarize_study_run(db, study_run_id, threshold=0.2)
    assert write_reports(db, again, tmp_path) == [folder / f.name for f in report_files()]
    assert runs_files() == before, "the same runs: the same files, untouched"
    assert json.loads((folder / "summary.json").read_text())["threshold"] == 0.2, (
        "the summary files are the new summary's"
    )

    last = s.runs[-1]["id"]
    # as runs.json opened when it was written before the last run was stored
    runs_json.write_text(runs_json.read_text().replace(f'"last_run_id": {last}', f'"last_run_id": {last - 1}', 1))
    write_reports(db, s, tmp_path)
    assert runs_files()[1][2] == before[1][2], "a run more: written again"

    interrupted = replace(s, study_run=s.study_run | {"status": "interrupted"})
    write_reports(db, interrupted, tmp_path)
    assert json.loads(runs_json.read_text())["study_run"]["status"] == "interrupted", (
        "the study run changed: written again"
    )
    write_reports(db, s, tmp_path)

    monkeypatch.setattr(runs_format, "version", lambda: "99.0")
    write_reports(db, s, tmp_path)
    assert json.loads(runs_json.read_text())["fslab"] == "99.0", "another fslab's files: written again"
    monkeypatch.undo()

    runs_csv.unlink()
    write_reports(db, s, tmp_path)
    assert runs_csv.read_bytes() == before[0][2], "runs.csv missing: written again"
    runs_json.write_text('{"study_run": {}}')  # an older fslab's, or anybody's
    write_reports(db, s, tmp_path)
    assert runs_files()[1][2] == before[1][2]

    runs_json.unlink()
    runs_json.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(Refused, match="never through a symlink"):
        write_reports(db, s, tmp_path)
    assert not (tmp_path / "elsewhere.json").exists()


SUMMARY_FILES = ("summary.md", "summary.csv", "summary.json", "comparisons.csv")


def test_a_summary_again_leaves_the_summary_files_made_of_the_same(study_run, tmp_path, monkeypatch):
    """summary.md, .csv, .json and comparisons.csv keep the digest of what they were made of (an
    extended attribute): the same summary asked for again leaves them as they are; other options,
    another state of the study run, a run more, another fslab, a file without its digest (copied,
    made anew) or missing, and all four are written again, each as a fresh one would be."""
    from fslab.report.formats import Source
    from fslab.report.output import MADE_OF, made_of_kept

    _, db, study_run_id = study_run
    s = summarize_study_run(db, study_run_id)
    folder = write_reports(db, s, tmp_path)[0].parent
    paths = [folder / name for name in SUMMARY_FILES]
    fresh = {f.name: str(f.render(Source(db, s))).encode() for f in report_files() if f.made_of}

    def files() -> list[tuple]:
        return [(p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in paths]

    before = files()
    assert [text for *_, text in before] == [fresh[p.name] for p in paths], "as rendered"
    assert len({os.getxattr(p, MADE_OF).split()[0] for p in paths}) == 1, "one digest, kept by each"
    write_reports(db, summarize_study_run(db, study_run_id), tmp_path)
    assert files() == before, "the same summary: the same files, untouched"

    def rewritten(other: StudySummary) -> None:
        write_reports(db, other, tmp_path)
        now = files()
        assert all(n[1] != b[1] for n, b in zip(now, before)), "each written again"
        expected = {f.name: str(f.render(Source(db, other))).encode() for f in report_files() if f.made_of}
        assert [text for *_, text in now] == [expected[p.name] for p in paths]
        write_reports(db, s, tmp_path)  # back to the first
        assert [text for *_, text in files()] == [text for *_, text in before]

    rewritten(summarize_study_run(db, study_run_id, threshold=0.2))
    assert json.loads((folder / "summary.json").read_bytes())["threshold"] == 0.03
    rewritten(replace(s, study_run=s.study_run | {"status": "interrupted"}))
    rewritten(replace(s, runs=s.runs[:-1]))  # as it was before its last run was stored
    monkeypatch.setattr(fslab, "version", lambda: "99.0")  # as kept.made_of asks it
    rewritten(s)
    monkeypatch.undo()
    write_reports(db, s, tmp_path)
    before = files()
    os.removexattr(paths[2], MADE_OF)  # summary.json copied, or made anew by someone
    rewritten(s)
    before = files()
    with paths[3].open("w") as older:  # rewritten in place (its attribute kept) by an older fslab, an editor
        older.write("study_run,workload\n")
    rewritten(s)
    before = files()
    paths[1].unlink()
    write_reports(db, s, tmp_path)
    assert [text for *_, text in files()] == [text for *_, text in before], "a file missing: written again"

    def cut_short(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "ftruncate", cut_short)  # a write cut short, after the digest went, before the content
    with pytest.raises(OSError):
        write_reports(db, summarize_study_run(db, study_run_id, threshold=0.2), tmp_path)
    monkeypatch.undo()
    assert made_of_kept(paths[0]) is None, "no digest beside content it may not describe"
    rewritten(s)


def test_summary_files_on_a_filesystem_without_extended_attributes_are_written_every_time(
    study_run, tmp_path, monkeypatch
):
    """Where no digest can be kept (a filesystem without extended attributes: ENOTSUP), the summary
    files are written every time, never judged current."""
    import errno

    def unsupported(*_args: object) -> None:
        raise OSError(errno.ENOTSUP, "Operation not supported")

    monkeypatch.setattr(os, "setxattr", unsupported)
    _, db, study_run_id = study_run
    s = summarize_study_run(db, study_run_id)
    folder = write_reports(db, s, tmp_path)[0].parent
    stamps = [(folder / name).stat().st_mtime_ns for name in SUMMARY_FILES]
    write_reports(db, s, tmp_path)
    assert all((folder / name).stat().st_mtime_ns != t for name, t in zip(SUMMARY_FILES, stamps))


def test_fslab_export_writes_the_runs_and_summary_tables(study_run):
    root, db, study_run_id = study_run
    folder = root / "reports" / f"tables-{study_run_id}"
    result = fslab_in_process("export", "tables", "--db", str(root / "fslab.db"), "-o", str(root / "exported" / "csv"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == [
        str(root / "exported" / "csv" / "runs.csv"),
        str(root / "exported" / "csv" / "summary.csv"),
        str(root / "exported" / "csv" / "comparisons.csv"),
    ]
    for same in ("runs.csv", "comparisons.csv"):  # as `fslab summary` wrote them
        assert (root / "exported" / "csv" / same).read_text() == (folder / same).read_text()
    summary = list(csv.DictReader(io.StringIO((root / "exported" / "csv" / "summary.csv").read_text())))
    values = stored(root, study_run_id)
    assert {(r["target"], r["workload"], r["metric"]) for r in summary} == set(values)
    for r in summary:
        samples = values[(r["target"], r["workload"], r["metric"])]
        assert int(r["n"]) == len(samples) and float(r["median"]) == statistics.median(samples)
        assert float(r["mean"]) == pytest.approx(statistics.mean(samples), rel=1e-12, abs=1e-12)
    assert fslab_in_process("export", "--db", str(root / "fslab.db"), "-o", "/etc/passwd").returncode == 2
    bad = fslab_in_process("export", "--db", str(root / "fslab.db"), "--format", "xlsx")
    assert bad.returncode == 2 and "'xlsx' is not one of" in bad.stderr


def test_the_parquet_export_holds_the_same_typed_tables(study_run):
    parquet = pytest.importorskip("pyarrow.parquet", reason="pyarrow (the parquet extra) is not installed")
    root, _, study_run_id = study_run
    result = fslab_in_process(
        "export",
        str(study_run_id),
        "--db",
        str(root / "fslab.db"),
        "-o",
        str(root / "exported" / "parquet"),
        "--format",
        "parquet",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    runs = parquet.read_table(root / "exported" / "parquet" / "runs.parquet")
    assert [str(t) for t in runs.schema.types] == [
        "int64",
        "int64",
        "string",
        "string",
        "int64",
        "int64",
        "bool",
        "string",
        "string",
        "string",
        "double",
        "string",
    ]
    as_csv = list(csv.DictReader(io.StringIO((root / "reports" / f"tables-{study_run_id}" / "runs.csv").read_text())))
    assert runs.num_rows == len(as_csv)
    assert [(r["run_id"], r["warmup"], r["metric"], r["value"]) for r in runs.to_pylist()] == [
        (int(r["run_id"]), r["warmup"] == "True", r["metric"] or None, float(r["value"]) if r["value"] else None)
        for r in as_csv
    ], "a failed run's missing metric is null"
    summary = parquet.read_table(root / "exported" / "parquet" / "summary.parquet").to_pylist()
    assert {(r["target"], r["workload"], r["metric"]) for r in summary} == set(stored(root, study_run_id))
    assert all(isinstance(r["n"], int) and isinstance(r["median"], float) for r in summary)


def test_without_pyarrow_parquet_is_refused_with_what_to_install(study_run, tmp_path):
    root, _, _ = study_run
    hidden = "import sys; sys.modules['pyarrow'] = None; from fslab.cli import main; sys.argv[0] = 'fslab'; main()"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            hidden,
            "export",
            "--db",
            str(root / "fslab.db"),
            "-o",
            str(tmp_path / "out"),
            "--format",
            "parquet",
        ],
        capture_output=True,
        text=True,
    )
    said = " ".join(result.stderr.split())
    assert result.returncode == 2 and "Traceback" not in said
    assert (
        "Parquet needs pyarrow, which is not installed: pip install 'fslab[parquet]'" in said
        and not (tmp_path / "out").exists()
    )


def rendered(s: StudySummary, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    print_summary(console, s, report=Path("reports/tables-1/summary.md"))
    return [line.rstrip() for line in console.export_text().splitlines()]


def table_rows(lines: list[str], targets: list[str]) -> list[str]:
    """The lines of the tables' rows, found by the tables' structure: the lines right under a
    table's rule (its line of "─") that begin with a target's name, up to the first that does
    not. A line of prose, however it wraps, is not under a rule."""
    rows, under_rule = [], False
    for line in lines:
        if line and set(line) == {"─"}:
            under_rule = True
        elif under_rule and line.split(" ", 1)[0] in targets:
            rows.append(line)
        else:
            under_rule = False
    return rows


def assert_fits(s: StudySummary) -> list[str]:
    """Every line within 120 columns, and every table row on one line: as a terminal of any
    width would show it."""
    lines, wide = rendered(s, CONSOLE_WIDTH), rendered(s, 400)
    assert max(len(line) for line in lines) <= CONSOLE_WIDTH
    names = [t["name"] for t in s.targets]
    assert table_rows(lines, names) == table_rows(wide, names) and table_rows(lines, names), "no table row wrapped"
    return lines


def test_the_console_summary_fits_120_columns_and_says_where_the_rest_is(study_run):
    root, db, study_run_id = study_run
    s = summarize_study_run(db, study_run_id)
    lines = assert_fits(s)
    said = " ".join(" ".join(lines).split())
    assert (
        "To fit 120 columns the console leaves out the bandwidth's mean, interval and CV, p99.9 latency" in said
        and "they are in reports/tables-1/summary.md." in said
    )
    ext4 = next(line for line in table_rows(lines, ["ext4"]) if "µs" in line).split()
    cell = next(c for c in s.cells if c.target == "ext4" and c.workload == "rand_read")
    assert ext4[:3] == ["ext4", "3", f"{cell.metrics['read_iops'].median:,.0f}"], (
        "n and the IOPS median, read as printed"
    )
    assert not [line for line in lines if re.fullmatch(r"  \(\d+\) –?", line)], (
        "a marker for every note, none for a row without"
    )
    assert (
        said.count("p99.9") == 1
        and "| lat p99.9 |" in (root / "reports" / f"tables-{study_run_id}" / "summary.md").read_text()
    ), "said left out, and in the file"


def test_the_console_summary_fits_whatever_the_machine_and_the_paths(study_run):
    """The header names the machine and its device, a failure the work directory's path: at
    some length a sentence wraps so that a line begins with a target's name ("ext4 (/dev/…).",
    "bad option, …"). Tables are read by their structure, on any machine, at any path."""
    _, db, study_run_id = study_run
    s = summarize_study_run(db, study_run_id)
    names = [t["name"] for t in s.targets]
    fooled = 0
    for n in range(0, 120, 3):
        environment = s.study_run["environment"] | {"image_directory": {"fstype": "ext4", "source": "/dev/" + "d" * n}}
        failures = [
            replace(f, error=f"mount -o journal_async_commit /dev/loop0 /{'p' * n}/mnt/bad: bad option, raw ext4 bad")
            for f in s.failures
        ]
        lines = assert_fits(replace(s, study_run=s.study_run | {"environment": environment}, failures=failures))
        fooled += len([line for line in lines if line.split(" ", 1)[0] in names]) > len(table_rows(lines, names))
    assert fooled, "some length wraps a sentence so that a line begins with a target's name"


def test_long_names_failures_and_notes_still_fit(study_run):
    """Synthetic figures (fixed samples) on the real study run's cells: long target names, a
    failed run in every cell, a long note on every row."""
    _, db, study_run_id = study_run
    s = summarize_study_run(db, study_run_id)
    names = {"ext4": "ext4[noatime,nobarrier]", "raw": "raw-reference-disk", "bad": "ext4[journal_async]"}
    note = (
        "measured 3.1× (95 % CI 2.8–3.4×) its raw devices: a cache, "
        "compression or a copy-on-write layout may have answered, not the device"
    )
    samples = [51_154.0, 52_021.0, 50_310.0]
    cells = [
        replace(
            c,
            target=names[c.target],
            failed=1,
            notes=[note],
            metrics={m: summarize([v * (1 + i % 7) for v in samples]) for i, m in enumerate(c.metrics)},
        )
        for c in s.cells
    ]
    targets = [t | {"name": names[t["name"]]} for t in s.targets]
    lines = assert_fits(replace(s, cells=cells, targets=targets, effective_mount_options={}, not_in_effect={}))
    said = " ".join(" ".join(lines).split())
    assert any(line.startswith("  (1) ") for line in lines) and note in said.split("(1) ", 1)[1], (
        "notes too long for a column are printed beneath their table, whole"
    )
    assert any(
        line.startswith("ext4[noatime,nobarrier]  3 (1 failed)") for line in table_rows(lines, list(names.values()))
    )


def test_the_docs_pandas_example_runs_as_written(study_run):
    """docs/reports.md's commands and Python, run as written in the directory holding fslab.db;
    pandas (not a dependency of fslab) stood in for by csv and sqlite3."""
    root, _, study_run_id = study_run
    text = DOCS.read_text()
    commands = [
        shlex.split(line.split("#")[0])
        for block in re.findall(r"```sh\n(.*?)```", text, re.S)
        for line in block.splitlines()
        if line.startswith("fslab export")
    ]
    assert commands
    for command in commands:
        if "parquet" in command and not _has_pyarrow():
            continue
        result = fslab_in_process(*command[1:], cwd=root)
        assert result.returncode == 0, (command, result.stderr)
    [example] = re.findall(r"```python\n(.*?)```", text, re.S)
    pandas = types.ModuleType("pandas")
    pandas.read_csv = lambda path: list(csv.DictReader(open(path)))
    pandas.read_sql = read_sql
    names: dict = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "pandas", pandas)
        patch.chdir(root)
        exec(compile(example, str(DOCS), "exec"), names)
    values = stored(root, study_run_id)
    with sqlite3.connect(root / "fslab.db") as conn:
        [[every]] = conn.execute(
            "SELECT COUNT(*) FROM runs LEFT JOIN metrics ON metrics.run_id = runs.id WHERE study_run_id = ?",
            (study_run_id,),
        ).fetchall()
    assert len(names["runs"]) == every, "every metric of every run, warm-ups and failed runs too"
    assert {(r["target"], r["workload"], r["metric"]) for r in names["summary"]} == set(values)
    samples = names["samples"]
    assert sorted((r["target"], r["workload"], r["metric"], r["value"]) for r in samples) == sorted(
        (t, w, m, v) for (t, w, m), vs in values.items() for v in vs
    )
    for cell in names["cells"]:
        measured = values[(cell["target"], cell["workload"], cell["metric"])]
        assert cell["n"] == len(measured) and cell["mean"] == pytest.approx(statistics.mean(measured), rel=1e-9)
    db = ResultsDB(str(root / "fslab.db"))
    its_runs = [r["id"] for r in db.runs(study_run_id, ("id",))]
    assert names["outputs"] and names["outputs"] == {
        (run_id, o.phase, o.tool): o.text for run_id in its_runs for o in db.outputs(run_id)
    }
    db.engine.dispose()


def read_sql(sql: str, conn: sqlite3.Connection) -> list[dict]:
    """pandas.read_sql's rows, as dicts by column."""
    cursor = conn.execute(sql)
    return [dict(zip([d[0] for d in cursor.description], row)) for row in cursor.fetchall()]


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True
