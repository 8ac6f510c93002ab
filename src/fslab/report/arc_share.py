"""Whether a ZFS cell's read figures may come from the ARC rather than the disks (pure), from what
its runs stored: the ARC cap in effect (the target's `arc_max`, after --scale and the engines'
floor) and the data its fio jobs read (the room their files take, as the stored job says).

The ARC may hold the working set when its cap is at least that data, or when the engines' floor
(filesystems/zfs_engine.py's SCALED_ARC_FLOOR) kept the cap above the study's own share of the data at a small
--scale: the reads then found more of it in the ARC than the study asked them to. The figures
are flagged, never refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from fslab.core.errors import Refused
from fslab.core.units import format_size
from fslab.model import ARC_FLOOR_NOTE, arc_caches_data

MAY_HOLD = "the ARC may hold the working set"


def arc_note(arc_cap: int | None, data: int, *, floor_raised: bool) -> str | None:
    """The note on a reading workload's figures on a ZFS target whose ARC is capped at `arc_cap`
    bytes (None: not capped by the study, no note), reading `data` bytes; `floor_raised`: the
    engines' floor kept the cap above the study's share of the data."""
    if arc_cap is None or data <= 0:
        return None
    if arc_cap >= data:
        return f"{MAY_HOLD}: its cap ({format_size(arc_cap)}) is at least the {format_size(data)} the workload reads"
    if floor_raised:
        return (
            f"{MAY_HOLD}: its cap ({format_size(arc_cap)}), the least the ZFS engines take, is {arc_cap / data:.0%} "
            f"of the {format_size(data)} the workload reads, more than the study's share at full size"
        )
    return None


def arc_notes(target_spec: Mapping, workload_spec: Mapping) -> list[str]:
    """A cell's ARC note, from its target's and workload's stored specs: fio workloads that read,
    on a target with an ARC cap (ZFS's alone have one) that caches the data (not primarycache=
    metadata or none)."""
    arc_cap = target_spec.get("arc_max")
    job_text = workload_spec.get("job")
    if not isinstance(arc_cap, int) or not isinstance(job_text, str):
        return []
    if not arc_caches_data(target_spec.get("properties") or {}):
        return []
    from fslab.fio import reads, room_needed, stored_job

    try:
        job = stored_job(job_text)
    except Refused:
        return []
    if not reads(job):
        return []
    floor_raised = any(str(said).startswith(ARC_FLOOR_NOTE) for said in target_spec.get("scaling_changed") or [])
    note = arc_note(arc_cap, room_needed(job, bool(target_spec.get("zvol"))), floor_raised=floor_raised)
    return [note] if note else []
