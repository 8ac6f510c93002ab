"""bench-fio's output tree, as `fslab import` reads it (pure): which directory of a file's path
names the target it measured, and whether it is a preconditioning run.

bench-fio (fio-plot's bench_fio, fio-plot 1.1.21: bench_fio/benchlib/supporting.py and runfio.py)
runs fio once per target × rw mode × block size × iodepth × numjobs, each time writing fio's JSON
to a file named after the run, in a directory per target (the basename of the device, file or
directory measured) and block size:

    OUTPUT/TARGET/BS/MODE-IODEPTH-NUMJOBS.json
    OUTPUT/TARGET/MODE RWMIXREAD/BS/MODE-IODEPTH-NUMJOBS.json   mixed modes (rw, readwrite, randrw): randrw75/
    OUTPUT/TARGET/BS/run-N/MODE-IODEPTH-NUMJOBS.json            its preconditioning job, before benchmark N

with fio's logs beside each (MODE-iodepth-IODEPTH-numjobs-NUMJOBS_bw.JOB.log, …). Older trees
(fio-plot's published data) have no block-size directory: the target's is right above the file.
A file is taken for bench-fio's only when its name and its jobs' own options agree (rw, iodepth,
numjobs; bs with the block-size directory, rwmixread with the mixed one): a tree is untrusted,
and a file merely named like bench-fio's keeps the importer's usual rule (its directory's name).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath

FILE_NAME = re.compile(r"(?P<rw>[a-z]+)-(?P<iodepth>[0-9]+)-(?P<numjobs>[0-9]+)\.json")
PRECONDITION = re.compile(r"run-[0-9]+")  # the directory of the preconditioning run before benchmark N
MIXED = ("readwrite", "rw", "randrw")  # bench-fio's settings["mixed"]: a directory per read share


@dataclass(frozen=True)
class Place:
    """Where bench-fio put a file: the directory of the target it measured, and whether it is the
    preconditioning job bench-fio runs before a benchmark (not a measurement of one)."""

    target: str
    precondition: bool


def place(path: str, jobs: Iterable[Mapping[str, str]]) -> Place | None:
    """bench-fio's place of the file at `path` whose jobs ran with these options (each job's, as
    fio listed them), None when it is not bench-fio's output."""
    parts = PurePath(path).parts
    named = FILE_NAME.fullmatch(parts[-1])
    jobs = list(jobs)
    if (
        not named
        or not jobs
        or any({k: options.get(k) for k in named.groupdict()} != named.groupdict() for options in jobs)
    ):
        return None
    above = list(reversed(parts[:-1]))  # the file's directory first, then the one above it, …
    precondition = bool(above) and PRECONDITION.fullmatch(above[0]) is not None
    if precondition:
        above = above[1:]
    if len(above) >= 2 and all(options.get("bs") == above[0] for options in jobs):
        above = above[1:]  # past the block size's directory
        if (
            named["rw"] in MIXED
            and len(above) >= 2
            and all(named["rw"] + options.get("rwmixread", "") == above[0] for options in jobs)
        ):
            above = above[1:]  # past the read share's
    elif precondition or not above:
        return None  # a preconditioning run is always in its block size's directory
    return Place(above[0], precondition)
