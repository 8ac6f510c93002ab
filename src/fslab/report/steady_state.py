"""What a cell's table says of steady state and preconditioning (pure): from its runs' stored
metrics (fio_output.STEADY_METRICS) and its workload as stored (its precondition's phases, its
job's steady-state criterion), a note each —

    steady state (iops_slope:0.3%): 4 of 5 runs, after 12 s (median; 8–20 s)
    preconditioned: fill ×2 (41 s); random writes 4k qd32 (330 s): steady after 320 s (iops_slope:0.3%)

— the time of each phase the median over the cell's runs. A run that did not reach it is also a
finding of its own (fio_steady.not_steady), counted on the cell like every other.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from fslab.core.errors import Refused
from fslab.fio import PRECONDITION_PHASE
from fslab.model import qualified


def steady_notes(values: Mapping[str, list[float]], spec: Mapping) -> list[str]:
    """A cell's notes of steady state: its measured runs', then its precondition's; `values`: its
    metrics' values over its runs, by key; `spec`: its workload's, as stored."""
    notes = []
    if attained := values.get("steady_state"):
        criteria = ", ".join(criteria_of(spec)) or "fio's criterion"
        notes.append(
            f"steady state ({criteria}): {_count(attained)}"
            + (f", after {_spread(values['steady_state_s'])}" if values.get("steady_state_s") else "")
        )
    phases = [_phase(values, number, options) for number, options in enumerate(spec.get("precondition") or [], start=1)]
    if phases:
        notes.append("preconditioned: " + "; ".join(phases))
    return notes


def criteria_of(spec: Mapping) -> list[str]:
    """The steady-state criteria the stored workload's jobs set, each once ("iops_slope:0.3%")."""
    from fslab.fio import stored_job

    try:
        jobs = stored_job(spec["job"]).jobs() if isinstance(spec.get("job"), str) else []
    except Refused:
        return []
    return list(dict.fromkeys(c for options in jobs if (c := options.get("steadystate"))))


def describe_phase(options: Mapping[str, str | None]) -> str:
    """A precondition phase in a few words: "fill ×2", "random writes 4k qd32 for 30 min"."""
    loops = int(options.get("loops") or 1)
    runtime = options.get("runtime")
    if options.get("rw") == "write":
        said = "fill" if not runtime else f"sequential writes {options.get('bs')}"
    else:
        said = f"random writes {options.get('bs')} qd{options.get('iodepth')}"
    if runtime:
        from fslab.fio import fio_seconds

        return f"{said} for {duration(fio_seconds(runtime))}"
    return f"{said} ×{loops}" if loops > 1 else said


def _phase(values: Mapping[str, list[float]], number: int, options: Mapping[str, str | None]) -> str:
    phase = f"{PRECONDITION_PHASE}{number}"
    took = values.get(qualified(phase, "precondition_s"))
    said = describe_phase(options) + (f" ({duration(statistics.median(took))})" if took else "")
    attained = values.get(qualified(phase, "steady_state"))
    if not attained:
        return said
    criterion = options.get("steadystate")
    after = values.get(qualified(phase, "steady_state_s"))
    if not any(attained):
        return (
            f"{said}: not steady after {duration(statistics.median(took))} ({criterion})"
            if took
            else f"{said}: not steady ({criterion})"
        )
    steady = f"steady after {duration(statistics.median(after))}" if after else "steady"
    return f"{said}: {steady} ({criterion})" + ("" if all(attained) else f" in {_count(attained)}")


def _count(attained: list[float]) -> str:
    return f"{sum(1 for a in attained if a)} of {len(attained)} runs"


def _spread(seconds: list[float]) -> str:
    """ "12 s (median; 8–20 s)", or "12 s" of one run."""
    if len(seconds) == 1:
        return duration(seconds[0])
    return f"{duration(statistics.median(seconds))} (median; {duration(min(seconds))}–{duration(max(seconds))})"


def duration(seconds: float) -> str:
    """ "41 s", "2.5 s", "30 min", "1.5 h": as a reader says a phase's length."""
    if seconds >= 3 * 3600:
        return f"{seconds / 3600:.1f} h".replace(".0 h", " h")
    if seconds >= 180:
        return f"{seconds / 60:.1f} min".replace(".0 min", " min")
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
