"""When fio's own figures of a run began: its epoch, the moment the monitors count from
(monitors.base.counted_from), so that fio's bytes and the devices' cover the same interval.

fio resets a job's figures at the end of its ramp_time (at its start when it has none, after its
start-up: forking, opening and laying out files) — its epoch — and reports that moment nowhere
(fio 3.33). fslab asks it to stamp its bandwidth logs on the monotonic clock (fio.log_options:
log_alternate_epoch, CLOCK_MONOTONIC — Python's time.monotonic()): each entry is stamped
epoch + the ms elapsed since it, when fio logs the window that ends then. Windows end at whole
multiples of log_avg_msec (P) after the epoch and are logged when fio gets to them, a few ms
late, later under load, not at all when no I/O completed in them (or merged into the next).

So, for each job (pure, on its stamps):
- its stamps' phase: fio logs a window late, never early (but for 1 ms of slack), so the epoch
  is congruent, modulo P, to the stamps that came on time — most do, late ones scatter: the
  phase at which most stamps fall within a few ms;
- the first stamp less its lateness is epoch + m·P for a whole m ≥ 1 (m > 1 when fio skipped the
  first windows, which it does under load); a job's last stamp comes at most its run time after
  its epoch (fio's job_runtime, measured as its last I/O completed), so epoch ≥ last stamp − run
  time: the largest m that stays within that bound. Its latency log makes the bound exact: fio
  adds to it at every completion, so when the job ends it logs the window it was in — stamped
  at its run time — where the bandwidth log, added to only at the windows' ends, often has
  nothing left to log and ends up to a window earlier (more while the job drains its last I/Os
  under load: 200 ms seen, a window skipped).
- without its run time (a group of jobs reported as one whose jobs cannot be told apart), m = 1.

The run's epoch is the earliest job's. A job that logged nothing falls back on fio's JSON:
timestamp_ms (the wall clock when fio wrote its report) less the job's run time, turned to the
monotonic clock — late by the tens of ms fio takes to reap its jobs and sum their figures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

SLACK_MS = 1  # fio logs a window up to this early (stat.c's LOG_MSEC_SLACK)
ON_TIME_MS = 2  # a window logged at most this late came on time


def stamps_of(log: str) -> list[int]:
    """The stamps (ms) of one job's log, as fio wrote them ("msec, value, direction, …" a line)."""
    return [int(line.split(",", 1)[0]) for line in log.splitlines() if line.strip()]


def lateness(stamp: int, phase: int, window: int) -> int:
    """How late fio logged the window a stamp closes, if windows end at `phase` modulo `window`."""
    return (stamp - phase + SLACK_MS) % window - SLACK_MS


def _phase(stamps: Sequence[int], window: int) -> int:
    """The phase (modulo `window`) at which most stamps came on time (ms late at most ON_TIME_MS,
    or SLACK_MS early): late stamps scatter, on-time ones gather. Ties go to the phase with
    fewer ms of lateness among those on time."""
    residues = Counter(s % window for s in stamps)

    def on_time(phase: int) -> tuple[int, int]:
        counts = [residues.get((phase + d) % window, 0) for d in range(-SLACK_MS, ON_TIME_MS + 1)]
        return sum(counts), -sum(n * d for n, d in zip(counts, range(-SLACK_MS, ON_TIME_MS + 1)))

    return max(sorted(residues), key=on_time)


def job_epoch_ms(stamps: Sequence[int], window: int, run_time_ms: float | None) -> float | None:
    """One job's epoch (ms, on its stamps' clock) from the stamps of its logs, its window
    (log_avg_msec) and its run time (JSON job_runtime) when known; None when it logged nothing."""
    if not stamps:
        return None
    stamps = sorted(stamps)
    phase = _phase(stamps, window)
    on_time = stamps[0] - lateness(stamps[0], phase, window)  # epoch + m·P
    m = 1
    if run_time_ms is not None:
        earliest = stamps[-1] - run_time_ms
        m = max(1, int((on_time - earliest + SLACK_MS + ON_TIME_MS) // window))  # the grid's ms of play
    return float(on_time - m * window)


def run_epoch_ms(
    logs: Mapping[int, Sequence[str]], window: int, run_times_ms: Mapping[int, float], fallback_ms: Mapping[int, float]
) -> float | None:
    """The run's epoch (ms on the monotonic clock): the earliest of its jobs', each from its logs
    (`logs` by fio's job number, 1-based) and run time when known, or else its `fallback_ms` (fio's
    report: late, see above). None when no job says."""
    found = []
    for job in sorted(set(logs) | set(fallback_ms)):
        epoch = job_epoch_ms([s for log in logs.get(job, ()) for s in stamps_of(log)], window, run_times_ms.get(job))
        found.append(epoch if epoch is not None else fallback_ms.get(job))
    known = [e for e in found if e is not None]
    return min(known) if known else None


def jobs_run_times_ms(entries: Sequence[Mapping], jobs: int) -> dict[int, float]:
    """Each job's run time (ms) by fio's job number, from fio's JSON "jobs" entries: one entry a job
    (no group_reporting), or one group of `jobs` jobs (fio sums their job_runtime: its mean, the
    jobs of a group start and end together). Several groups of jobs: none (their jobs cannot be
    told apart)."""
    if len(entries) == jobs:
        return {i + 1: float(e["job_runtime"]) for i, e in enumerate(entries) if "job_runtime" in e}
    if len(entries) == 1 and "job_runtime" in entries[0]:
        return {i + 1: entries[0]["job_runtime"] / jobs for i in range(jobs)}
    return {}
