"""What a workload writes: its data pattern, asked for with a workload's `data` field, or set by
fio buffer options in its `options` or its job file. Recorded with every run (runs.data_pattern):
zeros flatter a compressing or deduplicating target, and a reader must be able to tell.

Pure: the fio options a pattern asks for, and the words that record it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# fio options that decide the bytes a job writes: a workload sets them through `data` or itself.
BUFFER_OPTIONS = (
    "zero_buffers", "refill_buffers", "scramble_buffers", "buffer_compress_percentage",
    "buffer_compress_chunk", "buffer_pattern", "dedupe_percentage",
)  # fmt: skip

# fio's buffers when no option says otherwise (HOWTO: refill_buffers, scramble_buffers).
FIO_DEFAULT = (
    "fio's default: random bytes filled once and reused for every write, only lightly scrambled "
    "(scramble_buffers) — repeats a compressing or deduplicating target may find"
)
# Random and zero bytes alternate every COMPRESS_CHUNK, so each filesystem block compresses alike.
COMPRESS_CHUNK = "4k"


@dataclass(frozen=True)
class DataPattern:
    """The bytes a workload writes. `kind`: "random", "zeros" or "compressible" (with `percent`),
    as a workload's `data` asks; "options" when buffer options in a workload's `options` set it
    (`set_by` says whose); "job_file" for a job file, which sets it or leaves fio's default.
    `options`: the buffer options found, as written."""

    kind: str = "random"
    percent: int | None = None  # compressible: the share of each chunk fio fills with zeros
    set_by: str = ""
    options: tuple[tuple[str, str | None], ...] = ()

    @classmethod
    def asked(cls, data: str | Mapping[str, int] | None) -> DataPattern:
        """From a study's `data` value: "random", "zeros" or {compressible = N}; None is random."""
        if isinstance(data, Mapping):
            return cls("compressible", percent=int(data["compressible"]))
        return cls(data or "random")

    @classmethod
    def from_options(cls, kind: str, options: Iterable[tuple[str, str | None]], set_by: str = "") -> DataPattern:
        """As the buffer options among `options` set it: a workload's ("options") or a job file's."""
        return cls(kind, set_by=set_by, options=buffer_options(options))

    def fio_options(self) -> dict[str, str]:
        """The fio options fslab adds to ask for this pattern (none when the workload's own set it)."""
        if self.kind == "random":
            return {"refill_buffers": "1"}
        if self.kind == "zeros":
            return {"zero_buffers": "1"}
        if self.kind == "compressible":
            return {
                "buffer_compress_percentage": str(self.percent),
                "buffer_compress_chunk": COMPRESS_CHUNK,
                "refill_buffers": "1",
            }
        return {}

    def describe(self) -> str:
        """The words stored with every run (runs.data_pattern)."""
        listed = ", ".join(name if value is None else f"{name}={value}" for name, value in self.options)
        if self.kind == "random":
            return "random (fio refill_buffers: new random bytes for every write, incompressible)"
        if self.kind == "zeros":
            return "zeros (fio zero_buffers: every byte written is 0, as compressible as data gets)"
        if self.kind == "compressible" and self.percent is not None:  # (compressible has a percent)
            return (
                f"compressible {self.percent}% (fio buffer_compress_percentage={self.percent}, "
                f"buffer_compress_chunk={COMPRESS_CHUNK}, "
                f"refill_buffers: every {COMPRESS_CHUNK} is {100 - self.percent}% new random bytes, then zeros)"
            )
        if self.kind == "options":
            return f"set by {self.set_by}: {listed}"
        return (
            f"as the job file sets it: {listed}"
            if self.options
            else f"{FIO_DEFAULT} (the job file sets no buffer option)"
        )


def buffer_options(
    options: Iterable[tuple[str, str | int | float | bool | None]],
) -> tuple[tuple[str, str | None], ...]:
    """The buffer options among `options`, in order, each once, as text (a study's options are
    text once checked; their table's type is what the file may hold)."""
    return tuple(
        dict.fromkeys(
            (name, value if value is None else str(value)) for name, value in options if name in BUFFER_OPTIONS
        )
    )
