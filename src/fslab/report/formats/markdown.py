"""summary.md: the summary to read — the sections the console shows too (sections.py), and the
columns and the fio overview it leaves out; the main comparisons at a glance after its
introduction (forest.py), as the console prints them."""

from __future__ import annotations

from fslab.report.forest import Forest, count_lines, explained_lines, forest_of, heading, plot_lines
from fslab.report.formats import REPORT_FILES, ReportFile, Source, made_of_current
from fslab.report.sections import sections
from fslab.report.summary import StudySummary
from fslab.report.view import Section, SectionKind


def summary_md(source: Source) -> str:
    return to_markdown(source.summary, source.sections)


def to_markdown(s: StudySummary, shown: list[Section] | None = None) -> str:
    """`shown`: sections(s), where the caller has them already."""
    out = [f"# {s.study_run['study']} — study run {s.study_run['id']}", ""]
    for section in sections(s) if shown is None else shown:
        out += _section(section)
        if section.kind is SectionKind.INTRO:  # the summary opens with its conclusions at a glance
            out += _glance(forest_of(s))
    return "\n".join(out) + "\n"


def _glance(f: Forest) -> list[str]:
    """The forest (forest.py): its plot as text, in a block of fixed width."""
    if f.empty:
        return []
    counts, explained = count_lines(f), explained_lines(f)
    return [
        "## At a glance",
        "",
        heading(f) + ":",
        "",
        *(["```text", *plot_lines(f), "```"] if f.decided else plot_lines(f)),
        "",
        *([*(f"- {line}" for line in explained), ""] if explained else []),
        *([*(line + "  " for line in counts), ""] if counts else []),
    ]


def _section(section: Section) -> list[str]:
    """A section's lines: a heading (## …) for the study run's parts and each workload, a
    caption for the tables beneath a workload's; a paragraph's lines ended by a line break."""
    match section.kind:
        case SectionKind.INTRO:
            *lines, method = section.lines
            return [*[line + "  " for line in lines], method, ""]
        case SectionKind.SKIPPED:
            first, *each = section.lines
            return ["", f"## {section.title}", "", first, "", *[f"- {line}" for line in each]]
        case SectionKind.OVERVIEW:
            return ["", f"## {section.title}", "", *section.lines, "", *_table(section)]
        case SectionKind.RANKING:
            return ["", *[line + "  " for line in section.lines]]
        case SectionKind.MONITORS | SectionKind.COMPARISON:
            named = f" **{section.named}**" if section.named else ""
            return ["", f"{section.title}{named}:", "", *_table(section)]
        case SectionKind.TARGETS:  # the first heading, right after the introduction's blank line
            return [f"## {section.title}", "", *_table(section)]
        case _:
            return ["", f"## {section.title}", "", *_table(section)]


def _table(section: Section) -> list[str]:
    columns, rows = section.columns, section.rows
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)] + [
        "| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows
    ]


REPORT_FILES.add(ReportFile("summary.md", order=10, render=summary_md, current=made_of_current, made_of=True), own=True)
