"""snapshots-under-load: cow-ageing with a snapshot of the target every so long while it overwrites."""

from __future__ import annotations

from fslab.scenarios.builtin.cow_ageing import cow_ageing
from fslab.scenarios.phases import BUILTIN_SCENARIOS, BuiltinScenario

SNAPSHOT_EVERY = 0.33  # seconds: seed 001's "about three snapshots a second"

BUILTIN_SCENARIOS.add(
    BuiltinScenario("snapshots-under-load", lambda runtime, every: cow_ageing(runtime, every or SNAPSHOT_EVERY)),
    own=True,
)
