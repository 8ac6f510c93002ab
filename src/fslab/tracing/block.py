"""The block layer's view of a measured window (`--trace block`): fslab's own bpftrace program
over the block tracepoints, at the devices under a target (the bottom ones: md and dm are
bio-based, their requests are their members'), and the pure reading of what it prints.

Per device and direction (read, write; flushes and discards as "other"), for every request
issued and completed inside the window (issue → complete, matched by device and sector): its
size (a count per exact size in bytes) and its device time (a count per quarter of a power of
two of nanoseconds: 4 buckets an octave, 19 % wide at most), the sum of those times (the
devices' busy time: its share of the window is the mean queue depth, by Little's law), bios
merged into requests (block_bio_backmerge, block_bio_frontmerge, block_rq_merge), bios split
(block_split), and completions of requests issued before the window opened (unmatched).

The program is PROGRAM with one thing filled in: the device numbers, integers fslab read from
sysfs (`program` refuses anything else): no text of a study reaches it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fslab.tracing.output import READY, events

DIRECTIONS = ("read", "write", "other")  # the program's 0, 1, 2
SUB_BUCKETS = 4  # device-time buckets per power of two

PROGRAM = r"""
BEGIN { printf("fslab: attached %llu\n", nsecs); }
tracepoint:block:block_rq_issue /(DEVICES) && args->bytes > 0/ {
  @start[args->dev, args->sector] = nsecs;
  @bytes_at[args->dev, args->sector] = args->bytes;
  @dir_at[args->dev, args->sector] = strncmp(args->rwbs, "R", 1) == 0 ? 0 :
    (strncmp(args->rwbs, "W", 1) == 0 || strncmp(args->rwbs, "FW", 2) == 0) ? 1 : 2;
}
tracepoint:block:block_rq_complete /(DEVICES) && args->nr_sector > 0/ {
  if (@start[args->dev, args->sector]) {
    $t = nsecs - @start[args->dev, args->sector];
    $d = @dir_at[args->dev, args->sector];
    @size[args->dev, $d, @bytes_at[args->dev, args->sector]] = count();
    $o = (uint64)0; $x = $t;
    unroll(40) { if ($x > 1) { $x = $x >> 1; $o++; } }
    $sub = $o >= 2 ? (($t - ((uint64)1 << $o)) << 2) >> $o : (uint64)0;
    @time[args->dev, $d, $o, $sub] = count();
    @busy[args->dev] = sum($t);
    delete(@start[args->dev, args->sector]);
    delete(@bytes_at[args->dev, args->sector]);
    delete(@dir_at[args->dev, args->sector]);
  } else {
    @unmatched[args->dev] = count();
  }
}
tracepoint:block:block_bio_backmerge, tracepoint:block:block_bio_frontmerge, tracepoint:block:block_rq_merge
  /DEVICES/ { @merged[args->dev] = count(); }
tracepoint:block:block_split /DEVICES/ { @split[args->dev] = count(); }
END { clear(@start); clear(@bytes_at); clear(@dir_at); printf("fslab: window ended %llu\n", nsecs); }
"""


def kernel_dev(major: int, minor: int) -> int:
    """A device number as the block tracepoints carry it (the kernel's dev_t: MKDEV)."""
    return (major << 20) | minor


def program(devices: Iterable[int]) -> str:
    """PROGRAM for these devices (kernel dev_t numbers): refused unless each is an integer in
    dev_t's range (a bool, a string, a float is no device number)."""
    numbers = sorted(set(devices))
    if not numbers or not all(type(n) is int and 0 <= n < 2**32 for n in numbers):
        raise ValueError(f"device numbers are integers in [0, 2**32): {numbers!r}")
    return PROGRAM.replace("DEVICES", " || ".join(f"args->dev == {n}" for n in numbers))


Bucket = tuple[float, float, int]  # [low, high) and how many fell in it


@dataclass(frozen=True)
class DeviceWindow:
    """What the program counted at one device over the window."""

    sizes: dict[str, dict[int, int]] = field(default_factory=dict)  # direction → bytes → requests
    times: dict[str, dict[tuple[int, int], int]] = field(default_factory=dict)  # direction → (octave, quarter) → n
    busy_ns: int = 0
    merged: int = 0
    split: int = 0
    unmatched: int = 0

    def completed(self, direction: str | None = None) -> int:
        return sum(sum(counts.values()) for d, counts in self.sizes.items() if direction is None or d == direction)


@dataclass(frozen=True)
class BlockWindow:
    """The program's output read: each device's counts (by tracepoint device number) and how
    long the window lasted (BEGIN to END, ns)."""

    devices: dict[int, DeviceWindow]
    window_ns: int


def _keys(key: str) -> list[int]:
    return [int(part) for part in key.split(",")]


def parse(text: str) -> BlockWindow:
    """bpftrace's JSON output of PROGRAM → BlockWindow (ValueError when its BEGIN or END lines are
    missing: it did not run to its end)."""
    maps: dict[str, dict[str, Any]] = {}
    began = ended = None
    for event in events(text):
        if event["type"] == "map" and isinstance(event.get("data"), dict):
            maps.update(event["data"])
        elif event["type"] == "printf":
            line = str(event.get("data", "")).strip()
            if line.startswith(READY):
                began = int(line.rsplit(" ", 1)[1])
            elif line.startswith("fslab: window ended"):
                ended = int(line.rsplit(" ", 1)[1])
    if began is None or ended is None:
        raise ValueError("bpftrace's output lacks its BEGIN or END line: it did not run to its end")
    found: dict[int, dict[str, Any]] = {}

    def device(number: int) -> dict[str, Any]:
        return found.setdefault(number, {"sizes": {}, "times": {}})

    for key, n in (maps.get("@size") or {}).items():
        dev, direction, size = _keys(key)
        sizes = device(dev)["sizes"].setdefault(DIRECTIONS[direction], {})
        sizes[size] = sizes.get(size, 0) + int(n)
    for key, n in (maps.get("@time") or {}).items():
        dev, direction, octave, quarter = _keys(key)
        times = device(dev)["times"].setdefault(DIRECTIONS[direction], {})
        times[(octave, quarter)] = times.get((octave, quarter), 0) + int(n)
    for name, attribute in (
        ("@busy", "busy_ns"),
        ("@merged", "merged"),
        ("@split", "split"),
        ("@unmatched", "unmatched"),
    ):
        for key, n in (maps.get(name) or {}).items():
            device(int(key))[attribute] = int(n)
    return BlockWindow({number: DeviceWindow(**values) for number, values in found.items()}, ended - began)


# --- histograms and their quantiles ----------------------------------------------------------------

MIN_BUCKETS = 5


def _padded(buckets: list[Bucket], step: Any) -> list[Bucket]:
    """Buckets from the lowest to the highest filled, empty ones included, widened by empty
    neighbours (step(bucket, ±1)) to MIN_BUCKETS at least: a histogram shows its shape."""
    if not buckets:
        return []
    below = True
    while len(buckets) < MIN_BUCKETS:
        neighbour = step(buckets[0], -1) if below else None
        if neighbour is not None:
            buckets.insert(0, neighbour)
        else:
            buckets.append(step(buckets[-1], +1))
        below = not below
    return buckets


def _pow2_bounds(value: int) -> tuple[int, int]:
    if value < 1:
        return 0, 1
    low = 1 << (value.bit_length() - 1)
    return low, low * 2


def _pow2_step(bucket: Bucket, direction: int) -> Bucket | None:
    low, high = int(bucket[0]), int(bucket[1])
    if direction < 0:
        return None if low == 0 else ((0, 1, 0) if low == 1 else (low // 2, low, 0))
    return (high, high * 2, 0)


def power_of_two_histogram(counts: Mapping[int, int]) -> list[Bucket]:
    """Exact values (bytes, a depth) counted → buckets [2^k, 2^(k+1)) ([0, 1) for 0), from the
    lowest filled to the highest, empty ones between and around (MIN_BUCKETS at least)."""
    filled: dict[tuple[int, int], int] = {}
    for value, n in counts.items():
        if n:
            bounds = _pow2_bounds(value)
            filled[bounds] = filled.get(bounds, 0) + n
    if not filled:
        return []
    lowest, highest = min(filled), max(filled)
    buckets: list[Bucket] = []
    bounds = lowest
    while True:
        buckets.append((bounds[0], bounds[1], filled.get(bounds, 0)))
        if bounds == highest:
            break
        bounds = (bounds[1], bounds[1] * 2)
    return _padded(buckets, _pow2_step)


def _quarter_bounds(octave: int, quarter: int) -> tuple[int, int]:
    """A device-time bucket's bounds (ns): the program's octave (⌊log2 t⌋, 0 for t ≤ 1) and
    quarter of it (0 below octave 2)."""
    if octave < 2:
        return (0, 2) if octave == 0 else (2, 4)
    base = 1 << octave
    return base + quarter * base // SUB_BUCKETS, base + (quarter + 1) * base // SUB_BUCKETS


def _quarter_step(bucket: Bucket, direction: int) -> Bucket | None:
    """The device-time bucket just above (+1) or below (-1) one, empty; None below 0."""
    low, high = int(bucket[0]), int(bucket[1])
    if direction > 0:
        if high < 4:
            return (2, 4, 0)
        return (high, high + (1 << (high.bit_length() - 1)) // SUB_BUCKETS, 0)
    if low <= 4:
        return None if low == 0 else ((0, 2, 0) if low == 2 else (2, 4, 0))
    return (low - (1 << ((low - 1).bit_length() - 1)) // SUB_BUCKETS, low, 0)


def time_histogram(counts: Mapping[tuple[int, int], int]) -> list[Bucket]:
    """The program's device-time counts → buckets [low, high) in ns, lowest filled to highest,
    empty ones between and around (MIN_BUCKETS at least)."""
    filled = {_quarter_bounds(o, q): n for (o, q), n in counts.items() if n}
    if not filled:
        return []
    buckets: list[Bucket] = []
    bounds = min(filled)
    highest = max(filled)
    while True:
        buckets.append((bounds[0], bounds[1], filled.get(bounds, 0)))
        if bounds == highest:
            break
        step = _quarter_step((bounds[0], bounds[1], 0), +1)
        assert step is not None
        bounds = (int(step[0]), int(step[1]))
    return _padded(buckets, _quarter_step)


def quantile(buckets: Sequence[Bucket], q: float) -> float | None:
    """The q-quantile of a histogram, linear within its bucket; None when it is empty."""
    total = sum(b[2] for b in buckets)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for low, high, n in buckets:
        if n and seen + n >= rank:
            return low + (high - low) * (rank - seen) / n
        seen += n
    return float(buckets[-1][1])


def median_exact(counts: Mapping[int, int]) -> float | None:
    """The median of values counted exactly (request sizes in bytes); None when none."""
    total = sum(counts.values())
    if total == 0:
        return None
    seen, half = 0, total / 2
    ordered = sorted(counts.items())
    for i, (value, n) in enumerate(ordered):
        seen += n
        if seen > half:
            return float(value)
        if seen == half:  # an even count split between two values: their mean
            return (value + ordered[i + 1][0]) / 2
    return float(ordered[-1][0])


def merge_counts(many: Iterable[Mapping[Any, int]]) -> dict[Any, int]:
    merged: dict[Any, int] = {}
    for counts in many:
        for key, n in counts.items():
            merged[key] = merged.get(key, 0) + n
    return merged
