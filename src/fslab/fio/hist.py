"""fio's completion-latency histogram logs (write_hist_log): read, kept compactly, and merged over
a run's jobs window by window into its latency over time (pure: text in, records out).

What fio writes (fio 3.33: stat.c add_clat_sample, iolog.c flush_hist_samples). Per job and
direction, when a completion ends a window of log_hist_msec — windows counted from the job's first
completion after its epoch (the end of ramp_time) — fio copies the job's histogram of completion
latency (FIO_IO_U_PLAT_NR bins, reset with its other figures at the epoch) and logs the copy less the
one before: a line per window, "msec, direction, block size, bin, bin, …", whose bins count that
window's completions alone (per interval, not cumulative), each 2^coarseness of fio's bins added
up. The line is stamped as the completion that closed the window came (on the clock of the other
logs: log_alternate_epoch). fio writes no partial window at the end (finalize_logs leaves this log
alone): the completions after the last full window are in no line. After a stall, fio closes one
window per completion until its count of windows catches up: those lines share one moment.

fio's bins: index i < 128 holds latency i exactly; above, each power of two is split in 64 bins of
equal width (stat.c plat_val_to_idx / plat_idx_to_val, FIO_IO_U_PLAT_BITS = 6), the last bin also
holding everything beyond (2^34 ns, 17 s). Ported here because no library has them (fio's own
tools/hist scripts are scripts, and theirs put a coarse bin's upper edge one fine bin too high).
fio 3.x counts ns in 29 groups of bins (1856); fio 2.x counted µs in 19 (1216): a log's width says which.

fslab runs fio with 2^COARSENESS fine bins to a bin (464 bins): a bin is at most 1/16 of its latency
wide, so a percentile read from it (its middle) is within 3.1 % of fio's own; and keeps each log
compactly (`compact`: the same numbers, each run of empty bins written as minus its length).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fslab.model import RawOutput
from fslab.workloads.offered import DIRECTIONS, LatencyOverTime

if TYPE_CHECKING:
    import numpy as np  # imported where a log is read (the report), not by the fio kind that writes one

HIST_TOOL = "fio_hist"  # the raw output a run keeps them as (beside fio's JSON and its LOG_TOOL logs)
COARSENESS = 2  # fslab's log_hist_coarseness: 4 of fio's bins to one
PLAT_BITS = 6  # fio's FIO_IO_U_PLAT_BITS: 2^6 bins to every power of two
FINE_BINS = {
    29 << PLAT_BITS: 1,
    19 << PLAT_BITS: 1000,
}  # fio's FIO_IO_U_PLAT_NR → ns in its unit: fio ≥ 3.0 (ns), fio 2.x (µs)
MOST_WINDOWS = 20_000  # a run's log spans at most these (fslab's: about 50; an imported one: 5.5 hours of 1 s)
# A window closed this much before its end on the run's epoch still ends there (fio_epoch: the epoch
# is found to a few ms).
ON_TIME_MS = 2


@dataclass(frozen=True)
class HistLine:
    """One line of one job's histogram log: the window closed at `msec`, its completions' bins."""

    msec: int  # when the window closed, on the log's clock
    direction: int  # fio's: 0 read, 1 write, 2 trim
    block_size: int  # of the completion that closed the window
    bins: dict[int, int]  # bin index (of the log's coarse bins) → completions in the window, the bins that have any


@dataclass(frozen=True)
class Bins:
    """A log's bins: how many of fio's bins each is (2^coarseness) and fio's unit (ns per count of latency)."""

    coarseness: int
    count: int  # bins a line holds
    unit_ns: int  # 1 for fio ≥ 3.0, 1000 for fio 2.x

    @classmethod
    def of_width(cls, width: int, coarseness: int) -> Bins:
        """The bins of a log whose lines hold `width` bins at `coarseness`; ValueError when fio writes no such line."""
        if not 0 <= coarseness <= 6 or width << coarseness not in FINE_BINS:
            raise ValueError(
                f"{width} bins at coarseness {coarseness} is not a histogram "
                f"fio writes ({' or '.join(map(str, FINE_BINS))} of its bins)"
            )
        return cls(coarseness, width, FINE_BINS[width << coarseness])

    def range_ns(self, index: int) -> tuple[int, int]:
        """The latencies (ns) bin `index` holds: from, up to (not included)."""
        stride = 1 << self.coarseness
        return _lowest(index * stride) * self.unit_ns, _lowest((index + 1) * stride) * self.unit_ns

    def value_ns(self, index: int) -> int:
        """The latency a bin stands for: its middle, as fio's plat_idx_to_val gives each of its own
        bins (exact below 128, where a bin holds one value)."""
        stride = 1 << self.coarseness
        low, high = _lowest(index * stride), _lowest((index + 1) * stride)
        return (low + (high - low) // 2 if high - low > 1 else low) * self.unit_ns

    def values_ns(self) -> np.ndarray:
        """Every bin's value_ns, in order."""
        return _values_ns(self)

    def index_of(self, ns: int) -> int:
        """The bin fio counts a completion of `ns` in (stat.c plat_val_to_idx, coarsened)."""
        value = ns // self.unit_ns
        if value < 2 << PLAT_BITS:
            fine = value
        else:
            error_bits = value.bit_length() - 1 - PLAT_BITS
            fine = min(
                ((error_bits + 1) << PLAT_BITS) + ((value >> error_bits) & ((1 << PLAT_BITS) - 1)),
                (self.count << self.coarseness) - 1,
            )
        return fine >> self.coarseness


@functools.cache
def _values_ns(bins: Bins) -> np.ndarray:
    import numpy as np

    return np.array([bins.value_ns(i) for i in range(bins.count)], dtype=np.float64)


def _lowest(fine: int) -> int:
    """The smallest latency fio counts in its bin `fine` (in fio's unit)."""
    if fine < 2 << PLAT_BITS:
        return fine
    error_bits = (fine >> PLAT_BITS) - 1
    return ((1 << PLAT_BITS) + fine % (1 << PLAT_BITS)) << error_bits


# --- fio's log, and the compact form it is kept in ------------------------------------------------


def read_fio_log(text: str) -> tuple[int, list[HistLine]]:
    """A histogram log as fio writes it: the bins a line holds, and its lines. ValueError when a
    line is not one (its fields, their count)."""
    width, lines = 0, []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            fields = [int(field) for field in line.split(",")]
        except ValueError:
            raise ValueError(
                f"line {number} is not fio's histogram log line (whole numbers separated by commas)"
            ) from None
        width = width or len(fields) - 3
        if len(fields) - 3 != width or width <= 0 or min(fields) < 0:
            raise ValueError(f"line {number} has {len(fields) - 3} bins where the log's first has {width}")
        lines.append(HistLine(fields[0], fields[1], fields[2], {i: n for i, n in enumerate(fields[3:]) if n}))
    return width, lines


def compact(lines: Iterable[HistLine]) -> str:
    """Lines as fslab keeps them: "msec direction block_size" then the bins, each run of empty
    bins written as minus its length (those after the last bin with completions left out):
    fio's "100, 0, 4096, 0, 0, 5, 7, 0, 2, 0" is "100 0 4096 -2 5 7 -1 2"."""
    out = []
    for line in lines:
        tokens, after = [], -1
        for index in sorted(line.bins):
            if index - after > 1:
                tokens.append(str(after + 1 - index))
            tokens.append(str(line.bins[index]))
            after = index
        out.append(" ".join([str(line.msec), str(line.direction), str(line.block_size), *tokens]))
    return "\n".join(out)


def hist_files(prefix: str) -> re.Pattern[str]:
    """fio's names for the histogram logs of write_hist_log=`prefix`: <prefix>_clat_hist.<job>.log,
    or <prefix>_clat_hist.log (per_job_logs=0); group 1, the job's number."""
    return re.compile(re.escape(prefix) + r"_clat_hist(?:\.(\d{1,6}))?\.log")


def stored(phase: str, files: Mapping[str, str], window_ms: int, epoch_ms: float | None) -> list[RawOutput]:
    """A measured run's histogram logs (fio's texts by name, at COARSENESS) as the raw output it
    keeps (HIST_TOOL: `kept`); none when fio wrote no line (a run shorter than a window). Logs
    fslab cannot read are kept as unreadable, saying why: never a run lost for them."""
    written = {name: text for name, text in files.items() if text.strip()}
    if not written:
        return []
    try:
        text = kept(written, window_ms, COARSENESS, epoch_ms)
    except ValueError as exc:
        text = json.dumps({"unreadable": f"fio's histogram logs could not be read: {exc}"})
    return [RawOutput(phase, HIST_TOOL, text)]


def kept(files: Mapping[str, str], window_ms: int, coarseness: int, epoch_ms: float | None) -> str:
    """Jobs' histogram logs (`files`: name → fio's text) as the raw output a run keeps (HIST_TOOL):
    JSON {"log_hist_msec", "coarseness", "bins", "epoch_ms", "files": {name: compact}}, epoch_ms
    the run's epoch on the logs' clock (None: they count from it, fio's default). ValueError when
    a file is not such a log, or the logs' widths disagree."""
    width, found = 0, {}
    for name, text in files.items():
        try:
            own, lines = read_fio_log(text)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        if lines and width and own != width:
            raise ValueError(f"{name} has {own} bins a line where another log has {width}")
        width = width or (own if lines else 0)
        found[name] = compact(lines)
    if width:
        Bins.of_width(width, coarseness)
    return json.dumps(
        {"log_hist_msec": window_ms, "coarseness": coarseness, "bins": width, "epoch_ms": epoch_ms, "files": found}
    )


# --- the jobs merged, window by window -------------------------------------------------------------


def latency_over_time(text: str) -> list[LatencyOverTime]:
    """A run's kept histogram logs (HIST_TOOL's text, `kept`) as completion latency over time per
    direction: every line in the window of the run's time (from its epoch, log_hist_msec long) that
    it closed — a line closes its window a little after that window's end, never before it (but
    for ON_TIME_MS of the epoch's uncertainty) —, the lines of every job in one window added up bin
    by bin. ValueError when the text is not such logs."""
    import numpy as np

    try:
        document = json.loads(text)
        if "unreadable" in document:  # what fio.stored_logs could not keep, and why
            raise ValueError(str(document["unreadable"]))
        window, coarseness, width, files = (
            document["log_hist_msec"],
            document["coarseness"],
            document["bins"],
            dict(document["files"]),
        )
        origin = document.get("epoch_ms") or 0
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"no fio histogram logs as fslab keeps them ({type(exc).__name__}: {exc})") from None
    if not isinstance(window, int) or window <= 0:
        raise ValueError(f"log_hist_msec {window!r} is no window")
    if not isinstance(origin, (int, float)) or not math.isfinite(origin):
        raise ValueError(f"epoch_ms {origin!r} is no moment")
    if not all(isinstance(v, int) for v in (coarseness, width)):
        raise ValueError("coarseness and bins are whole numbers in fslab's histogram logs")
    if not width:
        return []
    bins = Bins.of_width(width, coarseness)
    # every file's, one after another
    lines: list[np.ndarray] = []
    directions_of: list[np.ndarray] = []
    indices: list[np.ndarray] = []
    counted: list[np.ndarray] = []
    line_ids: list[np.ndarray] = []
    for name, log in files.items():
        if not isinstance(log, str):
            raise ValueError(f"{name!r} is no histogram log")
        msec, directions, line_of, bin_index, counts = _read_compact(log, width)
        line_of = line_of + sum(len(m) for m in lines)
        lines.append(
            np.maximum(1, np.floor((msec - origin + ON_TIME_MS) / window)).astype(np.int64)
        )  # the window each line closed
        directions_of.append(directions)
        indices.append(bin_index)
        counted.append(counts)
        line_ids.append(line_of)
    over_time: list[LatencyOverTime] = []
    if not lines:
        return over_time
    slot, direction_of, index, completions, line_of = (
        np.concatenate(a) for a in (lines, directions_of, indices, counted, line_ids)
    )
    for code, direction in enumerate(DIRECTIONS):  # trims (2) aside
        mine = direction_of[line_of] == code
        if not mine.any():
            continue
        windows = slot[line_of[mine]]
        first, last = int(windows.min()), int(windows.max())
        if last - first >= MOST_WINDOWS:
            raise ValueError(
                f"its {direction} lines span {last - first + 1} windows "
                f"of {window} ms: more than {MOST_WINDOWS} is no run's log"
            )
        counts = np.bincount(
            (windows - first) * width + index[mine], weights=completions[mine], minlength=(last - first + 1) * width
        )
        numbers = range(first, last + 1)
        starts, ends = tuple((n - 1) * window / 1000 for n in numbers), tuple(n * window / 1000 for n in numbers)
        over_time.append(
            LatencyOverTime(
                direction, window, bins, starts, ends, counts.reshape(last - first + 1, width).astype(np.int64)
            )
        )
    return over_time


def _read_compact(text: str, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """compact's lines read back, all at once (a report reads hundreds of runs' logs): each line's
    msec and direction, and for each bin with completions its line, index and completions.
    ValueError when a line is not such a line, or has a bin beyond `width`."""
    import numpy as np

    lines = [line for line in text.split("\n") if line]
    lengths = np.array([line.count(" ") + 1 for line in lines], dtype=np.int64)
    try:
        values = np.fromstring(" ".join(lines), dtype=np.int64, sep=" ") if lines else np.zeros(0, dtype=np.int64)
    except ValueError:
        values = None
    if values is None or len(values) != lengths.sum():
        raise ValueError("not histogram lines as fslab keeps them (whole numbers separated by single spaces)")
    if len(lines) and lengths.min() < 3:
        raise ValueError(
            f"line {int(np.argmax(lengths < 3)) + 1} is not a histogram "
            "line as fslab keeps it (msec, direction, block size first)"
        )
    first = np.cumsum(lengths) - lengths  # each line's first token
    line_of = np.repeat(np.arange(len(lines)), lengths)
    position = np.arange(len(values)) - first[line_of]
    tokens, line_of = values[position >= 3], line_of[position >= 3]
    steps = np.where(tokens < 0, -tokens, 1)  # a negative token skips that many empty bins
    reached = np.cumsum(steps)
    before = np.zeros(len(lines), dtype=np.int64)  # bins passed on earlier lines, per line
    if len(tokens):
        ends = np.searchsorted(line_of, np.arange(len(lines)), side="left")
        before = np.concatenate(([0], reached))[ends]
    index = reached - before[line_of] - 1
    filled = tokens > 0
    if filled.any() and index[filled].max() >= width:
        raise ValueError(
            f"line {int(line_of[filled][np.argmax(index[filled] >= width)]) + 1} reaches beyond the log's {width} bins"
        )
    return values[first], values[first + 1], line_of[filled], index[filled], tokens[filled]
