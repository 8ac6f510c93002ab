"""fslab's import graph, read from its source with `ast`: no circle among its modules — a module-level,
a TYPE_CHECKING-only or a function-local import each counts, since each says which module needs
which — and the records a study is made of (model/__init__.py) depend on nothing of fslab but names,
units and errors, so that any module may take them from there."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fslab

PACKAGE = Path(fslab.__file__).parent
# What model/__init__.py may import of fslab: the guard's names (a target's image names), units, errors.
MODEL_MAY_IMPORT = {"fslab.core.errors", "fslab.core.names", "fslab.core.units"}


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package under `root`, by its dotted name."""
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


_TREES: dict[str, ast.Module] = {}


def syntax(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once a process for its text (a copy of fslab's modules is
    parsed once with them): the tests only read it, and five of them walk fslab's every module
    (half a second of CPU to parse them all)."""
    text = path.read_text()
    if text not in _TREES:
        _TREES[text] = ast.parse(text, str(path))
    return _TREES[text]


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that module `name` imports anywhere in its text (a `from package
    import name` counts as the submodule when there is one, else as the package)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(syntax(path)):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            stem = (
                ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).strip(".")
                if node.level
                else node.module or ""
            )
            candidates = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in known else stem for alias in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate not in known and "." in candidate:
                candidate = candidate.rsplit(".", 1)[0]
            if candidate in known and candidate != name:
                found.add(candidate)
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imported(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each circle of modules (a strongly connected component of more than one), as a path
    through it that comes back to where it starts."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def visit(module: str) -> None:  # Tarjan's
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while (top := stack.pop()) != module:
                component.append(top)
            if component:
                components.append({module, *component})

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [_circle(graph, component) for component in components]


def _circle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, within the component."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for other in sorted(graph[module] & component):
                if other == start:
                    return [*paths[module], start]
                if other not in paths:
                    paths[other] = [*paths[module], other]
                    following.append(other)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # a component of more than one always has one


def test_no_module_of_fslab_imports_itself_round_a_circle():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" → ".join(circle) for circle in found)


def test_the_walk_finds_a_circle_however_it_is_imported(tmp_path):
    """The walk itself: a circle closed by a TYPE_CHECKING import, one closed inside a function,
    and relative imports are each found; a package importing its own submodule is no circle."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg import plain\n")
    (package / "plain.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n")
    (package / "c.py").write_text("from .sub import d\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "d.py").write_text("def late():\n    from ..c import C\n")
    found = cycles(import_graph(package))
    assert sorted(found) == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.c", "pkg.sub.d", "pkg.c"]]


def test_the_model_depends_on_nothing_of_fslab_but_names_units_and_errors():
    graph = import_graph()
    assert graph["fslab.model"] <= MODEL_MAY_IMPORT, (
        f"model/__init__.py imports {sorted(graph['fslab.model'] - MODEL_MAY_IMPORT)}"
    )
    # and, run, loads nothing else (a package's __init__ on the way included)
    code = "import sys, fslab.model; print(' '.join(sorted(m for m in sys.modules if m.startswith('fslab'))))"
    loaded = set(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    assert loaded <= MODEL_MAY_IMPORT | {"fslab", "fslab.core", "fslab.model"}, (
        f"importing fslab.model loads {sorted(loaded)}"
    )


def test_the_results_database_loads_no_workload_kind_and_no_filesystem():
    """What `fslab summary` reads stored runs with takes their records from the model, not from
    the kinds that made them (the rest of the summary's path: issue 21's registries)."""
    code = "import sys, fslab.results.db; print(' '.join(sorted(m for m in sys.modules if m.startswith('fslab'))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert not [m for m in loaded if m.startswith(("fslab.workloads", "fslab.filesystems"))], (
        f"importing fslab.results.db loads {loaded}"
    )


def test_fslab_summary_of_a_study_run_loads_no_workload_kind_and_no_filesystem(tmp_path):
    """A run stores what its filesystem made of its options (OptionsApplied), so the summary of a
    study run reads its runs without the code that made them: no filesystem, no workload kind; nor
    pydantic, which reads study files (typer 0.29 builds a pydantic model of every option of the
    command run: a tenth of a second and more before it starts, pyproject.toml). And it starts no
    thread pool for linear algebra: numpy and scipy each bring OpenBLAS, which starts a thread per
    core as it loads (a tenth of a second of CPU), and fslab does none (its threads counted as it
    ends, /proc/self/task: the main one alone)."""
    from fslab.results import ResultsDB
    from fslab.workloads import SHIPPED
    from synthetic import stored_study

    study = """[study]\nname = "s"\nworkloads = ["rand_read"]\nrepetitions = 3\n
[[target]]\nname = "btrfs-zstd"\nfilesystem = "btrfs"\nmount_options = "compress=zstd"\n
[[target]]\nname = "ext4"\nfilesystem = "ext4"\n"""
    db = tmp_path / "results.db"
    stored_study(tmp_path, study, ResultsDB(str(db)))
    code = (
        "import os, sys\nfrom fslab.__main__ import main\nsys.argv = ['fslab', 'summary', '--db', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "print('LOADED', *sorted(m for m in sys.modules if m.startswith('fslab')))\n"
        "import threading\nfor t in threading.enumerate():\n    t is threading.main_thread() "
        "or t.join()\nprint('THREADS', len(os.listdir('/proc/self/task')), 'scipy.special' "
        "in sys.modules, 'pydantic' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=True, env=env)
    printed, loaded = done.stdout.split("LOADED")
    loaded, threads = loaded.split("THREADS")
    assert threads.split()[:2] == ["1", "True"], "one thread, once scipy.special (and numpy) were loaded"
    assert threads.split()[2] == "False", "pydantic is not loaded"
    assert "compress=zstd" in printed and "defaults" in printed, "the targets' requested options, as stored"
    kinds = {shipped.module for shipped in SHIPPED.values()}
    assert not [m for m in loaded.split() if m.startswith("fslab.filesystems") or m in kinds], loaded
    unused = sorted(set(loaded.split()) & set(NOT_FOR_A_SUMMARY))
    assert not unused, f"fslab summary loads {', '.join(unused)}"


# What running a study needs and a summary of one does not (a few hundredths of a second of its
# start): fio's job files and option tables (read only for a workload stored before fslab recorded
# its preallocation, one rewritten, one steady), commands (subprocess, the journal, cgroups) and the
# guard's checks of block devices (the monitors import them where they measure, not as they register),
# the watch on failures alike (running/systematic.py: a summary reads only how a skip is said, from model/__init__.py).
NOT_FOR_A_SUMMARY = (
    "fslab.fio.jobs",
    "fslab.fio.options",
    "fslab.fio.rewrite",
    "fslab.core.system",
    "fslab.core.block_devices",
    "fslab.running.systematic",
)


# What only some commands need: a database (SQLAlchemy), statistics (numpy, scipy).
LOADED_BY_THE_COMMANDS_THAT_USE_THEM = ("sqlalchemy", "numpy", "scipy")


@pytest.mark.parametrize(
    "args",
    [["-c", "import fslab.cli"], ["-m", "fslab", "cleanup", "--help"]],
    ids=["import fslab.cli", "fslab cleanup --help"],
)
def test_starting_fslab_loads_no_database_and_no_statistics(args):
    """Every fslab process pays for what starting it loads before it does anything — a fleet's
    worker, `fslab cleanup` in the tests' emulated guests, where Python runs ~18 times slower: each
    command imports the database and the statistics where it uses them. Run as a user runs it, in
    a fresh Python, its imports read from `-X importtime`."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True, check=True)
    loaded = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "fslab.cli" in loaded, "the commands were imported"
    heavy = sorted({m.split(".")[0] for m in loaded} & set(LOADED_BY_THE_COMMANDS_THAT_USE_THEM))
    assert not heavy, f"python {' '.join(args)} loads {', '.join(heavy)}"
    # nor the checks of a user's block device, whose flag the command line names (fslab.core)
    assert "fslab.core.block_devices" not in loaded, f"python {' '.join(args)} loads fslab.core.block_devices"


def test_running_a_study_loads_no_statistics():
    """What a study's runs need is all fslab loads before them in a lab VM, where Python runs some
    hundred times slower (software emulation, every module read over 9p): `fslab run --no-summary`
    (lab/study.py's guest command, `fslab run --kernel`'s boots and `fslab bisect`'s alike) plans
    and runs the study and stores its runs; numpy and scipy load where a summary or a verdict
    computes with them."""
    modules = "fslab.cli, fslab.study, fslab.model.ceiling, fslab.running.plan, fslab.running.runner"
    code = f"import sys, {modules}; print(sorted({{m.split('.')[0] for m in sys.modules}} & {{'numpy', 'scipy'}}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", f"importing {modules} loads {done.stdout.strip()}"


def test_a_fleets_status_table_loads_no_statistics():
    """`fslab status` reads where a fleet's study run stands: the planner, and the numpy its
    statistics load, are for `fslab run --on` alone."""
    code = (
        "import sys, fslab.cli, fslab.fleet.dispatch; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'scipy'}))"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )


def test_the_commands_parameters_are_read_without_evaluating_text():
    """typer reads every command's parameters as fslab starts, whichever command is run (twice
    each): annotations left as text (`from __future__ import annotations` in cli/__init__.py) it compiles
    and evaluates every time, a fiftieth of a second of every start."""
    from fslab.cli import app

    callbacks = [c.callback for c in app.registered_commands] + [
        c.callback for g in app.registered_groups for c in g.typer_instance.registered_commands
    ]
    assert len(callbacks) > 10, "the commands were found"
    as_text = sorted(
        f"{f.__name__}({name})" for f in callbacks for name, a in f.__annotations__.items() if isinstance(a, str)
    )
    assert not as_text, f"annotations left as text: {', '.join(as_text)}"
