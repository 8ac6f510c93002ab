"""write-rewrite-read-reread: seed 002's iozone-like pass."""

from __future__ import annotations

from fslab.scenarios.phases import BUILTIN_SCENARIOS, BuiltinScenario, Phase


def write_rewrite_read_reread() -> tuple[Phase, ...]:
    """Seed 002's iozone-like pass, buffered: write the file, write it again over itself, read it
    after dropping caches, read it again (the page cache answers the reread, as iozone's does)."""
    buffered = {"bs": "1m", "iodepth": "1", "direct": "0", "ioengine": "psync"}
    return (
        Phase("write", "fio", options=buffered | {"rw": "write", "end_fsync": "1"}),
        Phase("rewrite", "fio", options=buffered | {"rw": "write", "end_fsync": "1"}),
        Phase("drop", "drop_caches", measured=False),
        Phase("read", "fio", options=buffered | {"rw": "read"}),
        Phase("reread", "fio", options=buffered | {"rw": "read"}),
    )


BUILTIN_SCENARIOS.add(
    BuiltinScenario("write-rewrite-read-reread", lambda runtime, every: write_rewrite_read_reread()), own=True
)
