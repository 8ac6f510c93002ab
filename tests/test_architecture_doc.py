"""docs/architecture.md shows each extension point's toy as it is: every example there is taken
from a file in tests/toys/ (which that toy's test runs end to end) — its code after its docstring,
whole, or in pieces where a line `# …` stands for what is left out."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs" / "architecture.md"
LEFT_OUT = "# …"


def code_of(path: Path) -> list[str]:
    """The module's lines after its docstring."""
    text = path.read_text()
    first = ast.parse(text).body[0]
    return text.splitlines()[first.end_lineno :]


def pieces(example: str) -> list[list[str]]:
    """The example's runs of lines between the lines that say something is left out."""
    found: list[list[str]] = [[]]
    for line in example.splitlines():
        if line.strip() == LEFT_OUT:
            found.append([])
        else:
            found[-1].append(line)
    return [[*p] for p in found if any(line.strip() for line in p)]


def taken_from(example: str, code: list[str]) -> bool:
    """Whether each piece of the example is a run of the code's lines, in the code's order."""
    at = 0
    for piece in pieces(example):
        piece = [*piece]
        while piece and not piece[0].strip():
            piece.pop(0)
        while piece and not piece[-1].strip():
            piece.pop()
        starts = [i for i in range(at, len(code) - len(piece) + 1) if code[i : i + len(piece)] == piece]
        if not starts:
            return False
        at = starts[0] + len(piece)
    return True


def test_every_example_in_the_architecture_doc_is_taken_from_a_toy_its_test_runs():
    examples = re.findall(r"Toy: `(tests/toys/[\w.]+)`\.\n\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert {name for name, _ in examples} == {f"tests/toys/{p.name}" for p in (ROOT / "tests" / "toys").glob("*.py")}, (
        "one example per toy"
    )
    for name, shown in examples:
        assert taken_from(shown, code_of(ROOT / name)), (
            f"docs/architecture.md's example is not taken from {name} as it is"
        )


def test_an_example_that_strays_from_its_toy_is_caught():
    code = ["import x", "", "def f():", "    return 1", "", "register(f)"]
    assert taken_from("import x\n# …\nregister(f)\n", code)
    assert not taken_from("import x\n# …\nregister(g)\n", code)
    assert not taken_from("register(f)\n# …\nimport x\n", code), "pieces in the code's order"
