"""Everything that knows fio: its option table and values, job files and their rewriting, its
output and histograms, client/server runs, preallocation, steady state, and its workload kind.

- help.py, table.py  fio's own table of its options: read from what fio says, kept per fio version
- values.py          fio's values (sizes, times, block sizes) read as fio reads them
- options.py         fio options checked against that table; what reaches outside refused, with why
- jobs.py            fio job files: parsed, every option checked, written out again by fslab
- preallocation.py   how a job's files are laid out before they are measured
- rewrite.py, space.py  what fslab rewrites in a user's jobs (sizes, times); the room their files take
- workload.py        the fio workload kind (registered with fslab.workloads as it is imported)
- output.py, hist.py fio's JSON output and its latency histograms read; METRICS
- steady.py, epoch.py  steady-state preconditioning; fio's clock in its logs
- report.py, steady_notes.py  what fio's runs offer a report (its report hook: workloads/offered.py), and
                     what a cell's table says of its steady state
- clients.py, server.py  one workload driven on several hosts: `fio --client`, `fio --server`
- bench_tree.py      bench-fio's output tree, as `fslab import` reads it
- fill.py            a device written whole once (an image made full)

The public surface: what the other floors use of fio, by name (`from fslab.fio import FioJob`),
each loaded from its module when first asked, so that importing fslab.fio loads none of them (a
summary reads fio's output without its job files, option tables or kind). The other floors
import nothing else of fio but its modules themselves (fslab.fio.workload: the kind).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fslab.fio.bench_tree import place as place
    from fslab.fio.clients import given_clients as given_clients
    from fslab.fio.fill import fill_device as fill_device
    from fslab.fio.hist import (
        HIST_TOOL as HIST_TOOL,
        Bins as Bins,
        LatencyOverTime as LatencyOverTime,
        latency_over_time as latency_over_time,
    )
    from fslab.fio.jobs import (
        JobFile as JobFile,
        direct as direct,
        direct_after as direct_after,
        expected_seconds as expected_seconds,
        fio_seconds as fio_seconds,
        measured_seconds as measured_seconds,
        parse_all as parse_all,
        reads as reads,
        render as render,
        single_job as single_job,
        stored_job as stored_job,
    )
    from fslab.fio.output import (
        BINS_TOOL as BINS_TOOL,
        DIRECTIONS as DIRECTIONS,
        KEPT_APART as KEPT_APART,
        LOG_KINDS as LOG_KINDS,
        LOG_TOOL as LOG_TOOL,
        METRICS as METRICS,
        PERCENTILES as PERCENTILES,
        PRECONDITION_PHASE as PRECONDITION_PHASE,
        Columns as Columns,
        NoJson as NoJson,
        Throughput as Throughput,
        bin_columns as bin_columns,
        job_entries as job_entries,
        job_metrics as job_metrics,
        latency_bins as latency_bins,
        load_json as load_json,
        parse_metrics as parse_metrics,
        stored_latency_bins as stored_latency_bins,
        throughput_over_time as throughput_over_time,
    )
    from fslab.fio.preallocation import (
        preallocates as preallocates,
        preallocation_of as preallocation_of,
        stored_preallocation as stored_preallocation,
    )
    from fslab.fio.report import FIO_REPORT as FIO_REPORT
    from fslab.fio.rewrite import described as described
    from fslab.fio.section import FioSection as FioSection, fio_options as fio_options
    from fslab.fio.server import (
        Endpoint as Endpoint,
        Network as Network,
        address_and_port as address_and_port,
        checked_address as checked_address,
        checked_port as checked_port,
        endpoint as endpoint,
        networks as networks,
        serve_until_stopped as serve_until_stopped,
        serving as serving,
    )
    from fslab.fio.space import room_needed as room_needed
    from fslab.fio.values import ms_text as ms_text
    from fslab.fio.workload import (
        FIO_DEFAULTS as FIO_DEFAULTS,
        FIXED_OPTIONS as FIXED_OPTIONS,
        NO_PREALLOCATION as NO_PREALLOCATION,
        FioJob as FioJob,
        log_options as log_options,
        run_measured as run_measured,
    )

# Each name of the surface, and the module of fio it lives in.
_HOMES = {
    "place": "bench_tree",
    "given_clients": "clients",
    "fill_device": "fill",
    "Bins": "hist",
    "HIST_TOOL": "hist",
    "latency_over_time": "hist",
    "LatencyOverTime": "hist",
    "direct": "jobs",
    "direct_after": "jobs",
    "expected_seconds": "jobs",
    "fio_seconds": "jobs",
    "JobFile": "jobs",
    "measured_seconds": "jobs",
    "parse_all": "jobs",
    "reads": "jobs",
    "render": "jobs",
    "single_job": "jobs",
    "stored_job": "jobs",
    "bin_columns": "output",
    "BINS_TOOL": "output",
    "Columns": "output",
    "DIRECTIONS": "output",
    "job_entries": "output",
    "job_metrics": "output",
    "KEPT_APART": "output",
    "latency_bins": "output",
    "load_json": "output",
    "LOG_KINDS": "output",
    "LOG_TOOL": "output",
    "METRICS": "output",
    "NoJson": "output",
    "parse_metrics": "output",
    "PERCENTILES": "output",
    "PRECONDITION_PHASE": "output",
    "stored_latency_bins": "output",
    "Throughput": "output",
    "throughput_over_time": "output",
    "preallocates": "preallocation",
    "preallocation_of": "preallocation",
    "stored_preallocation": "preallocation",
    "FIO_REPORT": "report",
    "described": "rewrite",
    "fio_options": "section",
    "FioSection": "section",
    "address_and_port": "server",
    "checked_address": "server",
    "checked_port": "server",
    "Endpoint": "server",
    "endpoint": "server",
    "Network": "server",
    "networks": "server",
    "serve_until_stopped": "server",
    "serving": "server",
    "room_needed": "space",
    "ms_text": "values",
    "FIO_DEFAULTS": "workload",
    "FioJob": "workload",
    "FIXED_OPTIONS": "workload",
    "log_options": "workload",
    "NO_PREALLOCATION": "workload",
    "run_measured": "workload",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
