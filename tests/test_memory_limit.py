"""Memory limits (core/cgroups.py): a buffered workload's measured run in a cgroup of its own, held to
its limit by the kernel's own accounting, recorded with the run, removed afterwards, and removed
by `fslab cleanup` after a kill only when it is the very cgroup fslab made."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import fslab, fslab_in_process, groups_of, killed_fslab, plant, write_study
from fslab.core import cgroups
from fslab.core.cgroups import memory_limited
from fslab.core.names import workdir_tag
from fslab.core.system import run_held, sync_and_drop_caches
from fslab.core.workdir import Workdir
from fslab.results import ResultsDB
from fslab.study import StudyError, parse_study

LIMIT = 64 << 20
HIERARCHY = cgroups.find_hierarchy()
needs_cgroups = pytest.mark.skipif(isinstance(HIERARCHY, str), reason=f"no memory cgroups here: {HIERARCHY}")


def _failures(group: cgroups.Group) -> int:
    """How often the kernel found the group at its limit (and reclaimed within it)."""
    if group.hierarchy.version == 1:
        return int((group.path / "memory.failcnt").read_text())
    events = dict(line.split() for line in (group.path / "memory.events").read_text().splitlines())
    return int(events["max"])


@pytest.mark.slow
@needs_cgroups
def test_a_buffered_read_larger_than_the_limit_stays_within_it(workdir):
    """256 MiB read through the page cache by a cgroup allowed 64 MiB: the kernel's own high-water
    mark of the group (page cache included) never passes the limit, though the limit was reached."""
    file = workdir.root / "big"
    run_held(
        workdir.journal,
        ["fio", "--name=layout", f"--filename={file}", "--rw=write", "--bs=1M", "--size=256M", "--output-format=terse"],
        cwd=workdir.root,
    )
    sync_and_drop_caches()
    with memory_limited(workdir.journal, LIMIT) as group:
        assert group is not None and group.path.is_dir() and group.path.name.startswith(workdir_tag(workdir.root))
        assert int((group.path / group.hierarchy.limit_file).read_text()) == LIMIT
        run_held(
            workdir.journal,
            [
                "fio",
                "--name=read",
                f"--filename={file}",
                "--rw=read",
                "--bs=1M",
                "--size=256M",
                "--direct=0",
                "--output-format=terse",
            ],
            cwd=workdir.root,
        )
        peak = group.peak()
        assert peak is not None, f"the kernel reports no {group.hierarchy.peak_file}"
        assert LIMIT // 2 < peak <= LIMIT, (
            f"peak {peak} bytes: the page cache was charged to the group and held to its limit"
        )
        assert _failures(group) > 0, "the read met the limit: what it read did not all stay cached"
    assert not group.path.exists(), "the cgroup is removed after the run"


@needs_cgroups
def test_no_limit_makes_nothing(workdir):
    with memory_limited(workdir.journal, None) as group:
        assert group is None and cgroups.current() is None
        run_held(workdir.journal, ["true"])
    assert groups_of(workdir.root) == []


@pytest.mark.root
@needs_cgroups
def test_the_run_records_the_limit_and_the_summary_shows_it(workdir):
    study = write_study(
        workdir.root,
        """
[study]
name = "limited"
repetitions = 1
image_size = "512MiB"
image_fill = "sparse"

[[target]]
filesystem = "ext4"

[[workload]]
name = "cached_read"
rw = "read"
bs = "1M"
size = "192MiB"
runtime = "1s"
direct = false
memory_limit = "64MiB"
""",
    )
    db = workdir.root / "results.db"
    result = fslab("run", str(study), "--no-ceiling", "--db", str(db), "--workdir", str(workdir.root / "work"))
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    runs = results.runs(results.study_run()["id"])
    assert [(r["status"], r["memory_limit"]) for r in runs] == [("ok", LIMIT)], [r["error"] for r in runs]
    assert groups_of(workdir.root / "work") == [], "no cgroup left"
    summary = fslab_in_process("summary", "--db", str(db))
    assert "cached_read (buffered I/O, memory ≤ 64MiB" in summary.stdout, summary.stdout


_KILLED = """
import os, sys
from pathlib import Path
from fslab.core.cgroups import memory_limited
from fslab.core.workdir import Workdir
limited = memory_limited(Workdir(Path(sys.argv[1])).journal, 64 << 20)
group = limited.__enter__()
print(group.path, flush=True)
os._exit(0)  # killed: nothing released
"""


def _killed_fslab_leaves_a_group(workdir: Workdir) -> Path:
    path = Path(killed_fslab(_KILLED, workdir.root))
    assert path.is_dir() and str(path) in groups_of(workdir.root)
    return path


@needs_cgroups
def test_cleanup_removes_the_group_a_killed_fslab_left(workdir):
    path = _killed_fslab_leaves_a_group(workdir)
    outcomes = workdir.journal.clean_up()
    assert [(o.kind, o.status) for o in outcomes] == [("cgroup", "released")]
    assert not path.exists()


@needs_cgroups
def test_cleanup_leaves_a_group_fslab_did_not_make(workdir):
    """The journalled path made again by someone else (another inode): not fslab's, left alone;
    and a planted entry naming a cgroup without this work directory's tag is never acted on."""
    path = _killed_fslab_leaves_a_group(workdir)
    os.rmdir(path)
    os.mkdir(path)  # same name, not the cgroup fslab made
    other = HIERARCHY.parent / "fslab_00000_mem1_1"  # fslab's prefix, another work directory's tag
    os.mkdir(other)
    try:
        plant(workdir.journal, "cgroup", other, {"dev": "0:0", "ino": os.lstat(other).st_ino})
        outcomes = {o.ident: o for o in workdir.journal.clean_up()}
        assert outcomes[str(path)].status == "left alone" and "identity differs" in outcomes[str(path)].detail
        assert (
            outcomes[str(other)].status == "left alone"
            and "not a cgroup fslab names for this work directory" in outcomes[str(other)].detail
        )
        assert path.is_dir() and other.is_dir()
    finally:
        os.rmdir(path)
        os.rmdir(other)


def test_a_group_outside_a_memory_hierarchy_is_never_removed(workdir):
    planted = workdir.root / f"{workdir_tag(workdir.root)}mem1_1"
    planted.mkdir()
    plant(workdir.journal, "cgroup", planted)
    [outcome] = workdir.journal.clean_up()
    assert outcome.status == "left alone" and planted.is_dir()


# --- the study file ------------------------------------------------------------------------------

HEAD = """
[study]
name = "s"

[[target]]
filesystem = "ext4"
"""


def parse(text: str, **kw):
    return parse_study(HEAD + text, "study.toml", base_dir=Path("."), **kw)


def error_of(text: str) -> str:
    with pytest.raises(StudyError) as info:
        parse(text)
    return str(info.value)


def test_every_kind_takes_a_limit_once():
    study = parse("""
[fio]
memory_limit = "1GiB"

[[workload]]
name = "r"
rw = "read"
direct = false

[[workload]]
name = "own"
rw = "randread"
direct = false
memory_limit = "256MiB"

[[workload]]
name = "mail"
kind = "sysbench"
memory_limit = "512MiB"
""")
    limits = {w.name: w.memory_limit for w in study.workloads}
    assert limits == {"r": 1 << 30, "own": 256 << 20, "mail": 512 << 20}
    assert study.workloads[0].spec()["memory_limit"] == 1 << 30
    assert "memory_limit" not in parse('[[workload]]\nname = "r"\nrw = "read"\n').workloads[0].spec(), (
        "a workload without one is stored as before"
    )
    assert (
        parse('[fio]\nmemory_limit = "1GiB"\n[[workload]]\nname = "r"\nrw = "read"\ndirect = false\n', scale=0.5)
        .workloads[0]
        .memory_limit
        == 512 << 20
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[workload]]\nname = "w"\nrw = "read"\ndirect = true\nmemory_limit = "1GiB"\n',
            r"study.toml:1\d: workload\[0\].memory_limit: .*'w' uses direct I/O",
        ),
        (
            '[fio]\nmemory_limit = "1GiB"\n[[workload]]\nname = "w"\nrw = "read"\n',
            r"study.toml:\d+: fio.memory_limit: .*'w' uses direct I/O",
        ),
        (
            '[[workload]]\nname = "d"\nkind = "dd"\nmemory_limit = "1GiB"\n',
            r"workload\[0\].memory_limit: .*'d' uses direct I/O",
        ),
        (
            '[[workload]]\nname = "w"\nrw = "read"\ndirect = false\nmemory_limit = "lots"\n',
            r"workload\[0\].memory_limit",
        ),
        (
            '[[workload]]\nname = "w"\nrw = "read"\ndirect = false\nmemory_limit = "1MiB"\n',
            r"workload\[0\].memory_limit.*below 16MiB",
        ),
    ],
)
def test_refused_limits_are_located(text, message):
    found = error_of(text)
    assert re.search(message, found), found


# --- which hierarchy: cgroup v2 is not mounted with memory on every test machine (a hybrid one
# has v1's memory controller), so the choice is tested on mount tables and control files made here.


def _hierarchy_with(monkeypatch, mounts: list[tuple[Path, str, set[str]]]) -> cgroups.Hierarchy | str:
    monkeypatch.setattr(cgroups, "_cgroup_mounts", lambda: mounts)
    return cgroups.find_hierarchy()


def test_cgroup_v2_with_memory_enabled_for_children_is_chosen_over_v1(monkeypatch, tmp_path):
    v2, v1 = tmp_path / "unified", tmp_path / "memory"
    v2.mkdir()
    v1.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (v2 / "cgroup.subtree_control").write_text("memory pids\n")
    found = _hierarchy_with(monkeypatch, [(v1, "cgroup", {"rw", "memory"}), (v2, "cgroup2", {"rw"})])
    assert found == cgroups.Hierarchy(2, v2, v2), "v2 groups go beneath the root"
    assert (found.limit_file, found.peak_file) == ("memory.max", "memory.peak")


def test_cgroup_v2_without_memory_falls_back_to_v1_or_says_why(monkeypatch, tmp_path):
    v2, v1 = tmp_path / "unified", tmp_path / "memory"
    v2.mkdir()
    v1.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu io pids\n")  # a hybrid machine: memory is v1's
    found = _hierarchy_with(monkeypatch, [(v2, "cgroup2", {"rw"}), (v1, "cgroup", {"rw", "memory"})])
    assert isinstance(found, cgroups.Hierarchy) and (found.version, found.mount) == (1, v1)
    assert found.limit_file == "memory.limit_in_bytes" and found.peak_file == "memory.max_usage_in_bytes"
    why = _hierarchy_with(monkeypatch, [(v2, "cgroup2", {"rw"})])
    assert isinstance(why, str) and f"cgroup2 at {v2} lists no memory controller" in why and "CONFIG_MEMCG" in why
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    (v2 / "cgroup.subtree_control").write_text("cpu\n")
    why = _hierarchy_with(monkeypatch, [(v2, "cgroup2", {"rw"}), (v1, "cgroup", {"rw", "memory"})])
    assert isinstance(why, str) and "not enabled for the children" in why and "+memory" in why, (
        "v2 holds memory but will not give it: said, not v1"
    )
