"""A summary asked for again, printed as it was kept.

`fslab summary` keeps what the console showed (view.SummaryView) beside the report files it
wrote, with the digest of what the summary was made of (`made_of`) and each report file as it
stood, whole or not at all, as fslab's own file (core.cache). Asked again, while the digest is the
one the summary would be made of now and every report file is as it was, it prints that view:
nothing worked out again, neither scipy nor numpy imported (a study run of 2,000 runs, quiet:
1.00 s worked out, 0.44 s kept; bench/report_scale.py). The digest is read from the database in
a few queries: the study run's row, targets, workloads, hosts, and its runs' ids and statuses (a
run is stored whole and never changed but for its status)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fslab.core import cache
from fslab.core.errors import Refused
from fslab.core.names import file_name
from fslab.core.units import Bandwidth
from fslab.report.output import made_of_kept
from fslab.report.view import SummaryView
from fslab.results import ResultsDB

VIEW = ".summary-view.json"  # in the report folder, beside the files it was kept with; not a report file
LARGEST_VIEW = 64 * 2**20  # bytes: a summary of 2,000 runs in 200 cells keeps 0.2 MB

# Each report file by name, and whether it keeps the digest of what its summary is made of
# (formats.ReportFile.made_of): every report file there is, as the caller's registry has them.
ReportFiles = list[tuple[str, bool]]


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


def keep(folder: Path, view: SummaryView, digest: bytes, files: ReportFiles) -> None:
    """Keep the view printed, with `digest` and the report files just written into `folder` (or
    left there, current) as each stands now: whole or not at all, as fslab's own (core.cache), a
    line saying what it is made of and the SHA-256 of what follows it, then the view and files."""
    stood = {name: _as_it_stands(folder / name) for name, _ in files}
    if None in stood.values():  # one gone meanwhile: nothing kept, the next summary works it out
        return
    body = json.dumps({"view": view.record(), "files": stood}).encode()
    head = json.dumps({"made_of": digest.decode(), "sha256": hashlib.sha256(body).hexdigest()}).encode()
    cache.keep(folder / VIEW, head + b"\n" + body)


def kept(folder: Path, digest: bytes, files: ReportFiles) -> tuple[SummaryView, list[Path]] | None:
    """The view kept in `folder` and the report files it was kept with, while `digest` is what it
    was made of, they are every one of `files`, each stands as it did, and each that keeps a digest
    keeps this one (another summary, asked otherwise, may have written it since); else None (then
    worked out again). Read only as fslab's own file in fslab's own folders (core.cache)."""
    if not cache.own_directory(folder.parent):
        return None
    data = cache.read_kept(folder / VIEW, LARGEST_VIEW)
    if data is None:
        return None
    head, _, body = data.partition(b"\n")
    try:
        said = json.loads(head)
        if said["made_of"] != digest.decode() or said["sha256"] != hashlib.sha256(body).hexdigest():
            return None  # another's summary, or not as written
        found = json.loads(body)
        view = SummaryView.from_record(found["view"])
        stood = dict(found["files"])
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError):
        return None
    if list(stood) != [name for name, _ in files]:
        return None
    for name, keeps_digest in files:
        if _as_it_stands(folder / name) != stood[name]:
            return None
        try:
            if keeps_digest and made_of_kept(folder / name) != digest:
                return None
        except Refused:  # not a regular file by now: worked out, and refused, as written
            return None
    return view, [folder / name for name, _ in files]


def _as_it_stands(path: Path) -> list[int] | None:
    """A report file's inode, size, and times of modification and change (the one no program can
    put back); None where it is not a regular file."""
    try:
        found = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    return [found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns]
