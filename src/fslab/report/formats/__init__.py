"""The report formats, each a module of this package that joins the registry itself:

    @report_file("summary.md", order=10)      # written by `fslab summary` for every study run
    def to_markdown(source: Source) -> str: ...

    @table_form("csv", suffix="csv")          # `fslab export --format csv`
    def csv_bytes(columns: dict[str, type], rows: list[list]) -> bytes: ...

A new format is one module here (and its test): the registry imports every module of this
package the first time it is read (`report_files`, `table_forms`), so a command that writes no
report file imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from fslab.core import registry
from fslab.core.errors import FslabError
from fslab.model.records import RunMetric
from fslab.report.summary import StudySummary
from fslab.results import ResultsDB


@dataclass
class Source:
    """What a report file is written from: a study run's summary, and the database it was read
    from for what a summary does not hold (every run whole, every stored metric), read once."""

    db: ResultsDB
    summary: StudySummary

    @cached_property
    def runs(self) -> list[dict]:
        return self.db.runs(self.summary.study_run["id"])

    @cached_property
    def run_metrics(self) -> list[RunMetric]:
        return self.db.run_metrics(self.summary.study_run["id"])


@dataclass(frozen=True)
class ReportFile:
    """A file `fslab summary` writes into every study run's report folder."""

    name: str  # its file name
    order: int  # where it comes among the files written (and said)
    render: Callable[[Source], str | bytes]
    current: Callable[[Path, Source], bool] | None = (
        None  # whether the folder's file holds what would be written (then left as it is)
    )


@dataclass(frozen=True)
class TableForm:
    """A form `fslab export --format NAME` writes a study run's tables in (runs, summary)."""

    name: str
    suffix: str  # of each table's file: runs.SUFFIX, summary.SUFFIX
    encode: Callable[[dict[str, type], list[list]], bytes]  # the columns with their types, the rows


class UnknownFormat(FslabError):
    pass


_FILES: dict[str, ReportFile] = {}
_FORMS: dict[str, TableForm] = {}


def report_file(
    name: str, *, order: int, current: Callable[[Path, Source], bool] | None = None
) -> Callable[[Callable[[Source], str | bytes]], Callable[[Source], str | bytes]]:
    """Registers the function it decorates as the renderer of the report file `name`."""

    def register(render: Callable[[Source], str | bytes]) -> Callable[[Source], str | bytes]:
        _FILES[name] = ReportFile(name, order, render, current)
        return render

    return register


def table_form(
    name: str, *, suffix: str
) -> Callable[[Callable[[dict[str, type], list[list]], bytes]], Callable[[dict[str, type], list[list]], bytes]]:
    """Registers the function it decorates as the encoder of `fslab export --format name`."""

    def register(
        encode: Callable[[dict[str, type], list[list]], bytes],
    ) -> Callable[[dict[str, type], list[list]], bytes]:
        _FORMS[name] = TableForm(name, suffix, encode)
        return encode

    return register


def report_files() -> list[ReportFile]:
    """Every report file, in order."""
    registry.load(__name__)
    return sorted(_FILES.values(), key=lambda f: (f.order, f.name))


def table_forms() -> dict[str, TableForm]:
    registry.load(__name__)
    return dict(sorted(_FORMS.items()))


def table_form_named(name: str) -> TableForm:
    """The table form `fslab export --format` names; UnknownFormat naming those there are."""
    forms = table_forms()
    if name not in forms:
        raise UnknownFormat(f"{name!r} is not one of {', '.join(map(repr, forms))}")
    return forms[name]
