"""fio options from a study or a job file, checked against fio's own table (fio/table.py).

fio runs as root, and a study's options and job files travel between people, so every option is
untrusted. What fio knows comes from the fio fslab drives: an option fio does not have is refused,
and every one it has is accepted — with its value checked by fio's own type for it — unless it can
reach outside fslab's sandbox. Those are refused by an explicit list, each with its reason
(REFUSED, _REFUSED_PREFIXES): options that name a path, a device, a network, a command or a
library, that change machine-wide state, or that change the output fslab reads its numbers from.
Engines are code that decides where the I/O goes, so they stay an allow-list (ENGINES). A value
fio takes as free text (a string without valid values) is where a path hides: such an option is
accepted only where fslab knows its form (FORMS), so a newer fio's new string option is refused
until it is reviewed. fio's own `--parse-only` then checks the whole job (fio_jobs.parse_all).

Pure but for the table, which fio_table keeps per fio (asked once per version).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from fslab.core.errors import Refused
from fslab.core.toml_errors import did_you_mean
from fslab.fio.help import FioOption, FioTable
from fslab.fio.table import FioUnavailable, fio_table
from fslab.fio.values import SECONDS, SIZE, Numbers, misread, misread_each, numbers_of

# Why an option or value is refused, in kinds: the dangers (a corpus test asserts each refusal of
# fio's own examples names one) — what names a path, a device, a network, a command or a library,
# changes machine-wide state or the output fslab reads, expands '$' or would end fio's line early —
# and the rest: fslab's own options, what fio does not list, a value not of its form, a job file's
# structure.
PATH, DEVICE, NETWORK, COMMAND, LIBRARY, MACHINE, OUTPUT = (
    "path",
    "device",
    "network",
    "command",
    "library",
    "machine",
    "output",
)
EXPANSION, INJECTION = "expansion", "injection"
DANGERS = (PATH, DEVICE, NETWORK, COMMAND, LIBRARY, MACHINE, OUTPUT, EXPANSION, INJECTION)
FSLABS, UNKNOWN, VALUE, SYNTAX = "fslab's", "unknown", "value", "syntax"
BROKEN = "broken"  # what the fio at hand mishandles (BROKEN_BEFORE)


class FioRefused(Refused):
    """An option or a job file refused by the guard; `kind` says which kind of harm (DANGERS) or
    problem it is."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class FioValueForm:
    """A form fslab knows for a value: a regex it must match whole, and words for messages; and
    how fio reads the numbers in it (fio_values): the value as a whole (`numbers`), or each number
    on its own (`each`)."""

    pattern: str
    says: str
    most: int | None = None  # an upper bound, for whole numbers
    numbers: Numbers | None = None
    each: Numbers | None = None

    def problem(self, value: str | None) -> str | None:
        if value is None:
            return f"needs a value: {self.says}"
        if not re.fullmatch(self.pattern, value, re.IGNORECASE):
            return f"takes {self.says}, not '{value[:40]}'"
        if self.most is not None and int(value) > self.most:
            return f"takes {self.says}; {value} is too many"
        return None

    def misread(self, name: str, value: str) -> str | None:
        """Why fio would read a value of this form (which matches it) otherwise than it says."""
        if self.numbers is not None:
            return misread(name, value, self.numbers)
        return misread_each(name, value, self.each) if self.each is not None else None


def per_direction(part: str) -> str:
    """fio's read,write,trim triplets ("4k,64k"): one to three values, some left empty."""
    return rf"(?=.*\d)(?:{part})?(?:,(?:{part})?){{0,2}}"


DEC = r"\d+(?:\.\d+)?"
_SIZE = rf"{DEC}(?:[kmgtp]i?b?|b)?"  # fio's suffixes: 4k, 4KiB, 1m, 1g, or bytes
# A bare number is in the option's own unit; what fio misreads: fio_values.
_TIME = rf"{DEC}(?:us|usec|ms|msec|s|sec|m|min|h|d)?"
_RANGE = rf"{_SIZE}(?:[-:]{_SIZE})?"
_SPLIT = rf"{_SIZE}/(?:\d+)?(?::{_SIZE}/(?:\d+)?)*"  # fio reads a percentage with atoi: whole
# A literal pattern only: hex, a decimal number, a "string", %o (the offset). A 'quoted' word
# would make fio read the file of that name, so quotes ' and / never match.
_PATTERN = r"""(?:0x[0-9a-f]+|\d+|"[^"'/\\]*"|%o)+"""
_CPUS = r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*"
_NUMBER = r"[-+]?(?:0x[0-9a-f]+|\d+(?:\.\d*)?|\.\d+)[a-z]{0,4}%?"  # with a unit: 4k, 500ms, 50%, 10z

TIME = FioValueForm(_TIME, "a time (10, 500ms, 30s, 2m)", numbers=SECONDS)
TIME_RANGE = FioValueForm(
    rf"{_TIME}(?:-{_TIME})?",
    "a time or a range of times (1-5, 1ms-5ms)",
    numbers=Numbers(time=True, seconds=True, ranges=True, directions=False),
)
PERCENT = FioValueForm(r"\d+", "a whole percentage 0-100", most=100)
ONE_SIZE = FioValueForm(_SIZE, "a size (4k, 1m, 1g or bytes)", numbers=Numbers(directions=False))
SIZE_RANGE = FioValueForm(_RANGE, "a size or a range of sizes (1k-64k)", numbers=Numbers(ranges=True, directions=False))
SPLIT = FioValueForm(per_direction(_SPLIT), "size/percentage pairs (4k/10:64k/90)", each=SIZE)
JOB_NAME = FioValueForm(
    r"(?!\s)(?!.*\.\.)[^\x00-\x1f\x7f/\[\];#$]{1,255}(?<!\s)",
    "a job name: no '/', '..', [ ] ; # $ or control character",
)
TEXT = FioValueForm(r"[^\x00-\x1f\x7f]*", "text on one line")
PATTERN = FioValueForm(_PATTERN, 'a literal pattern (0xdeadbeef, "text", a number, %o)')
CPUS = FioValueForm(_CPUS, "a list of CPUs (0-3,6)")
NODES = FioValueForm(rf"all|{_CPUS}", "all, or a list of NUMA nodes (0-1,3)")
ERRORS = FioValueForm(
    r"[A-Z0-9_]*(?:[,:][A-Z0-9_]*)*", "errors by name or number, a list per read:write:verify (EIO,ENOSPC:EILSEQ)"
)


def count(most: int) -> FioValueForm:
    return FioValueForm(r"\d+", f"a whole number up to {most}", most=most)


# A file made in the target's directory: a job file's `filename` (and the file a workload's jobs
# share), e4defrag's `donorname` (fio puts it in the job's directory). No '/' (no other
# directory), no ':' (fio's separator between several files), not . or .., not starting with '-'
# (fio reads "-" as stdin or stdout).
PLAIN_FILE = re.compile(r"(?!\.\.?$)[A-Za-z0-9_.][A-Za-z0-9_.+-]{0,127}")

# Options fio takes as free text whose form fslab knows (each a form that names no path); a few
# fslab bounds more tightly than fio (a job is a process of root's); the times fslab reads itself
# (fio_jobs.expected_seconds).
FORMS: dict[str, FioValueForm] = {
    "description": TEXT, "name": JOB_NAME, "wait_for": JOB_NAME, "bssplit": SPLIT, "filesize": SIZE_RANGE,
    "randseed": count(2**64 - 1), "number_ios": count(2**63), "verify_backlog": count(2**31),
    "trim_backlog": count(2**31),
    "verify_pattern": PATTERN, "buffer_pattern": PATTERN, "ignore_error": ERRORS,
    "zonesize": ONE_SIZE, "zonecapacity": ONE_SIZE, "zonerange": ONE_SIZE,
    "cpus_allowed": CPUS, "numa_cpu_nodes": NODES,
    "numa_mem_policy": FioValueForm(rf"(?:default|local|prefer|bind|interleave)(?::{_CPUS})?",
        "default, local, or prefer, bind or interleave with :nodes (bind:0-1)"),
    "cmdprio_bssplit": FioValueForm(per_direction(rf"{_SIZE}/\d+(?:/\d+/\d+)?(?::{_SIZE}/\d+(?:/\d+/\d+)?)*"),
        "size/percentage[/class/level] entries (64k/25/1/1:1m/0), one list per direction", each=SIZE),
    "numjobs": count(1024), "rwmixread": PERCENT, "rwmixwrite": PERCENT,
    "runtime": TIME, "ramp_time": TIME, "startdelay": TIME_RANGE,
}  # fmt: skip

# What a choice may carry after its value and a ':' (rw=read:-8k), where fslab knows it: numbers
# only. A choice whose tail fslab does not know is taken without one.
SUFFIXES: dict[str, FioValueForm] = {
    "rw": FioValueForm(rf"[+-]?{_SIZE}", "an offset or a count (read:-8k, randread:8)"),
    "random_distribution": FioValueForm(
        r"(?:[0-9.:/,%]|[kmgtp]i?b?)+", "numbers (zipf:1.2, zoned:50/5:50/95, zoned_abs:60/20g:40/100g)"
    ),
    "file_service_type": FioValueForm(rf"{DEC}(?::{DEC})?", "a number (random:4, zipf:1.2)"),
    "steadystate": FioValueForm(rf"{DEC}%|{_SIZE}", "a limit: a number, a percentage or a bandwidth (iops:10%, bw:1m)"),
    "sync_file_range": FioValueForm(r"\d+", "a number of writes"),
}
TAIL_NEEDED = {"steadystate"}  # fio refuses ss=iops: "threshold must be specified in addition to criterion"

# Engines: an engine is code that decides where the I/O goes, so only these local ones are
# allowed, each for what it does (and nothing beyond the target's own files).
ENGINES: dict[str, str] = {
    "psync": "pread/pwrite on the target's files", "sync": "read/write", "vsync": "readv/writev",
    "pvsync": "preadv/pwritev", "pvsync2": "preadv2/pwritev2", "libaio": "Linux native asynchronous I/O",
    "io_uring": "io_uring", "posixaio": "POSIX aio",
    "mmap": "maps the target's files into memory", "splice": "splice/vmsplice between a pipe and the target's files",
    "filecreate": "creates files in the target's directory", "filestat": "stats them", "filedelete": "deletes them",
    "falloc": "fallocate() on the target's files: preallocation and hole punching",
    "ftruncate": "ftruncate() on the target's files",
    "e4defrag": "ext4's defragmentation ioctl on the target's files, from a donor file beside them "
                "(donorname: a plain file name)",
    "cpuio": "burns CPU beside the jobs that do I/O: no file, device or network (a job file needs a job that does I/O)",
}  # fmt: skip
# Engines that do no I/O on the target: beside jobs that do (cpuio loads the CPU while they
# run), never alone — a job file of these alone measures nothing of the target (fio_jobs).
NO_IO_ENGINES = {"cpuio"}
# Engines that make, stat or delete files by name, or a donor file beside them: a job of theirs
# needs the target's directory. On a raw device its file name is the device's (filedelete would
# unlink the device node) and e4defrag's donor would be made wherever fio runs.
DIRECTORY_ENGINES = {"filecreate", "filestat", "filedelete", "e4defrag"}
_ENGINE_NAMES = tuple(ENGINES)
_ENGINES_REFUSED = {
    NETWORK: ("it opens a network connection or a remote store", {
        "net", "netsplice", "rdma", "http", "nbd", "rbd", "rados", "gfapi", "gfapi_async", "libhdfs", "nfs", "libiscsi",
        "dfs", "librpma_apm_client", "librpma_apm_server", "librpma_gpspm_client", "librpma_gpspm_server", "ime_psync",
        "ime_psyncv", "ime_aio"}),
    DEVICE: ("it opens a device, a library or a program rather than the target's files", {
        "sg", "io_uring_cmd", "xnvme", "spdk", "libzbc", "dev-dax", "libpmem", "pmemblk", "mtd", "libcufile",
        "windowsaio", "solarisaio", "guasi"}),
    COMMAND: ("it runs a program of the job's choosing, as root", {"exec"}),
    OUTPUT: ("it does no I/O, so its numbers say nothing about the target", {"null"}),
}  # fmt: skip

_SHELL = (COMMAND, "it runs a shell command as root")
_WRITES_LOG = (PATH, "it writes log files at a path of the job's choosing")
_CHANGES_OUTPUT = (OUTPUT, "it changes the output fslab reads its numbers from")
# Options refused whatever their value (by fio's main name or any spelling), each with its kind
# and why. The nuances: a job file's `filename` and `donorname` may name a plain file (PLAIN_FILE).
REFUSED: dict[str, tuple[str, str]] = {
    "filename": (PATH, "fslab points fio at the target's files or device "
                       "(a job file may name a plain file, made in the target)"),
    "directory": (PATH, "fslab points fio at the target's directory"),
    "filename_format": (PATH, "it makes fio name files at paths of the job's choosing"),
    "opendir": (PATH, "it makes fio use every file under a directory of the job's choosing"),
    "include": (PATH, "it makes fio read another file: put its options in the job file itself"),
    "exec_prerun": _SHELL, "exec_postrun": _SHELL,
    "write_iolog": (PATH, "it writes a file at a path of the job's choosing"),
    "read_iolog": (PATH, "it reads a file at a path of the job's choosing"),
    "merge_blktrace_file": (PATH, "it writes a file at a path of the job's choosing"),
    "replay_redirect": (DEVICE, "it sends the I/O to a device of the job's choosing"),
    "verify_state_save": (PATH, "it writes a state file outside the target"),
    "verify_state_load": (PATH, "it reads a state file from outside the target"),
    "profile": (DEVICE, "it runs one of fio's built-in tests, whose own options name devices and directories"),
    "unique_filename": (NETWORK, "it names files after a client's network address (fio's client/server), "
                                 "which fslab arranges itself"),
    "ioscheduler": (MACHINE, "it changes the I/O scheduler of the device for everyone, and leaves it changed"),
    "lockmem": (MACHINE, "it locks that much of the machine's memory in each job (root has no limit); "
                         "a workload's memory_limit confines a run to a cgroup instead"),
    "allow_mounted_write": (DEVICE, "it lets fio write over a mounted device"),
    "create_only": (FSLABS, "fslab lays out the files a job reads itself, with this option"),
    "stats": _CHANGES_OUTPUT, "kb_base": _CHANGES_OUTPUT, "unit_base": _CHANGES_OUTPUT,
    "unified_rw_reporting": _CHANGES_OUTPUT,
    "gtod_reduce": _CHANGES_OUTPUT,
}  # fmt: skip
_REFUSED_PREFIXES = {
    "include": REFUSED["include"],  # fio reads any line that begins "include" as one (init.c)
    "trigger": (COMMAND, "it runs a command, or reboots the machine, when fio is triggered"),
    "cgroup": (MACHINE, "it creates control groups and moves processes between them, machine-wide"),
    "log_": _WRITES_LOG, "per_job_logs": _WRITES_LOG,
    "replay_": (PATH, "it replays a trace read from a path of the job's choosing"),
    "disable_": _CHANGES_OUTPUT,
}  # fmt: skip
# A choice whose tail after ':' names a file: mem=mmapshared:/path maps that file.
_NAMES_A_FILE = {
    "mem": (PATH, "its mmap, mmapshared and mmaphuge forms with ':' map a file at a path of the job's choosing")
}

# Characters no name or value may hold: each would change how fio reads the job file.
_FORBIDDEN = {
    "\n": "a newline would start a new line of the job file (a new option or [section])",
    "\r": "a carriage return would start a new line of the job file",
    "[": "fio reads [ and ] as a section header", "]": "fio reads [ and ] as a section header",
    ";": "fio reads the rest of the line as a comment", "#": "fio reads the rest of the line as a comment",
    "$": "fio replaces $ncpus, $mb_memory and ${VARIABLE} with this machine's values or root's environment: "
         "write the value itself, so the stored job file says what ran",
    "\x00": "it holds a NUL byte",
}  # fmt: skip


def forbidden_character(text: str) -> tuple[str, str] | None:
    """(why, kind) of the first character no name or value may hold, or None."""
    for char, why in _FORBIDDEN.items():
        if char in text:
            return why, EXPANSION if char == "$" else INJECTION
    if re.search(r"[\x00-\x1f\x7f]", text):
        return "it holds a control character", INJECTION
    return None


def table() -> FioTable:
    """The table of the fio fslab drives, with the options of the engines fslab allows."""
    return fio_table(_ENGINE_NAMES)


def option_problem(name: str, value: str | None, *, in_job_file: bool = False) -> str | None:
    """Why `name=value` may not reach fio (a sentence naming the option), or None when it may.
    `in_job_file`: the one nuance of a job file, whose `filename` may be a plain file name."""
    return _checked(table(), name, value, in_job_file)[0]


def check_option(name: str, value: str | None, *, where: str, in_job_file: bool = False) -> tuple[str, str | None]:
    """The option under fio's main name, or FioRefused naming `where`, the option and why."""
    problem, main, kind = _checked(table(), name, value, in_job_file)
    if problem:
        raise FioRefused(f"{where}: {problem}", kind)
    return main, value


def main_name(name: str) -> str:
    """fio's main name for an option (blocksize → bs)."""
    return table().spellings.get(name, name)


@functools.lru_cache(maxsize=4096)
def _checked(fio: FioTable, name: str, value: str | None, in_job_file: bool) -> tuple[str | None, str, str]:
    """(problem or None, main name, kind of problem). Cached by table: a study of thousands of
    workloads sets the same few options thousands of times, and checking them again took most of
    its reading (positional arguments: one cache look-up costs least)."""
    option = fio.find(name)
    main = option.name if option else name
    problem, kind = _problem(fio, option, name, main, value, in_job_file)
    return problem, main, kind


# Values a fio release mishandles, refused on the releases before the one that works: (option,
# value) → (that release, what goes wrong). Not a danger, but a run that cannot be trusted to end.
BROKEN_BEFORE: dict[tuple[str, str], tuple[tuple[int, int], str]] = {
    ("io_submit_mode", "offload"): ((3, 42), (
        "fio before 3.42 hangs at random as such a job starts (workqueue_init waits for ever for a submit worker whose "
        "start raced; fixed by fio's commit 736c2015): its run would stall until its time-out, by hand as in fslab")),
}  # fmt: skip


def _broken(version: str, main: str, value: str | None) -> tuple[str, str] | None:
    """(problem, BROKEN) when this fio (`version`: "fio-3.33") mishandles `main=value`, else None."""
    known = BROKEN_BEFORE.get((main, value or ""))
    release = re.match(r"fio-(\d+)\.(\d+)", version)
    if known is None or release is None or tuple(map(int, release.groups())) >= known[0]:
        return None
    return f"{main}={value} is refused with {version}: {known[1]}", BROKEN


def _problem(
    fio: FioTable, option: FioOption | None, name: str, main: str, value: str | None, in_job_file: bool
) -> tuple[str | None, str]:
    if found := standing_problem(name, value, in_job_file=in_job_file, main=main):
        return found
    if found := _broken(fio.version, main, value):
        return found
    if option is None:
        return (
            f"unknown fio option '{name}'{did_you_mean(name, fio.spellings)}: "
            f"{fio.version} lists no such option (`fslab list fio` shows them)",
            UNKNOWN,
        )
    if main in ("ioengine", "filename", "donorname"):
        return None, ""  # checked above: an engine fslab allows, a plain file
    return _value_problem(option, value)


def standing_problem(
    name: str, value: str | None, *, in_job_file: bool = False, main: str | None = None
) -> tuple[str, str] | None:
    """(problem, kind) of what the guard refuses without fio's table: characters, the options
    refused whatever their value, engines, the plain files; None when none of these refuses it.
    (A stored job is read with these alone: reading stored results asks fio nothing.)"""
    main = main or name
    if found := forbidden_character(name):
        return f"option {name[:40]!r} is refused: {found[0]}", found[1]
    if value is not None and (found := forbidden_character(value)):
        return f"{name}={value[:40]!r} is refused: {found[0]}", found[1]
    if main in ("filename", "donorname") and (in_job_file or main == "donorname"):
        return (
            None
            if PLAIN_FILE.fullmatch(value or "")
            else (_plain_file_problem(main, value or ""), DEVICE if (value or "").startswith("/dev/") else PATH)
        )
    if refused := _refusal(name) or _refusal(main):
        return f"{main} is refused: {refused[1]}", refused[0]
    if main == "ioengine":
        return (
            _engine_problem(value)
            if value is not None
            else (f"ioengine needs a value: one of {', '.join(ENGINES)}", VALUE)
        )
    return None


def _refusal(name: str) -> tuple[str, str] | None:
    """(kind, why) an option is refused whatever its value, or None."""
    if name in REFUSED:
        return REFUSED[name]
    if name.startswith("write_") and name.endswith("_log"):
        return _WRITES_LOG
    return next((why for prefix, why in _REFUSED_PREFIXES.items() if name.startswith(prefix)), None)


def _plain_file_problem(name: str, value: str) -> str:
    return (
        f"{name}={value[:40]!r} is refused: a job file may name only a plain file (letters, digits, _ . + -, "
        "not starting with '-'; no '/', no '..', no ':'), which fio makes in the target's directory"
    )


def _engine_problem(engine: str) -> tuple[str, str] | None:
    if engine in ENGINES:
        return None
    kind, why = next(((k, why) for k, (why, names) in _ENGINES_REFUSED.items() if engine in names), (None, None))
    if kind is None:
        kind, why = LIBRARY, (
            "it loads a library of the job's choosing into fio, as root"
            if engine.startswith("external") or "/" in engine or ":" in engine
            else "it is not one of the local engines fslab allows "
                 "(an engine fio does not have built in is a library it loads)"
        )  # fmt: skip
    return f"ioengine={engine[:40]} is refused: {why}; allowed: {', '.join(ENGINES)}", kind


def _value_problem(option: FioOption, value: str | None) -> tuple[str | None, str]:
    """A value checked by fslab's form for the option, else by fio's type for it."""
    name = option.name
    if name in FORMS:
        wrong = FORMS[name].problem(value)
        if wrong:
            return f"{name} {wrong}", VALUE
        return (misread_, VALUE) if value and (misread_ := FORMS[name].misread(name, value)) else (None, "")
    if option.form in ("choice", "choices"):
        return _choice_problem(option, value)
    if option.form == "string":
        return f"{name} is refused: fio takes any text here and fslab does not know what it names", UNKNOWN
    if option.form not in _NUMERIC:
        return f"{name} is refused: fio describes its value as {option.fio_type!r}, a form fslab does not know", UNKNOWN
    says = _describe(option)
    if value is None:
        return (None, "") if option.form == "flag" else (f"{name} needs a value: {says}", VALUE)
    if not re.fullmatch(_NUMERIC[option.form], value, re.IGNORECASE) or not _in_range(option, value):
        return f"{name} takes {says}, not '{value[:40]}'", VALUE
    numbers = numbers_of(name, option.form, low=option.low)
    if numbers is not None and (wrong := misread(name, value, numbers)):
        return wrong, VALUE
    return None, ""


_NUMBERS = rf"(?=.*\d)(?:{_NUMBER})?(?:[,:-](?:{_NUMBER})?)*"  # one per direction, or a range
_NUMERIC = {
    "bool": "[01]",
    "flag": "[01]",
    "int": _NUMBERS,
    "time": _NUMBERS,
    "range": _NUMBERS,
    "floats": _NUMBERS,
    "size": _NUMBERS,
}
_FORM_SAYS = {
    "bool": "0 or 1", "flag": "0 or 1, or nothing (means 1)",
    "int": "a number (4k, 1m for a size), or one per direction (4k,64k)",
    "time": "a time (10, 500ms, 30s, 2m)", "range": "a range of sizes (1k-64k), or one per direction",
    "floats": "numbers separated by ':' (99:99.9)",
    "size": "a size (4k, 1GiB), a percentage (50%) or a number of zones (10z)",
}  # fmt: skip


def _in_range(option: FioOption, value: str) -> bool:
    """A plain whole number within fio's range for it (other forms: fio's --parse-only judges)."""
    if not re.fullmatch(r"-?\d{1,20}", value):
        return True
    number = int(value)
    return (option.low is None or number >= option.low) and (option.high is None or number <= option.high)


def _describe(option: FioOption) -> str:
    if option.name in ("filename", "donorname"):
        return "a plain file name, made in the target's directory"
    if option.name == "ioengine":
        return "one of " + ", ".join(ENGINES)
    if option.name in FORMS:
        return FORMS[option.name].says
    if option.form in ("choice", "choices"):
        many = "one or more of (comma-separated) " if option.form == "choices" else "one of "
        tail = f", with ':' and {SUFFIXES[option.name].says}" if option.name in SUFFIXES else ""
        tail += f" (never with ':': {_NAMES_A_FILE[option.name][1]})" if option.name in _NAMES_A_FILE else ""
        return many + ", ".join(option.values) + tail
    says = _FORM_SAYS.get(option.form, f"fio's {option.fio_type!r}")
    low, high = option.low, option.high
    if option.form not in ("int", "time") or (not low and high is None):
        return says
    bounds = f"{low or 0:g} to {high:g}" if high is not None else f"at least {low:g}"
    return f"{says}: {bounds}"


_CHOICE = re.compile(r"([^:,]*)(?:([:,])(.*))?", re.DOTALL)


def _choice_problem(option: FioOption, value: str | None) -> tuple[str | None, str]:
    """A choice: one of fio's valid values (as fio matches them: the word before ':' or ','),
    and after ':' only a tail fslab knows (numbers); a comma-separated list for several."""
    name = option.name
    if value is None:
        return f"{name} needs a value: {_describe(option)}", VALUE
    items = value.split(",") if option.form == "choices" else [value]
    for item in items:
        found = _CHOICE.fullmatch(item)
        assert found is not None  # the pattern matches any text
        word, sep, tail = found.groups(default="")
        if word not in option.values:
            return f"{name} takes {_describe(option)}, not '{value[:40]}'", VALUE
        if not sep:
            if name in TAIL_NEEDED:
                return (
                    f"{name} takes a criterion and its limit after ':' ({SUFFIXES[name].says}), "
                    f"not '{value[:40]}' alone: fio refuses a criterion without one",
                    VALUE,
                )
            continue
        if name in _NAMES_A_FILE:
            return f"{name} is refused: {_NAMES_A_FILE[name][1]}", _NAMES_A_FILE[name][0]
        if sep == "," or name not in SUFFIXES:
            return (
                f"{name}={value[:40]} is refused: fslab does not know what fio "
                f"reads after '{word}{sep}' here; {name} takes {_describe(option)}",
                UNKNOWN,
            )
        if wrong := SUFFIXES[name].problem(tail) or _tail_misread(name, word, tail):
            return f"{name} after '{word}:' {wrong}", VALUE
    return None, ""


# Tails fio reads with atoi, a whole number whose unit it would drop (rw=randread:8k is 8 I/Os),
# and tails it reads as sizes (parse.c str_to_decimal), by option and the word before ':'.
_TAIL_COUNTS = {
    ("file_service_type", "random"),
    ("file_service_type", "roundrobin"),
    ("file_service_type", "sequential"),
}
_TAIL_SIZES = {
    ("steadystate", "bw"),
    ("steadystate", "bw_slope"),
    ("random_distribution", "zoned"),
    ("random_distribution", "zoned_abs"),
}


def _tail_misread(name: str, word: str, tail: str) -> str | None:
    """Where fio would read a choice's tail otherwise than it says (the words after the option's
    name and word), or None."""
    counted = (name, word) in _TAIL_COUNTS or (
        name == "rw" and word.startswith("rand")
    )  # a random rw's: I/Os before a new offset
    if counted and not tail.isdigit():
        return f"takes a whole number ({word}:8), not '{tail[:40]}': fio reads only its digits, with atoi"
    sizes = (name, word) in _TAIL_SIZES and not tail.endswith("%") or (name == "rw" and not counted)
    wrong = misread_each(f"{name}={word}:", tail, Numbers(signed=True)) if sizes else None
    return "is refused: " + wrong.split(" is refused: ", 1)[1] if wrong else None


def _listing() -> tuple[dict[str, str], dict[str, str]]:
    """(accepted, refused): every spelling of every option of fio's table → its form and fio's
    words for it, or why fslab refuses it whatever its value."""
    try:
        fio = table()
    except FioUnavailable as exc:
        return {"(none)": str(exc)}, {}
    accepted, refused = {}, {}
    for spelling, main in sorted(fio.spellings.items()):
        option = fio.options[main]
        other = f" (fio's other name for {main})" if spelling != main else ""
        if why := _standing(option, spelling):
            refused[spelling] = why + other
            continue
        engines = f"; an option of ioengine {', '.join(option.engines)}" if option.engines else ""
        accepted[spelling] = f"{_describe(option)} — {option.help}{engines}{other}"
    return accepted, refused


def _standing(option: FioOption, spelling: str) -> str | None:
    """Why fslab refuses an option whatever its value, or None when a value may pass."""
    if option.name == "donorname":
        return None
    if refused := _refusal(spelling) or _refusal(option.name):
        return refused[1]
    if option.name in FORMS or option.form in ("choice", "choices", *_NUMERIC):
        return None
    problem, _ = _value_problem(option, "")
    return (problem or "").split(" is refused: ", 1)[-1]


class _Listed(Mapping[str, str]):
    """A listing read when first used: importing fslab asks fio nothing."""

    def __init__(self, which: int):
        self._which = which

    @functools.cached_property
    def _items(self) -> dict[str, str]:
        return _listing()[self._which]

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def accepted_options() -> Mapping[str, str]:
    """Every option a study or a job file may give fio → its value's form (`fslab list fio`)."""
    return _Listed(0)


def refused_options() -> Mapping[str, str]:
    """Every option fio has that fslab refuses → why (`fslab list fio`)."""
    return _Listed(1)


def option_text(value: str | int | float | bool) -> str:
    """A study file's TOML value as fio writes it: true/false as 1/0."""
    return str(int(value)) if isinstance(value, bool) else str(value)
