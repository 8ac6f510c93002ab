"""fio options and job files from a study: parsed, checked against an allow-list, and written
out again by fslab.

A study sets fio options three ways — `[fio] options`, a workload's `options`, a job file —
and all three are untrusted: fio runs as root, and many of its options open a path, run a
command, or reach a device, a network or a library. So an option reaches fio only when it is
on ALLOWED and its value matches the pattern of its kind; anything else is refused, saying why.
fslab never hands the user's text to fio: a job file is parsed into a JobFile, and `render`
writes a new job file from that record, pointed at the target by fslab alone.

Pure (text in, records out), but for `parse_only`, which asks fio itself.
"""

from __future__ import annotations

import functools
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fslab.errors import Refused
from fslab.guard.names import NAME, NAME_RULE
from fslab.guard.options import accepted_values
from fslab.system import CommandError, run
from fslab.toml_errors import did_you_mean

GLOBAL = "global"
READING_MODES = {"read", "randread", "rw", "readwrite", "randrw"}


@dataclass(frozen=True)
class Kind:
    """What a value of one kind looks like: a regex it must match whole, and words for messages."""

    pattern: str
    says: str
    bare: bool = False  # may be written without a value (`time_based` means time_based=1)
    most: int | None = None  # an upper bound, for whole numbers

    @property
    def describe(self) -> str:
        """The value's form, as `fslab list` shows it (guard.options.accepted_values)."""
        return f"{self.says}, or nothing (means 1)" if self.bare else self.says

    def problem(self, value: str | None) -> str | None:
        if value is None:
            return None if self.bare else f"needs a value: {self.says}"
        if not re.fullmatch(self.pattern, value, re.IGNORECASE):
            return f"takes {self.says}, not '{value[:40]}'"
        if self.most is not None and int(value) > self.most:
            return f"takes {self.says}; {value} is too many"
        return None


def choices(*names: str, bare: bool = False) -> Kind:
    return Kind("|".join(re.escape(n) for n in names), "one of " + ", ".join(names), bare=bare)


def per_direction(part: str) -> str:
    """fio's read,write,trim triplets ("4k,64k"): one to three values, some left empty."""
    return rf"(?=.*\d)(?:{part})?(?:,(?:{part})?){{0,2}}"


_DEC = r"\d+(?:\.\d+)?"
_SIZE = rf"{_DEC}(?:[kmgtp]i?b?|b)?"  # fio's suffixes: 4k, 4KiB, 1m, 1g, or bytes
_TIME = rf"{_DEC}(?:us|usec|ms|msec|s|sec|m|min|h|d)?"  # a bare number in the option's own unit
_RANGE = rf"{_SIZE}(?:[-:]{_SIZE})?"
_SPLIT = rf"{_SIZE}/(?:{_DEC})?(?::{_SIZE}/(?:{_DEC})?)*"
# A literal pattern only: hex, a decimal number, a "string", %o (the offset). A 'quoted' word
# would make fio read the file of that name, so quotes ' and / never match.
_PATTERN = r"""(?:0x[0-9a-f]+|\d+|"[^"'/\\]*"|%o)+"""

BOOL = Kind(r"[01]", "0 or 1", bare=True)
PERCENT = Kind(r"\d+", "a whole percentage 0-100", most=100)
SIZE = Kind(_SIZE, "a size (4k, 1m, 1GiB or bytes)")
SIZE_OR_PERCENT = Kind(rf"{_SIZE}|{_DEC}%", "a size (4k, 1m, 1GiB) or a percentage (50%)")
SIZES = Kind(per_direction(_SIZE), "a size, or read,write,trim sizes (4k,64k)")
RANGES = Kind(per_direction(_RANGE), "a size or a range of sizes (1k-64k), or one per direction")
SPLIT = Kind(per_direction(_SPLIT), "size/percentage pairs (4k/10:64k/90)")
TIME = Kind(_TIME, "a time (10, 500ms, 30s, 2m)")
TIME_RANGE = Kind(rf"{_TIME}(?:-{_TIME})?", "a time or a range of times (1s-5s)")
FRACTIONS = Kind(rf"{_DEC}(?::{_DEC})*", "numbers separated by ':' (99:99.9)")
PERCENTS = Kind(per_direction(r"\d+"), "a percentage, or one per direction (50,100)")
COUNTS = Kind(per_direction(r"\d+"), "a whole number, or one per direction (100,200)")
JOB_NAME = Kind(NAME.pattern, NAME_RULE)
TEXT = Kind(r"[^\x00-\x1f\x7f]*", "text on one line")
PATTERN = Kind(_PATTERN, 'a literal pattern (0xdeadbeef, "text", a number, %o)')


def count(most: int) -> Kind:
    return Kind(r"\d+", f"a whole number up to {most}", most=most)


RW_MODES = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite", "randtrimwrite")
RW = Kind(rf"(?:{'|'.join(RW_MODES)})(?::{_SIZE})?", "an rw mode (" + ", ".join(RW_MODES) + "), with an optional :N")
# Engines that do I/O through the kernel on the target's own files or device, and nothing else.
ENGINES = ("libaio", "io_uring", "psync", "sync", "pvsync", "pvsync2", "vsync", "posixaio", "mmap", "filecreate", "filestat", "filedelete")
VERIFY_METHODS = (
    "md5", "crc64", "crc32c", "crc32c-intel", "crc32", "crc16", "crc7", "xxhash",
    "sha512", "sha256", "sha1", "sha3-224", "sha3-256", "sha3-384", "sha3-512", "meta", "pattern", "null",
)  # fmt: skip
DISTRIBUTION = Kind(
    rf"random|(?:zipf|pareto|normal|gauss):{_DEC}(?::{_DEC})?|zoned(?:_abs)?:[0-9/:.,]+",
    "random, zipf:θ, pareto:h, normal:σ, gauss:σ, zoned:… or zoned_abs:…",
)
FILE_SERVICE = Kind(rf"(?:random|roundrobin|sequential|zipf|pareto|normal|gauss)(?::{_DEC})?", "random, roundrobin, sequential, zipf, pareto, normal or gauss, with an optional :N")

ALLOWED: dict[str, Kind] = {
    # what the I/O is
    "rw": RW, "rwmixread": PERCENT, "rwmixwrite": PERCENT, "percentage_random": PERCENTS,
    "bs": SIZES, "ba": SIZES, "bsrange": RANGES, "bssplit": SPLIT, "bs_unaligned": BOOL, "bs_is_seq_rand": BOOL,
    "ioengine": choices(*ENGINES), "direct": BOOL, "buffered": BOOL, "sync": choices("0", "1", "none", "sync", "dsync", bare=True),
    "iodepth": count(65536), "iodepth_batch": count(65536), "iodepth_batch_complete_min": count(65536),
    "iodepth_batch_complete_max": count(65536), "iodepth_low": count(65536), "numjobs": count(1024), "thread": BOOL,
    # where in the files, how much
    "size": SIZE_OR_PERCENT, "filesize": RANGES, "io_size": SIZE_OR_PERCENT, "nrfiles": count(100000), "openfiles": count(100000),
    "file_service_type": FILE_SERVICE, "offset": SIZE_OR_PERCENT, "offset_increment": SIZE_OR_PERCENT, "offset_align": SIZE,
    "number_ios": count(2**63), "loops": count(1000000),
    # time and pacing
    "runtime": TIME, "time_based": BOOL, "ramp_time": TIME, "startdelay": TIME_RANGE,
    "thinktime": TIME, "thinktime_spin": TIME, "thinktime_blocks": count(2**31), "thinktime_blocks_type": choices("complete", "issue"),
    "thinktime_iotime": TIME, "rate": SIZES, "rate_min": SIZES, "rate_iops": COUNTS, "rate_iops_min": COUNTS,
    "rate_process": choices("linear", "poisson"), "rate_cycle": count(2**31), "rate_ignore_thinktime": BOOL,
    # flushing
    "fsync": count(2**31), "fdatasync": count(2**31), "end_fsync": BOOL, "fsync_on_close": BOOL,
    # randomness
    "norandommap": BOOL, "random_distribution": DISTRIBUTION, "randrepeat": BOOL, "allrandrepeat": BOOL,
    "randseed": count(2**64 - 1), "random_generator": choices("tausworthe", "lfsr", "tausworthe64"),
    # files
    "create_on_open": BOOL, "create_serialize": BOOL, "create_fsync": BOOL, "pre_read": BOOL, "invalidate": BOOL,
    "fallocate": choices("none", "native", "posix", "keep", "truncate", "0", "1"), "fadvise_hint": choices("0", "1", "sequential", "random"),
    "overwrite": BOOL, "unlink": BOOL, "unlink_each_loop": BOOL,
    # data
    "zero_buffers": BOOL, "refill_buffers": BOOL, "scramble_buffers": BOOL, "buffer_compress_percentage": PERCENT,
    "buffer_compress_chunk": SIZE, "dedupe_percentage": PERCENT, "buffer_pattern": PATTERN,
    # verification (but its state files: see REFUSED)
    "verify": choices(*VERIFY_METHODS), "do_verify": BOOL, "verify_only": BOOL, "verify_interval": SIZE, "verify_offset": SIZE,
    "verify_pattern": PATTERN, "verify_fatal": BOOL, "verify_dump": BOOL, "verify_async": count(64),
    "verify_backlog": count(2**31), "verify_backlog_batch": count(2**31), "experimental_verify": BOOL,
    # jobs, groups, reporting
    "name": JOB_NAME, "description": TEXT, "wait_for": JOB_NAME, "stonewall": BOOL, "new_group": BOOL, "group_reporting": BOOL,
    "exitall": BOOL, "lat_percentiles": BOOL, "clat_percentiles": BOOL, "slat_percentiles": BOOL, "percentile_list": FRACTIONS,
    # options of the allowed engines (fio refuses them under another engine: see parse_only)
    "hipri": BOOL, "fixedbufs": BOOL, "registerfiles": BOOL, "sqthread_poll": BOOL, "nonvectored": BOOL,
    "force_async": count(2**31), "userspace_reap": BOOL, "nowait": BOOL,
}  # fmt: skip

# Steady state (fio's HOWTO, "Steady state"; fio 3.33 has no steadystate_check_interval): a job
# ends once its criterion stays under its limit for steadystate_duration, sampled once a second,
# after steadystate_ramp_time. Kept apart from ALLOWED's table so that replacing that table with
# fio's own (branch fio-table) meets them as one small block.
STEADYSTATE = Kind(
    rf"(?:iops|iops_slope):{_DEC}%?|(?:bw|bw_slope):(?:{_DEC}%|{_SIZE})",
    "a criterion and its limit: iops:N, iops_slope:N, bw:N or bw_slope:N, N a number (a size for bw) or a percentage of the mean (iops_slope:0.3%)",
)
ALLOWED |= {"steadystate": STEADYSTATE, "steadystate_duration": TIME, "steadystate_ramp_time": TIME}

# fio's other names for allowed options; the record keeps the main name.
ALIASES = {
    "readwrite": "rw", "blocksize": "bs", "blockalign": "ba", "blocksize_range": "bsrange", "io_limit": "io_size",
    "iodepth_batch_submit": "iodepth_batch", "iodepth_batch_complete": "iodepth_batch_complete_min",
    "ratemin": "rate_min", "ratecycle": "rate_cycle",
    "ss": "steadystate", "ss_dur": "steadystate_duration", "ss_ramp": "steadystate_ramp_time",
}  # fmt: skip



def accepted_options() -> dict[str, str]:
    """Every option a study or a job file may give fio → its value's form (`fslab list`)."""
    return accepted_values(ALLOWED) | {alias: f"{ALLOWED[name].describe} (fio's other name for {name})" for alias, name in ALIASES.items()}


_SHELL = "it runs a shell command as root"
_WRITES_LOG = "it writes log files at a path of the job's choosing"
_CHANGES_OUTPUT = "it changes the output fslab reads its numbers from"
REFUSED: dict[str, str] = {
    "filename": "fslab points fio at the target's files or device (a job file may name a plain file, made in the target)",
    "directory": "fslab points fio at the target's directory",
    "filename_format": "it makes fio name files at paths of the job's choosing",
    "opendir": "it makes fio use every file under a directory of the job's choosing",
    "include": "it makes fio read another file: put its options in the job file itself",
    "exec_prerun": _SHELL, "exec_postrun": _SHELL,
    "write_iolog": "it writes a file at a path of the job's choosing",
    "read_iolog": "it reads a file at a path of the job's choosing",
    "merge_blktrace_file": "it writes a file at a path of the job's choosing",
    "replay_redirect": "it sends the I/O to a device of the job's choosing",
    "verify_state_save": "it writes a state file outside the target",
    "verify_state_load": "it reads a state file from outside the target",
    "ioscheduler": "it changes the I/O scheduler of the device for everyone, and leaves it changed",
    "mem": "its mmapshared:/mmaphuge: forms map a file at a path of the job's choosing",
    "iomem": "its mmapshared:/mmaphuge: forms map a file at a path of the job's choosing",
    "allow_mounted_write": "it lets fio write over a mounted device",
    "create_only": "fslab lays out the files a job reads itself, with this option",
    "stats": _CHANGES_OUTPUT, "kb_base": _CHANGES_OUTPUT, "unit_base": _CHANGES_OUTPUT, "unified_rw_reporting": _CHANGES_OUTPUT,
    "gtod_reduce": _CHANGES_OUTPUT,
}  # fmt: skip
_REFUSED_PREFIXES = {
    "trigger": "it runs a command, or reboots the machine, when fio is triggered",
    "cgroup": "it creates control groups and moves processes between them, machine-wide",
    "log_": _WRITES_LOG, "per_job_logs": _WRITES_LOG,
    "replay_": "it replays a trace read from a path of the job's choosing",
    "disable_": _CHANGES_OUTPUT,
}  # fmt: skip

_NETWORK_ENGINES = {"net", "netsplice", "rdma", "http", "nbd", "rbd", "rados", "gfapi", "gfapi_async", "libhdfs", "nfs", "libiscsi"}
_DEVICE_ENGINES = {"sg", "io_uring_cmd", "xnvme", "spdk", "libzbc", "dev-dax", "libpmem", "pmemblk", "mtd", "libcufile", "windowsaio", "e4defrag", "exec", "cpuio", "splice", "guasi", "solarisaio", "falloc", "ftruncate"}


def _engine_problem(value: str) -> str:
    engine = value.lower()
    if engine.startswith("external") or "/" in engine or ":" in engine:
        why = "it loads a library of the job's choosing into fio, as root"
    elif engine in _NETWORK_ENGINES:
        why = "it opens a network connection or a remote store"
    elif engine == "null":
        why = "it does no I/O, so its numbers say nothing about the target"
    elif engine in _DEVICE_ENGINES:
        why = "it opens a device, a library or a program rather than the target's files"
    else:
        why = "it is not one of the local engines fslab allows"
    return f"ioengine={value[:40]} is refused: {why}; allowed: {', '.join(ENGINES)}"


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


def _character_problem(text: str) -> str | None:
    for char, why in _FORBIDDEN.items():
        if char in text:
            return why
    if re.search(r"[\x00-\x1f\x7f]", text):
        return "it holds a control character"
    return None


# A file name a job file may give (and the file a workload's jobs share): made by fio inside the
# target's directory. No '/' (no other directory), no ':' (fio's separator between several
# files), not . or .., not starting with '-' (fio reads "-" as stdin or stdout).
PLAIN_FILE = re.compile(r"(?!\.\.?$)[A-Za-z0-9_.][A-Za-z0-9_.+-]{0,127}")


@functools.lru_cache(maxsize=4096)
def option_problem(name: str, value: str | None, *, in_job_file: bool = False) -> str | None:
    """Why `name=value` may not reach fio (a sentence naming the option), or None when it may.
    `in_job_file`: the one nuance of a job file, whose `filename` may be a plain file name.
    Cached (a pure function of its arguments): a study of thousands of workloads sets the same
    few options thousands of times, and checking them again took most of its reading."""
    if why := _character_problem(name):
        return f"option {name[:40]!r} is refused: {why}"
    if value is not None and (why := _character_problem(value)):
        return f"{name}={value[:40]!r} is refused: {why}"
    name = ALIASES.get(name, name)
    if in_job_file and name == "filename":
        return None if PLAIN_FILE.fullmatch(value or "") else _filename_problem(value or "")
    if why := _refusal(name):
        return f"{name} is refused: {why}"
    if name not in ALLOWED:
        return f"unknown fio option '{name}'{did_you_mean(name, [*ALLOWED, *ALIASES])}: fslab passes fio only the options `fslab list fio` shows"
    if name == "ioengine" and value is not None and value.lower() not in ENGINES:
        return _engine_problem(value)
    wrong = ALLOWED[name].problem(value)
    if wrong is None and name in ("name", "wait_for") and ".." in (value or ""):
        wrong = f"takes {NAME_RULE}, without '..'"
    return f"{name} {wrong}" if wrong else None


def _refusal(name: str) -> str | None:
    """Why an option is refused whatever its value, or None."""
    if name in REFUSED:
        return REFUSED[name]
    if name.startswith("write_") and name.endswith("_log"):
        return _WRITES_LOG
    return next((why for prefix, why in _REFUSED_PREFIXES.items() if name.startswith(prefix)), None)


def _filename_problem(value: str) -> str:
    return (
        f"filename={value[:40]!r} is refused: a job file may name only a plain file (letters, digits, _ . + -, "
        "not starting with '-'; no '/', no '..', no ':'), which fio makes in the target's directory"
    )


def check_option(name: str, value: str | None, *, where: str, in_job_file: bool = False) -> tuple[str, str | None]:
    """The option under its main name, or Refused naming `where`, the option and why."""
    problem, main = _checked(name, value, in_job_file)
    if problem:
        raise Refused(f"{where}: {problem}")
    return main, value


@functools.lru_cache(maxsize=4096)
def _checked(name: str, value: str | None, in_job_file: bool) -> tuple[str | None, str]:
    # One cache look-up of positional arguments per option (a keyword argument's costs more): a
    # study of thousands of workloads checks the same few options thousands of times.
    return option_problem(name, value, in_job_file=in_job_file), ALIASES.get(name, name)


def option_text(value: str | int | float | bool) -> str:
    """A study file's TOML value as fio writes it: true/false as 1/0."""
    return str(int(value)) if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Section:
    """One [section] of a job file: [global] (defaults for the jobs after it) or a job."""

    name: str
    options: tuple[tuple[str, str | None], ...]  # (name, value) in order; None: written bare
    line: int  # of its header in the job file (0 for a job fslab built)


@dataclass(frozen=True)
class JobFile:
    """A fio job, every option checked. fio receives only what `render` writes from it."""

    sections: tuple[Section, ...]
    source: str  # the job file as the study names it, or the workload it was built for

    def applied(self) -> list[list[tuple[str, str | None]]]:
        """Each job's options in the order fio applies them: the [global] sections before it, then its own."""
        defaults: list[tuple[str, str | None]] = []
        found = []
        for section in self.sections:
            if section.name == GLOBAL:
                defaults += section.options
            else:
                found.append([*defaults, *section.options])
        return found

    def jobs(self) -> list[dict[str, str | None]]:
        """Each job's options as fio leaves them: the last value of each."""
        return [dict(options) for options in self.applied()]


def single_job(name: str, options: Mapping[str, str]) -> JobFile:
    """A one-job JobFile from checked-here options (a study's parameters and fslab's own). Its
    `filename`, when it has one, is the file its jobs share, checked as a job file's: a plain name
    in the target's directory (a study's `options` may not set it: study_file.fio_options)."""
    checked = tuple(check_option(key, value, where=f"workload '{name}'", in_job_file=key == "filename") for key, value in options.items())
    return JobFile(sections=(Section(name=name, options=checked, line=0),), source=f"workload '{name}'")


_HEADER = re.compile(r"\[([^\[\]]*)\]")
_KEY = re.compile(r"[A-Za-z0-9_-]+")


def parse_job_file(text: str, source: str) -> JobFile:
    """A job file's sections, every option checked (Refused names `source`, the line, the section).
    `directory` lines are dropped: fslab chooses the target's directory."""
    headers: list[tuple[str, int]] = []  # (name, line) of each section
    options: list[list[tuple[str, str | None]]] = []  # each section's
    for number, raw in enumerate(text.split("\n"), start=1):
        # fio ends a line at ';' or '#' (an inline comment too) and ignores blanks around it.
        line = re.split(r"[;#]", raw.rstrip("\r"), maxsplit=1)[0].strip()
        where = f"{source}:{number}" + (f" [{headers[-1][0]}]" if headers else "")
        if not line:
            continue
        if line.split(None, 1)[0] == "include":
            raise Refused(f"{where}: include is refused: {REFUSED['include']}")
        if line.startswith("["):
            headers.append((_section_name(line, f"{source}:{number}"), number))
            options.append([])
        elif not headers:
            raise Refused(f"{where}: '{line[:40]}' comes before any [section]; fio's options go under [global] or a [job]")
        elif option := _option(line, where):
            options[-1].append(option)
    if not any(name != GLOBAL for name, _ in headers):
        raise Refused(f"{source}: defines no job: add a [name] section with its options")
    return JobFile(sections=tuple(Section(name, tuple(opts), line) for (name, line), opts in zip(headers, options)), source=source)


def _section_name(line: str, where: str) -> str:
    header = _HEADER.fullmatch(line)
    if not header:
        raise Refused(f"{where}: '{line[:40]}' is not a section header [name]")
    name = header.group(1).strip()
    if name != GLOBAL and (not NAME.fullmatch(name) or ".." in name):
        raise Refused(f"{where}: job name '{name[:40]}' is refused: fio makes files named after it; use {NAME_RULE}, without '..'")
    return name


def _option(line: str, where: str) -> tuple[str, str | None] | None:
    """One `key=value` or bare `key` line, checked; None for a directory line (fslab's replaces it)."""
    key, sep, value = line.partition("=")
    key = key.strip()
    if not _KEY.fullmatch(key):
        problem = _character_problem(key) or "an option is a name, or name=value"
        raise Refused(f"{where}: '{line[:40]}' is refused: {problem}")
    if key == "directory":
        return None
    return check_option(key, value.strip() if sep else None, where=where, in_job_file=True)


# fio reads a job file a line at a time, trims the blanks around a value, expands `$`, and takes a
# ':' in `directory` for the start of another directory: a target's directory whose path holds
# any of these (a work directory's path may) is named through the environment instead, which fio
# expands in a value (${FSLAB_DIRECTORY}); fio_environment gives it, a ':' escaped as fio reads it.
DIRECTORY_VARIABLE = "FSLAB_DIRECTORY"
_AS_WRITTEN = re.compile(r"/(?:[^\x00-\x1f\x7f:$]*[^\x00-\x1f\x7f:$\s])?")


def _directory_line(directory: Path) -> str:
    return f"directory={directory}" if written_as_is(directory) else f"directory=${{{DIRECTORY_VARIABLE}}}"


def written_as_is(directory: Path) -> bool:
    """Whether `directory` can be written into a job file as it is (no ${FSLAB_DIRECTORY}): a
    fio server on another host reads the job without fslab's environment."""
    return bool(_AS_WRITTEN.fullmatch(str(directory)))


def fio_environment(directory: Path | None) -> dict[str, str]:
    """The environment fio runs a job rendered for `directory` in (render may name it there)."""
    return {} if directory is None else {DIRECTORY_VARIABLE: str(directory).replace(":", "\\:")}


def render(job: JobFile, *, directory: Path | None, device: str | None, fixed: Mapping[str, str] | None = None) -> str:
    """The job file fio runs: fslab's [global] naming the target's directory (or raw device),
    then the checked sections, each job ending with `fixed` (fslab's own, which win). On a raw
    device a job's plain `filename` goes: every job works on the device."""
    lines = ["[global]", _directory_line(directory) if directory else f"filename={device}"]
    for section in job.sections:
        lines.append(f"[{section.name}]")
        lines += [_line(key, value) for key, value in section.options if not (directory is None and key == "filename")]
        if section.name != GLOBAL:
            lines += [f"{key}={value}" for key, value in (fixed or {}).items()]
    return "\n".join(lines) + "\n"


def job_text(job: JobFile) -> str:
    """The checked job, without fslab's location lines: what a study stores as its workload."""
    return "".join(f"[{s.name}]\n" + "".join(_line(k, v) + "\n" for k, v in s.options) for s in job.sections)


def _line(key: str, value: str | None) -> str:
    return key if value is None else f"{key}={value}"


def _on(options: Mapping[str, str | None], name: str) -> bool:
    """A boolean option as fio reads it: bare or non-zero is on."""
    return name in options and options[name] != "0"


def reads(job: JobFile) -> bool:
    """Whether a job reads data (fio's default rw is read), so it must be laid out first."""
    return any((opts.get("rw") or "read").split(":")[0].lower() in READING_MODES or _on(opts, "verify_only") for opts in job.jobs())


def direct(job: JobFile) -> bool:
    """Whether every job uses direct I/O (fio's default is buffered). `direct` and `buffered` set
    one thing in fio, so the later of them wins: direct=1 then buffered=1 is buffered."""
    return all(direct_after(options) for options in job.applied())


def direct_after(options: list[tuple[str, str | None]]) -> bool:
    """Whether fio does direct I/O after these options, in the order fio applies them."""
    direct = False
    for name, value in options:
        if name in ("direct", "buffered"):
            direct = _on({name: value}, name) == (name == "direct")
    return direct


# fio's `fallocate` where a job sets none (HOWTO: native wherever the platform preallocates), and
# the values that allocate a file's blocks before the job writes them ("1" is posix; "truncate"
# only sets the size, allocating nothing).
FALLOCATE_DEFAULT = "native"
PREALLOCATING = ("native", "posix", "keep", "1")


def preallocation(jobs: Iterable[Mapping[str, str | None]]) -> str:
    """How fio lays out these jobs' files (each job's options as fio leaves them, JobFile.jobs):
    their `fallocate` values, each once in order, fio's default where a job sets none — the words
    stored with a workload ("none", "native", "none, posix")."""
    return ", ".join(dict.fromkeys((options.get("fallocate") or FALLOCATE_DEFAULT).lower() for options in jobs))


def stored_preallocation(spec: Mapping[str, object]) -> str:
    """A stored workload's `preallocation`: as recorded, or, for one stored before fslab recorded
    it (its fio jobs then ran with fio's default unless they set fallocate), read from the job
    stored with it, or from its options (the oldest stored no job); "" where none says (a
    scenario of then, a job refused today)."""
    job, options = spec.get("job"), spec.get("fio_options")
    if "preallocation" in spec:
        return str(spec["preallocation"] or "")
    if isinstance(job, str):
        try:
            return preallocation(parse_job_file(job, "the stored job").jobs())
        except Refused:
            return ""
    return preallocation([{str(k): str(v) for k, v in options.items()}]) if isinstance(options, dict) and options and not spec.get("job_file") else ""


def preallocates(recorded: str) -> bool:
    """Whether any job of a recorded `preallocation` allocated its files' blocks before writing them."""
    return any(value.strip() in PREALLOCATING for value in recorded.split(","))


def expected_seconds(job: JobFile) -> float:
    """How long the job runs: per job startdelay + ramp_time + runtime; jobs run together
    unless stonewall or wait_for puts a job after those before it. 0 when a job has no runtime
    (it ends when its size is done: unknown)."""
    total = group = 0.0
    for opts in job.jobs():
        if not opts.get("runtime"):
            return 0.0
        delay = (opts.get("startdelay") or "0").split("-")[-1]
        seconds = sum(fio_seconds(opts.get(key) or "0") for key in ("ramp_time", "runtime")) + fio_seconds(delay)
        if _on(opts, "stonewall") or opts.get("wait_for"):
            total, group = total + group, seconds
        else:
            group = max(group, seconds)
    return total + group


def measured_seconds(job: JobFile) -> float:
    """The shortest measured window of the job's jobs: runtime, ramp_time excluded. 0 when a
    job has no runtime (it ends when its size is done: unknown)."""
    runtimes = [fio_seconds(opts.get("runtime") or "0") for opts in job.jobs()]
    return 0.0 if not runtimes or 0 in runtimes else min(runtimes)


# fio samples steady state once a second: a window of fewer than two samples judges nothing (a
# slope of one sample is no number; one sample is always its own mean).
SHORTEST_STEADY_WINDOW = 2.0


def steadystate_problem(job: JobFile) -> str | None:
    """Why a job's steady-state options cannot work as written (a sentence naming them), or None:
    a criterion without a window, which fio never judges (steadystate_duration's default, 0, turns
    it off); a window under SHORTEST_STEADY_WINDOW; one that its ramp and the job's runtime leave
    no time to fill. A job file of several jobs names the job."""
    names = [section.name for section in job.sections if section.name != GLOBAL]
    for name, options in zip(names, job.jobs()):
        if problem := _steadystate_problem(options):
            return f"[{name}] {problem}" if len(names) > 1 else problem
    return None


def _steadystate_problem(options: Mapping[str, str | None]) -> str | None:
    criterion, window = options.get("steadystate"), options.get("steadystate_duration")
    seconds = fio_seconds(window or "0")
    if criterion is not None and not seconds:
        return f"steadystate={criterion} without steadystate_duration is never judged (fio's default window, 0, turns it off): add steadystate_duration (at least {SHORTEST_STEADY_WINDOW:g}s)"
    if not seconds:
        return None
    if seconds < SHORTEST_STEADY_WINDOW:
        return f"steadystate_duration={window} is under {SHORTEST_STEADY_WINDOW:g}s: fio samples once a second, and fewer than two samples judge nothing"
    needed = seconds + fio_seconds(options.get("steadystate_ramp_time") or "0")
    runtime = fio_seconds(options.get("runtime") or "0")
    if runtime and needed > runtime:
        return f"steadystate_ramp_time + steadystate_duration ({needed:g}s) is longer than runtime ({runtime:g}s): fio could never judge steady state; lengthen runtime or shorten the window"
    return None


_UNITS = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "": 1}


@functools.lru_cache(maxsize=1024)  # pure: the same few values in every workload of a study
def fio_seconds(value: str) -> float:
    """A checked time value of runtime, ramp_time or startdelay (a bare number is seconds)."""
    number, unit = re.fullmatch(rf"({_DEC})([a-z]*)", value.lower()).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def parse_only(text: str, *, directory: Path | None, where: str = "the job") -> None:
    """fio's own parser on a rendered job (`fio --parse-only`, in a private directory), which
    knows what the allow-list cannot: an engine's options under another engine, a value out of
    range. Refused with fio's words when it does not accept the job."""
    with tempfile.TemporaryDirectory(prefix="fslab-parse-") as scratch:
        path = Path(scratch) / "job.fio"
        path.write_text(text)
        try:
            run(["fio", "--parse-only", str(path)], cwd=Path(scratch), timeout=60, env=fio_environment(directory))
        except CommandError as exc:
            said = [line.strip() for line in (exc.stderr or exc.stdout).splitlines() if line.strip()]
            raise Refused(f"{where}: fio does not accept the job: {' / '.join(said[-5:]) or 'no reason given'}") from None
