"""Sizes and durations as people write them in study files ("4GiB", "10GB", "30s", "500ms")."""

from __future__ import annotations

import re
from enum import Enum

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_size(value: str | int) -> int:
    """Bytes. "4GiB", "4G" and "4g" are binary (as fio reads them); "4GB" is decimal (10^9)."""
    if isinstance(value, int):
        return value
    match = _SIZE.match(value)
    if not match:
        raise ValueError(f"not a size: {value!r} (write e.g. 512MiB, 4GiB, 10GB or a number of bytes)")
    number, prefix, suffix = match.groups()
    base = 1000 if suffix.lower() == "b" and prefix else 1024
    return int(float(number) * base ** _POWERS[prefix.lower()])


def scaled_size(size: int, scale: float) -> int:
    """A size times --scale, kept a whole number of MiB (at least one) when scaled."""
    if scale == 1.0:
        return size
    return max(1, round(size * scale / 2**20)) * 2**20


def parse_duration(value: str | int | float) -> float:
    """Seconds. A bare number is seconds; ms, s, m and h are understood."""
    if isinstance(value, (int, float)):
        return float(value)
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"not a duration: {value!r} (write e.g. 500ms, 30s, 2m or a number of seconds)")
    number, unit = match.groups()
    return float(number) * _SECONDS[unit.lower() if unit else None]


def format_size(n: float) -> str:
    """A compact binary size: 4GiB, 512MiB, 1.5GiB."""
    for unit, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if n >= 1024**power:
            value = n / 1024**power
            return f"{value:.{0 if value == int(value) else 1}f}{unit}"
    return f"{n}B"


def format_duration(seconds: float) -> str:
    return f"{seconds:g}s" if seconds >= 1 or seconds == 0 else f"{seconds * 1000:g}ms"


def parse_percent(value: str | float) -> float:
    """A fraction from a percentage: "3%", "3" and 3 all mean 0.03."""
    text = str(value).strip().removesuffix("%")
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"not a percentage: {value!r} (write e.g. 3 or 3%)") from None
    if not 0 < number < 100:
        raise ValueError(f"a percentage between 0 and 100 is needed, not {value!r}")
    return number / 100


class Bandwidth(Enum):
    """The unit bandwidth is shown in: decimal megabytes (10^6 bytes) or binary mebibytes (2^20
    bytes, what seed 003 and most tools print) per second. Both are stored with every run."""

    MB = "MB/s"
    MIB = "MiB/s"

    @property
    def metric(self) -> str:
        """The stored metric's suffix, after the direction: read_mb_s, read_mib_s."""
        return "mb_s" if self is Bandwidth.MB else "mib_s"

    def of(self, bytes_per_second: float) -> float:
        """Bytes per second in this unit."""
        return bytes_per_second / (1e6 if self is Bandwidth.MB else 2**20)

    def describe(self) -> str:
        return "MB/s (10^6 bytes per second)" if self is Bandwidth.MB else "MiB/s (2^20 bytes per second)"
