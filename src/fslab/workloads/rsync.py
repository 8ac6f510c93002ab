"""rsync ingestion (seed 003's photo ingestion): a set of incompressible files the size of raw
photos, on a source that is not the target, copied with `rsync -a` into the target's directory.

The files: `files` of them, each 17–28 MiB, most near 21 MiB (a triangular distribution in whole
KiB, as a camera's raw files spread around one size), sizes and contents drawn from `seed`: the
same seed gives the same set, byte for byte, in every study run. A study asks for a count
(`files`) or a `total` (as many files as it takes to reach it); --scale scales the count, at
least one file. The contents come from a seeded PRNG (random.Random.randbytes: incompressible,
and, unlike os.urandom, the same for a seed).

The source: an image of its own (not a target's), ext4, made once per study run by the first run
of the workload (`source_set`, kept in the runner's StudyScope) and released when the study run
ends. It is made, attached, formatted and mounted the way the targets' images are: image_file
(unnamed until journalled with its identity), attached (a loop device with direct I/O, proven by
the kernel's record), a mount point of fslab's (journalled, proven after mounting); once its files
are written it is remounted read-only. The runner drops caches after `prepare`, so rsync reads
the source from its image, through direct I/O, as it reads a card. The image sits on the
work directory's disk, beside the targets' images: on one host disk the run measures reading and
writing it at once, as a copy from an internal card reader does.

The measured run: `rsync -a --stats --no-human-readable <source>/ <target>/ingest/` (journalled,
in the C locale). Its numbers: rsync's --stats gives the bytes and files it copied ("Total
transferred file size", "Number of regular files transferred"); its own rate ("bytes/sec") is
over whole-second timing and includes the file list, so fslab times the run itself (wall clock
around rsync) and takes the CPU rsync and its children used (getrusage of fslab's children,
before and after; it includes the few milliseconds of run_held's gate, the Python that execs
rsync once journalled). fslab writes these in a first line of the stored output, `fslab-measured
wall_s=… user_s=… system_s=…`, above rsync's own: what is stored holds every number the metrics
come from, and `parse` stays pure.

MiB/s is the primary metric, as seed 003 states it; MB/s is reported beside it.
"""

from __future__ import annotations

import math
import random
import re
import resource
import shlex
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from fslab.core.journal import Journal
from fslab.core.mounting import mount_point, proven
from fslab.core.names import file_name
from fslab.core.system import run, run_held
from fslab.core.units import Bandwidth, format_size, parse_size
from fslab.devices.loop import attached, image_file
from fslab.filesystems import FILESYSTEMS
from fslab.model import Metric, RawOutput, Workload
from fslab.model.findings import Finding
from fslab.model.options import OneOf, OptionRefused, Suboptions, accepted_values, check_properties, value_text
from fslab.workloads import KINDS, Needed, Registered
from fslab.workloads.base import WRITTEN_BYTES, Measured, StudyScope, directory_of, tool_of
from fslab.workloads.offered import NOTHING
from fslab.workloads.rsync_metrics import METRICS
from fslab.workloads.tables import Size, ToolOption, ToolWorkloadSection, tool_workload

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir
    from fslab.filesystems.base import Provisioned

ENV = {"LC_ALL": "C"}  # rsync's words as the parser reads them
KIB, MIB = 2**10, 2**20

# Seed 003's photos: 17 to 28 MiB, most near 21 MiB; 20 GiB of them unless a study says.
LOW, MODE, HIGH = 17 * MIB, 21 * MIB, 28 * MIB
DEFAULT_TOTAL = 20 * 2**30
DEFAULT_SEED = 3
MAX_FILES = 100_000

# Only random data: photos are compressed already, and a copy of zeros would measure a
# filesystem's compression or zero detection, not an ingestion.
DATA = ("random",)
DATA_PATTERN = "random (incompressible generated files of 17–28 MiB on a source image of their own, copied by rsync -a)"

# What a study may set, by rsync's own long option names; each is a switch, true or false, and
# becomes rsync's flag, or its --no- form (None: rsync has none, and false is its default).
RSYNC_FLAGS: dict[str, tuple[str, str | None]] = {
    "whole-file": ("--whole-file", "--no-whole-file"),  # no delta transfer (rsync's default for a local copy)
    "inplace": ("--inplace", "--no-inplace"),  # write each file in place, not as a temporary file renamed
    "preallocate": ("--preallocate", None),  # fallocate each file before writing it
    "fsync": ("--fsync", None),  # fsync every file written (rsync ≥ 3.2.4)
    "sparse": ("--sparse", "--no-sparse"),  # turn runs of zeros into holes (none in random data)
}
RSYNC_OPTIONS = dict.fromkeys(RSYNC_FLAGS, OneOf(("true", "false")))
_PATH = "it names a path or a program: fslab gives rsync its source and destination and nothing else"
_OUTPUT = "it changes the output fslab reads its numbers from"
_DELETES = "it deletes files: fslab's copy only adds files to the target"
RSYNC_REFUSED = {
    "rsh": _PATH, "e": _PATH, "rsync-path": _PATH, "files-from": _PATH, "include-from": _PATH, "exclude-from": _PATH,
    "log-file": _PATH, "temp-dir": _PATH, "partial-dir": _PATH, "backup-dir": _PATH, "compare-dest": _PATH,
    "copy-dest": _PATH, "link-dest": _PATH, "write-batch": _PATH, "only-write-batch": _PATH, "read-batch": _PATH,
    "password-file": _PATH, "daemon": _PATH, "config": _PATH, "filter": _PATH, "exclude": _PATH, "include": _PATH,
    "remove-source-files": _DELETES, "delete": _DELETES, "delete-after": _DELETES, "delete-before": _DELETES,
    "delete-during": _DELETES, "delete-excluded": _DELETES, "force": _DELETES,
    "stats": _OUTPUT, "human-readable": _OUTPUT, "info": _OUTPUT, "debug": _OUTPUT, "out-format": _OUTPUT,
    "progress": _OUTPUT, "quiet": _OUTPUT, "verbose": _OUTPUT, "itemize-changes": _OUTPUT,
    "compress": "it compresses what rsync sends over a network; a local copy sends nothing",
    "dry-run": "it copies nothing, which measures nothing",
    "bwlimit": "it measures rsync's limit, not the target",
}  # fmt: skip
RSYNC_ALLOWED = Suboptions(RSYNC_OPTIONS, RSYNC_REFUSED)


def file_sizes(seed: int, count: int) -> list[int]:
    """The sizes of a source set's files, in bytes: whole KiB from a triangular distribution
    (17, 21, 28 MiB). The first n sizes are the same whatever the count: a larger set only adds."""
    rng = random.Random(f"fslab-rsync-sizes:{seed}")
    return [round(rng.triangular(LOW // KIB, HIGH // KIB, MODE // KIB)) * KIB for _ in range(count)]


def files_for_total(seed: int, total: int) -> int:
    """How many files of the seed's set it takes to reach `total` bytes (at least one)."""
    rng_sizes, reached = iter(file_sizes(seed, MAX_FILES)), 0
    for count in range(1, MAX_FILES + 1):
        reached += next(rng_sizes)
        if reached >= total:
            return count
    raise OptionRefused(f"rsync total {format_size(total)} needs more than {MAX_FILES} files")


@dataclass(frozen=True)
class RsyncIngest:
    """One rsync ingestion workload, every value checked (model.Tool)."""

    kind: ClassVar[str] = "rsync"
    needs_directory: ClassVar[bool] = True  # it copies into the target's directory
    takes_snapshots: ClassVar[bool] = False
    direct: ClassVar[bool] = False  # rsync writes through the page cache

    files: int
    seed: int = DEFAULT_SEED
    options: tuple[tuple[str, bool], ...] = ()  # rsync's long options, as switches, in the study's order
    data: str = "random"

    @property
    def sizes(self) -> list[int]:
        return file_sizes(self.seed, self.files)

    @property
    def total(self) -> int:
        return sum(self.sizes)

    def spec(self) -> dict[str, Any]:
        return asdict(self) | {"options": dict(self.options)}

    def data_pattern(self) -> str:
        return DATA_PATTERN

    def bytes_needed(self, block_device: bool) -> int:
        return self.total

    def measured_seconds(self) -> float:
        return 0.0  # as long as the copy takes

    def scaled(self, scale: float, time_scale: float) -> RsyncIngest:
        """The count × `scale`, at least one file (each file keeps its size, as photos do); no
        time of its own to scale."""
        return replace(self, files=max(1, round(self.files * scale)))

    def flags(self) -> list[str]:
        chosen = (RSYNC_FLAGS[name][0 if on else 1] for name, on in self.options)
        return [flag for flag in chosen if flag]


def check_data(data: str) -> None:
    if data not in DATA:
        raise OptionRefused(
            f'rsync data {data!r} is refused: only "random" (photos do not compress, '
            "and zeros would measure a filesystem's compression, not an ingestion)"
        )


def check_files_or_total(files: int | None, total: object) -> None:
    if files is not None and total is not None:
        raise OptionRefused("rsync takes `files` or `total`, not both")


def rsync_ingest(
    options: Mapping[str, ToolOption],
    *,
    files: int | None = None,
    total: int | None = None,
    seed: int = DEFAULT_SEED,
    data: str = "random",
) -> RsyncIngest:
    """A study's rsync workload: `files` or a `total` (default: seed 003's 20 GiB), its seed and its
    options, each checked; OptionRefused names every one refused and why."""
    check_data(data)
    check_files_or_total(files, total)
    if files is not None and not 1 <= files <= MAX_FILES:
        raise OptionRefused(f"rsync files {files} is not a whole number from 1 to {MAX_FILES}")
    if total is not None and total < 1:
        raise OptionRefused("rsync total must be more than 0 bytes")
    fields = check_properties(
        RSYNC_ALLOWED,
        "rsync",
        {name: value_text(raw, "true", "false") for name, raw in options.items()},
        "rsync option",
    )
    count = files if files is not None else files_for_total(seed, DEFAULT_TOTAL if total is None else total)
    return RsyncIngest(
        files=count, seed=seed, options=tuple((name, value == "true") for name, value in fields.items()), data=data
    )


# ---- the source -------------------------------------------------------------------------------


def source_name(workload: str) -> str:
    """The source image's and mount point's name (workdir.inside takes only plain names). With
    ".." in it, file_name makes it a readable part and a hash of the whole: a target's plain name
    never has "..", and one that has gets a hash of its own, so no target's image or mount point
    can take it by chance (and image_file and mount_point refuse any path already there)."""
    return file_name(f"rsync..source-{workload}")


PHOTOS = "photos"  # the directory of the set in the source filesystem
CHUNK = MIB


def source_image_size(options: RsyncIngest) -> int:
    """Room for the set on ext4: its bytes, a tenth more for the filesystem's own, and 64 MiB."""
    return math.ceil(options.total * 1.1 / MIB) * MIB + 64 * MIB


def write_set(directory: Path, options: RsyncIngest) -> None:
    """The set's files in `directory`, their contents from the seed (incompressible)."""
    directory.mkdir()
    rng = random.Random(f"fslab-rsync-contents:{options.seed}")
    for index, size in enumerate(options.sizes):
        with open(directory / f"photo-{index:05d}.raw", "wb") as out:
            out.writelines(rng.randbytes(min(CHUNK, size - start)) for start in range(0, size, CHUNK))


@contextmanager
def source_set(journal: Journal, name: str, options: RsyncIngest) -> Iterator[Path]:
    """The workload's source set on an image of its own, mounted read-only; released afterwards."""
    workdir = journal.workdir
    stem = source_name(name)
    with (
        image_file(journal, workdir.images, stem, source_image_size(options), fill=None) as image,
        attached(journal, image) as loop,
    ):
        run(FILESYSTEMS["ext4"].mkfs_command([loop.device], []))
        mountpoint = workdir.mounts / stem
        with mount_point(journal, mountpoint) as held:
            run(["mount", "-t", "ext4", "-o", "noatime", loop.device, str(mountpoint)])
            proven(held)
            write_set(mountpoint / PHOTOS, options)
            # Read-only from here: no run can change what the next one reads.
            run(["mount", "-o", "remount,ro", str(mountpoint)])
            yield mountpoint / PHOTOS


def source_problem(workloads: list[Workload], workdir: Workdir) -> str | None:
    """Whether the work directory's disk holds the source images beside the targets' (checked
    before anything is made; the targets' own images are checked by the runner)."""

    needed = sum(source_image_size(tool_of(w, RsyncIngest)) for w in workloads)
    where = next(p for p in (workdir.root, *workdir.root.parents) if p.exists())  # made when the study begins
    free = shutil.disk_usage(where).free
    if needed > free:
        return (
            f"the rsync source images need {format_size(needed)} in {workdir.root}, which has "
            f"{format_size(free)} free: lower the workloads' files or total, or use --scale"
        )
    return None


# ---- the report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RsyncRun:
    """What a run of rsync copied, and what fslab measured of it."""

    files: int  # regular files transferred
    bytes: int  # their bytes ("Total transferred file size")
    total_bytes: int  # the whole set's ("Total file size")
    wall_s: float
    user_s: float
    system_s: float

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.system_s


MEASURED = "fslab-measured"
_MEASURED = re.compile(rf"^{MEASURED} wall_s=(\S+) user_s=(\S+) system_s=(\S+)$", re.MULTILINE)
_FILES = re.compile(r"^Number of regular files transferred: ([\d,]+)$", re.MULTILINE)
_TRANSFERRED = re.compile(r"^Total transferred file size: ([\d,]+) bytes?$", re.MULTILINE)
_TOTAL = re.compile(r"^Total file size: ([\d,]+) bytes?$", re.MULTILINE)


def measured_line(wall_s: float, user_s: float, system_s: float) -> str:
    return f"{MEASURED} wall_s={wall_s:.6f} user_s={user_s:.6f} system_s={system_s:.6f}"


def _number(text: str) -> int:
    return int(text.replace(",", ""))  # rsync's human-readable thousands, should they slip through


def parse(text: str) -> RsyncRun:
    """A stored rsync output (fslab's measured line above rsync's --stats); ValueError when a
    number is missing (rsync failed, or another version words its stats otherwise)."""
    measured, files, transferred, total = (p.search(text) for p in (_MEASURED, _FILES, _TRANSFERRED, _TOTAL))
    if not (measured and files and transferred and total):
        said = " / ".join(line.strip() for line in text.strip().splitlines()[-3:]) or "nothing"
        raise ValueError(f"rsync's output holds no {MEASURED} line and --stats (run with LC_ALL=C): {said}")
    wall, user, system = (float(v) for v in measured.groups())
    return RsyncRun(_number(files.group(1)), _number(transferred.group(1)), _number(total.group(1)), wall, user, system)


def metric_values(result: RsyncRun) -> list[Metric]:
    rate = result.bytes / result.wall_s if result.wall_s > 0 else math.inf
    values = {
        **{unit.metric: unit.of(rate) for unit in (Bandwidth.MIB, Bandwidth.MB)},
        "bytes": result.bytes,
        "files": result.files,
        "elapsed_s": result.wall_s,
        "cpu_s": result.cpu_s,
        WRITTEN_BYTES: result.bytes,
    }
    return [METRICS[name].of(name, float(value)) for name, value in values.items()]


# Shorter than this, the wall clock measures starting rsync more than the copy.
MIN_SECONDS = 0.05


def judge(result: RsyncRun, files: int, total: int) -> list[Finding]:
    """What makes a run's rate no plain result (pure); `files` and `total`: the set's."""
    found = []
    if result.files != files or result.bytes != total:
        found.append(Finding(
            "short_copy",
            f"rsync copied {result.files} files, {result.bytes} bytes, not the set's {files} files, {total} bytes: "
            "its rate is for another amount of data",
            implausible=True,
        ))  # fmt: skip
    if result.wall_s < MIN_SECONDS:
        found.append(
            Finding(
                "too_short_to_time",
                f"rsync took {result.wall_s:g} s, under {MIN_SECONDS:g} s: no rate can be read from it",
                implausible=True,
            )
        )
    return found


# ---- the workload kind ------------------------------------------------------------------------


INGEST = "ingest"  # the directory rsync makes in the target's


def argv(options: RsyncIngest, source: Path | str, directory: Path) -> list[str]:
    """The measured copy: the set's directory's contents into the target's `ingest` directory."""
    return ["rsync", "-a", "--stats", "--no-human-readable", *options.flags(), f"{source}/", f"{directory / INGEST}/"]


class Rsync:
    """rsync ingestion behind the workload protocol (workloads/base.py): the source set made once
    per study run (prepare), then one measured copy (phase "")."""

    name = "rsync"
    metrics = METRICS
    report = NOTHING  # one copy: its figures are its metrics
    accepted_options = accepted_values(RSYNC_OPTIONS)

    def problems(self, workloads: list[Workload], workdir: Workdir) -> list[str]:
        problem = source_problem(workloads, workdir) if workloads else None
        return [problem] if problem else []

    def command(self, workload: Workload, ready: Provisioned) -> str:
        return shlex.join(argv(tool_of(workload, RsyncIngest), "$SOURCE", directory_of(ready, self.name)))

    def _source(self, journal: Journal, workload: Workload, scope: StudyScope) -> Path:
        options = tool_of(workload, RsyncIngest)
        return scope.kept(f"rsync-source:{workload.name}", lambda: source_set(journal, workload.name, options))

    def prepare(
        self, journal: Journal, workload: Workload, ready: Provisioned, scratch: Path, scope: StudyScope
    ) -> list[RawOutput]:
        self._source(journal, workload, scope)  # made by the study run's first run of the workload
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
        copy = argv(
            tool_of(workload, RsyncIngest), self._source(journal, workload, scope), directory_of(ready, self.name)
        )
        with measured(""):
            before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
            out = run_held(journal, copy, env=ENV).stdout
            wall, after = time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
        line = measured_line(wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)
        return [RawOutput("", self.name, f"{line}\n{out}")]

    def parse(self, outputs: list[RawOutput]) -> list[Metric]:
        return [m for output in outputs for m in metric_values(parse(output.text))]

    def judge(self, workload: Workload, outputs: list[RawOutput]) -> list[Finding]:
        options = tool_of(workload, RsyncIngest)
        return [f for output in outputs for f in judge(parse(output.text), options.files, options.total)]


RSYNC = Rsync()


# ---- its table in a study file -----------------------------------------------------------------


class RsyncSection(ToolWorkloadSection):
    """rsync ingestion of generated photos from a source image of their own (workloads/rsync.py);
    defaults: seed 003's 20 GiB of 17–28 MiB files. `files` or `total`, not both."""

    kind: Literal["rsync"]
    data: str | None = None  # type: ignore[assignment]  # only "random": refused with why, not by pydantic's literal
    files: int | None = Field(None, ge=1, le=MAX_FILES)  # how many files (before --scale)
    total: Size | None = None  # or: as many files as it takes to reach this size
    seed: int = DEFAULT_SEED  # the set's sizes and contents are drawn from it

    # Checked here too, by rsync's own checks, so that a refusal points at its own field, not at `options`.
    @field_validator("data")
    @classmethod
    def _random_only(cls, value: str | None) -> str | None:
        if value is not None:
            check_data(value)
        return value

    @field_validator("total")
    @classmethod
    def _files_or_total(cls, value: str | None, info: ValidationInfo) -> str | None:
        check_files_or_total(info.data.get("files"), value)
        return value

    def checked(self) -> RsyncIngest:
        total = parse_size(self.total) if self.total is not None else None
        return rsync_ingest(self.options, files=self.files, total=total, seed=self.seed, data=self.data or "random")


KINDS.add(
    Registered(RSYNC, section=RsyncSection, build=tool_workload, tool=Needed(("rsync", "--version"), "rsync")), own=True
)
