"""The option table of the fio fslab drives, asked of that fio once per version and kept on disk.

Asking fio about each of its ~250 options takes seconds (one `fio --cmdhelp=NAME` each: fio
answers one question a run), so the answers are asked in parallel, once, and kept in fslab's
cache directory (core/cache.py) under the fio's version, with the executable they came from
(system.executable: device, inode, mtime; and its SHA-256, so that the same fio seen through
another mount, a test guest's, is known too). A kept file is read defensively: one that is not
fslab's own (cache.read_kept), does not parse, or is of another fio is ignored and asked anew —
never trusted blindly. The table itself is derived from the answers on load (fio_help, pure), so a
newer fslab reads old answers with its own parser, and tests derive it from a fixture of the
real fio's answers (`given_table`). Within a process the table is held per executable, checked
again at most every RECHECK_SECONDS: a study checks the same options thousands of times.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from fslab.core.cache import CACHE_DIR, keep, read_kept
from fslab.core.errors import FslabError
from fslab.core.system import VERSION_SECONDS, Executable, executable, run, tool_version
from fslab.fio.help import VERSION, FioTable, HelpError, needed, table_from_answers

FORMAT = 1  # of the file kept; another is asked anew
RECHECK_SECONDS = 1.0  # a held table is fio's of the last second: an upgrade is seen at the next study
_LARGEST = 4 * 2**20  # a kept file is ~100 KiB; a larger one is not fslab's


class FioUnavailable(FslabError):
    """fslab cannot know fio's options: fio is not installed (`missing_tool`: "fio"), or its
    answers cannot be read."""

    def __init__(self, message: str, missing_tool: str | None = None):
        super().__init__(message)
        self.missing_tool = missing_tool


_given: FioTable | None = None
_held: tuple[float, Executable, tuple[str, ...], FioTable] | None = None


@contextlib.contextmanager
def given_table(table: FioTable) -> Iterator[None]:
    """Every check inside uses `table` and asks no fio (tests: the real fio 3.33's, from a fixture)."""
    global _given
    before, _given = _given, table
    try:
        yield
    finally:
        _given = before


def fio_table(engines: tuple[str, ...]) -> FioTable:
    """The table of the fio on PATH, with the options of `engines` (those of them it has)."""
    global _held
    if _given is not None:
        return _given
    now, held = time.monotonic(), _held
    if held is not None and held[2] == engines and now - held[0] < RECHECK_SECONDS:
        return held[3]
    fio = executable("fio")
    if fio is None:
        raise FioUnavailable(
            "fio is not installed: fslab checks every fio option against fio's own description of it "
            "(`fio --cmdhelp`); install fio (Debian: apt-get install fio)",
            "fio",
        )
    table = held[3] if held is not None and held[1:3] == (fio, engines) else load_table(fio, engines, CACHE_DIR)
    _held = (now, fio, engines, table)
    return table


@functools.lru_cache(maxsize=8)
def load_table(fio: Executable, engines: tuple[str, ...], cache_dir: Path) -> FioTable:
    """fio's table from its answers kept in `cache_dir`, asking fio what they lack (and keeping
    them again when it asked anything)."""
    version = tool_version((fio.path, "--version"))
    if version is None:
        raise FioUnavailable(f"`{fio.path} --version` says no version: fslab cannot ask this fio about its options")
    path = cache_dir / f"fio-options-{version.removeprefix('fio-')}.json"
    kept = _read_kept(path, fio, version)
    for answers in ([kept] if kept else []) + [{}]:
        try:
            return _completed(answers, fio, version, engines, path)
        except HelpError as exc:
            problem = exc  # a kept answer fslab cannot read: ask every question anew
    raise FioUnavailable(f"fslab cannot read fio {version}'s description of its options: {problem}")


def _completed(
    answers: dict[str, str], fio: Executable, version: str, engines: tuple[str, ...], path: Path
) -> FioTable:
    answers = {**answers, VERSION: version}
    asked = False
    while questions := needed(answers, engines):
        answers |= ask(fio.path, questions)
        asked = True
    table = table_from_answers(answers, engines)
    if asked:
        _keep(path, {"format": FORMAT, "version": version, "executable": _described(fio), "answers": answers})
    return table


def ask(fio: str, questions: list[str]) -> dict[str, str]:
    """fio's answer (what it prints) to each question, asked in parallel: each is a fio of its own."""
    from concurrent.futures import ThreadPoolExecutor  # only where fio is asked: reading results loads none

    with ThreadPoolExecutor(max_workers=min(8, 2 * (os.cpu_count() or 1))) as pool:
        return dict(
            zip(
                questions,
                pool.map(lambda question: run([fio, question], check=False, timeout=VERSION_SECONDS).stdout, questions),
            )
        )


def _described(fio: Executable) -> dict[str, object]:
    return {"path": fio.path, "identity": list(fio.identity), "sha256": _digest(fio.path)}


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _read_kept(path: Path, fio: Executable, version: str) -> dict[str, str] | None:
    """The answers kept at `path`, if it is fslab's own file and of this very fio; else None."""
    text = read_kept(path, _LARGEST)
    if text is None:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("version") != version:
        return None
    answers, made_by = record.get("answers"), record.get("executable")
    if (
        not isinstance(answers, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in answers.items())
        or not isinstance(made_by, dict)
    ):
        return None
    same = made_by.get("identity") == list(fio.identity) or made_by.get("sha256") == _digest(fio.path)
    return answers if same else None


def _keep(path: Path, record: Mapping[str, object]) -> None:
    """Keep `record` at `path` (cache.keep: whole or not at all; where fslab may not write, the
    table is kept in this process only)."""
    keep(path, json.dumps(record, indent=1, sort_keys=True).encode())
