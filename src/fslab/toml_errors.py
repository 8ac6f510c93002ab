"""Pointing at the place in a TOML file where a validation error is: file, line and field,
with what is allowed. Pure functions on the file's text and pydantic's error locations."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable


def unknown(what: str, value: str, allowed: Iterable[str]) -> str:
    """"unknown filesystem 'xfz' (did you mean 'xfs'?); allowed: ext4, xfs, …"."""
    allowed = list(allowed)
    return f"unknown {what} '{value}'{did_you_mean(value, allowed)}; allowed: {', '.join(allowed)}"


def did_you_mean(value: str, allowed: Iterable[str]) -> str:
    """" (did you mean 'xfs'?)" when one allowed name is close to `value`, else ""."""
    close = difflib.get_close_matches(value, list(allowed), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


class FieldError(ValueError):
    """An error a table's own validator found in one of its fields (a target's image_size too
    small for its filesystem), so that it points at that field's line, not the table's."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def describe_error(
    error: dict, text: str, filename: str, allowed_fields: Callable[[tuple], list[str]], untagged: Callable[[tuple], tuple] = lambda loc: loc
) -> str:
    """One pydantic error as "file:line: field: message"; `allowed_fields(loc)` names the
    fields of the table an unknown field was met in; `untagged(loc)` drops what pydantic adds to
    a location that is not in the file (the tag of a union's member)."""
    tagged = tuple(error["loc"])
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, FieldError):
        tagged = (*tagged, cause.field)
    loc = untagged(tagged)
    line = locate(text, loc)
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


def locate(text: str, loc: tuple) -> int | None:
    """The line of a field, following TOML table headers ([study], [[target]] number n, …)."""
    table: tuple = ()
    counts: dict[str, int] = {}  # array tables met, per parent table
    best, best_depth = None, 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("[["):
            name = line.strip("[] ")
            parent, _, own = name.rpartition(".")
            # [[workload.phase]] is an array inside the [[workload]] table last opened
            prefix = table[:2] if parent and table[:1] == (parent,) else ()
            key = f"{prefix}.{name}"
            counts[key] = counts.get(key, -1) + 1
            table = (*prefix, own if prefix else name, counts[key])
        elif line.startswith("["):
            table = (line.strip("[] "),)
        elif "=" in line and not line.startswith("#"):
            key = line.split("=", 1)[0].strip().strip('"')
            path = (*table, key)
        else:
            continue
        candidate = table if line.startswith("[") else path
        depth = common_prefix(candidate, loc)
        if depth > best_depth and depth == len(candidate):
            best, best_depth = number, depth
    return best


def common_prefix(a: tuple, b: tuple) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
