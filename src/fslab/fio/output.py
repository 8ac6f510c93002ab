"""What fio prints, read: the metrics fslab takes from fio's JSON, with their units, directions and
roles (METRICS), its latency histograms (latency_bins), and the bandwidth and IOPS logs fslab
keeps beside (throughput_over_time). Pure (text in, records out), and apart from the fio kind
(fio.py) so that what reads stored output — the importer, the summary, its charts and details —
loads no workload kind.

Parsing is tested on output produced by real fio (tests/fixtures). Latency is fio's total latency
(lat = slat + clat: what an application waits for each I/O); completion (clat) and submission
(slat) latency are kept as their own metrics. Percentiles are computed from fio's json+ histogram
bins merged over all jobs — fio's own method — so jobs without group_reporting aggregate
correctly. fio keeps total- and submission-latency bins only when asked (fio.MEASUREMENT_OPTIONS);
a run without them (stored before) has no such percentiles, never clat's in their place. The same
parser reads results fslab did not make (results/importer.py): fio's plain json (one job's percentiles are
then fio's own), its client/server output, and fio 2.x's units, each converted to 3.x's
(in_current_units).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

import orjson

from fslab.core.units import Bandwidth
from fslab.model import Metric, MetricKind, RawOutput
from fslab.workloads.offered import DIRECTIONS, Throughput

FSYNCS = "fsyncs"  # the name kinds report their fsyncs under (workloads.base.FSYNCS; base imports this module)
IOS = "ios"  # and their completed I/Os (workloads.base.IOS)
PERCENTILES = {"p50": 50.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}
# fio's latencies, each in its "<kind>_ns" object: total (the latency), completion, submission.
LATENCIES = ("lat", "clat", "slat")


# Compared for every direction: throughput, and the tail latency seed 003 cares about; IOPS is
# what decides a cell's precision and its rank.
PRIMARY = ("iops",)
COMPARED = ("iops", "lat_p99_us")


# What fio's JSON prints each to (tests/fixtures/fio): IOPS to 6 decimals, bandwidth in whole
# bytes/s, latencies in whole ns; by the unit each is stored in.
RESOLUTIONS = {"IOPS": 1e-6, "MB/s": 1e-6, "MiB/s": 2**-20, "µs": 1e-3}


# Steady state (steady_states): whether fio judged a run's jobs steady (1) or not (0), and, when
# it did, after how long (s); and how long a precondition phase took (fio.py runs them: s, as
# fslab timed it). What a run was, not how fast: neither primary nor compared.
STEADY_METRICS = {
    "steady_state": MetricKind("", True, resolution=1.0),
    "steady_state_s": MetricKind("s", False, resolution=1e-3),
    "precondition_s": MetricKind("s", False),
}


def _kinds() -> dict[str, MetricKind]:
    per_direction = {"iops": ("IOPS", True), "mb_s": ("MB/s", True), "mib_s": ("MiB/s", True)}
    per_direction |= {f"{kind}_{stat}_us": ("µs", False) for kind in LATENCIES for stat in ("mean", *PERCENTILES)}
    kinds = {
        f"{d}_{name}": MetricKind(
            unit, higher, primary=name in PRIMARY, compared=name in COMPARED, resolution=RESOLUTIONS[unit]
        )
        for d in DIRECTIONS
        for name, (unit, higher) in per_direction.items()
    }
    # What each direction moved (fio's io_bytes): what the runner's traffic monitor weighs the
    # devices' bytes against (write amplification, reads served by a cache). Neither better nor
    # worse; reported, not compared.
    kinds |= {f"{d}_bytes": MetricKind("B", False) for d in DIRECTIONS}
    kinds[FSYNCS] = MetricKind("", False, resolution=1.0)  # fsync(2) calls (fsync_count), held against device flushes
    kinds[IOS] = MetricKind("", False, resolution=1.0)  # reads and writes completed (total_ios): CPU per I/O
    return kinds | {"cpu_usr_pct": MetricKind("%", False), "cpu_sys_pct": MetricKind("%", False)} | STEADY_METRICS


METRICS: dict[str, MetricKind] = _kinds()  # every metric fio's parser reports


def metric(name: str, value: float) -> Metric:
    return METRICS[name].of(name, value)


# fio's bandwidth and IOPS logs of a measured run, as the runner keeps them: one raw output of this
# tool (fio.py writes and stores them).
LOG_TOOL = "fio_log"
LOG_PREFIX = "fslab"  # fio names the files <prefix>_bw.<job>.log and <prefix>_iops.<job>.log
LOG_KINDS = "bw|iops|lat|clat|slat|clat_hist"  # every log fio writes: <prefix>_<kind>[.<job>].log
LOG_FILE = re.compile(rf"{LOG_PREFIX}_(bw|iops)\.(\d+)\.log")  # the logs stored


def throughput_over_time(text: str) -> list[Throughput]:
    """A run's stored logs (LOG_TOOL's text) as throughput per direction over time (pure), each
    window's time from fio's epoch (epoch_ms: logs stamped on the monotonic clock; logs stored
    before were stamped from it). The
    jobs' windows are added up in order — each job's k-th with the others' k-th, stamped at their
    mean time —, not by time: fio stamps a job's windows when it gets to them, a few ms late and
    later as the run goes on. ValueError when the text is not such logs."""
    try:
        document = json.loads(text)
        interval, files, origin = document["log_avg_msec"], dict(document["files"]), document.get("epoch_ms") or 0
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"no fio logs as fslab stores them ({type(exc).__name__}: {exc})") from None
    if not isinstance(interval, int) or interval <= 0:
        raise ValueError(f"log_avg_msec {interval!r} is no window")
    if not isinstance(origin, (int, float)) or not math.isfinite(origin):
        raise ValueError(f"epoch_ms {origin!r} is no moment")
    jobs: dict[
        tuple[str, str], list[list[tuple[float, float]]]
    ] = {}  # (direction, log) → each job's windows: (msec, value)
    for name, log in files.items():
        matched = LOG_FILE.fullmatch(name)
        if not matched or not isinstance(log, str):
            raise ValueError(f"{name!r} is no fio log fslab writes")
        windows: dict[str, list[tuple[float, float]]] = {d: [] for d in DIRECTIONS}
        for line in log.splitlines():
            if line.strip():
                msec, value, code = map(float, line.split(",", 3)[:3])
                if (
                    code in (0, 1) and math.isfinite(msec) and math.isfinite(value)
                ):  # not trims (2), nor what fio never writes
                    windows[DIRECTIONS[int(code)]].append((msec, value))
        for direction, found in windows.items():
            if found:
                jobs.setdefault((direction, matched.group(1)), []).append(found)
    throughput = []
    for direction in DIRECTIONS:
        bw, iops = _added(jobs.get((direction, "bw"), [])), _added(jobs.get((direction, "iops"), []))
        stamps = max(bw, iops, key=len)
        if stamps:
            pad = [(0.0, 0.0)] * len(stamps)
            throughput.append(
                Throughput(
                    direction,
                    interval,
                    [(msec - origin) / 1000 for msec, _ in stamps],
                    [v * 1024 for _, v in (bw + pad)[: len(stamps)]],
                    [v for _, v in (iops + pad)[: len(stamps)]],
                )
            )
    return throughput


def _added(jobs: list[list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """Several jobs' windows added up in order: (their mean time, the sum of their values)."""
    if len(jobs) == 1:  # one job: its windows as they are
        return jobs[0]
    added = []
    for k in range(max((len(windows) for windows in jobs), default=0)):
        kth = [windows[k] for windows in jobs if k < len(windows)]
        added.append((sum(msec for msec, _ in kth) / len(kth), sum(value for _, value in kth)))
    return added


# Where fio's JSON may begin: an opening brace at the start of a line (fio indents every nested
# object). fio prints notices and error lines ("note: ...", "fio: ...") before its JSON and
# sometimes after it, and those may hold braces of their own.
_JSON_START = re.compile(r"^\{", re.MULTILINE)


def load_json(text: str) -> dict:
    """fio's JSON: the first JSON object that begins a line, whatever fio printed before or after
    it. ValueError when there is none, saying what was wrong with the candidate that read
    furthest (a truncated file's JSON, not a stray brace before it)."""
    first = _JSON_START.search(text)
    if first is not None:  # orjson: a 2,000-run report reads 74 MB of json+ in a quarter of json's time
        with contextlib.suppress(orjson.JSONDecodeError):  # it reads plain JSON alone: the rest is read below
            if isinstance(found := orjson.loads(text[first.start() :]), dict):
                return found
    # fio writes the job's options into its JSON without escaping a control character in them: a
    # directory's tab or newline (strict=False reads them as the characters they are)
    decoder = json.JSONDecoder(parse_constant=_no_constant, strict=False)
    failures: list[tuple[int, str]] = []  # (how far it read, what was wrong)
    for start in _JSON_START.finditer(text):
        try:
            found, _ = decoder.raw_decode(text, start.start())
        except json.JSONDecodeError as exc:
            failures.append((exc.pos, str(exc)))
            continue
        except (ValueError, RecursionError) as exc:  # NaN or Infinity; nesting deeper than Python's stack
            failures.append((start.start(), str(exc) if isinstance(exc, ValueError) else "nested too deeply"))
            continue
        if isinstance(found, dict):
            return found
    if not failures:
        raise NoJson("fio produced no JSON output")
    raise ValueError(f"malformed JSON: {max(failures)[1]}")


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is no number fio writes")


class NoJson(ValueError):
    """Text with no JSON object in it at all."""


def percentile_from_bins(bins: dict[str, int], percent: float) -> float:
    """fio's percentile: the first histogram bucket at which the running count reaches percent·N."""
    ordered = sorted((int(value), count) for value, count in bins.items())
    total = sum(count for _, count in ordered)
    threshold = percent / 100.0 * total
    running = 0
    for value, count in ordered:
        running += count
        if running >= threshold:
            return float(value)
    return float(ordered[-1][0])


def _in_direction(direction: str, jobs: list[dict]) -> list[dict]:
    """The jobs' parts in one direction that did I/O, in current units: what both the metrics and
    the latency bins read."""
    return [p for job in jobs if (p := in_current_units(job[direction]))["total_ios"] > 0]


def _direction_metrics(direction: str, jobs: list[dict]) -> list[Metric]:
    parts = _in_direction(direction, jobs)
    if not parts:
        return []
    bw_bytes = sum(p["bw_bytes"] for p in parts)
    metrics = [
        metric(f"{direction}_iops", sum(p["iops"] for p in parts)),
        *(metric(f"{direction}_{unit.metric}", unit.of(bw_bytes)) for unit in Bandwidth),
        metric(f"{direction}_bytes", sum(p["io_bytes"] for p in parts)),
    ]
    for kind in LATENCIES:
        metrics += _latency_metrics(f"{direction}_{kind}", [p[f"{kind}_ns"] for p in parts if f"{kind}_ns" in p])
    return metrics


def _latency_metrics(prefix: str, stats: list[dict]) -> list[Metric]:
    """One latency's mean (weighted by each job's count) and its percentiles from the jobs' bins
    merged, when fio kept bins; nothing when fio recorded none (slat under a synchronous engine).
    Without bins (fio's plain json), one job's percentiles are fio's own, as it printed them;
    several jobs' cannot be merged, and have none."""
    count = sum(s["N"] for s in stats)
    if not count:
        return []
    metrics = [metric(f"{prefix}_mean_us", sum(s["mean"] * s["N"] for s in stats) / count / 1e3)]
    bins = _merged_bins(stats)
    if bins:
        metrics += [
            metric(f"{prefix}_{name}_us", percentile_from_bins(bins, pct) / 1e3) for name, pct in PERCENTILES.items()
        ]
    elif len(stats) == 1:
        own = stats[0].get("percentile", {})
        metrics += [
            metric(f"{prefix}_{name}_us", own[key] / 1e3)
            for name, pct in PERCENTILES.items()
            if (key := f"{pct:.6f}") in own
        ]
    return metrics


def _merged_bins(stats: list[dict]) -> dict[str, int]:
    """fio's json+ histogram bins (latency in ns → I/Os) of several jobs, added up."""
    return added_bins([s.get("bins", {}) for s in stats])


def added_bins(each: list[dict[str, int]]) -> dict[str, int]:
    """Histogram bins (latency in ns, as fio keys them → I/Os) of several jobs added up. One alone
    as it is, the first copied whole (a cell's runs are added up in columns: details.added_columns)."""
    if len(each) == 1:
        return each[0]
    bins = dict(each[0]) if each else {}
    for other in each[1:]:
        for value, n in other.items():
            bins[value] = bins.get(value, 0) + n
    return bins


def latency_bins(
    text: str, job: str | None = None, host: str | None = None, kinds: tuple[str, ...] = LATENCIES
) -> dict[tuple[str, str], dict[str, int]]:
    """(direction, latency kind: lat, clat or slat; those of `kinds`) → fio's json+ bins merged
    over the jobs — those named `job` (of `host`, in client/server output) when given: an imported
    run's, whose file may hold others —, latency in ns → I/Os: the distribution behind the
    percentiles, read as they are (any fio version's units), keyed as fio writes them (the ns in
    decimal: a report adds up thousands of runs' bins, and converts a cell's keys once). Only what
    fio kept bins of; ValueError when a bin is not a count of a latency."""
    entries = job_entries(load_json(text))
    if entries is None:
        raise ValueError("no 'jobs' or 'client_stats' in fio's output")
    jobs = [e for e in entries if job in (None, e["jobname"]) and host in (None, e.get("hostname"))]
    found = {}
    for direction in DIRECTIONS:
        parts = _in_direction(direction, jobs)
        for kind in kinds:
            bins = _merged_bins([p[f"{kind}_ns"] for p in parts if f"{kind}_ns" in p])
            if bins:
                found[(direction, kind)] = _checked(direction, kind, bins)
    return found


def _checked(direction: str, kind: str, bins: dict[str, int]) -> dict[str, int]:
    if not (all(map(str.isdecimal, bins)) and set(map(type, bins.values())) == {int}):
        raise ValueError(f"fio's {direction} {kind} bins are not latencies in ns with their counts")
    return bins


BINS_TOOL = "fio_bins"  # a run's json+ latency bins apart from fio's JSON (stored_bins): a report reads them alone
KEPT_APART = ("lat", "clat")  # the latencies whose distribution a report draws


def stored_bins(phase: str, output: str) -> list[RawOutput]:
    """fio's json+ bins of total and completion latency of a run's `output` (latency_bins, merged
    over its jobs) as one raw output of BINS_TOOL, in columns — JSON {"<direction> <latency>":
    [[ns, …], [I/Os, …]]} —, kept beside fio's JSON, which holds them too: a page adds up every
    run's bins, and reads these (a few KB) instead of all of fio's JSON (tens of KB each). None
    when fio's output has none."""
    try:
        bins = latency_bins(output, kinds=KEPT_APART)
    except (ValueError, KeyError, TypeError, AttributeError):  # fio's output unreadable: parsing it says why
        return []
    columns = {f"{d} {kind}": [list(map(int, b)), list(b.values())] for (d, kind), b in bins.items()}
    return [RawOutput(phase, BINS_TOOL, json.dumps(columns, separators=(",", ":")))] if bins else []


Columns = tuple[list[int], list[int]]  # bins in columns: latency in ns, I/Os


def stored_latency_bins(text: str, kinds: tuple[str, ...] = KEPT_APART) -> dict[tuple[str, str], Columns]:
    """What stored_bins kept (of `kinds`), its columns as they are: a report adds up a cell's at once."""
    found = {}
    for key, (values, counts) in load_json(text).items():
        direction, kind = key.split(" ")
        if kind in kinds:
            if not (isinstance(values, list) and isinstance(counts, list) and len(values) == len(counts)):
                raise ValueError(f"the stored {direction} {kind} bins are not two columns of one length")
            found[(direction, kind)] = (values, counts)
    return found


def bin_columns(bins: Mapping[str, int]) -> Columns:
    """Bins as fio keys them (latency_bins) in columns, as stored_bins keeps them."""
    return list(map(int, bins)), list(bins.values())


# fio's sum over the hosts of client/server output: its parts are read, never the sum beside them
ALL_CLIENTS = "All clients"


def job_entries(document: dict) -> list[dict] | None:
    """The entries of fio's JSON that report jobs: its "jobs", or client/server output's
    "client_stats" (one per host and job, with its "hostname"; fio's "All clients" sum left out).
    None when it has neither."""
    if isinstance(document.get("jobs"), list):
        return document["jobs"]
    if isinstance(document.get("client_stats"), list):
        return [e for e in document["client_stats"] if e["jobname"] != ALL_CLIENTS]
    return None


def in_current_units(part: dict) -> dict:
    """One direction of a job ("read", "write") as fio 3.20 and later write it: bandwidth in
    bytes/s ("bw_bytes"), bytes moved ("io_bytes"), each latency in ns under "<kind>_ns" with its
    sample count "N", its percentiles and its json+ bins keyed by value in ns.

    Older fio wrote it otherwise, and each is converted exactly: fio 2.x kept latencies in µs
    under "clat", "lat" and "slat" (json+ bins keyed by value from 2.21, by bucket index with fio's
    bucket constants before); bandwidth only in KiB/s ("bw") before 3.2; io_bytes in KiB before
    2.19 (when "io_kbytes" came beside it); no "N" before 3.20 — then a latency fio recorded counts
    the direction's I/Os, and one it never recorded (slat under a synchronous engine, all zero)
    counts none; and no "total_ios" before 2.2."""
    found = dict(part)
    if "io_kbytes" not in part:
        found["io_bytes"] = part["io_bytes"] * 1024
    found.setdefault("bw_bytes", part["bw"] * 1024)
    found.setdefault("total_ios", round(part["iops"] * part["runtime"] / 1000))
    for kind in LATENCIES:
        if f"{kind}_ns" in part:
            found[f"{kind}_ns"] = _with_count(part[f"{kind}_ns"], found["total_ios"])
        elif kind in part:
            found[f"{kind}_ns"] = _with_count(_microseconds_as_ns(part[kind]), found["total_ios"])
    return found


def _with_count(stats: dict, ios: int) -> dict:
    if "N" in stats:
        return stats
    recorded = stats["max"] > 0 or stats["mean"] > 0
    return {**stats, "N": ios if recorded else 0}


def _microseconds_as_ns(stats: dict) -> dict:
    """A fio 2.x latency (µs) in 3.x's units (ns): mean and percentiles scaled, bins keyed by
    value in ns (fio 2.x before 2.21 keyed them by bucket index: turned into the bucket's value
    as fio itself computed it)."""
    found = {
        **stats,
        "mean": stats["mean"] * 1e3,
        "percentile": {key: value * 1000 for key, value in stats.get("percentile", {}).items()},
    }
    bins = stats.get("bins")
    if bins is not None:
        if "FIO_IO_U_PLAT_BITS" in bins:
            bits, per_group = bins["FIO_IO_U_PLAT_BITS"], bins["FIO_IO_U_PLAT_VAL"]
            bins = {
                str(_bucket_value(int(index), bits, per_group)): n
                for index, n in bins.items()
                if not index.startswith("FIO_") and n
            }
        found["bins"] = {str(int(value) * 1000): n for value, n in bins.items()}
    return found


def _bucket_value(index: int, bits: int, per_group: int) -> int:
    """The value fio 2.x gave a histogram bucket by its index (stat.c's plat_idx_to_val): exact
    below 2·per_group, else the middle of the bucket's range, truncated."""
    if index < per_group << 1:
        return index
    error_bits = (index >> bits) - 1
    base = 1 << (error_bits + bits)
    return int(base + (index % per_group + 0.5) * (1 << error_bits))


def parse_metrics(text: str) -> list[Metric]:
    """IOPS, bandwidth, latency — total, completion and submission: mean and percentiles — per
    direction, and fio's CPU use, over every job of a run's fio output."""
    jobs = load_json(text)["jobs"]
    if not jobs:
        raise ValueError("fio's output lists no jobs")
    return job_metrics(jobs)


def job_metrics(jobs: list[dict]) -> list[Metric]:
    """The metrics of these jobs of fio's JSON taken together (their bins merged): fio's "jobs"
    entries, or its client/server "client_stats" entries, in any fio version's units."""
    metrics = [m for direction in DIRECTIONS for m in _direction_metrics(direction, jobs)]
    if ios := sum(p["total_ios"] for direction in DIRECTIONS for p in _in_direction(direction, jobs)):
        metrics.append(metric(IOS, ios))
    if fsyncs := fsync_count(jobs):
        metrics.append(metric(FSYNCS, fsyncs))
    metrics.append(metric("cpu_usr_pct", sum(job["usr_cpu"] for job in jobs)))
    metrics.append(metric("cpu_sys_pct", sum(job["sys_cpu"] for job in jobs)))
    return metrics + steady_metrics([s for job in jobs if (s := steady_state(job)) is not None])


def fsync_count(jobs: list[dict]) -> int:
    """The fsync(2) calls these jobs issued (fio's fsync=N; a lower bound of their syncs): the
    "total_ios" of their JSON's "sync" part, which counts those alone. Its latency count ("N")
    adds fdatasync(2) and sync_file_range(2) calls together — and sync_file_range flushes no
    device cache —, and a group of jobs reported as one (group_reporting, which fslab sets) shows
    one job's options, not each job's: so neither says how many fdatasyncs there were (fio 3.33)."""
    return sum(int(job.get("sync", {}).get("total_ios", 0)) for job in jobs)


# ---- steady state ---------------------------------------------------------------------------------
#
# A job with fio's steadystate options (fio/jobs.py) ends as soon as its criterion stays
# under its limit over a window of steadystate_duration seconds, sampled once a second; fio's JSON
# then holds a "steadystate" object per job (or group of jobs reported as one): the criterion as
# set ("ss"), the window ("duration"), whether it was "attained", the value the criterion reached
# ("criterion") and the window's samples ("data": IOPS and bytes/s). It says nowhere when: a job
# that attained it stopped then, so its run time (its longest direction's "runtime", counted from
# the end of ramp_time, where fio's steady-state clock starts too) is how long it took.


@dataclass(frozen=True)
class SteadyState:
    """fio's judgement of steady state of one job, or one group of jobs reported as one."""

    job: str
    criterion: str  # as the job set it, in fio's words: "iops_slope:0.300000%"
    window_s: int  # steadystate_duration, whole seconds (fio's samples: one a second)
    attained: bool
    seconds: float  # how long the job ran (its figures' run time): when attained, how long it took
    reached: str  # the criterion's value over the last window fio judged: "4.015655%"
    iops: list[int]  # the window's samples, oldest first
    bw_bytes: list[int]  # bytes/s

    @property
    def setting(self) -> str:
        """The criterion as a study writes it: "iops_slope:0.3%" (fio prints six decimals)."""
        name, _, limit = self.criterion.partition(":")
        percent = limit.endswith("%")
        return f"{name}:{float(limit.rstrip('%')):g}{'%' if percent else ''}"


def steady_state(entry: dict) -> SteadyState | None:
    """A job's steady state as fio's JSON reports it (a "jobs" or "client_stats" entry), None when
    the job had no steady-state options. ValueError when its object is not fio's."""
    found = entry.get("steadystate")
    if found is None:
        return None
    try:
        data = found["data"]
        runtimes = [entry[d]["runtime"] for d in (*DIRECTIONS, "trim") if isinstance(entry.get(d), dict)]
        return SteadyState(
            job=str(entry["jobname"]), criterion=str(found["ss"]), window_s=int(found["duration"]),
            attained=bool(found["attained"]),
            seconds=max(runtimes, default=0) / 1000, reached=str(found["criterion"]),
            iops=[int(v) for v in data["iops"]], bw_bytes=[int(v) for v in data["bw"]],
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"fio's steadystate of job {entry.get('jobname')!r} is not as fio writes it ({type(exc).__name__}: {exc})"
        ) from None


def steady_states(text: str) -> list[SteadyState]:
    """Every job's steady state in fio's output (pure): none when no job judged it."""
    return [s for entry in job_entries(load_json(text)) or [] if (s := steady_state(entry)) is not None]


def steady_metrics(states: list[SteadyState]) -> list[Metric]:
    """Jobs' steady states as a run's metrics: steady_state 1 when every job attained it, else 0;
    steady_state_s, when they all did, how long the slowest took. None without steady state."""
    if not states:
        return []
    attained = all(s.attained for s in states)
    return [
        metric("steady_state", float(attained)),
        *([metric("steady_state_s", max(s.seconds for s in states))] if attained else []),
    ]


# A workload's precondition (fio/steady.py): its phases run unmeasured before the
# measured run, each kept as one raw output of this tool, phase "precondition-N" (N from 1): JSON
# {"seconds": how long fslab saw the phase take, "output": fio's JSON text as it came}.
PRECONDITION_TOOL = "fio_precondition"
PRECONDITION_PHASE = "precondition-"


def precondition_output(number: int, seconds: float, text: str) -> RawOutput:
    """Phase `number`'s raw output: fio's `text`, and the `seconds` the phase took."""
    return RawOutput(
        f"{PRECONDITION_PHASE}{number}", PRECONDITION_TOOL, json.dumps({"seconds": round(seconds, 3), "output": text})
    )


def read_precondition(text: str) -> tuple[float, str]:
    """A precondition phase's raw output: its seconds and fio's text. ValueError when not one."""
    try:
        stored = json.loads(text)
        seconds, output = float(stored["seconds"]), stored["output"]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"no precondition phase as fslab stores one ({type(exc).__name__}: {exc})") from None
    if not isinstance(output, str) or not math.isfinite(seconds):
        raise ValueError("no precondition phase as fslab stores one")
    return seconds, output


def precondition_metrics(output: RawOutput) -> list[Metric]:
    """A precondition phase's metrics, of its phase: how long it took, and its steady state."""
    seconds, text = read_precondition(output.text)
    found = [metric("precondition_s", seconds), *steady_metrics(steady_states(text))]
    return [replace(m, phase=output.phase) for m in found]
