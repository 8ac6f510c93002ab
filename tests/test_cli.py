"""The commands a user types that do not run a study."""

from conftest import fslab_in_process, write_study


def test_doctor_reports_what_this_machine_can_do(workdir):
    result = fslab_in_process("doctor", "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    for line in ("ext4 in kernel", "xfs in kernel", "btrfs in kernel", "fio-3", "mkfs.xfs version", "running as root"):
        assert line in result.stdout
    # this kernel loads no modules: device-mapper and md are reported absent, not as a crash
    assert "device-mapper" in result.stdout and "md RAID" in result.stdout


def test_list_names_builtin_studies_workloads_and_filesystems():
    result = fslab_in_process("list")
    assert result.returncode == 0
    for name in ("quick", "baseline-paper", "rand_write", "RND4K_Q32T1_read", "crystaldiskmark", "raw"):
        assert name in result.stdout


def test_a_bad_study_file_is_refused_with_its_line(tmp_path):
    study = write_study(tmp_path, '[study]\nname = "x"\nworkloads = ["rand_read"]\n[[target]]\nfilesystem = "ext5"\n')
    result = fslab_in_process("run", str(study), "--db", str(tmp_path / "r.db"))
    assert result.returncode == 2
    assert f"{study}:5: target[0].filesystem: unknown filesystem 'ext5' (did you mean 'ext4'?)" in result.stderr.replace("\n", "")
    assert not (tmp_path / "r.db").exists(), "refused before anything was opened or formatted"


def test_history_and_summary_of_an_empty_database(tmp_path):
    db = str(tmp_path / "empty.db")
    assert fslab_in_process("history", "--db", db).returncode == 0
    result = fslab_in_process("summary", "--db", db)
    assert result.returncode == 2 and "no study run" in result.stderr


def test_untrusted_text_reaches_the_terminal_without_control_sequences(tmp_path):
    """A shared study file's values are quoted in errors: an escape sequence in one (which could
    clear the screen or retitle the window) is shown as text."""
    study = write_study(tmp_path, '[study]\nname = "x"\nworkloads = ["rand_read"]\n[[target]]\nfilesystem = "\\u001b[2Jext5"\n')
    result = fslab_in_process("run", str(study), "--db", str(tmp_path / "r.db"))
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "unknown filesystem '\\x1b[2Jext5'" in result.stderr
