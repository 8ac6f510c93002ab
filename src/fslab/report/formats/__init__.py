"""The report formats, each a module of this package that joins its registry itself:

    def summary_md(source: Source) -> str: ...
    REPORT_FILES.add(ReportFile("summary.md", order=10, render=summary_md), own=True)  # by `fslab summary`

    def csv_bytes(columns: dict[str, type], rows: list[list]) -> bytes: ...
    TABLE_FORMS.add(TableForm("csv", suffix="csv", encode=csv_bytes), own=True)  # `fslab export --format csv`

A new format is one module here (and its test): the registries import every module of this
package the first time either is read (`report_files`, `table_forms`; fslab.registry), so a
command that writes no report file imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from fslab.core.errors import FslabError
from fslab.core.registry import Registry
from fslab.model.records import RunMetric
from fslab.report.kept import made_of
from fslab.report.sections import sections
from fslab.report.summary import StudySummary
from fslab.report.view import Section
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

    @cached_property
    def made_of(self) -> bytes:
        """The digest of what the summary is made of (kept.made_of), that the files marked
        `made_of` keep (output.MADE_OF)."""
        s = self.summary
        return made_of(
            study_run=s.study_run,
            targets=s.targets,
            workloads=s.workloads,
            hosts=s.host_facts,
            runs=s.runs,
            asked=s.asked,
        )

    @cached_property
    def sections(self) -> list[Section]:
        """What the summary shows (sections.py): the console's and summary.md's, worked out once
        (a summary of 2,000 runs: a twentieth of a second each time)."""
        return sections(self.summary)


@dataclass(frozen=True)
class ReportFile:
    """A file `fslab summary` writes into every study run's report folder."""

    name: str  # its file name
    order: int  # where it comes among the files written (and said)
    render: Callable[[Source], str | bytes]
    current: Callable[[Path, Source], bool] | None = (
        None  # whether the folder's file holds what would be written (then left as it is)
    )
    made_of: bool = False  # kept with the digest of what its summary is made of (Source.made_of)


def made_of_current(folder: Path, source: Source) -> bool:
    """Whether every file marked `made_of` in `folder` keeps the digest of what this summary is
    made of (they are written together): each then holds what would be written."""
    from fslab.report.output import made_of_kept

    return all(made_of_kept(folder / f.name) == source.made_of for f in report_files() if f.made_of)


@dataclass(frozen=True)
class TableForm:
    """A form `fslab export --format NAME` writes a study run's tables in (runs, summary)."""

    name: str
    suffix: str  # of each table's file: runs.SUFFIX, summary.SUFFIX
    encode: Callable[[dict[str, type], list[list]], bytes]  # the columns with their types, the rows


class UnknownFormat(FslabError):
    pass


REPORT_FILES: Registry[ReportFile] = Registry("report file", package=__name__)
TABLE_FORMS: Registry[TableForm] = Registry("export form", package=__name__)


def report_files() -> list[ReportFile]:
    """Every report file, in order."""
    return sorted(REPORT_FILES.values(), key=lambda f: (f.order, f.name))


def table_forms() -> dict[str, TableForm]:
    return dict(sorted(TABLE_FORMS.items()))


def table_form_named(name: str) -> TableForm:
    """The table form `fslab export --format` names; UnknownFormat naming those there are."""
    forms = table_forms()
    if name not in forms:
        raise UnknownFormat(f"{name!r} is not one of {', '.join(map(repr, forms))}")
    return forms[name]
