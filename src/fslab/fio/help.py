"""fio's option table, read from fio's own words: what `fio --cmdhelp` and `fio --enghelp` print,
parsed into typed records (FioTable). Pure: the answers (each question's text) in, records out;
fio/table.py asks fio and keeps the answers, tests read the real fio's answers from a fixture.

The questions (`needed` says which are still to ask, given those answered):
  --version, --cmdhelp=all (every option, a child indented under its parent), --enghelp (the
  engines this fio has); then --cmdhelp=NAME for each option (its alias, type, default, range,
  valid values) and --enghelp=ENGINE for each engine asked about; then --enghelp=ENGINE,NAME for
  each of an engine's options.

fio prints a type as words (parse.c, show_option_help): FORMS maps each to the form fslab checks
a value against. fio 3.33 prints "(null)" for FIO_OPT_STR_VAL_ZONE (size, io_size, offset,
offset_increment, zoneskip: a size, a percentage or a number of zones), which its table of words
lacks; words fslab does not know are kept as "unknown", which the guard refuses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

VERSION, ALL, ENGINE_LIST = "--version", "--cmdhelp=all", "--enghelp"

FORMS = {
    "boolean value (opt=1)": "bool",
    "empty or boolean value ([0|1])": "flag",  # written bare, it means 1
    "integer value (opt=100)": "int",  # a number, with k/m/g… for sizes; one per direction (4k,64k)
    "string with time postfix (opt=10s)": "time",
    "one to three ranges (opt=1k-4k[,4k-8k[,1k-8k]])": "range",
    "list of floating point values separated by ':' (opt=5.9:7.8)": "floats",
    "string with possible k/m/g postfix (opt=4k)": "choices",  # FIO_OPT_STR_MULTI: valid values, comma-separated
    "string (opt=bla)": "string",  # "choice" when it lists valid values
    "(null)": "size",  # FIO_OPT_STR_VAL_ZONE in fio 3.33 (above)
}


class HelpError(ValueError):
    """fio's answer to a question is not what fslab reads (another fio's wording, an error)."""


@dataclass(frozen=True)
class FioOption:
    """One option as fio describes it."""

    name: str
    help: str
    form: str  # FORMS' words: bool, flag, int, time, range, floats, choices, string, choice, size, unknown
    fio_type: str  # as fio prints it
    aliases: tuple[str, ...] = ()
    default: str | None = None
    values: tuple[str, ...] = ()  # a choice's valid values
    low: float | None = None  # fio's range, where it prints one
    high: float | None = None
    parent: str | None = None  # the option it is indented under in --cmdhelp=all
    engines: tuple[str, ...] = ()  # an engine's option: the engines that have it; () for fio's own

    @property
    def free_text(self) -> bool:
        """fio takes any text here: a string without valid values."""
        return self.form == "string"


@dataclass(frozen=True, eq=False)  # hashed by identity: the guard's caches are keyed by the table
class FioTable:
    """Every option one fio knows, and the engines it has."""

    version: str
    options: Mapping[str, FioOption]  # by fio's main name
    engines: tuple[str, ...]  # as `fio --enghelp` lists them
    spellings: Mapping[str, str] = field(default_factory=dict)  # every name and alias → main name

    def find(self, spelling: str) -> FioOption | None:
        """The option fio reads `spelling` as: its name or an alias, exactly (parse.c o_match:
        strcmp, no prefix, case counts)."""
        main = self.spellings.get(spelling)
        return None if main is None else self.options[main]


def cmdhelp(name: str) -> str:
    return f"--cmdhelp={name}"


def enghelp(engine: str, option: str | None = None) -> str:
    return f"--enghelp={engine}" + (f",{option}" if option else "")


def parse_option_list(text: str) -> list[tuple[str, str, str | None]]:
    """--cmdhelp=all, or an engine's --enghelp=ENGINE: (name, help, parent) of each option, in
    fio's order. A child is indented two spaces a level under its parent (parse.c print_option)."""
    found: list[tuple[str, str, str | None]] = []
    stack: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, colon, help_ = line.partition(":")
        level, name = (len(name) - len(name.lstrip(" "))) // 2, name.strip()
        if not colon or not _NAME.fullmatch(name) or level > len(stack):
            raise HelpError(f"not a line of fio's option list: {line[:80]!r}")
        del stack[level:]
        found.append((name, help_.strip(), stack[-1] if stack else None))
        stack.append(name)
    if not found:
        raise HelpError("fio listed no option")
    return found


_NAME = re.compile(r"[A-Za-z0-9_-]+")
_RANGE = re.compile(r"min=(-?[0-9.]+)(?:, max=(-?[0-9.]+))?")


def parse_option_help(text: str, asked: str) -> FioOption:
    """--cmdhelp=NAME (or --enghelp=ENGINE,NAME): one option's record. Each line is "key: value",
    the key right-aligned in 20 columns; a valid value's further lines have an empty key."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or lines[0].lstrip().startswith(("No such command", "- showing closest match")):
        raise HelpError(f"fio does not know the option {asked!r}")
    name, _, help_ = lines[0].partition(": ")
    fields: dict[str, list[str]] = {}
    key = ""
    for line in lines[1:]:
        label, colon, value = line.partition(": ")
        if not colon:
            raise HelpError(f"{asked}: not a line of fio's help: {line[:80]!r}")
        key = label.strip() or key  # a valid value's further line
        fields.setdefault(key, []).append(value.strip())
    fio_type = (fields.get("type") or [""])[0]
    values = tuple(value.split()[0] for value in fields.get("valid values", []) if value.split())
    form = FORMS.get(fio_type, "unknown")
    if form == "string" and values:
        form = "choice"
    low, high = _range((fields.get("range") or [""])[0])
    default = (fields.get("default") or ["no default"])[0]
    return FioOption(
        name=name.strip(), help=help_.strip(), form=form, fio_type=fio_type, aliases=tuple(fields.get("alias", [])),
        default=None if default == "no default" else default, values=values, low=low, high=high,
    )  # fmt: skip


def _range(text: str) -> tuple[float | None, float | None]:
    """fio's "min=0, max=100"; a max of -1 is UINT_MAX printed as a signed int: no bound."""
    found = _RANGE.fullmatch(text)
    if not found:
        return None, None
    high = float(found.group(2)) if found.group(2) else None
    return float(found.group(1)), None if high == -1 else high


def parse_engines(text: str) -> tuple[str, ...]:
    """--enghelp: "Available IO engines:", then one engine a line."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "Available IO engines:":
        raise HelpError("fio's --enghelp does not list its engines")
    return tuple(line.strip() for line in lines[1:] if line.strip())


def _engine_options(text: str, engine: str) -> list[tuple[str, str, str | None]]:
    """--enghelp=ENGINE: its options, or none ("IO engine X has no options")."""
    return [] if text.strip() == f"IO engine {engine} has no options" else parse_option_list(text)


def needed(answers: Mapping[str, str], engines: Iterable[str]) -> list[str]:
    """The questions still to ask fio, given those answered, for a table with the options of
    `engines` (those of them this fio has)."""
    first = [q for q in (VERSION, ALL, ENGINE_LIST) if q not in answers]
    if first:
        return first
    asked = [cmdhelp(name) for name, _, _ in parse_option_list(answers[ALL])]
    has = [engine for engine in dict.fromkeys(engines) if engine in parse_engines(answers[ENGINE_LIST])]
    asked += [enghelp(engine) for engine in has]
    for engine in has:
        if enghelp(engine) in answers:
            asked += [enghelp(engine, name) for name, _, _ in _engine_options(answers[enghelp(engine)], engine)]
    return [q for q in asked if q not in answers]


def table_from_answers(answers: Mapping[str, str], engines: Iterable[str]) -> FioTable:
    """The table from fio's answers (HelpError when one is missing or does not parse)."""
    engines = tuple(engines)
    if missing := needed(answers, engines):
        raise HelpError(f"fio's answer to {missing[0]} is missing")
    options: dict[str, FioOption] = {}
    for name, help_, parent in parse_option_list(answers[ALL]):
        option = parse_option_help(answers[cmdhelp(name)], name)
        if option.name != name:
            raise HelpError(f"--cmdhelp={name} describes {option.name!r}")
        options[name] = replace(option, help=help_ or option.help, parent=parent)
    available = parse_engines(answers[ENGINE_LIST])
    for engine in (e for e in dict.fromkeys(engines) if e in available):
        for name, _, parent in _engine_options(answers[enghelp(engine)], engine):
            _add_engine_option(options, parse_option_help(answers[enghelp(engine, name)], name), engine, parent)
    spellings = {alias: o.name for o in options.values() for alias in o.aliases} | {name: name for name in options}
    return FioTable(_version(answers[VERSION]), options, available, spellings)


def _add_engine_option(options: dict[str, FioOption], option: FioOption, engine: str, parent: str | None) -> None:
    """An engine's option joins the table; fio looks one up only where its own options have no
    such name (options.c fio_options_parse). Two engines describing one name differently leave
    it "unknown": the guard could not tell which engine a value is for."""
    known = options.get(option.name)
    if known is None:
        options[option.name] = replace(option, parent=parent, engines=(engine,))
    elif known.engines and (known.form, known.values, known.aliases) == (option.form, option.values, option.aliases):
        options[option.name] = replace(known, engines=(*known.engines, engine))
    elif known.engines:
        options[option.name] = replace(
            known, form="unknown", fio_type="differs between engines", engines=(*known.engines, engine)
        )


def _version(text: str) -> str:
    version = text.strip()
    if not re.fullmatch(r"fio-[0-9A-Za-z.+~_-]{1,40}", version):
        raise HelpError(f"not a fio version: {version[:40]!r}")
    return version
