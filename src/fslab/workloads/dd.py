"""dd (seed 000's sanity check: 1 GiB written `bs=1M oflag=direct`, read back `iflag=direct`): its
options through an allow-list, the commands of its two measured steps, running them, and the
summary line it prints read into numbers.

dd works on one file in the target's directory, named by fslab (core/names.py file_name of the
workload's name); no option may name a file or a device. dd reports on stderr, in the words of
its locale ("copiados", "0,5 s"): fslab runs it with LC_ALL=C, and reads bytes and seconds from
that line, computing MB/s and MiB/s itself rather than trusting dd's rounded "1.1 GB/s".

Data: "zeros" reads /dev/zero, as seed 000 did. "random" reads a file of random bytes fslab made
beforehand (`make_random_source`, not measured) in a RAM-backed directory of its own (tmpfs, such
as /dev/shm: dropping caches leaves it), because /dev/urandom itself is slower than the disks
measured (460 MB/s on the machine the fixtures come from, tests/fixtures/dd/urandom-256m.txt,
against 1.3 GB/s for the direct write):
reading it inside the measured window would measure the kernel's random generator. The source
costs its size in RAM for as long as it is kept.

Parsing is pure (text in, a record out), tested on real output (tests/fixtures/dd).
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from fslab.core.journal import Journal
from fslab.core.names import file_name
from fslab.core.system import run_held
from fslab.core.units import Bandwidth, parse_size
from fslab.model import Metric, RawOutput, Workload
from fslab.model.findings import Finding
from fslab.model.options import (
    Integer,
    OneOf,
    OptionRefused,
    Size,
    Suboptions,
    ValueForm,
    accepted_values,
    check_properties,
    value_text,
)
from fslab.workloads import KINDS, Registered
from fslab.workloads.base import Measured, StudyScope, directory_of, tool_of
from fslab.workloads.dd_metrics import DIRECTIONS, METRICS, MOVED
from fslab.workloads.offered import NOTHING
from fslab.workloads.tables import ToolOption, ToolWorkloadSection, tool_workload

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir
    from fslab.filesystems.base import Provisioned

ENV = {"LC_ALL": "C"}  # dd's words and numbers as the parser reads them
DATA = ("random", "zeros")
ZEROS = "/dev/zero"
DATA_PATTERNS = {
    "random": "random (dd reads a file of random bytes fslab made beforehand in RAM: incompressible, none repeated)",
    "zeros": "zeros (dd reads /dev/zero: every byte written is 0, as compressible as data gets)",
}

# What a study may set, by dd's own operand names, and `direct` (fslab's: oflag/iflag=direct).
DD_OPTIONS: dict[str, ValueForm] = {
    "bs": Size(512, 2**30),  # a power of two: direct I/O needs blocks aligned to the device's
    "count": Integer(1, 2**31),
    "direct": OneOf(("true", "false")),
    "conv": OneOf(("fsync", "fdatasync")),  # on the write: data on the device before dd reports
}
_FLAGS = "fslab sets iflag=direct and oflag=direct from `direct`"
_OUTPUT = "it changes the line fslab reads its numbers from"
DD_REFUSED = {
    "if": "fslab gives dd its input (the target's file, or the data source)",
    "of": "fslab gives dd its output (the target's file, or /dev/null)",
    "iflag": _FLAGS, "oflag": _FLAGS, "status": _OUTPUT,
    "ibs": "write bs", "obs": "write bs", "cbs": "it converts records, which measures nothing",
    "skip": "dd reads and writes the file from its start", "seek": "dd reads and writes the file from its start",
    "iseek": "dd reads and writes the file from its start", "oseek": "dd reads and writes the file from its start",
}  # fmt: skip
# Checked as the guard checks any allow-list item: refused, unknown, plain value, then its kind.
DD_ALLOWED = Suboptions(DD_OPTIONS, DD_REFUSED)


@dataclass(frozen=True)
class DdOptions:
    """One dd workload, every value checked (model.Tool). Defaults: seed 000's 1 GiB in
    1 MiB blocks, direct."""

    kind: ClassVar[str] = "dd"
    needs_directory: ClassVar[bool] = True  # its file is made in the target's directory
    takes_snapshots: ClassVar[bool] = False

    block_size: int = 2**20
    count: int = 1024
    direct: bool = True
    conv: str | None = None
    data: str = "random"

    @property
    def size(self) -> int:
        return self.block_size * self.count

    def data_pattern(self) -> str:
        """The words stored with every run (runs.data_pattern)."""
        return DATA_PATTERNS[self.data]

    def spec(self) -> dict[str, Any]:
        return asdict(self)

    def bytes_needed(self, block_device: bool) -> int:
        return self.size

    def measured_seconds(self) -> float:
        return 0.0  # as long as the copy takes

    def scaled(self, scale: float, time_scale: float) -> DdOptions:
        """The count × `scale`, at least one block; no time of its own to scale."""
        return replace(self, count=max(1, round(self.count * scale)))


def dd_options(options: Mapping[str, ToolOption], *, data: str = "random") -> DdOptions:
    """A study's dd options (bs, count, direct, conv) over seed 000's defaults, each checked;
    OptionRefused names every one refused and why."""
    if data not in DATA:
        raise OptionRefused(f"dd data {data!r} is not one of {', '.join(DATA)}")
    fields = check_properties(
        DD_ALLOWED, "dd", {name: value_text(raw, "true", "false") for name, raw in options.items()}, "dd option"
    )
    return DdOptions(
        block_size=parse_size(fields["bs"]) if "bs" in fields else DdOptions.block_size,  # K, M, G binary, as dd's
        count=int(fields.get("count", DdOptions.count)),
        direct=fields.get("direct", "true") == "true",
        conv=fields.get("conv"),
        data=data,
    )


def target_file(directory: Path, workload: str) -> Path:
    """The file dd writes and reads: in the target's directory, named by fslab."""
    return directory / file_name(workload)


def write_argv(options: DdOptions, file: Path, source: Path | None = None) -> list[str]:
    """The measured write. `source`: the random-data file (make_random_source); zeros need none."""
    if options.data == "random" and source is None:
        raise ValueError("random data needs its source file (make_random_source)")
    data = source if options.data == "random" else ZEROS
    return [
        "dd", f"if={data}", f"of={file}", f"bs={options.block_size}", f"count={options.count}",
        *(["oflag=direct"] if options.direct else []), *([f"conv={options.conv}"] if options.conv else []),
    ]  # fmt: skip


def read_argv(options: DdOptions, file: Path) -> list[str]:
    """The measured read of what the write left."""
    return [
        "dd",
        f"if={file}",
        "of=/dev/null",
        f"bs={options.block_size}",
        f"count={options.count}",
        *(["iflag=direct"] if options.direct else []),
    ]


def make_random_source(path: Path, size: int, *, chunk: int = 2**20) -> None:
    """Write `size` random bytes to `path` (fslab's own file, on tmpfs): not measured."""
    with open(path, "wb") as out:
        for start in range(0, size, chunk):
            out.write(os.urandom(min(chunk, size - start)))


def run_step(journal: Journal, argv: list[str], *, timeout: float | None = None) -> str:
    """Run one dd (journalled: clean-up stops it) in the C locale; what it reported (stderr)."""
    return run_held(journal, argv, timeout=timeout, env=ENV).stderr


# ---- the report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DdRun:
    """What dd reported: whole and partial records in and out, bytes copied, seconds taken."""

    records_in: tuple[int, int]
    records_out: tuple[int, int]
    copied: int  # bytes
    seconds: float

    @property
    def bytes_per_s(self) -> float:
        return self.copied / self.seconds if self.seconds > 0 else math.inf


def metric_values(result: DdRun, direction: str) -> list[Metric]:
    """The step's metrics (METRICS), `direction` "write" or "read"."""
    if direction not in DIRECTIONS:
        raise ValueError(f"dd's direction is write or read, not {direction!r}")
    rate = result.bytes_per_s
    values = {
        **{f"{direction}_{unit.metric}": unit.of(rate) for unit in Bandwidth},
        f"{direction}_elapsed_s": result.seconds,
        MOVED[direction]: result.copied,
    }
    return [METRICS[name].of(name, value) for name, value in values.items()]


_RECORDS = re.compile(r"^(\d+)\+(\d+) records (in|out)$", re.MULTILINE)
# "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.81105 s, 1.3 GB/s"; "1 byte copied, 2e-05 s, …";
# seconds as C's %g (an exponent when tiny), with a decimal comma where a locale slipped through.
_COPIED = re.compile(r"^(\d+) bytes? (?:\([^)]*\) )?copied, (\d+(?:[.,]\d+)?(?:e[-+]?\d+)?) s, .*$", re.MULTILINE)


def parse(text: str) -> DdRun:
    """dd's report (its stderr); ValueError when it holds none (dd failed, or spoke another locale)."""
    records = {kind: (int(whole), int(part)) for whole, part, kind in _RECORDS.findall(text)}
    copied = _COPIED.findall(text)
    if not copied or set(records) != {"in", "out"}:
        said = " / ".join(line.strip() for line in text.strip().splitlines()[-3:]) or "nothing"
        raise ValueError(f"dd reported no copy (run it with LC_ALL=C): {said}")
    size, seconds = copied[-1]
    return DdRun(records["in"], records["out"], int(size), float(seconds.replace(",", ".")))


# ---- what cannot be taken as a result ---------------------------------------------------------

# Shorter than this, dd's clock measures the system call more than the copy.
MIN_SECONDS = 0.01


def judge(result: DdRun, options: DdOptions) -> list[Finding]:
    """What makes a step's figure no plain result (pure). Rates beyond the raw device are judged
    by the summary against the study's raw targets: metric_values' MB/s is what it needs."""
    found = []
    if result.copied != options.size or result.records_in[1] or result.records_out[1]:
        found.append(Finding(
            "short_copy",
            f"dd copied {result.copied} bytes ({result.records_out[0]}+{result.records_out[1]} records), "
            f"not {options.size}: "
            "its rate is for another amount of data",
            implausible=True,
        ))  # fmt: skip
    if result.seconds < MIN_SECONDS:
        found.append(Finding(
            "too_short_to_time",
            f"dd took {result.seconds:g} s, under {MIN_SECONDS:g} s: no rate can be read from it",
            implausible=True,
        ))  # fmt: skip
    if not options.direct and not options.conv:
        found.append(
            Finding(
                "buffered", "buffered without conv=fsync: the page cache answers, not the device", implausible=False
            )
        )
    return found


# ---- the workload kind ------------------------------------------------------------------------


SCRATCH_NAME = "$SCRATCH"  # stands for the run's scratch directory in the recorded command
RANDOM_SOURCE = "random-source"  # the random-data file's name in the run's scratch directory (in RAM)


class Dd:
    """dd behind the workload protocol (workloads/base.py): the write, then the read of what it
    wrote, each measured and stored as its own output (phase "write", "read"); the random data it
    copies is made in the run's scratch directory, in RAM, beforehand."""

    name = "dd"
    metrics = METRICS
    # One copy per step, one line of dd at its end: no series (status=progress prints a running
    # total once a second, a handful of points over a copy of a second or two), no distribution;
    # every run's figure is already a dot of its primary chart.
    report = NOTHING
    accepted_options = accepted_values(DD_OPTIONS)

    def problems(self, workloads: list[Workload], workdir: Workdir) -> list[str]:
        return []  # every option was checked when the study was read

    def steps(self, workload: Workload, ready: Provisioned, scratch: Path) -> dict[str, list[str]]:
        options = tool_of(workload, DdOptions)
        file = target_file(directory_of(ready, self.name), workload.name)
        return {"write": write_argv(options, file, scratch / RANDOM_SOURCE), "read": read_argv(options, file)}

    def command(self, workload: Workload, ready: Provisioned) -> str:
        """The two dd commands as recorded: the run's private scratch directory (made later, its
        name unknown here) is written SCRATCH_NAME; nothing ever reaches a shell."""
        return "\n".join(shlex.join(argv) for argv in self.steps(workload, ready, Path(SCRATCH_NAME)).values())

    def prepare(
        self, journal: Journal, workload: Workload, ready: Provisioned, scratch: Path, scope: StudyScope
    ) -> list[RawOutput]:
        options = tool_of(workload, DdOptions)
        if options.data == "random":
            make_random_source(scratch / RANDOM_SOURCE, options.size)
        return []

    def run(
        self,
        journal: Journal,
        workload: Workload,
        ready: Provisioned,
        command: str,
        scratch: Path,
        scope: StudyScope,
        measured: Measured,
    ) -> list[RawOutput]:
        outputs = []
        for step, argv in self.steps(workload, ready, scratch).items():
            with measured(step):
                outputs.append(RawOutput(step, self.name, run_step(journal, argv)))
        return outputs

    def parse(self, outputs: list[RawOutput]) -> list[Metric]:
        return [m for output in outputs for m in metric_values(parse(output.text), output.phase)]

    def judge(self, workload: Workload, outputs: list[RawOutput]) -> list[Finding]:
        found = [f for output in outputs for f in judge(parse(output.text), tool_of(workload, DdOptions))]
        return list(dict.fromkeys(found))  # "buffered" is said of both steps alike


DD = Dd()


# ---- its table in a study file -----------------------------------------------------------------


class DdSection(ToolWorkloadSection):
    """dd's write then read of one file (workloads/dd.py); defaults: seed 000's 1 GiB, 1 MiB blocks, direct."""

    kind: Literal["dd"]

    def checked(self) -> DdOptions:
        return dd_options(self.options, data=self.data or "random")


KINDS.add(Registered(DD, section=DdSection, build=tool_workload), own=True)  # dd is coreutils's: on every Linux
