"""dd: options through the allow-list, the commands built, its report parsed from real output
(tests/fixtures/dd, see its README), the judgement, and a short real write and read."""

import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES
from fslab.model import MetricKind
from fslab.model.options import OptionRefused
from fslab.workloads.dd import (
    METRICS,
    DdOptions,
    DdRun,
    dd_options,
    judge,
    make_random_source,
    metric_values,
    parse,
    read_argv,
    run_step,
    target_file,
    write_argv,
)

DD = FIXTURES / "dd"


def fixture(name: str) -> DdRun:
    return parse((DD / name).read_text())


def test_defaults_are_seed_000s():
    seed = DdOptions(data="zeros")
    file = target_file(Path("/mnt/t"), "dd")
    assert dd_options({"bs": "1M", "count": 1024}, data="zeros") == seed
    assert write_argv(seed, file) == ["dd", "if=/dev/zero", "of=/mnt/t/dd", "bs=1048576", "count=1024", "oflag=direct"]
    assert read_argv(seed, file) == ["dd", "if=/mnt/t/dd", "of=/dev/null", "bs=1048576", "count=1024", "iflag=direct"]
    random = write_argv(DdOptions(), file, source=Path("/dev/shm/src"))
    assert random[1] == "if=/dev/shm/src" and "random" in DdOptions().data_pattern()
    with pytest.raises(ValueError, match="random data needs its source file"):
        write_argv(DdOptions(), file)


def test_options_and_file_names():
    options = dd_options({"bs": "4k", "count": 16, "direct": False, "conv": "fsync"})
    assert (options.block_size, options.count, options.direct, options.conv, options.size) == (
        4096,
        16,
        False,
        "fsync",
        65536,
    )
    assert write_argv(options, Path("/t/f"), Path("/s"))[-1] == "conv=fsync"
    assert read_argv(options, Path("/t/f"))[-1] == "count=16", "buffered: no iflag"
    assert target_file(Path("/t"), "ext4[noatime]").parent == Path("/t"), "a decorated name stays in the directory"
    assert "/" not in target_file(Path("/t"), "../../etc/passwd").name


REFUSED = {
    "an output file": ({"of": "/dev/sda"}, "dd of=/dev/sda is refused: fslab gives dd its output"),
    "an input file": ({"if": "/etc/shadow"}, "dd if=/etc/shadow is refused"),
    "flags are fslab's": ({"oflag": "direct"}, "fslab sets iflag=direct and oflag=direct from `direct`"),
    "status": ({"status": "none"}, "it changes the line fslab reads"),
    "unknown": ({"bz": "1M"}, "unknown dd option 'bz'; allowed: bs, count, direct, conv"),
    "not a power of two": ({"bs": "1000"}, "dd bs=1000 is not a power of two"),
    "a path in a value": ({"conv": "/x"}, "holds '/'"),
    "a second operand": ({"count": "1 of=/dev/sda"}, "holds '/'"),
    "a second word": ({"count": "1 conv"}, "holds ' '"),
    "a newline": ({"bs": "1M\nof=/dev/sda"}, "holds a control character"),
    "a value that is an option": ({"conv": "--help"}, "starts with '-'"),
    "a conversion that changes data": ({"conv": "ucase"}, "is not one of fsync, fdatasync"),
    "zero blocks": ({"count": 0}, "is not a whole number from 1"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_refused(case):
    options, says = REFUSED[case]
    with pytest.raises(OptionRefused) as info:
        dd_options(options)
    assert says in str(info.value)


def test_seed_write_and_read_parsed():
    write = fixture("write-1g-direct-zeros.txt")
    assert (write.records_in, write.records_out, write.copied, write.seconds) == ((1024, 0), (1024, 0), 2**30, 0.81105)
    metrics = metric_values(write, "write")
    values = {m.name: m.value for m in metrics}
    assert len(metrics) == 4 and values == {
        "write_mb_s": pytest.approx(2**30 / 0.81105 / 1e6),
        "write_mib_s": pytest.approx(1024 / 0.81105),
        "write_elapsed_s": 0.81105,
        "write_bytes": 2**30,
    }
    assert round(values["write_mb_s"] / 1000, 1) == 1.3, "what dd printed, rounded"
    read = fixture("read-1g-direct.txt")
    assert {m.name: m.value for m in metric_values(read, "read")}["read_mib_s"] == pytest.approx(1024 / 0.971051)
    assert judge(write, DdOptions(data="zeros")) == [] and judge(read, DdOptions()) == []
    assert all(m == METRICS[m.name].of(m.name, m.value) for m in metrics), "unit, direction and roles as declared"
    assert set(METRICS) == {f"{d}_{m}" for d in ("write", "read") for m in ("mb_s", "mib_s", "elapsed_s", "bytes")}
    assert {name for name, kind in METRICS.items() if kind.primary} == {"write_mb_s", "read_mb_s"}
    assert METRICS["write_mb_s"] == MetricKind("MB/s", True, primary=True, compared=True)
    assert METRICS["write_elapsed_s"] == MetricKind("s", False)


def test_urandom_is_slower_than_the_direct_write():
    """Why random data is read from a file in RAM (dd.py's docstring, the fixtures' README)."""
    urandom, write = fixture("urandom-256m.txt"), fixture("write-1g-direct-zeros.txt")
    assert (urandom.copied, urandom.seconds) == (256 * 2**20, 0.583073)
    assert round(urandom.bytes_per_s / 1e6) == 460 and urandom.bytes_per_s < write.bytes_per_s / 2


def test_small_and_odd_reports():
    assert fixture("write-100-bytes.txt").copied == 100, "no (… MB) part under 1 kB"
    nothing = fixture("write-0-bytes.txt")
    assert (nothing.copied, nothing.seconds) == (0, 2.0497e-05), "seconds in C's %g exponent form"
    assert fixture("write-64m-direct-random.txt").copied == 64 * 2**20
    # a locale that slipped through LC_ALL=C: the decimal comma is read, other words are not
    assert parse("1+0 records in\n1+0 records out\n512 bytes copied, 0,5 s, 1,0 kB/s\n").seconds == 0.5
    with pytest.raises(ValueError, match="dd reported no copy.*No space left on device"):
        parse("dd: error writing '/mnt/t/dd': No space left on device\n")
    with pytest.raises(ValueError, match="LC_ALL=C"):
        parse(
            "1024+0 registros leídos\n1024+0 registros escritos\n"
            "1073741824 bytes (1,1 GB, 1,0 GiB) copiados, 0,8 s, 1,3 GB/s\n"
        )


def test_judgements():
    short = fixture("write-short-source.txt")
    assert [f.kind for f in judge(short, dd_options({"count": 128}))] == ["short_copy"]
    assert [f.kind for f in judge(DdRun((1, 0), (1, 0), 2**20, 0.001), dd_options({"count": 1}))] == [
        "too_short_to_time"
    ]
    partial = DdRun((1023, 1), (1023, 1), 2**30, 1.0)
    assert [f.kind for f in judge(partial, DdOptions())] == ["short_copy"]
    buffered = judge(DdRun((1024, 0), (1024, 0), 2**30, 1.0), dd_options({"direct": False}))
    assert [(f.kind, f.implausible) for f in buffered] == [("buffered", False)]
    assert DdRun((0, 0), (0, 0), 0, 0.0).bytes_per_s == float("inf")


@pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed")
def test_real_write_and_read(workdir):
    options = dd_options({"bs": "1M", "count": 16})
    directory = workdir.root / "target"
    directory.mkdir()
    source = workdir.root / "source"  # fslab would keep it on tmpfs
    make_random_source(source, options.size)
    file = target_file(directory, "dd-check")
    write = parse(run_step(workdir.journal, write_argv(options, file, source), timeout=30))
    assert file.read_bytes() == source.read_bytes(), "what was written is the random source"
    read = parse(run_step(workdir.journal, read_argv(options, file), timeout=30))
    for result, direction in ((write, "write"), (read, "read")):
        assert (
            result.copied == 16 * 2**20
            and {m.name: m.value for m in metric_values(result, direction)}[f"{direction}_mb_s"] > 0
        )
        assert [f.kind for f in judge(result, options)] in ([], ["too_short_to_time"])


def test_a_short_elapsed_time_prints_its_digits_in_the_tables():
    """dd's 64 MiB at a few GB/s takes hundredths of a second: shown as such, never "0.0 s"."""
    from fslab.report.formatting import fmt
    from fslab.report.sections import metric_rows
    from fslab.report.summary import CellSummary
    from fslab.statistics.stats import summarize

    seconds = [fixture("write-64m-direct-random.txt").seconds, 0.0412, 0.0398]
    cell = CellSummary("dd", "ext4", 0, {"write_elapsed_s": summarize(seconds, False)})
    [row] = metric_rows(cell, {"write_elapsed_s": "s"})
    assert (
        row[3] == fmt(sorted(seconds)[1])
        and row[3].startswith("0.0")
        and row[3] != "0.0"
        and len(row[3].strip("0.")) == 2
    ), row
    assert row[4].startswith(fmt(sum(seconds) / 3) + " ") and fmt(sum(seconds) / 3) == "0.055" and row[6] == "s"
    assert [fmt(v) for v in (0.5, 12.34, 0.04, 0.00123, -0.051, 0.0, 250.7)] == [
        "0.5",
        "12.3",
        "0.040",
        "0.0012",
        "-0.051",
        "0.0",
        "251",
    ]
