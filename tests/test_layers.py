"""fslab's floors (docs/architecture.md) and the contract that holds them: import-linter's `layers`
contract in pyproject.toml fails on any import from a floor below to a floor above, circle or no
circle; and no circle closes among the floors' folders (each subpackage of fslab one node, as
../shared/tools/import-cycles.py --folders counts them) nor among modules (test_imports.py)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from test_imports import PACKAGE, cycles, import_graph, syntax

ROOT = Path(__file__).parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's verdict on the package under `src` by pyproject.toml's contracts."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=src,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
    )


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph with each subpackage of fslab one node (fslab.core, fslab.fio, …) and
    each module lying flat in fslab/ its own."""

    def folder(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folders: dict[str, set[str]] = {}
    for module, imports in graph.items():
        folders.setdefault(folder(module), set()).update(folder(m) for m in imports if folder(m) != folder(module))
    return folders


def test_every_module_keeps_to_its_floor():
    done = lint_imports(ROOT / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_an_upward_import_breaks_the_contract_though_it_closes_no_circle(tmp_path):
    """A copy of fslab where a primitive imports the command line: no circle (nothing imports the
    new module), yet the contract names the import and fails."""
    shutil.copytree(PACKAGE, tmp_path / "fslab", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "fslab" / "core" / "upward.py").write_text("import fslab.cli\n")
    assert not cycles(import_graph(tmp_path / "fslab"))
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    assert "0 kept, 1 broken" in done.stdout
    assert "fslab.core.upward -> fslab.cli" in done.stdout, done.stdout


def test_no_circle_closes_among_the_floors_folders():
    found = cycles(folder_graph(import_graph()))
    assert not found, "folder cycles: " + "; ".join(" → ".join(circle) for circle in found)


def test_the_folder_walk_finds_a_circle_its_modules_do_not_close(tmp_path):
    """Two folders importing each other through different modules: no module circle, one folder circle."""
    package = tmp_path / "pkg"
    for folder in ("low", "high"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "low" / "a.py").write_text("from pkg.high import b\n")
    (package / "high" / "b.py").write_text("")
    (package / "high" / "c.py").write_text("from pkg.low import d\n")
    (package / "low" / "d.py").write_text("")
    graph = import_graph(package)
    assert not cycles(graph)
    assert cycles(folder_graph(graph)) == [["pkg.high", "pkg.low", "pkg.high"]]


def test_fio_is_known_only_in_fio():
    """Outside fslab/fio/, fio is used through its public surface (fio/__init__.py: `from
    fslab.fio import name`, or one of its modules as a whole), never a private name of it, and no
    command line starting with `fio` is built there."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "fio") in path.parents:
            continue
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(syntax(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fslab.fio"):
                if node.module != "fslab.fio":
                    found.append(f"{where}:{node.lineno}: from {node.module} import (not the surface)")
                found += [f"{where}:{node.lineno}: private {a.name}" for a in node.names if a.name.startswith("_")]
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and "fio" in ast.unparse(node.value):
                found.append(f"{where}:{node.lineno}: private {ast.unparse(node)}")
            elif isinstance(node, ast.List) and node.elts and ast.unparse(node.elts[0]) in ("'fio'", '"fio"'):
                found.append(f"{where}:{node.lineno}: a fio command line: {ast.unparse(node)[:60]}")
    assert not found, "\n".join(found)


def test_fios_surface_names_each_name_once_for_the_type_checker_and_once_for_the_lazy_loader():
    """fio/__init__.py says its surface twice, as it must: the imports under TYPE_CHECKING (what
    mypy sees) and _HOMES (what __getattr__ loads when first asked). Held to each other here."""
    import fslab.fio

    tree = ast.parse((PACKAGE / "fio" / "__init__.py").read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    typed = {
        alias.name: node.module.removeprefix("fslab.fio.")
        for node in guarded.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    assert typed == fslab.fio._HOMES
    for name in typed:
        assert getattr(fslab.fio, name) is not None, name
