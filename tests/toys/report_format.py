"""A toy report format, as a new one is added: one module that joins the registry itself — a
file `fslab summary` writes (toy.txt: a line per cell) and a form `fslab export --format toy`
writes its tables in (a line per row, "column=value" separated by tabs)."""

from fslab.report.formats import REPORT_FILES, TABLE_FORMS, ReportFile, Source, TableForm


def toy_text(source: Source) -> str:
    return "".join(f"{c.target} · {c.workload}: {len(c.metrics)} metrics\n" for c in source.summary.cells)


def toy_table(columns: dict[str, type], rows: list[list]) -> bytes:
    return "".join("\t".join(f"{name}={value}" for name, value in zip(columns, row)) + "\n" for row in rows).encode()


REPORT_FILES.add(ReportFile("toy.txt", order=99, render=toy_text))
TABLE_FORMS.add(TableForm("toy", suffix="toy", encode=toy_table))
