"""What the tests of workload kinds share: a study file's text read as `fslab` reads s.toml, and
one that must be refused."""

from pathlib import Path

import pytest

from fslab.model import Study
from fslab.study import StudyError, parse_study


def read_study(text: str, *, scale: float = 1.0) -> Study:
    """The study in `text`, read as a file s.toml in the current directory."""
    return parse_study(text, "s.toml", base_dir=Path("."), scale=scale)


def refused(text: str, says: str) -> None:
    """`text` is refused when read, with a message `says` matches (a regular expression)."""
    with pytest.raises(StudyError, match=says):
        read_study(text)
