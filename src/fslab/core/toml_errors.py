"""Pointing at the place in a TOML file where a validation error is: file, line and field,
with what is allowed. Pure functions on the file's text and pydantic's error locations."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable


def unknown(what: str, value: str, allowed: Iterable[str]) -> str:
    """ "unknown filesystem 'xfz' (did you mean 'xfs'?); allowed: ext4, xfs, …"."""
    allowed = list(allowed)
    return f"unknown {what} '{value}'{did_you_mean(value, allowed)}; allowed: {', '.join(allowed)}"


def did_you_mean(value: str, allowed: Iterable[str]) -> str:
    """ " (did you mean 'xfs'?)" when one allowed name is close to `value`, else ""."""
    return _closest(value, tuple(allowed))


@functools.lru_cache(maxsize=1024)
def _closest(value: str, allowed: tuple[str, ...]) -> str:
    # Cached: difflib takes far longer than anything else to refuse a table, and a generated
    # study file repeats one mistake in each of its thousands of tables.
    close = difflib.get_close_matches(value, allowed, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


class FieldError(ValueError):
    """An error a table's own validator found in one of its fields (a target's image_size too
    small for its filesystem), so that it points at that field's line, not the table's."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def describe_error(
    error: dict,
    lines: FieldLines,
    filename: str,
    allowed_fields: Callable[[tuple], list[str]],
    untagged: Callable[[tuple], tuple] = lambda loc: loc,
) -> str:
    """One pydantic error as "file:line: field: message"; `allowed_fields(loc)` names the
    fields of the table an unknown field was met in; `untagged(loc)` drops what pydantic adds to
    a location that is not in the file (the tag of a union's member)."""
    tagged = tuple(error["loc"])
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, FieldError):
        tagged = (*tagged, cause.field)
    loc = untagged(tagged)
    line = lines.line(loc)
    where = f"{filename}:{line}" if line else filename
    field = field_path(loc)
    if error["type"] == "extra_forbidden":
        return f"{where}: {unknown('field', str(loc[-1]), allowed_fields(tagged))} (in {field})"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "missing":
        message = f"required field '{loc[-1]}' is missing"
    return f"{where}: {field}: {message}"


def field_path(loc: tuple) -> str:
    """("target", 0, "mount_options") → "target[0].mount_options"."""
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts[-1] = f"{parts[-1]}[{item}]"
        else:
            parts.append(str(item))
    return ".".join(parts) or "the file"


class FieldLines:
    """The line of every table header and key of a TOML file, read once, following table headers
    ([study], [[target]] number n, [[workload.phase]] within its own [[workload]]): each error
    is then located without reading the file again, so a file with an error in each of its
    20,000 tables is read once, not 20,000 times."""

    def __init__(self, text: str) -> None:
        self._lines: dict[tuple, int] = {}  # a table's or key's path → the line it is first written on
        table: tuple = ()
        counts: dict[str, int] = {}  # array tables met, per parent table
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if line.startswith("[["):
                name = line.strip("[] ")
                parent, _, own = name.rpartition(".")
                # [[workload.phase]] is an array inside the [[workload]] table last opened
                prefix = table[:2] if parent and table[:1] == (parent,) else ()
                key = f"{prefix}.{name}"
                counts[key] = counts.get(key, -1) + 1
                table = path = (*prefix, own if prefix else name, counts[key])
            elif line.startswith("["):
                table = path = (line.strip("[] "),)
            elif "=" in line and not line.startswith("#"):
                path = (*table, line.split("=", 1)[0].strip().strip('"'))
            else:
                continue
            self._lines.setdefault(path, number)

    def line(self, loc: tuple) -> int | None:
        """The line of the field at `loc` (a pydantic error's location), else of the deepest
        table or key written in the file that holds it; None when none does."""
        for depth in range(len(loc), 0, -1):
            found = self._lines.get(tuple(loc[:depth]))
            if found is not None:
                return found
        return None
