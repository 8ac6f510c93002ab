"""fio's option table: read from what fio itself prints (fio/help.py, pure, tested on the real
fio 3.33's answers in tests/fixtures/fio-options), and kept per fio version on disk, read back
defensively (fio/table.py, tested with a fake fio that answers as 3.33 did and counts the
questions, and once with the real fio)."""

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import FIO_OPTIONS, fio_options_answers, fslab_in_process, write_study
from fslab.core.system import executable
from fslab.fio import table as fio_table
from fslab.fio.help import HelpError, needed, parse_option_help, parse_option_list, table_from_answers
from fslab.fio.options import ENGINES, option_problem
from fslab.fio.preallocation import stored_preallocation
from fslab.fio.table import FioUnavailable, load_table

ENGINE_NAMES = tuple(ENGINES)


@pytest.fixture(scope="module")
def answers() -> dict[str, str]:
    return fio_options_answers()


def test_fio_3_33s_answers_are_its_table(answers):
    table = table_from_answers(answers, ENGINE_NAMES)
    assert table.version == "fio-3.33" and len(table.options) == 241 and len(table.spellings) == 261
    rw, bs, size = table.options["rw"], table.options["bs"], table.options["size"]
    assert (rw.form, rw.aliases, rw.default, rw.values[:3]) == (
        "choice",
        ("readwrite",),
        "read",
        ("read", "write", "trim"),
    )
    assert (bs.form, bs.low, bs.high, bs.parent) == ("int", 1, None, "rw"), (
        "max=-1 is fio's UINT_MAX: no bound; bs is indented under rw"
    )
    assert (size.form, size.fio_type) == ("size", "(null)"), "fio 3.33 prints no words for FIO_OPT_STR_VAL_ZONE"
    assert table.find("fill_fs") is table.options["fill_device"] and table.find("ss") is table.options["steadystate"]
    assert table.find("Fill_fs") is None and table.find("fill-fs") is None and table.find("fill_f") is None, (
        "fio matches exactly (parse.c o_match)"
    )
    assert table.options["time_based"].form == "flag" and table.options["direct"].form == "bool"
    assert table.options["percentile_list"].form == "floats" and table.options["bsrange"].form == "range"
    assert table.options["sync_file_range"].form == "choices" and table.options["description"].free_text
    assert (table.options["lockfile"].parent, table.options["trim_backlog"].parent) == ("filename", "trim_percentage")
    assert table.options["hipri"].engines == ("pvsync2", "io_uring") and table.options["donorname"].engines == (
        "e4defrag",
    )
    assert {"io_uring", "libaio", "falloc", "e4defrag", "exec", "net"} <= set(
        table.engines
    ) and "dircreate" not in table.engines
    assert not [o.name for o in table.options.values() if o.form == "unknown"]


def test_what_fio_says_of_an_option_it_does_not_have_is_no_option(answers):
    with pytest.raises(HelpError, match="does not know the option 'threads'"):
        parse_option_help("No such command: threads", "threads")
    closest = (
        " - showing closest match\n              thread: Use threads instead "
        "of processes\n                type: empty or boolean value ([0|1])\n"
    )
    with pytest.raises(HelpError, match="does not know the option 'threads'"):
        parse_option_help(closest, "threads")  # what fio prints on stdout when it has no such option
    with pytest.raises(HelpError, match="--cmdhelp=thread describes 'bs'"):
        table_from_answers(answers | {"--cmdhelp=thread": answers["--cmdhelp=bs"]}, ENGINE_NAMES)
    with pytest.raises(HelpError, match="missing"):
        table_from_answers({k: v for k, v in answers.items() if k != "--cmdhelp=rw"}, ENGINE_NAMES)
    with pytest.raises(HelpError, match="not a line of fio's option list"):
        parse_option_list("rw : IO direction\n      bs : too deep\n")
    assert parse_option_list("rw : IO\n  bs : Block\n    x : deeper\n  ba : Align\nsize : Size\n") == [
        ("rw", "IO", None), ("bs", "Block", "rw"), ("x", "deeper", "bs"), ("ba", "Align", "rw"),
        ("size", "Size", None)]  # fmt: skip


def test_the_questions_come_in_three_rounds(answers):
    assert needed({}, ENGINE_NAMES) == ["--version", "--cmdhelp=all", "--enghelp"]
    first = {q: answers[q] for q in ("--version", "--cmdhelp=all", "--enghelp")}
    second = needed(first, ENGINE_NAMES)
    assert (
        len(second) == 217 + 17
        and "--enghelp=io_uring" in second
        and "--enghelp=exec" not in second
        and "--enghelp=null" not in second
    ), "only the engines fslab allows"
    third = needed(first | {q: answers[q] for q in second}, ENGINE_NAMES)
    assert "--enghelp=io_uring,hipri" in third and len(third) == len(answers) - 3 - len(second)


def test_two_engines_that_describe_one_option_apart_leave_it_unknown(answers):
    other = answers["--enghelp=libaio,nowait"].replace("boolean value (opt=1)", "string (opt=bla)")
    table = table_from_answers(answers | {"--enghelp=pvsync2,nowait": other}, ENGINE_NAMES)
    assert (table.options["nowait"].form, table.options["nowait"].fio_type) == ("unknown", "differs between engines")
    with fio_table.given_table(table):
        assert "a form fslab does not know" in option_problem("nowait", "1")


def _fake_fio(bin_dir: Path, calls: Path, answers: dict[str, str], version: str = "fio-3.33") -> Path:
    """A fio that answers each question as the real fio 3.33 did (or says `version`), writing each
    question it is asked to `calls`. Each answer is a file it reads, byte for byte (the last line
    whether or not a newline ends it), with the shell's builtins: a script holding all 67 kB of
    them cost the shell a third more CPU to read at each of the ~270 questions of a table."""
    said = bin_dir / "answers"
    said.mkdir(parents=True, exist_ok=True)
    for question, answer in answers.items():
        (said / question).write_text(answer)
    file = shlex.quote(str(said)) + '/"$1"'
    lines = [
        "#!/bin/sh",
        f'echo "$1" >> {shlex.quote(str(calls))}',
        f'[ "$1" = --version ] && {{ printf %s {shlex.quote(version)}; exit 0; }}',
        f'[ -f {file} ] || {{ echo "No such command: $1" >&2; exit 1; }}',
        f"while IFS= read -r line; do printf '%s\\n' \"$line\"; done < {file}",
        'printf %s "$line"',
        "",
    ]
    new = bin_dir / "fio.new"
    new.write_text("\n".join(lines))
    new.chmod(0o755)
    new.replace(bin_dir / "fio")  # a new file, as an upgrade installs one
    return bin_dir / "fio"


@pytest.fixture
def fake(tmp_path, monkeypatch, answers):
    """A fake fio first on PATH, its questions counted; the cache in tmp_path/cache."""
    calls = tmp_path / "calls"
    _fake_fio(tmp_path / "bin", calls, answers)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")

    def load(cache: Path = tmp_path / "cache"):
        load_table.cache_clear()  # as a new process would
        before = len(calls.read_text().splitlines()) if calls.exists() else 0
        table = load_table(executable("fio"), ENGINE_NAMES, cache)
        return table, calls.read_text().splitlines()[before:]

    return load


def _kept(cache: Path) -> Path:
    return cache / "fio-options-3.33.json"


def test_fio_is_asked_once_per_version_and_its_answers_kept(fake, tmp_path, answers):
    table, asked = fake()
    assert len(asked) == len(answers), "every question once (--version by tool_version)"
    assert table.options == table_from_answers(answers, ENGINE_NAMES).options
    kept = _kept(tmp_path / "cache")
    record = json.loads(kept.read_text())
    assert record["answers"].keys() == answers.keys() and record["version"] == "fio-3.33"
    assert record["executable"]["path"] == str(tmp_path / "bin" / "fio") and len(record["executable"]["sha256"]) == 64
    assert kept.stat().st_mode & 0o777 == 0o644 and [p.name for p in kept.parent.iterdir()] == [kept.name], (
        "written whole: no temporary left"
    )
    again, asked = fake()
    assert asked == [] and again.options == table.options, "read back, nothing asked"


@pytest.mark.parametrize(
    "tamper",
    [
        "world-writable",
        "another user's",
        "not json",
        "another fio's",
        "another executable",
        "an answer fslab cannot read",
        "a symlink",
    ],
)
def test_a_kept_table_is_trusted_only_when_it_is_fslabs_own_and_of_this_fio(fake, tmp_path, tamper, answers):
    kept = _kept(tmp_path / "cache")
    kept.parent.mkdir()
    record = {
        "format": fio_table.FORMAT,
        "version": "fio-3.33",
        "answers": answers,
        "executable": fio_table._described(executable("fio")),
    }
    kept.write_text(json.dumps(record))
    assert fake()[1] == ["--version"], "as fslab keeps it: trusted"
    if tamper == "world-writable":
        kept.chmod(0o666)
    elif tamper == "another user's":
        if os.geteuid() != 0:
            pytest.skip("only root gives a file away")
        os.chown(kept, 65534, 65534)  # nobody's: neither root's nor this user's
    elif tamper == "not json":
        kept.write_text(kept.read_text()[:-10])
    elif tamper == "another fio's":
        kept.write_text(json.dumps(record | {"version": "fio-3.34"}))
    elif tamper == "another executable":
        kept.write_text(json.dumps(record | {"executable": {"identity": [1, 2, 3], "sha256": "0" * 64}}))
    elif tamper == "an answer fslab cannot read":
        kept.write_text(
            json.dumps(record | {"answers": record["answers"] | {"--cmdhelp=rw": "rw: IO direction\nbanner\n"}})
        )
    else:
        (tmp_path / "elsewhere.json").write_text(kept.read_text())
        kept.unlink()
        kept.symlink_to(tmp_path / "elsewhere.json")
    table, asked = fake()
    assert len(asked) == len(answers) - 1, f"{tamper}: not trusted, asked anew ({len(asked)} questions)"
    assert table.options["rw"].form == "choice" and json.loads(kept.read_text())["answers"] == json.loads(
        json.dumps(answers)
    )


def test_what_a_kept_table_lacks_is_asked_and_the_same_fio_elsewhere_is_known_by_its_bytes(fake, tmp_path, answers):
    fake()
    kept = _kept(tmp_path / "cache")
    record = json.loads(kept.read_text())
    kept.write_text(
        json.dumps(
            record | {"answers": {k: v for k, v in record["answers"].items() if k != "--enghelp=io_uring,hipri"}}
        )
    )
    _, asked = fake()
    assert asked == ["--enghelp=io_uring,hipri"], "only what it lacks (a newer fslab asks about a new engine)"
    copy = tmp_path / "bin" / "fio.copy"
    shutil.copy2(tmp_path / "bin" / "fio", copy)
    copy.replace(tmp_path / "bin" / "fio")  # another inode, the same bytes: a test guest's copy-up
    table, asked = fake()
    assert asked == ["--version"] and table.version == "fio-3.33", (
        "its version asked of the new file (tool_version), nothing else"
    )


def test_an_upgraded_fio_is_asked_anew_and_an_unwritable_cache_costs_only_time(fake, tmp_path, answers):
    fake()
    _fake_fio(tmp_path / "bin", tmp_path / "calls", answers, version="fio-3.99")
    table, asked = fake()
    assert table.version == "fio-3.99" and len(asked) == len(answers)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["fio-options-3.33.json", "fio-options-3.99.json"]
    (tmp_path / "not-a-directory").write_text("")
    table, asked = fake(tmp_path / "not-a-directory")
    assert table.version == "fio-3.99" and len(asked) == len(answers) - 1, "kept in this process only"


@pytest.fixture
def no_fio(tmp_path, monkeypatch):
    """This process as it would be on a machine without fio: no table given, none held, no fio on PATH."""
    monkeypatch.setattr(fio_table, "_given", None)
    monkeypatch.setattr(fio_table, "_held", None)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


def test_without_fio_the_guard_says_so_and_reading_stored_jobs_asks_no_fio(no_fio, tmp_path):
    with pytest.raises(
        FioUnavailable,
        match=r"fio is not installed: fslab checks every fio option "
        r"against fio's own description of it .*apt-get install fio",
    ):
        option_problem("bs", "4k")
    assert stored_preallocation({"job": "[global]\nfallocate=posix\n[w]\nrw=write\nbs=4k\n"}) == "posix", (
        "a summary reads stored jobs without fio"
    )
    assert stored_preallocation({"job": "[w]\nioengine=external:/tmp/x.so\n"}) == ""
    from fslab.fio.steady_notes import criteria_of

    assert criteria_of({"job": "[w]\nrw=randwrite\nsteadystate=iops_slope:0.3%\nsteadystate_duration=5s\n"}) == [
        "iops_slope:0.3%"
    ], "nor its steady state"
    study = write_study(tmp_path, '[study]\nname = "s"\nworkloads = ["rand_read"]\n\n[[target]]\nfilesystem = "ext4"\n')
    result = fslab_in_process("run", str(study), "--db", str(tmp_path / "r.db"), "--workdir", str(tmp_path / "w"))
    assert result.returncode == 2 and "fio is not installed" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_this_machines_fio_answers_as_the_fixture_says(tmp_path):
    """The fixture is the real fio's output: this machine's fio 3.33 (Debian's) answers alike."""
    fio = executable("fio")
    if fio is None or json.loads(FIO_OPTIONS.read_text())["version"] != (os.popen("fio --version").read().strip()):
        pytest.skip("not fio 3.33")
    table = load_table(fio, ENGINE_NAMES, tmp_path)
    kept = json.loads(_kept(tmp_path).read_text())
    assert kept["answers"] == fio_options_answers() and kept["executable"]["identity"] == list(fio.identity)
    assert table.options == table_from_answers(fio_options_answers(), ENGINE_NAMES).options
