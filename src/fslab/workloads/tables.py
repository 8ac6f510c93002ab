"""What every workload table of a study file is made of, whatever its kind: the field types
(Name, Size, Duration, Timeout, Data), the fields fslab sets around any workload (WorkloadLimits,
OnTargets) and the base of a table whose tool takes its own options (ToolWorkloadSection). Each
kind's own table is declared in its module from these (fio's, and the study's [fio] table: fio/
section.py); study/file.py reads them through the registry.

`Building` is what a kind's `build` is given to turn its validated table into a Workload.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NoReturn, Self, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from fslab.core.cgroups import SMALLEST_LIMIT
from fslab.core.names import check_name, swept_name
from fslab.core.toml_errors import FieldError
from fslab.core.units import format_size, parse_duration, parse_size
from fslab.model import UNKNOWN_LENGTH_TIMEOUT, Workload
from fslab.workloads.data import DataPattern


def checked(parse: Any) -> AfterValidator:
    """A field kept as written, refused unless `parse` (which says what is wrong) accepts it."""

    def check(value: Any) -> Any:
        parse(value)
        return value

    return AfterValidator(check)


Name = Annotated[str, checked(check_name)]  # becomes fio job names and, through file_name, file names
Size = Annotated[str, checked(parse_size)]  # "4GiB", "512M", "10G"
Duration = Annotated[str | int | float, checked(parse_duration)]  # "10s", "2m", seconds


def _positive_duration(value: str | int | float) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"a time-out must be above zero, not {value!r}")
    return seconds


Timeout = Annotated[str | int | float, checked(_positive_duration)]


def _data(value: Any) -> None:
    """A workload's `data`: "random", "zeros" or { compressible = N }."""
    if value in ("random", "zeros"):
        return
    percent = value.get("compressible") if isinstance(value, dict) and set(value) == {"compressible"} else None
    if isinstance(percent, int) and not isinstance(percent, bool) and 1 <= percent <= 99:
        return
    raise ValueError(
        'data is "random", "zeros" or { compressible = N } (N: the percentage '
        f"of every 4 KiB fio fills with zeros, 1 to 99), not {value!r}"
    )


Data = Annotated[str | dict[str, Any], checked(_data)]


class Table(BaseModel):
    model_config = ConfigDict(extra="forbid")


def nested_table(annotation: object) -> type[BaseModel] | None:
    """The table a field's type holds (list[Phase], list[Phase] | None, …), if any: where its
    fields are listed (`fslab list`) and an unknown one is refused."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((table for inner in get_args(annotation) if (table := nested_table(inner))), None)


def _memory_limit(value: str) -> None:
    if parse_size(value) < SMALLEST_LIMIT:
        raise ValueError(
            f"a memory limit below {format_size(SMALLEST_LIMIT)} "
            f"leaves the tool itself too little to run, not {value!r}"
        )


class WorkloadLimits(Table):
    """What fslab sets around any workload, whatever its kind: the fields every workload table
    (and [fio]) has once, from here."""

    # The measured run in a cgroup with this much memory (core/cgroups.py), so the page cache cannot
    # hold what a buffered workload reads: refused on direct I/O, which the cache never answers.
    memory_limit: Annotated[str, checked(_memory_limit)] | None = None


class OnTargets(Table):
    """What every [[workload]] table may say, whatever its kind."""

    if TYPE_CHECKING:  # each kind's table declares it, in its own place among its fields
        name: str

    targets: list[str] = []  # the targets it runs on, by name or a sweep's name (default: every target)
    # Another workload of the study it is compared with on each target both ran on (study/__init__.py
    # checks the name and settles a sweep's: _compared_with).
    compare_with: str | None = None
    swept_fields: ClassVar[
        tuple[str, ...]
    ] = ()  # its kind's fields a list of values sweeps (its model takes the lists)

    def sweep_size(self) -> int:
        """How many tables `swept` makes, known before they are made."""
        return math.prod(len(value) for name in self.swept_fields if isinstance(value := getattr(self, name), list))

    def swept(self) -> list[Self]:
        """The tables its sweeps make, each built into a workload of its own: one per combination
        of the values of its swept_fields given as lists, each with one value of each, named as a
        target's sweep is (`mine[iodepth=8, numjobs=4]`); itself when it sweeps nothing."""
        lists = {name: value for name in self.swept_fields if isinstance(value := getattr(self, name), list)}
        made = []
        for values in itertools.product(*lists.values()):
            labels = [f"{name}={value}" for name, value in zip(lists, values)]
            made.append(
                self.model_copy(update={**dict(zip(lists, values)), "name": swept_name(self.name, labels)})
                if labels
                else self
            )
        return made


ToolOption = str | int | float | bool


class ToolWorkloadSection(OnTargets, WorkloadLimits):
    """A workload run by a tool other than fio: its options by the tool's own names, each
    checked by the tool's allow-list (its module's `…_options`)."""

    name: Name
    data: Literal["random", "zeros"] | None = None  # what it writes (default: random)
    timeout: Timeout | None = None  # fslab's: a run still going after it is killed and failed
    options: dict[str, ToolOption] = {}

    def checked(self) -> Any:
        """The tool's record of these options (raises OptionRefused, a ValueError, saying why)."""
        raise NotImplementedError

    @model_validator(mode="after")
    def _allowed_options(self) -> ToolWorkloadSection:
        try:
            self.checked()
        except ValueError as exc:
            raise FieldError("options" if self.options else "data", str(exc)) from None
        return self


# A run's time-out when the study sets none: twice the workload's length, plus five minutes for
# fslab's own work around it (mkfs, mount, laying out what it reads, dropping caches).
TIMEOUT_MARGIN = 300.0


def run_timeout(seconds: float, asked: str | int | float | None) -> float:
    """Seconds a run of a workload `seconds` long (0: unknown) may take, unless the study says."""
    if asked is not None:
        return parse_duration(asked)
    return 2 * seconds + TIMEOUT_MARGIN if seconds else UNKNOWN_LENGTH_TIMEOUT


@dataclass(frozen=True)
class Building:
    """What a kind's `build` is given besides its table: where the table is ([[workload]] number
    `index`), the study's scales (sizes × `scale`, times × `time_scale`), the study file's
    directory (a job file's is relative to it), the study's [fio] table and what its workloads
    write unless they say (`data`); `refuse(field, why)` stops the study, pointing at that field
    or table (("workload", 2, "job_file")) of the file."""

    index: int
    scale: float
    time_scale: float
    base_dir: Path
    fio: WorkloadLimits  # the study's [fio] table: fio's FioSection (fio/section.py: study_fio)
    data: DataPattern
    where: Callable[[tuple], str]
    refuse: Callable[[tuple, str], NoReturn]

    @property
    def table(self) -> tuple:
        return ("workload", self.index)


def tool_workload(section: ToolWorkloadSection, building: Building) -> Workload:
    """A workload of a tool taking its own options (sysbench, dd, rsync), its sizes × `scale` and
    its time × `time_scale`, as its tool scales them (its record's `scaled`)."""
    tool = section.checked().scaled(building.scale, building.time_scale)
    seconds = tool.measured_seconds()
    return Workload(section.name, tool, seconds, tool.direct, run_timeout(seconds, section.timeout))
