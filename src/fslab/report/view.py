"""What a summary shows, as plain records: its sections (sections.py walks a summary into them;
the console, Markdown and the page each lay them out) and the console's whole view of a study
run's summary (SummaryView), which `fslab summary` keeps beside the report files (kept.py). No
statistics here, nor anything that imports them: a summary printed from its kept view imports
none of them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum

from fslab.core.units import Bandwidth


class SectionKind(Enum):
    """What a section is: how a format lays it out (a heading, a caption, a paragraph)."""

    INTRO = "intro"  # the study run, the machine, how to read the figures, the method: lines
    TARGETS = "targets"  # the targets as built: a table
    SKIPPED = "skipped"  # targets --skip-unsupported left out: a first line, then one per target
    OVERVIEW = "overview"  # every fio figure in Table IV's layout: a line saying so, a table
    WORKLOAD = "workload"  # a workload's table (its title says how it ran)
    MONITORS = "monitors"  # what the monitors measured beside a workload: a table
    COMPARISON = "comparison"  # a workload's comparisons with one baseline: a table
    RANKING = "ranking"  # what a workload's comparisons leave out, its rankings, the runs a precision needs: lines
    FAILURES = "failures"  # the failed runs: a table


@dataclass(frozen=True)
class Section:
    kind: SectionKind
    title: str = ""  # as a heading says it ("Compared with"; a workload's: workload_title)
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # text (Markdown emphasis: **…**)
    named: str = ""  # the name the title ends with (a baseline), emphasised where a format can
    workload: str = ""  # the workload it belongs to; "" for one of the whole study run


VERDICT_COLUMN, REASON_COLUMN = "verdict", "why"


def table_columns(units: Bandwidth, columns: list[str]) -> list[str]:
    """Columns with the bandwidth columns titled in the unit shown."""
    return [c.replace("MB/s", units.value) for c in columns]


@dataclass(frozen=True)
class SummaryView:
    """All the console prints of a study run's summary (console.print_view): its sections, the
    main comparisons at a glance (forest.forest_lines) printed after the introduction, the
    bandwidth unit of its tables, and how many of its runs failed (the command's exit status)."""

    sections: list[Section]
    glance: list[str]
    units: Bandwidth
    failures: int

    def record(self) -> dict:
        """The view as JSON holds it (from_record reads it back)."""
        return {
            "sections": [{**asdict(s), "kind": s.kind.value} for s in self.sections],
            "glance": self.glance,
            "units": self.units.value,
            "failures": self.failures,
        }

    @classmethod
    def from_record(cls, found: dict) -> SummaryView:
        """The view `record` made; ValueError for anything else (every text checked to be text)."""
        failures = found["failures"]
        if not isinstance(failures, int) or isinstance(failures, bool):
            raise ValueError("failures: not a count")
        return cls(
            [_section(s) for s in found["sections"]], _texts(found["glance"]), Bandwidth(found["units"]), failures
        )


def _section(found: dict) -> Section:
    if set(found) != {"kind", "title", "columns", "rows", "lines", "named", "workload"}:
        raise ValueError(f"a section of {sorted(found)}")
    rows = found["rows"]
    if not isinstance(rows, list):
        raise ValueError("rows: not a list")
    return Section(
        SectionKind(found["kind"]),
        _text(found["title"]),
        _texts(found["columns"]),
        [_texts(row) for row in rows],
        _texts(found["lines"]),
        _text(found["named"]),
        _text(found["workload"]),
    )


def _texts(found: object) -> list[str]:
    if not isinstance(found, list):
        raise ValueError("not a list")
    return [_text(value) for value in found]


def _text(found: object) -> str:
    if not isinstance(found, str):
        raise ValueError(f"{type(found).__name__}, not text")
    return found
