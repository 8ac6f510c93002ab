"""The commands a user types that do not run a study."""

import gc
import re

from conftest import fslab_in_process, write_study


def test_doctor_reports_what_this_machine_can_do(workdir):
    result = fslab_in_process("doctor", "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    for line in ("ext4 in kernel", "xfs in kernel", "btrfs in kernel", "fio-3", "mkfs.xfs version", "running as root"):
        assert line in result.stdout
    # this kernel loads no modules: device-mapper and md are reported absent, not as a crash
    assert "device-mapper" in result.stdout and "md RAID" in result.stdout
    assert result.stdout.startswith("this machine\ncheck ") and re.search(
        r"^root +ok +fslab +running as root", result.stdout, re.M
    ), "each check's status beside it, in the one table layout"
    md = re.search(r"^md-raid1 layer +absent +targets on md-raid1 ", result.stdout, re.M)
    assert md, "what lacks md is the targets on it, not fslab"


def test_doctor_exits_0_when_only_what_one_filesystem_needs_is_missing(workdir):
    """Issue 32, item 12: a filesystem whose kernel support (or tools) this machine lacks failed
    `fslab doctor` though no study needed it. nilfs2 is in neither this kernel nor its packages:
    a filesystem of it registered here is checked for real, and reported as its targets' need.
    Fails on the old code (exit 1: "2 required check(s) failed")."""
    from fslab.filesystems import FILESYSTEMS
    from fslab.filesystems.base import Filesystem, SizeFloor

    class Nilfs2(Filesystem):
        kind = "nilfs2"
        mkfs = ("mkfs.nilfs2", "-f")
        version_command = ("mkfs.nilfs2", "-V")
        package = "nilfs-tools"
        floor = SizeFloor(2**27, "mkfs.nilfs2 makes no smaller filesystem")

    with FILESYSTEMS.scoped():
        FILESYSTEMS.add(Nilfs2())
        result = fslab_in_process("doctor", "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^nilfs2 in kernel +absent +nilfs2 targets +not in /proc/filesystems", result.stdout, re.M)
    tools = r"^nilfs2 tools +absent +nilfs2 targets +not installed +apt-get install nilfs-tools"
    assert re.search(tools, result.stdout, re.M)
    assert "absent here: nilfs2 targets, targets on md-raid1" in result.stdout


def test_doctor_of_a_study_checks_what_that_study_needs(workdir, tmp_path):
    """`fslab doctor STUDY`: exit 1 naming what the study needs and this machine lacks (md, under a
    target's layer: this kernel has none), exit 0 for a study that needs nothing missing."""
    text = '[study]\nname = "m"\nworkloads = ["seq_read"]\n[[target]]\nname = "on-md"\nfilesystem = "ext4"\n'
    study = write_study(tmp_path, text + 'devices = 2\nlayers = ["md-raid1"]\n')
    needing = fslab_in_process("doctor", str(study), "--workdir", str(workdir.root))
    assert needing.returncode == 1
    assert "target 'on-md': it needs md-raid1, and this kernel has no md RAID1" in needing.stdout
    assert "study 'm' needs 1 thing(s) this machine lacks" in needing.stderr
    fine = fslab_in_process("doctor", "quick", "--workdir", str(workdir.root))
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert fine.stdout == "quick: this machine has everything the study needs\n"


def test_list_names_builtin_studies_workloads_and_filesystems():
    result = fslab_in_process("list")
    assert result.returncode == 0
    for name in ("quick", "baseline-paper", "rand_write", "RND4K_Q32T1_read", "crystaldiskmark", "raw"):
        assert name in result.stdout


def test_a_bad_study_file_is_refused_with_its_line(tmp_path):
    study = write_study(tmp_path, '[study]\nname = "x"\nworkloads = ["rand_read"]\n[[target]]\nfilesystem = "ext5"\n')
    result = fslab_in_process("run", str(study), "--db", str(tmp_path / "r.db"))
    assert result.returncode == 2
    assert (
        f"{study}:5: target[0].filesystem: unknown filesystem 'ext5' (did you mean 'ext4'?)"
        in result.stderr.replace("\n", "")
    )
    assert not (tmp_path / "r.db").exists(), "refused before anything was opened or formatted"


def test_history_and_summary_of_an_empty_database(tmp_path, monkeypatch):
    from fslab import cli

    db = str(tmp_path / "empty.db")
    assert fslab_in_process("history", "--db", db).returncode == 0
    opened, open_db = [], cli._open_db
    monkeypatch.setattr(cli, "_open_db", lambda location: (opened.append(gc.isenabled()), open_db(location))[1])
    result = fslab_in_process("summary", "--db", db)
    assert result.returncode == 2 and "no study run" in result.stderr
    assert opened == [False] and gc.isenabled(), (
        "a summary works without the cyclic collector, and gives it back as it ends"
    )


def test_untrusted_text_reaches_the_terminal_without_control_sequences(tmp_path):
    """A shared study file's values are quoted in errors: an escape sequence in one (which could
    clear the screen or retitle the window) is shown as text."""
    study = write_study(
        tmp_path, '[study]\nname = "x"\nworkloads = ["rand_read"]\n[[target]]\nfilesystem = "\\u001b[2Jext5"\n'
    )
    result = fslab_in_process("run", str(study), "--db", str(tmp_path / "r.db"))
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "unknown filesystem '\\x1b[2Jext5'" in result.stderr


def test_history_prints_each_study_run_as_text_through_the_one_table_printer(tmp_path):
    """A stored kernel string (or study name) is text: markup in it is printed as it is, an escape
    sequence written out, as in every other table fslab prints."""
    from pathlib import Path

    from fslab.results import ResultsDB
    from fslab.results.owner import Owner
    from fslab.study import parse_study

    db = ResultsDB(str(tmp_path / "r.db"))
    study = parse_study(
        '[study]\nname = "kept"\nworkloads = ["rand_read"]\n[[target]]\nfilesystem = "ext4"\n',
        "s.toml",
        base_dir=Path("."),
    )
    study_run = db.begin_study_run(
        study, 1, {"kernel": "6.1 [red]patched[/red] \x1b[2J"}, {}, {}, Owner.current(tmp_path)
    )
    db.finish_study_run(study_run, "finished", {})
    result = fslab_in_process("history", "--db", str(tmp_path / "r.db"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert (
        lines[0] == "study runs" and lines[1].rstrip() == "id  study  started (UTC)     status    runs per cell  kernel"
    )
    assert lines[3].split("  ")[:2] == [" 1", "kept"] and lines[3].endswith(
        "finished              3  6.1 [red]patched[/red] \\x1b[2J"
    )


_NAMED = '[study]\nname = "{name}"\nworkloads = ["rand_read"]\nrepetitions = 2\n[[target]]\nfilesystem = "ext4"\n'


def test_a_study_named_with_digits_is_never_taken_for_a_study_run_id(tmp_path):
    from fslab.results import ResultsDB
    from synthetic import stored_study

    db = ResultsDB(str(tmp_path / "r.db"))
    first, second = (
        stored_study(tmp_path, _NAMED.format(name=name), db, name=f"{name}.toml") for name in ("other", "1")
    )
    assert (first, second) == (1, 2)
    ambiguous = fslab_in_process("summary", "1", "--db", db.location)
    assert ambiguous.returncode == 2 and "Traceback" not in ambiguous.stderr
    said = " ".join(ambiguous.stderr.split())
    assert (
        "'1' is both the id of study run 1 (other) and the name of study '1' (its newest study run is 2): "
        "write #1 for study run 1, or #2"
    ) in said
    for ref, (study, study_run) in (("#1", ("other", 1)), ("#2", ("1", 2)), ("other", ("other", 1))):
        result = fslab_in_process("summary", ref, "--db", db.location)
        shown = result.stdout.startswith(f"Study {study}, study run {study_run} ")
        assert result.returncode == 0 and shown, (ref, result.stdout[:200], result.stderr)
    assert db.study_run("2")["study"] == "1", "digits that are an id alone are that id"
    assert fslab_in_process("summary", "#9", "--db", db.location).returncode == 2
