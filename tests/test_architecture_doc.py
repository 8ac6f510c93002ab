"""docs/architecture.md shows each extension point's toy as it is: every example there is the code
of a file in tests/toys/ (after its docstring), which that toy's test runs end to end."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs" / "architecture.md"


def code_of(path: Path) -> str:
    """The module's code after its docstring."""
    text = path.read_text()
    first = ast.parse(text).body[0]
    return "\n".join(text.splitlines()[first.end_lineno :]).strip() + "\n"


def test_every_example_in_the_architecture_doc_is_a_toy_its_test_runs():
    examples = re.findall(r"Whole: `(tests/toys/[\w.]+)`\.\n\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert {name for name, _ in examples} == {f"tests/toys/{p.name}" for p in (ROOT / "tests" / "toys").glob("*.py")}, "one example per toy"
    for name, shown in examples:
        assert shown == code_of(ROOT / name), f"docs/architecture.md's example is not {name} as it is"
