"""Shared fixtures. The tests drive the real tools as root: loop devices, mkfs, mount, fio."""

from __future__ import annotations

import gc
import io
import json
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from fslab.core import cgroups, interruption, registry
from fslab.core.identity import FileId
from fslab.core.journal import Journal
from fslab.core.names import workdir_tag
from fslab.core.scratch import SCRATCH_IN_RAM
from fslab.core.workdir import Workdir
from fslab.model.findings import DISTURBED, NOT_MEASURABLE

if TYPE_CHECKING:
    from playwright.sync_api import Browser

    import fleet
    import postgres

FIXTURES = Path(__file__).parent / "fixtures"
# Notes about the machine and its neighbours, not the run's own doing: a test's run beside the
# other workers' runs is disturbed (monitors/pressure.py), and this machine has no RAPL.
MACHINE_NOTES = (DISTURBED, NOT_MEASURABLE)
TOYS = Path(__file__).parent / "toys"  # one module each, as a new filesystem, kind, monitor or format is added
TEST_ROOT = Path("/var/tmp/fslab-tests")  # on disk: loop images in /tmp could sit in RAM elsewhere


# zfs-fuse is one daemon for the whole machine: each module that starts it, or checks that none
# runs, sets `pytestmark = ZFS_FUSE`, and a parallel run (`make test`: pytest-xdist, --dist
# loadgroup) runs those modules one after another in one worker.
ZFS_FUSE = pytest.mark.xdist_group("zfs-fuse")
# The tests that start bpftrace, one worker for them all: the block trace's tests count the
# machine's bpftrace processes, and the monitors bench's smoke starts one.
BPFTRACE = pytest.mark.xdist_group("bpftrace")
GUESTS = "guests"  # the xdist group of the modules that read a QEMU guest's result (tests/guest.py)
# The tests that boot a lab VM themselves, in the foreground: one at a time, handed out early (a boot is
# minutes of one worker's time under load: last, it was the run's tail while the other workers idled).
LAB_BOOTS = pytest.mark.xdist_group("lab-boots")


def apart(test: str, values: Iterable[str]) -> list:
    """Parameters each in an xdist group of its own (`test`[value]): the slow cases of a test that
    shares no module fixture, each handed to whichever worker is free, not all to its module's."""
    return [pytest.param(value, marks=pytest.mark.xdist_group(f"{test}[{value}]")) for value in values]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks what a test's fixtures make it: a fixture that asks for `needs_root` (a work
    directory, a study run on loop images) is root's, a `browser` is chromium's, a module with a
    `guest_job` boots a QEMU guest. (Marks a test needs for what it does itself are on the test.)

    For a parallel run, each test joins its module's xdist group unless it has one (a module's
    fixtures, such as a whole study run, then run in one worker only, once), and in a worker the
    groups are ordered to be handed out (with --no-loadscope-reorder), the longest first, so that
    the quick ones fill the other workers' time at the end: zfs-fuse's first (the longest), then
    the lab's own boots (lab-boots), then the modules that need root, a browser or seconds, then
    the quick ones, and the guests' last (their guests boot in the background from the session's
    start, guests_boot_meanwhile, and whichever worker is handed them reads the results: seconds)."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "needs_root" in fixtures:
            item.add_marker(pytest.mark.root)
        if "browser" in fixtures:
            item.add_marker(pytest.mark.browser)
        module = getattr(item, "module", None)
        if getattr(module, "guest_job", None) is not None:
            item.add_marker(pytest.mark.guest)
            item.add_marker(pytest.mark.root)
            item.add_marker(pytest.mark.xdist_group(GUESTS))
        elif item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: every worker sorts alike
        items[:] = _in_handing_out_order(items)


def _in_handing_out_order(items: list[pytest.Item]) -> list[pytest.Item]:
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        assert mark is not None, "every item has its group (pytest_collection_modifyitems)"
        groups.setdefault(mark.args[0] if mark.args else mark.kwargs.get("name", "default"), []).append(item)

    def rank(name: str) -> int:
        if name == ZFS_FUSE.args[0]:
            return 0
        if name == GUESTS:
            return 4
        if name == LAB_BOOTS.args[0]:
            return 1
        return (
            2
            if any(item.get_closest_marker(mark) for item in groups[name] for mark in ("root", "browser", "slow"))
            else 3
        )

    return [item for name in sorted(groups, key=rank) for item in groups[name]]


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `root` fails at once, saying why, in a session that is not root's; the rest
    (`make check`'s lane) run as any user."""
    if item.get_closest_marker("root") and os.geteuid() != 0:
        pytest.fail(
            "this test formats and mounts loop images: run it as root "
            "(make test); `make check` runs the tests that need no root",
            pytrace=False,
        )


FIO_OPTIONS = FIXTURES / "fio-options" / "fio-3.33.json"  # the real fio 3.33's answers (its make.py)


def fio_options_answers() -> dict[str, str]:
    return json.loads(FIO_OPTIONS.read_text())["answers"]


@pytest.fixture(scope="session", autouse=True)
def fio_options_table() -> Iterator[None]:
    """Every check of a fio option reads the real fio 3.33's table from its committed answers:
    no test asks fio about its options (the pure lane may not keep them in /var/cache/fslab, and
    asking takes seconds); test_fio_table checks that this machine's fio answers alike."""
    from fslab.fio.help import table_from_answers
    from fslab.fio.options import ENGINES
    from fslab.fio.table import given_table

    with given_table(table_from_answers(fio_options_answers(), tuple(ENGINES))):
        yield


@pytest.fixture(scope="session", autouse=True)
def cache_of_the_sessions_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What fslab keeps in its cache directory (core/cache.py: the page's JavaScript) is kept in the
    session's own: no test run in this process reads or writes /var/cache/fslab's."""
    from fslab.core import cache

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cache, "CACHE_DIR", tmp_path_factory.mktemp("cache"))
        yield


@pytest.fixture(scope="session", autouse=True)
def guests_boot_meanwhile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The QEMU guests the selected tests need (a module's `guest_job()`) start booting now, in
    the background, while the host's tests run (tests/guest.py): in a parallel run, in the first
    worker to start, and whichever worker is handed a guest's tests waits for its result."""
    import guest

    if guest.unavailable_reason() is None:
        modules = dict.fromkeys(getattr(item, "module", None) for item in request.session.items)
        jobs = [getattr(module, "guest_job", lambda: None)() for module in modules]
        if any(jobs):
            guest.keep_fio_options()
        guest.boot_meanwhile([job for job in jobs if job is not None], tmp_path_factory)
    yield
    guest.stop_waiting()


@contextmanager
def fresh_workdir(name: str = "") -> Iterator[Workdir]:
    """A work directory of its own (at `name` below a new temporary directory, if named), checked
    afterwards for anything left attached or mounted."""
    TEST_ROOT.mkdir(parents=True, exist_ok=True)
    top = Path(tempfile.mkdtemp(prefix="wd-", dir=TEST_ROOT))
    root = top / name
    Workdir(root).prepare()
    try:
        yield Workdir(root)
    finally:  # a failed test's directory goes too: nothing of the tests' is left in /var/tmp
        leftovers = held_by(root)
        if leftovers:
            Workdir(root).journal.clean_up()  # release them, then fail the test that left them
        shutil.rmtree(top, ignore_errors=True)
    assert not leftovers, f"the test left these attached or mounted: {leftovers}"


@pytest.fixture
def toys() -> Iterator[Callable[..., None]]:
    """Registers toys for one test: `toys("filesystem", "monitor")` runs tests/toys/filesystem.py
    and monitor.py as an import would (each joins its registry itself), and every registry is as
    it was again at the test's end (fslab.registry.scoped)."""

    def register(*names: str) -> None:
        for name in names:
            runpy.run_path(str(TOYS / f"{name}.py"))

    with registry.scoped():
        yield register


@pytest.fixture(scope="session")
def needs_root() -> None:
    """Asked for by each fixture that attaches, formats or mounts, whatever its scope: the tests
    that use it, however indirectly, are marked `root` (pytest_collection_modifyitems)."""


@pytest.fixture(scope="session")
def pg_cluster(needs_root: None) -> Iterator[postgres.Cluster]:
    """A PostgreSQL cluster of this worker's own, on loopback (tests/postgres.py)."""
    import postgres

    reason = postgres.unavailable_reason()
    if reason:
        pytest.fail(f"the PostgreSQL tests start a cluster: {reason}; make test installs it", pytrace=False)
    with postgres.cluster() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def fleet_lab(needs_root: None) -> Iterator[fleet.Lab]:
    """Network namespaces on a bridge and a PostgreSQL listening there (tests/fleet.py), shared
    by a module's fleets: each fleet on it starts on a new database."""
    import fleet

    with fleet.lab(3) as found:
        yield found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium (the Makefile installs it; playwright downloads no browser), headless, driven
    by playwright: the page tests' (each such test is marked `browser`)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless=new"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def workdir(needs_root: None) -> Iterator[Workdir]:
    with fresh_workdir() as wd:
        yield wd


def held_by(root: Path) -> list[str]:
    """Loop devices backed by images under `root`, mounts under it, and the run scratch
    directories and memory cgroups fslab names for it. Read from the kernel's own bytes, not
    through fslab's reading of them: sysfs gives a loop device's backing file as it is,
    mountinfo a path with its space, tab, newline and backslash as octal escapes."""
    raw = os.fsencode(root)
    backing = {loop.parent.parent.name: _bytes_of(loop) for loop in Path("/sys/block").glob("loop*/loop/backing_file")}
    held = [f"/dev/{loop} on {file!r}" for loop, file in backing.items() if raw in file]
    escaped = raw
    for char in b"\\ \t\n":  # the backslash first: the others' escapes hold one
        escaped = escaped.replace(bytes([char]), b"\\%03o" % char)
    held += [repr(line) for line in Path("/proc/self/mountinfo").read_bytes().splitlines() if escaped in line]
    return held + [str(p) for p in scratch_of(root)] + groups_of(root)


def _bytes_of(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # detached meanwhile
        return b""


def scratch_of(root: Path) -> list[Path]:
    """Run scratch directories named for the work directory `root`, where fslab makes them."""
    return sorted(SCRATCH_IN_RAM.glob(f"{workdir_tag(root)}*"))


def groups_of(root: Path) -> list[str]:
    """Memory cgroups named for the work directory `root`, wherever in the memory hierarchy."""
    hierarchy = cgroups.find_hierarchy()
    return (
        []
        if isinstance(hierarchy, str)
        else [str(p) for p in hierarchy.mount.rglob(f"{workdir_tag(root)}*") if p.is_dir()]
    )


def killed_fslab(code: str, root: Path) -> str:
    """What a fslab killed while it held something printed: `code`, run by a Python of its own
    with the work directory `root` as its argument, ends in os._exit (nothing released)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    return subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()


def plant(journal: Journal, kind: str, path: Path, proof: dict | None = None) -> None:
    """A journal entry fslab did not write: `kind` held at `path`, proven by `proof` (default: the
    identity of what is there now)."""
    journal._append("acquire", kind, str(path))
    journal._append("proof", kind, str(path), FileId.of(os.lstat(path)).proof() if proof is None else proof)


def fslab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The fslab command, as a user runs it: a process of its own (for what only a process shows:
    its start, its signals, several at once, and the studies a root test runs)."""
    return subprocess.run([sys.executable, "-m", "fslab", *args], capture_output=True, text=True, timeout=timeout)


def fslab_in_process(
    *args: str, cwd: Path | None = None, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """The fslab command run in this process, its output caught as a pipe catches it, its exit
    status as a process's would be: what a command prints and how it ends, without the second a
    Python's start and fslab's imports cost. Through the same `main` (one error family, caught
    once); the consoles are made for the pipe, whatever this session's own output is. `cwd`: its
    working directory (where it writes reports); `env`: variables set for it (None: unset)."""
    from rich.console import Console

    from fslab import cli
    from fslab.report.console import CONSOLE_WIDTH

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out), redirect_stderr(err):
        if cwd is not None:
            patch.chdir(cwd)
        for name, value in (env or {}).items():
            if value is None:
                patch.delenv(name, raising=False)
            else:
                patch.setenv(name, value)
        patch.setattr(sys, "argv", ["fslab", *args])
        patch.setattr(sys, "stdin", io.StringIO())  # at its end, as /dev/null is
        patch.setattr(
            cli, "console", Console(file=out, width=CONSOLE_WIDTH, soft_wrap=True)
        )  # as cli makes it for a pipe
        patch.setattr(cli, "errors", Console(file=err))
        try:
            cli.main()
            status = 0
        except SystemExit as exit:  # how typer ends every command, and how a Python ends on sys.exit
            status = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
        finally:
            gc.unfreeze()  # main froze what the imports made for the rest of a process: this one goes on
    return subprocess.CompletedProcess(["fslab", *args], status, out.getvalue(), err.getvalue())


def write_study(directory: Path, text: str, name: str = "study.toml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def ran_study(tmp_path: Path, text: str, workdir: Workdir, *args: str):  # noqa: ANN201
    """A study file run through `fslab run`, as a user runs it, which must succeed: what it
    printed, its results database and the study run's id."""
    from fslab.results import ResultsDB
    from synthetic import study_run_of

    db = tmp_path / "r.db"
    result = fslab("run", str(write_study(tmp_path, text)), "--db", str(db), "--workdir", str(workdir.root), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    return result, results, study_run_of(results)["id"]


def runs_stored(db: Path) -> int:
    """Runs stored by the newest study run, or -1 before one has begun (the fio that runs then
    only reports its version)."""
    from fslab.results import ResultsDB

    if not db.exists():
        return -1
    results = ResultsDB(str(db))
    study_run = results.study_run()
    return len(results.runs(study_run["id"])) if study_run else -1


def wait_for(what: str, ready: Callable[[], object], deadline: float = 240, every: float = 0.2) -> object:
    """Poll `ready()` every `every` seconds until it is true (a state, never a guess of how long
    it takes); returns what it returned, or fails naming `what` after `deadline` seconds."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        found = ready()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"waited {deadline} s for {what}")


def fio_children(pid: int) -> list[int]:
    """The fio processes a process has started."""
    out = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if line.split()[1:] == ["fio"]]


def same_document(actual: object, expected: object, *, rel: float = 1e-12, where: str = "$") -> None:
    """Two JSON documents alike, their floats to `rel` (a golden summary's figures may differ in
    their last bits with numpy's version and the CPU's vector unit: exp and log are not exactly
    rounded), everything else exactly; an AssertionError names the first place they differ."""
    if isinstance(expected, float) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        assert actual == pytest.approx(expected, rel=rel, abs=0, nan_ok=True), f"{where}: {actual!r} != {expected!r}"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), (
            f"{where}: keys {list(actual) if isinstance(actual, dict) else actual!r} != {list(expected)}"
        )
        for key in expected:
            same_document(actual[key], expected[key], rel=rel, where=f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{where}: {actual!r} != {expected!r}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            same_document(a, e, rel=rel, where=f"{where}[{i}]")
    else:
        assert actual == expected and type(actual) is type(expected), f"{where}: {actual!r} != {expected!r}"


def path_without(tool: str, directory: Path) -> str:
    """A PATH with every command of this machine but `tool`: as if its package were not installed."""
    directory.mkdir()
    for folder in os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(":") + ["/usr/sbin", "/sbin"]:
        for entry in Path(folder).glob("*") if Path(folder).is_dir() else []:
            link = directory / entry.name
            if entry.name != tool and not link.exists() and not link.is_symlink():
                link.symlink_to(entry)
    assert shutil.which(tool, path=str(directory)) is None
    return str(directory)


@pytest.fixture
def signals_interrupt():
    """fslab's handlers (as its commands install them), the test's own restored afterwards."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    interruption.interrupt_on_signals()
    yield
    for s, handler in before.items():
        signal.signal(s, handler)
    interruption._received.clear()
