"""How fio lays out a workload's files (its `fallocate`): recorded with each workload as it runs,
read back by a summary. Apart from the job files (jobs.py), whose parser and option tables a
summary needs only for a workload stored before fslab recorded it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fslab.core.errors import Refused

# fio's `fallocate` where a job sets none (HOWTO: native wherever the platform preallocates), and
# the values that allocate a file's blocks before the job writes them ("1" is posix; "truncate"
# only sets the size, allocating nothing).
FALLOCATE_DEFAULT = "native"
PREALLOCATING = ("native", "posix", "keep", "1")


def preallocation_of(jobs: Iterable[Mapping[str, str | None]]) -> str:
    """How fio lays out these jobs' files (each job's options as fio leaves them, JobFile.jobs):
    their `fallocate` values, each once in order, fio's default where a job sets none — the words
    stored with a workload ("none", "native", "none, posix")."""
    return ", ".join(dict.fromkeys((options.get("fallocate") or FALLOCATE_DEFAULT).lower() for options in jobs))


def stored_preallocation(spec: Mapping[str, object]) -> str:
    """A stored workload's `preallocation`: as recorded, or, for one stored before fslab recorded
    it (its fio jobs then ran with fio's default unless they set fallocate), read from the job
    stored with it, or from its options (the oldest stored no job); "" where none says (a
    scenario of then, a job refused today)."""
    job, options = spec.get("job"), spec.get("fio_options")
    if "preallocation" in spec:
        return str(spec["preallocation"] or "")
    if isinstance(job, str):
        from fslab.fio.jobs import (
            stored_job,
        )  # fio's option tables and the parser: only for a workload stored before

        try:
            return preallocation_of(stored_job(job).jobs())
        except Refused:
            return ""
    return (
        preallocation_of([{str(k): str(v) for k, v in options.items()}])
        if isinstance(options, dict) and options and not spec.get("job_file")
        else ""
    )


def preallocates(recorded: str) -> bool:
    """Whether any job of a recorded `preallocation` allocated its files' blocks before writing them."""
    return any(value.strip() in PREALLOCATING for value in recorded.split(","))
