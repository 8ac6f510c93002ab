"""cow-ageing: seed 001's in-place writes, and the extents copy-on-write scatters."""

from __future__ import annotations

from dataclasses import replace

from fslab.fio import ms_text
from fslab.scenarios.phases import BUILTIN_SCENARIOS, BuiltinScenario, Phase

SEQ_WRITE = {"rw": "write", "bs": "1m", "iodepth": "8"}
SEQ_READ = {"rw": "read", "bs": "1m", "iodepth": "8"}


def cow_ageing(runtime: float, snapshot_every: float | None = None) -> tuple[Phase, ...]:
    """Seed 001's in-place writes: one file written sequentially (1 MiB, QD8), read (before),
    overwritten at random in 4 KiB blocks at QD32 for `runtime` seconds, read again (after), its
    extents counted before and after. Copy-on-write scatters what was one extent."""
    settle = (Phase("settle", "sync", measured=False), Phase("drop", "drop_caches", measured=False))
    overwrite = {"rw": "randwrite", "bs": "4k", "iodepth": "32", "time_based": "1", "runtime": ms_text(runtime)}
    return (
        Phase("write", "fio", options=SEQ_WRITE | {"end_fsync": "1"}),
        *settle,
        Phase("before", "fio", options=SEQ_READ, extents=True),
        Phase("overwrite", "fio", options=overwrite | {"end_fsync": "1"}, snapshot_every=snapshot_every),
        *(replace(p, name=f"{p.name}-2") for p in settle),
        Phase("after", "fio", options=SEQ_READ, extents=True),
    )


BUILTIN_SCENARIOS.add(BuiltinScenario("cow-ageing", lambda runtime, every: cow_ageing(runtime)), own=True)
