"""A summary asked for again, printed as it was kept.

`fslab summary` keeps what the console showed (view.SummaryView) beside the report files it
wrote, with the digest of what the summary was made of (`made_of`) and each report file as it
stood. Asked again, while the digest is the one the summary would be made of now and every report
file is as it was, it prints that view: nothing worked out again, neither scipy nor numpy imported (a study
run of 2,000 runs: a summary of a second became a third of one, bench/report_scale.py). The digest
is read from the database in a few queries: the study run's row, targets, workloads, hosts, and
its runs' ids and statuses (a run is stored whole and never changed but for its status)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fslab.core.identity import open_own
from fslab.core.names import file_name
from fslab.core.units import Bandwidth
from fslab.report.output import made_of_kept, write_own
from fslab.report.view import SummaryView
from fslab.results import ResultsDB

VIEW = ".summary-view.json"  # in the report folder, beside the files it was kept with; not a report file


@dataclass(frozen=True)
class Asked:
    """How a summary was asked for, as it is worked out: --baseline, --threshold, --precision
    (the threshold when not given), the bandwidth unit (the study file's when not given) and
    whether hosts are pooled (--pool-hosts, or a plan spread over a fleet's hosts)."""

    baseline: str | None
    threshold: float
    precision: float
    units: Bandwidth
    pooled: bool

    @classmethod
    def of(
        cls,
        study_run: dict,
        *,
        baseline: str | None = None,
        threshold: float = 0.03,
        precision: float | None = None,
        units: Bandwidth | None = None,
        pool_hosts: bool = False,
    ) -> Asked:
        import tomllib

        chosen = tomllib.loads(study_run["study_source"]).get("study", {})
        spread = bool((study_run.get("settings") or {}).get("spread"))  # its hosts divided one plan (fleet/spread.py)
        return cls(
            baseline,
            threshold,
            threshold if precision is None else precision,
            units or Bandwidth(chosen.get("units", Bandwidth.MB.value)),
            pool_hosts or spread,
        )


def made_of(
    *, study_run: dict, targets: list[dict], workloads: list[str], hosts: list[Any], runs: list[dict], asked: Asked
) -> bytes:
    """The digest of what a summary is made of: this fslab (its source's hash), how it was asked
    for, and the study run as stored — its row, its targets, workloads and hosts (fslab.model.Host),
    and each of its runs by id and status. A summary is made of nothing else: the same digest,
    the same summary. (Every run's facts whole were 3.6 MB to hash for 2,000 runs.)"""
    from fslab import version

    made = {
        "fslab": version(),
        "asked": [asked.baseline, asked.threshold, asked.precision, asked.units.value, asked.pooled],
        "study_run": study_run,
        "targets": targets,
        "workloads": workloads,
        "hosts": [asdict(h) for h in hosts],
        "runs": [(r["id"], r["status"]) for r in runs],
    }
    return hashlib.sha256(json.dumps(made, default=str, sort_keys=True).encode()).hexdigest().encode()


def made_of_now(db: ResultsDB, study_run: dict, asked: Asked) -> bytes:
    """made_of for the study run as the database holds it now."""
    at = study_run["id"]
    return made_of(
        study_run=study_run,
        targets=db.targets(at),
        workloads=[w["name"] for w in db.workloads(at)],
        hosts=db.hosts(at),
        runs=db.runs(at, ["id", "status"]),
        asked=asked,
    )


def folder_of(study_run: dict, directory: Path) -> Path:
    """Where a study run's report files go: a folder named after it in `directory`."""
    return directory / file_name(f"{study_run['study']}-{study_run['id']}")


def keep(folder: Path, view: SummaryView, digest: bytes, files: list[Path]) -> None:
    """Keep the view printed beside `files`, the report files just written into `folder` (or left
    there, current), as each stands now."""
    stood = {f.name: _as_it_stands(f) for f in files}
    write_own(folder / VIEW, json.dumps({"view": view.record(), "files": stood}), made_of=digest)


def kept(folder: Path, digest: bytes, names: list[str]) -> tuple[SummaryView, list[Path]] | None:
    """The view kept in `folder` and the report files it was kept with, while `digest` is what it
    was made of, they are those `names` (every report file there is: formats.report_files) and
    every one of them stands as it did; else None (then made again)."""
    if made_of_kept(folder / VIEW) != digest:
        return None
    try:
        fd = open_own(folder / VIEW, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            found = json.loads(f.read())
        view = SummaryView.from_record(found["view"])
        files = {str(name): list(stood) for name, stood in found["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if list(files) != names or any(_as_it_stands(folder / name) != stood for name, stood in files.items()):
        return None
    return view, [folder / name for name in files]


def _as_it_stands(path: Path) -> list[int] | None:
    """A report file's inode, size and modification time; None where it is not a regular file."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    return [found.st_ino, found.st_size, found.st_mtime_ns] if stat.S_ISREG(found.st_mode) else None
