"""docs/extending.md shows each extension point's toy whole: every example there is the code of a
file in tests/toys/ after its docstring, so that the toys' tests (and tests/test_extending.py,
which registers the doc's own code) run what the page shows."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs" / "extending.md"
TOYS = ROOT / "tests" / "toys"


def doc_modules() -> dict[str, str]:
    """The doc's modules, each by the toy it is said to be ("filesystem": its code)."""
    found = re.findall(r"Toy: `tests/toys/(\w+)\.py`\.\n\n```python\n(.*?)```", DOC.read_text(), re.S)
    return {name: code for name, code in found}


def code_of(path: Path) -> str:
    """The module's code after its docstring."""
    text = path.read_text()
    first = ast.parse(text).body[0]
    return "\n".join(text.splitlines()[first.end_lineno :]).strip("\n") + "\n"


def test_every_toy_is_shown_whole_in_the_extending_doc():
    shown = doc_modules()
    assert sorted(shown) == sorted(p.stem for p in TOYS.glob("*.py")), "one example per toy"
    for name, code in shown.items():
        assert code == code_of(TOYS / f"{name}.py"), f"docs/extending.md's {name} is not tests/toys/{name}.py as it is"
