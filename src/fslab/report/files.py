"""The report files of a study run, as the registry of formats (formats/) has them: every
report file `fslab summary` writes — Markdown to read, CSV and JSON to process further, the
summary (summary.*) and every run as stored (runs.*) — and `fslab export`'s tables, in the form
asked for."""

from __future__ import annotations

from pathlib import Path

from fslab.report.formats import Source, TableForm, report_files
from fslab.report.kept import folder_of
from fslab.report.output import own_folder, write_all, write_own
from fslab.report.summary import StudySummary
from fslab.report.tables import HISTOGRAM_COLUMNS, comparison_table, histogram_rows, run_table, summary_table
from fslab.results import ResultsDB


def report_folder(s: StudySummary, directory: Path) -> Path:
    """Where a study run's report files go: a folder named after it in `directory`."""
    return folder_of(s.study_run, directory)


def write_reports(db: ResultsDB, s: StudySummary, directory: Path, source: Source | None = None) -> list[Path]:
    """Every report file in the study run's folder, but those there that hold what would be
    written already (ReportFile.current: the runs files, while the runs are the same; the
    summary's, while what it is made of is: Source.made_of); the paths of all of them, in
    order. `source`: the summary's, where the caller made it (what it read or worked out for the
    console, its sections, not worked out again)."""
    folder = report_folder(s, directory)
    source = Source(db, s) if source is None else source
    own_folder(directory)
    own_folder(folder)
    registered = report_files()
    stale = [
        f for f in registered if f.current is None or not f.current(folder, source)
    ]  # all judged before any is written
    rendered = {f.name: f.render(source) for f in stale}
    for f in stale:
        write_own(folder / f.name, rendered[f.name], source.made_of if f.made_of else None)
    return [folder / f.name for f in registered]


def export_tables(db: ResultsDB, s: StudySummary, folder: Path, form: TableForm) -> list[Path]:
    """`fslab export`: the runs table (every run, long format), the summary table (every cell's
    statistics), the comparisons table (every comparison's verdict, ratio and interval), and the
    histograms table where its runs were traced (every bucket of each run's histograms) in
    `folder`, for pandas, in `form` (formats.table_form_named)."""
    tables = {
        "runs": run_table(s, db.run_metrics(s.study_run["id"])),
        "summary": summary_table(s),
        "comparisons": comparison_table(s),
    }
    if stored := db.histograms(s.study_run["id"]):  # only a study run traced (`--trace block`) has them
        tables["histograms"] = (HISTOGRAM_COLUMNS, histogram_rows(s.study_run["id"], stored))
    written = {f"{name}.{form.suffix}": form.encode(columns, rows) for name, (columns, rows) in tables.items()}
    own_folder(folder.parent)
    return write_all(folder, written)
