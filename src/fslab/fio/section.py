"""fio's tables in a study file: the [fio] table, which sets every fio workload's parameters
(FioSection), and the field types fio's own tables share (BlockSize, IoDepth, NumJobs), each value
through fio's allow-list (options.py) as fio reads it (values.py)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator

from fslab.core.units import parse_size
from fslab.fio.options import main_name, option_problem, option_text
from fslab.fio.values import block_size
from fslab.workloads.tables import Building, Data, Duration, Size, Timeout, WorkloadLimits, checked

FIO_RW_MODES = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite")


def fio_allows(option: str) -> Any:
    """A check for a field that becomes fio option `option`: its value through fio's allow-list."""

    def check(value: Any) -> None:
        problem = option_problem(option, option_text(value))
        if problem:
            raise ValueError(problem)

    return check


def fio_options(options: dict[str, Any]) -> dict[str, str]:
    """A study's fio option table, each option through the allow-list (ValueError says which and
    why), under fio's main names, with values as fio writes them."""
    checked = {}
    for name, value in options.items():
        fio_allows(name)(value)
        checked[main_name(name)] = option_text(value)
    return checked


def _block_size(value: str) -> None:
    """A study's bs: its own sizes (parse_size, "4KiB" is 4096), one per direction ("4k,64k"), each
    at least one byte; it reaches fio as fio reads it as fslab does (values.block_size)."""
    parts = value.split(",")
    try:
        sizes = [parse_size(part) for part in parts if part]
    except ValueError:
        sizes = []
    if len(parts) > 3 or not sizes or min(sizes) < 1:
        fio_allows("bs")(value)  # what it holds that fio would read as more than a value, first
        raise ValueError(
            "bs takes a size (4k, 1m, 4KiB), or up to three separated "
            f"by ',' (reads, writes, trims: 4k,64k), not {value!r}"
        )
    fio_allows("bs")(block_size(value))


BlockSize = Annotated[str, checked(_block_size)]
IoDepth = Annotated[int, Field(ge=1, le=65536)]
NumJobs = Annotated[int, Field(ge=1, le=1024)]


class FioSection(WorkloadLimits):
    """fio parameters; the study's [fio] table sets them for every workload, a workload for itself."""

    bs: BlockSize | None = None
    iodepth: IoDepth | None = None
    numjobs: NumJobs | None = None
    size: Size | None = None
    io_size: Size | None = None  # fio's io_size: how much a job does, when not its size
    runtime: Duration | None = None
    ramp_time: Duration | None = None
    direct: bool | None = None
    ioengine: Annotated[str, checked(fio_allows("ioengine"))] | None = None
    rwmixread: int | None = Field(default=None, ge=0, le=100)
    randseed: int | None = Field(default=None, ge=0)
    timeout: Timeout | None = None  # fslab's, not fio's: a run still going after it is killed and failed
    data: Data | None = (
        None  # what is written: "random" (fslab's default), "zeros" or { compressible = N } (workloads/data.py)
    )
    options: dict[
        str, str | int | float | bool
    ] = {}  # any other fio option fio has and the guard accepts (fio/options.py)

    @field_validator("options")
    @classmethod
    def _allowed_options(cls, options: dict[str, Any]) -> dict[str, str]:
        return fio_options(options)


def study_fio(building: Building) -> FioSection:
    """The study's [fio] table a workload is built with (Building holds it as any table's limits)."""
    assert isinstance(building.fio, FioSection)
    return building.fio
