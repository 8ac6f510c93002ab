"""The numbers in fio's options — sizes and times — read exactly as fio 3.33 reads them, and the
values whose text says one thing to a reader and another to fio. Pure.

fio reads a number in C (parse.c: handle_option, str_to_decimal, get_mult_bytes, get_mult_time),
not quite as its HOWTO describes it, and a few forms fall between the two (tests/fixtures/
fio-parse holds fio's own `--debug=parse` account of each):
- it cuts a number at its '.', and drops its unit with it: size=1.5m is 1 byte, runtime=1.5s is
  1 s, runtime=1.5ms is 1 s (the bare number, in seconds), offset=1.5% is 1 byte;
- in its default kb_base=1024 (fslab refuses kb_base) k, kb, m, mb, … are powers of 1024 and
  kib, mib, … powers of 1000: bs=4KiB is 4000 bytes;
- of the time units it matches us, usec, ms and msec at the start of what follows the digits,
  but s, m, h and d only as all of it: runtime=2sec and runtime=1min are 2 and 1 µs (the HOWTO
  says "s or sec"), startdelay=1s-5s is 1 µs to 5 s, while 1-5ms is 1 ms to 5 ms; a hexadecimal
  time is in µs;
- an option that is not a time (bwavgtime, log_avg_msec, …) it reads as a size: 500ms is
  500 × 1024²; a percentage where it takes none is 2⁶⁴ − 1 − N; a letter it does not know, 1.
So the guard takes a number only where both readings agree — fio's (`fio_reading`, a port of its
C) and a reader's (`plain_reading`, the HOWTO's units) — and refuses the rest, saying what fio
would read and what to write instead (`misread`). fslab's own readers of fio values
(`size_bytes`, `seconds`) are fio's reading, so what fslab says of a job — its length, its sizes,
the space it needs, what the report says ran — is what fio ran; and `parse_debug` reads fio's own
account (`fio --debug=parse`), which fio_jobs.parse_all checks against fslab's reading.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from fslab.core.units import parse_size

_MASK = 2**64 - 1  # fio prints what it read as an unsigned 64-bit number (%llu)
_SECOND = 10**6  # fio keeps times in µs

# fio 3.33's options whose numbers are times (options.c .is_time), and of them those whose bare
# number is seconds (.is_seconds; else µs). Options of type "string with time postfix" are times
# whatever their name; these four are "integer value"s to `fio --cmdhelp`. The fixture of fio's
# own --debug=parse (tests/fixtures/fio-parse) holds every numeric option's reading of 1 and 1m.
TIMES_IN_SECONDS = frozenset(
    {"startdelay", "runtime", "ramp_time", "steadystate_duration", "steadystate_ramp_time", "thinktime_iotime"}
)
INTEGER_TIMES = frozenset({"thinktime", "thinktime_spin", "thinktime_iotime", "max_latency"})
# The options whose values fslab reads itself (fio_jobs, fio_rewrite, the space check): fio's own
# account of them is checked against fslab's reading before a study runs (fio_jobs.parse_all).
READ_BY_FSLAB = frozenset(
    {
        "size",
        "io_size",
        "offset",
        "offset_increment",
        "filesize",
        "bs",
        "runtime",
        "ramp_time",
        "startdelay",
        "steadystate_duration",
        "steadystate_ramp_time",
    }
)

_POWERS = "bkmgtp"
_TIME_UNITS = {
    "us": 1,
    "usec": 1,
    "ms": 1000,
    "msec": 1000,
    "s": _SECOND,
    "m": 60 * _SECOND,
    "h": 3600 * _SECOND,
    "d": 86400 * _SECOND,
}


@dataclass(frozen=True)
class Numbers:
    """How fio reads the numbers of one option's value."""

    time: bool = False  # a time (µs), else a size or a count (bytes: one reading)
    seconds: bool = False  # a bare time is seconds, else µs
    zoned: bool = False  # also N% (of the target) and Nz (zones): size, io_size, offset, …
    ranges: bool = False  # a-b or a:b, two ends (startdelay, filesize, bsrange)
    ends_apart: bool = False  # fio cuts a range at its separator before reading either end (bsrange)
    directions: bool = True  # one value per direction, separated by ','
    signed: bool = False  # a leading '-' (nice)


SIZE = Numbers()
SIZE_ZONED = Numbers(zoned=True, directions=False)
SECONDS = Numbers(time=True, seconds=True, directions=False)


def numbers_of(name: str, form: str, *, low: float | None = None) -> Numbers | None:
    """How fio reads option `name`, whose value has the table's `form` (fio_help), or None where
    it reads no number of its own (a choice, a flag, a float list, text)."""
    if form == "time" or (form == "int" and name in INTEGER_TIMES):
        return Numbers(time=True, seconds=name in TIMES_IN_SECONDS, directions=form == "int")
    if form == "int":
        return Numbers(signed=low is not None and low < 0)
    if form == "size":
        return SIZE_ZONED
    if form == "range":
        return Numbers(ranges=True, ends_apart=True)
    return None


# ---- fio's reading: a port of parse.c ------------------------------------------------------------


def fio_reading(text: str, numbers: Numbers) -> int | None:
    """What fio 3.33 reads of `text` (a value from where __handle_option is given it) as it prints
    it (`out=`, unsigned 64-bit: bytes, µs, 2⁶⁴ − 1 − N for N%); None where it reads no number.
    kb_base is fio's default, 1024: fslab refuses another."""
    text = text.split(",", 1)[0]  # __handle_option reads up to the first ','
    number = _strtoll(text) if text else None
    if number is None:
        return None
    if numbers.time:
        return (number * _time_multiplier(text, numbers.seconds)) & _MASK
    multiplier, percent = _size_multiplier(text)
    return (-1 - number) & _MASK if percent else (number * multiplier) & _MASK


def _strtoll(text: str) -> int | None:
    """C's strtoll as fio calls it: base 16 wherever "0x" appears, else 10; digits up to the first
    other character; None for none, or an overflow (fio's error)."""
    hexadecimal = "0x" in text or "0X" in text
    found = re.match(
        r"\s*([+-]?)(?:0[xX](?=[0-9a-fA-F]))?([0-9a-fA-F]+)" if hexadecimal else r"\s*([+-]?)([0-9]+)", text
    )
    if not found:
        return None
    value = int(found.group(2), 16 if hexadecimal else 10) * (-1 if found.group(1) == "-" else 1)
    return None if value > 2**63 - 1 else max(value, -(2**63))


def _after_digits(text: str, *, sign_after_digit_stops: bool) -> str:
    """What follows fio's walk over the digits (and + and -) that begin `text`."""
    position, seen = 0, False
    while position < len(text) and (
        text[position].isdigit() or (text[position] in "+-" and not (sign_after_digit_stops and seen))
    ):
        seen |= text[position].isdigit()
        position += 1
    return text[position:]


def _letter(char: str) -> bool:
    return char.isascii() and char.isalpha()


def _time_multiplier(text: str, seconds: bool) -> int:
    """parse.c get_mult_time: us (usec) and ms (msec) matched at the start of what follows the
    digits, s, m, h and d only as all of it; no letter there, the option's own unit."""
    rest = _after_digits(text, sign_after_digit_stops=False).lower()
    if not _letter(rest[:1]):
        return _SECOND if seconds else 1
    if rest.startswith(("us", "ms")):
        return _TIME_UNITS[rest[:2]]
    return _TIME_UNITS[rest] if rest in ("s", "m", "h", "d") else 1


def _size_multiplier(text: str) -> tuple[int, bool]:
    """parse.c get_mult_bytes with kb_base=1024: (multiplier, whether a percentage)."""
    rest = _after_digits(text, sign_after_digit_stops=True) if len(text) >= 2 else text
    if len(text) >= 2 and not (_letter(rest[:1]) or rest[:1] == "%"):
        return 1, False
    rest = re.split(r"[:\-,/]", rest.lower(), maxsplit=1)[0]
    for power, prefix in enumerate(_POWERS[1:], start=1):
        if rest.startswith(prefix + "ib"):
            return 1000**power, False  # the "opposite units" of fio's compatibility mode
    if rest[:1] and rest[0] in _POWERS[1:]:
        return 1024 ** _POWERS.index(rest[0]), False
    return 1, rest.startswith("%")


# ---- a reader's reading: fio's HOWTO --------------------------------------------------------------

_SIZE_TOKEN = re.compile(r"(\d+)([kmgtp]b?|b)?", re.IGNORECASE)
_TIME_TOKEN = re.compile(r"(\d+)(us|usec|ms|msec|s|m|h|d)?", re.IGNORECASE)
_HEX = re.compile(r"0x[0-9a-f]+", re.IGNORECASE)
# One number as it may be written at all, units and mistakes included (what `misread` looks at).
NUMBER = re.compile(r"[+-]?(?:0x[0-9a-f]+|\d+(?:\.\d*)?|\.\d+)[a-z0-9]*%?", re.IGNORECASE)


def plain_reading(token: str, numbers: Numbers) -> int | None:
    """What one number means to a reader, in fio's units (bytes, µs, 2⁶⁴ − 1 − N for N%): fio's
    HOWTO's — k, m, g, t, p (with or without b) powers of 1024, a time in us, usec, ms, msec, s,
    m, h or d, a bare time in the option's unit, hexadecimal without a unit for a size; None
    for a form fio does not read as it says (a fraction, KiB, sec, a hexadecimal time, …)."""
    sign, body = (
        (-1, token[1:]) if token[:1] == "-" and numbers.signed else (1, token[1:]) if token[:1] == "+" else (1, token)
    )
    if _HEX.fullmatch(body):
        return None if numbers.time else (sign * int(body, 16)) & _MASK
    if numbers.time:
        found = _TIME_TOKEN.fullmatch(body)
        unit = ((found.group(2) or "") if found else "").lower()
        return (sign * int(found.group(1)) * (_TIME_UNITS[unit] if unit else _bare(numbers))) & _MASK if found else None
    if numbers.zoned and re.fullmatch(r"\d+%", body):
        return (-1 - int(body[:-1])) & _MASK
    found = _SIZE_TOKEN.fullmatch(body)
    return (
        (sign * int(found.group(1)) * 1024 ** _POWERS.index((found.group(2) or "b")[0].lower())) & _MASK
        if found
        else None
    )


def _bare(numbers: Numbers) -> int:
    return _SECOND if numbers.seconds else 1


# ---- where the two differ ------------------------------------------------------------------------


def misread(name: str, value: str, numbers: Numbers) -> str | None:
    """Why fio would read `name=value` otherwise than its text says — a sentence naming the option,
    what fio reads and what to write instead —, or None when every number in it reads alike."""
    if numbers.zoned and re.fullmatch(r"\d+z", value):
        return None  # a number of zones: fio's own form
    parts = value.split(",")
    if len(parts) > 1 and not numbers.directions:
        return (
            f"{name}={value[:40]} is refused: {name} takes one value, not one per direction (fio reads up to the ',')"
        )
    offset = 0
    for part in parts:
        if problem := _part_misread(name, value, part, offset, numbers):
            return problem
        offset += len(part) + 1
    return None


def misread_each(name: str, value: str, numbers: Numbers = SIZE) -> str | None:
    """`misread` for a value fio reads number by number, each on its own (bssplit's sizes and
    percentages, a rw offset, zoned_abs's sizes: parse.c str_to_decimal, or atoi)."""
    for token in tokens(value):
        if (why := _token_misread(token[0], token[0], numbers, last=True)) is not None:
            return f"{name}={value[:40]} is refused: {why}"
    return None


def _part_misread(name: str, value: str, part: str, offset: int, numbers: Numbers) -> str | None:
    """One ','-separated part of a value (at `offset` in it): a number, or a range where the option
    takes one; each number as fio reads it with what follows it in the part."""
    if not part:
        return None  # fio's default for that direction
    numbers_in = list(tokens(part))
    between = [part[a.end() : b.start()] for a, b in zip(numbers_in, numbers_in[1:])]
    whole = (
        numbers_in
        and not numbers_in[0].start()
        and numbers_in[-1].end() == len(part)
        and len(numbers_in) <= 2
        and all(s in ("-", ":") for s in between)
    )
    if not whole:
        return (
            f"{name}={value[:40]} is refused: fio reads "
            f"{'a number or a range' if numbers.ranges else 'one number'} "
            f"here{' per direction' if numbers.directions else ''}, not '{part[:40]}'"
        )
    if len(numbers_in) == 2 and not numbers.ranges:
        return (
            f"{name}={value[:40]} is refused: {name} takes no range: "
            f"fio reads '{between[0]}' here as it reads ',', between "
            f"directions ({numbers_in[0][0]} for reads, {numbers_in[1][0]} for writes and trims); write them with ','"
        )
    for index, token in enumerate(numbers_in):
        context = token[0] if numbers.ends_apart else value[offset + token.start() :]
        if (why := _token_misread(token[0], context, numbers, last=index == len(numbers_in) - 1)) is not None:
            return f"{name}={value[:40]} is refused: {why}"
    return None


def tokens(part: str) -> Iterator[re.Match[str]]:
    """The numbers of a value (a range's ends, one per direction), as fio splits them: a '-'
    after another character separates, it is not a sign."""
    position = 0
    while found := NUMBER.search(part, position):
        if found.group(0)[0] in "+-" and found.start() > 0:
            found = NUMBER.match(part, found.start() + 1) or found
        yield found
        position = found.end()


def _token_misread(token: str, context: str, numbers: Numbers, *, last: bool) -> str | None:
    """Why fio reads `token` (starting `context`, which fio reads it from) otherwise than a reader
    does — what it reads, and what to write instead —, or None."""
    fio, plain = fio_reading(context, numbers), plain_reading(token, numbers)
    if plain is not None and fio == plain:
        return None
    reads = f"fio reads {token} as {describe(fio, numbers)}" if fio is not None else f"fio reads no number in {token}"
    meant = _meant(token, numbers)
    instead = f"; write {written(meant, numbers, last=last)}" if meant is not None else ""
    letters = re.sub(r"^[+-]?(?:0x[0-9a-f]+|[\d.]+)", "", token, flags=re.IGNORECASE).lower()
    if plain is not None:  # as a reader takes it alone, not where it stands: a range's first end
        if letters:
            return (
                f"fio reads s, m, h and d only at the end of a value: {reads} here; "
                "write the first end in ms (1000ms-5s), or both ends bare (seconds)"
            )
        return (
            f"fio reads a range's bare first end in the unit of its second: {reads} "
            "here; write the unit on both ends (1ms-5ms), or on neither (seconds)"
        )
    if token[:1] == "-":
        return f"fio takes no negative number here: {reads}"
    if "." in token:
        return f"fio cuts a number at its '.', and its unit with it: {reads}{instead}"
    if _HEX.match(token):
        return (
            f"fio reads {'a hexadecimal time in µs' if numbers.time else 'no unit after a hexadecimal number'}: "
            f"{reads}; write it in decimal"
        )
    if re.fullmatch(r"[kmgtp]ib?", letters):
        return f"in fio's default kb_base=1024 (fslab refuses kb_base) KiB, MiB, … are powers of 1000: {reads}{instead}"
    if letters.endswith("%"):
        return f"fio takes no percentage here: {reads}"
    if numbers.time:
        return (
            "fio 3.33 knows no time unit "
            f"'{letters}'{' (its HOWTO lists sec, its code does not)' if letters == 'sec' else ''}: "
            f"{reads}{instead}"
        )
    if _TIME_TOKEN.fullmatch("1" + letters):
        return (
            "this is not a time to fio but a plain "
            f"number{' (and m is 1024²)' if 'm' in letters else ''}: {reads}; write a number"
        )
    return f"fio knows no unit '{letters}' here: {reads}"


_WORDS = {"sec": "s", "secs": "s", "min": "m", "mins": "m"}


def _meant(token: str, numbers: Numbers) -> float | None:
    """What a reader means by a fraction, a KiB or a sec that fio misreads (bytes or µs); None
    where nothing sensible is meant."""
    found = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)([a-z]*)", token, re.IGNORECASE)
    if not found:
        return None
    number, unit = float(found.group(1)), found.group(2).lower()
    if numbers.time:
        unit = _WORDS.get(unit, unit)
        return number * (_TIME_UNITS[unit] if unit else _bare(numbers)) if unit in _TIME_UNITS or not unit else None
    unit = re.sub(r"i?b$", "", unit) if unit != "b" else ""
    return number * 1024 ** _POWERS.index(unit) if unit == "" or unit in _POWERS[1:] else None


def written(meant: float, numbers: Numbers, *, last: bool = True) -> str:
    """How to write `meant` (bytes, or µs) so that fio reads it as meant."""
    if not numbers.time:
        return size_text(int(meant)) if meant == int(meant) else "a whole number of bytes"
    for unit, size in (("s", _SECOND), ("ms", 1000), ("us", 1)):
        if meant >= size and meant % size == 0 and (last or unit != "s"):
            return f"{int(meant // size)}{unit}"
    return "a whole number of us"


def describe(value: int | None, numbers: Numbers) -> str:
    """fio's reading in words: "4000", "2 µs", "1 s", "2⁶⁴ − 51"."""
    if value is None:
        return "nothing"
    if value > 2**63:
        return f"2⁶⁴ − {2**64 - value}"
    if not numbers.time:
        return str(value)
    unit, size = next(((u, s) for u, s in (("s", _SECOND), ("ms", 1000)) if value and value % s == 0), ("µs", 1))
    return f"{value // size} {unit}"


# ---- fslab's readers and writers of fio's values -------------------------------------------------


def each_number(value: str, rewrite: Callable[[re.Match[str]], str]) -> str:
    """`value` with each of its numbers (tokens) rewritten."""
    parts, position = [], 0
    for found in tokens(value):
        parts += [value[position : found.start()], rewrite(found)]
        position = found.end()
    return "".join(parts) + value[position:]


def size_bytes(value: str) -> int:
    """A size as fio reads it (k, m, … powers of 1024; kib, … of 1000; a fraction cut, and its
    unit with it: 1.5m is 1 byte); 0 where it reads none."""
    return fio_reading(value.strip(), SIZE) or 0


def seconds(value: str) -> float:
    """A time of runtime, ramp_time, startdelay or fio's steady-state window, as fio reads it (a
    bare number is seconds), in seconds — a range's first end; 0 where fio reads none."""
    return (fio_reading(value.strip(), SECONDS) or 0) / _SECOND


@functools.lru_cache(maxsize=1024)  # pure: the same few values in every workload of a study
def last_seconds(value: str) -> float:
    """A time range's last end (startdelay=1-5s: 5), as fio reads it; a single time itself."""
    ends = [found.start() for found in tokens(value)]
    return seconds(value[ends[-1] :]) if ends else 0.0


def size_text(size: int) -> str:
    """Bytes as fio reads them exactly, in the largest unit that holds them whole (102m, 4k, 1000)."""
    for power in range(5, 0, -1):
        if size and size % 1024**power == 0:
            return f"{size // 1024**power}{_POWERS[power]}"
    return str(size)


def time_text(seconds: float, *, last: bool = True) -> str:
    """Seconds as fio reads them exactly: whole seconds (9s), else whole milliseconds (900ms), at
    least one — before a range's '-' in milliseconds (fio reads s only at a value's end)."""
    return written(max(1, round(seconds * 1000)) * 1000, SECONDS, last=last)


def ms_text(seconds: float) -> str:
    """Seconds as fslab writes a time it computed (a workload's runtime × --scale): whole
    milliseconds, at least one, which fio reads exactly ("10000ms")."""
    return f"{max(1, round(seconds * 1000))}ms"


@functools.lru_cache(maxsize=1024)
def block_size(value: str) -> str:
    """A study's bs — its own sizes (units.parse_size), one per direction: "4KiB", "4k,64k" — as
    fio reads it as fslab does: as written where fio reads it so, else in bytes' form ("4k")."""
    parts = []
    for part in value.split(","):
        meant = parse_size(part) if part else None
        parts.append(part if meant is None or fio_reading(part, SIZE) == meant else size_text(meant))
    return ",".join(parts)


# ---- fio's own account: --debug=parse ------------------------------------------------------------


@dataclass(frozen=True)
class Handled:
    """One value fio read, as `fio --debug=parse` says: in which job file, of which option (fio's
    main name) and type, the value from where fio read it (`ptr`), what it read (`out`; None where
    it printed none: a callback's, a range's, a zone count, a failure)."""

    file: str
    option: str
    type: str
    ptr: str
    out: int | None


_PREFIX = re.compile(r"parse\s+\d+\s+")
_FILE = re.compile(r"Parsing ini file (.*)")
_HANDLED = re.compile(r"__handle_option=([^,]+), type=(\w+), ptr=(.*)")
_OUT = re.compile(r"ret=0, out=(\d+)")


def parse_debug(text: str) -> list[Handled]:
    """What fio read of each option, from its `--debug=parse` output, in order."""
    found: list[Handled] = []
    file = ""
    for line in text.splitlines():
        if not (prefix := _PREFIX.match(line)):
            continue
        body = line[prefix.end() :]
        if m := _FILE.fullmatch(body):
            file = m.group(1)
        elif m := _HANDLED.fullmatch(body):
            found.append(Handled(file, m.group(1), m.group(2), m.group(3), None))
        elif (m := _OUT.fullmatch(body)) and found and found[-1].out is None:
            found[-1] = replace(found[-1], out=int(m.group(1)))
    return found


def files_parsed(text: str) -> list[str]:
    """The job files fio began to parse, in order, from its `--debug=parse` output: when it stops
    at one it refuses, the last."""
    return [
        m.group(1)
        for line in text.splitlines()
        if (p := _PREFIX.match(line)) and (m := _FILE.fullmatch(line[p.end() :]))
    ]


def numbers_read(handled: Handled) -> Numbers:
    """How fio reads a value by the type it names (an option fslab reads itself: READ_BY_FSLAB)."""
    if handled.type == "OPT_STR_VAL_TIME":
        return Numbers(time=True, seconds=handled.option in TIMES_IN_SECONDS)
    return SIZE_ZONED if handled.type == "OPT_STR_VAL_ZONE" else SIZE


def disagreement(handled: Handled) -> str | None:
    """Where fio's account of an option fslab reads itself differs from fslab's reading of the
    same text, a sentence saying both; None where they agree, or fslab does not read it."""
    if handled.option not in READ_BY_FSLAB or handled.out is None:
        return None
    numbers = numbers_read(handled)
    first = next(tokens(handled.ptr), None)
    mine = plain_reading(first[0], numbers) if first is not None and not first.start() else None
    if mine == handled.out:
        return None
    return (
        f"this fio reads {handled.option}={handled.ptr[:40]} as "
        f"{describe(handled.out, numbers)}, fslab as {describe(mine, numbers)}: "
        "fslab's figures would not be what fio ran (fslab reads fio's values as fio 3.33 does)"
    )
