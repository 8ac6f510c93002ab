"""Reading bpftrace's output (pure): its JSON events (`-f json`), and what else it said."""

from __future__ import annotations

import json
from typing import Any

READY = "fslab: attached"  # what every fslab program's BEGIN prints first
# bpftrace warns so on every start where the memlock limit is already unlimited or cannot be raised
MEMLOCK_WARNING = "couldn't set RLIMIT_MEMLOCK"


def events(text: str) -> list[dict[str, Any]]:
    """bpftrace's JSON events ({"type": ..., "data": ...}) in its output, in order; its other
    lines (stderr's warnings and errors, interleaved) are not events."""
    found = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("type"), str):
                found.append(event)
    return found


def said(text: str) -> str:
    """What bpftrace said besides its events, its routine memlock warning left out: for a message."""
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith("{") and MEMLOCK_WARNING not in line
    ]
    return " / ".join(lines[-6:]) or "it said nothing"


def attached(text: str) -> bool:
    """Whether the program's BEGIN has printed (every probe attached)."""
    return any(e["type"] == "printf" and str(e.get("data", "")).startswith(READY) for e in events(text))
