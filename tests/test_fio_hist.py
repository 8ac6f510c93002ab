"""fio's histogram logs (fio/hist.py, pure): fio's bins and their edges, what a log
line holds, the compact form a run keeps, and the jobs merged window by window — on the logs of a
real fio run (tests/fixtures/fio/hist: regenerate.sh there made them, with fslab's log options)
and on synthetic latencies binned as fio bins them, against numpy on the samples themselves."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from conftest import FIXTURES
from fslab.fio.hist import (
    COARSENESS,
    HIST_TOOL,
    MOST_WINDOWS,
    Bins,
    compact,
    kept,
    latency_over_time,
    read_fio_log,
)
from fslab.fio.output import percentile_from_bins
from fslab.fio.workload import epoch_ms, stored_logs

HIST = FIXTURES / "fio" / "hist"
FIO3 = Bins.of_width(1856, 0)  # fio 3.x's own bins: 29 groups of 64
OURS = Bins.of_width(1856 >> COARSENESS, COARSENESS)


def fio_json() -> dict:
    return json.loads((HIST / "randrw-2jobs-hist.json").read_text())


def fixture_logs() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(HIST.glob("fslab_*.log"))}


def kept_fixture() -> str:
    """The fixture's logs as a measured run keeps them: fio.stored_logs, from the epoch fio_epoch finds."""
    files = fixture_logs()
    epoch = epoch_ms(
        (HIST / "randrw-2jobs-hist.json").read_text(), files, 100, float((HIST / "wall_less_monotonic_ms").read_text())
    )
    [output] = [o for o in stored_logs("", files, 100, epoch) if o.tool == HIST_TOOL]
    document = json.loads(output.text)
    document["log_hist_msec"] = (
        100  # the fixture's job ran windows of 100 ms (fslab now asks for twice the bandwidth log's)
    )
    return json.dumps(document)


# --- fio's bins ----------------------------------------------------------------------------------


def test_every_bin_fio_reported_is_where_fio_counts_it_and_worth_what_fio_says():
    """fio's json+ bins are keyed by plat_idx_to_val of their index: each value found again as the
    value of the bin plat_val_to_idx counts it in, inside that bin's edges."""
    values = [
        int(v)
        for job in fio_json()["jobs"]
        for d in ("read", "write")
        for k in ("clat_ns", "lat_ns", "slat_ns")
        for v in job[d][k]["bins"]
    ]
    assert len(values) > 300
    for value in values:
        index = FIO3.index_of(value)
        low, high = FIO3.range_ns(index)
        assert FIO3.value_ns(index) == value and low <= value < high


def test_bins_tile_the_latencies_and_coarser_bins_are_fios_added_up():
    for bins in (FIO3, OURS, Bins.of_width(29, 6)):
        edges = [bins.range_ns(i) for i in range(bins.count)]
        assert edges[0][0] == 0 and all(a[1] == b[0] for a, b in zip(edges, edges[1:])), "no gap, no overlap"
        assert edges[-1][1] == 2**34, "the last bin holds 17 s and beyond"
    stride = 1 << COARSENESS
    for i in range(OURS.count):
        assert OURS.range_ns(i) == (FIO3.range_ns(i * stride)[0], FIO3.range_ns(i * stride + stride - 1)[1])
    widest = max((high - low) / low for low, high in map(OURS.range_ns, range(40, OURS.count)))
    assert widest == 1 / 16, "a bin of fslab's is at most 1/16 of its latency wide: its middle within 3.1 %"
    fio2 = Bins.of_width(1216, 0)  # fio 2.x: 19 groups, µs
    assert (fio2.unit_ns, fio2.value_ns(128), fio2.index_of(129_000)) == (1000, 129_000, 128)
    for width, coarseness in ((1000, 0), (464, 3), (464, 7), (0, 0)):
        with pytest.raises(ValueError):
            Bins.of_width(width, coarseness)


# --- what fio logs -------------------------------------------------------------------------------


def test_a_line_holds_its_windows_completions_alone_and_the_last_window_is_never_logged():
    """fio logs each window's own completions (a copy of its running histogram less the one
    before): the lines of a run add up to at most its JSON's bins, bin by bin, and fall short of
    its count by the partial window at each job's end, no more."""
    document = fio_json()
    [job] = document["jobs"]  # group_reporting: both jobs as one
    jobs = int(job["job options"]["numjobs"])
    for code, direction in enumerate(("read", "write")):
        reported: dict[int, int] = {}
        for value, n in job[direction]["clat_ns"]["bins"].items():
            reported[OURS.index_of(int(value))] = reported.get(OURS.index_of(int(value)), 0) + n
        logged: dict[int, int] = {}
        windows = []
        for text in (t for name, t in fixture_logs().items() if "_clat_hist." in name):
            width, lines = read_fio_log(text)
            assert width == OURS.count
            for line in (line for line in lines if line.direction == code):
                windows.append(sum(line.bins.values()))
                for index, n in line.bins.items():
                    logged[index] = logged.get(index, 0) + n
        assert all(n <= reported.get(i, 0) for i, n in logged.items()), "never more than fio counted: no running totals"
        short = job[direction]["clat_ns"]["N"] - sum(logged.values())
        assert 0 < short <= jobs * max(windows), (direction, short, max(windows))


def test_the_compact_form_is_fios_numbers_and_a_fraction_of_fios_text():
    logs = {name: text for name, text in fixture_logs().items() if "_clat_hist." in name}
    stored = json.loads(kept(logs, 100, COARSENESS, None))
    assert (stored["bins"], stored["coarseness"], stored["log_hist_msec"]) == (OURS.count, COARSENESS, 100)
    for name, text in logs.items():
        _, lines = read_fio_log(text)
        expanded = [
            f"{line.msec}, {line.direction}, {line.block_size}, "
            + ", ".join(str(line.bins.get(i, 0)) for i in range(OURS.count))
            for line in lines
        ]
        assert expanded == text.splitlines(), "fio's text, line for line"
        assert len(stored["files"][name]) < len(text) / 3
        first = stored["files"][name].splitlines()[0].split(" ")
        assert (
            first[:3] == [str(lines[0].msec), str(lines[0].direction), str(lines[0].block_size)] and int(first[3]) < 0
        ), "empty bins as minus their count"
    assert compact([read_fio_log("5, 1, 4096, 0, 0, 3, 4, 0, 1, 0, 0\n")[1][0]]) == "5 1 4096 -2 3 4 -1 1"


# --- merged over jobs, window by window -----------------------------------------------------------


def test_the_jobs_are_merged_window_by_window_from_the_run_epoch():
    """On the real run: both jobs' lines of one window added up bin by bin; windows of 100 ms from
    the run's epoch, the first ending where fio closed its first."""
    found = {t.direction: t for t in latency_over_time(kept_fixture())}
    assert set(found) == {"read", "write"}
    epoch = json.loads(kept_fixture())["epoch_ms"]
    for code, direction in enumerate(("read", "write")):
        t = found[direction]
        assert t.window_ms == 100 and t.counts.shape[1] == OURS.count
        assert t.ends_s[0] == 0.1 and all(math.isclose(b - a, 0.1) for a, b in zip(t.starts_s, t.ends_s))
        expected = np.zeros_like(t.counts)
        for text in (t for name, t in fixture_logs().items() if "_clat_hist." in name):
            for k, line in enumerate(line for line in read_fio_log(text)[1] if line.direction == code):
                assert math.floor((line.msec - epoch + 2) / 100) - 1 == k, (
                    "each job's k-th line closes the run's k-th window"
                )
                for index, n in line.bins.items():
                    expected[k, index] += n
        assert (t.counts == expected).all()


def binned_line(msec: int, direction: int, samples: list[int]) -> str:
    """A line of fio's histogram log of these completion latencies (ns), binned as fio bins them."""
    counts = [0] * OURS.count
    for ns in samples:
        counts[OURS.index_of(ns)] += 1
    return f"{msec}, {direction}, 4096, " + ", ".join(map(str, counts))


def test_each_windows_percentiles_are_those_of_every_jobs_completions_together():
    """Two jobs, one fast and one slow, five windows: each window's P50 and P99 are the value of
    the bin holding numpy's percentile of both jobs' samples taken together (inverted_cdf is fio's
    rule: the first at which the running count reaches p·N) — never a mean of each job's."""
    rng = random.Random(7)
    samples: dict[int, list[int]] = {w: [] for w in range(1, 6)}
    files = {}
    for job, (median_us, spread) in enumerate(((80, 0.3), (900, 0.8)), 1):
        lines = []
        for w in samples:
            own = [int(rng.lognormvariate(math.log(median_us * 1000), spread)) for _ in range(rng.randint(200, 2000))]
            samples[w] += own
            lines.append(binned_line(w * 200 + rng.randint(0, 9), 0, own))
        files[f"fslab_clat_hist.{job}.log"] = "\n".join(lines) + "\n"
    [t] = latency_over_time(kept(files, 200, COARSENESS, None))
    assert t.direction == "read" and t.ends_s == (0.2, 0.4, 0.6, 0.8, 1.0)
    for p in (50, 99, 99.9):
        for w, found in zip(samples, t.percentiles(p)):
            truth = np.percentile(samples[w], p, method="inverted_cdf")
            low, high = OURS.range_ns(OURS.index_of(int(truth)))
            assert found == OURS.value_ns(OURS.index_of(int(truth))) and low <= truth < high
            assert abs(found / truth - 1) <= 1 / 32 + 1e-9, "within 3.1 %"
            assert found == percentile_from_bins({OURS.value_ns(i): n for i, n in t.window_bins(w - 1).items()}, p), (
                "fio_output's rule"
            )
    whole = t.coarsened(1)
    assert whole.window_ms == 1000 and (whole.starts_s, whole.ends_s) == ((0.0,), (1.0,))
    everything = [s for each in samples.values() for s in each]
    assert whole.percentiles(99) == [
        OURS.value_ns(OURS.index_of(int(np.percentile(everything, 99, method="inverted_cdf"))))
    ], "coarser windows: their bins added up"


def test_a_stall_leaves_its_windows_empty_and_a_window_closed_early_stays_its_own():
    """After a stall fio closes one window per completion until it catches up, the lines a moment
    apart: their completions are of the window they came in. A line stamped up to 2 ms before its
    window's end (the epoch is found to a few ms) is still that window's."""
    lines = [
        binned_line(1000 + 200, 1, [50_000] * 10),
        binned_line(1000 + 399, 1, [60_000] * 5),
    ]  # windows 1 and 2 (the second a ms early)
    lines += [
        binned_line(1000 + 1210 + k, 1, [9_000_000]) for k in range(4)
    ]  # a stall: nothing in windows 3 to 5, 4 lines at 1.21 s
    [t] = latency_over_time(kept({"fslab_clat_hist.1.log": "\n".join(lines)}, 200, COARSENESS, 1000.0))
    assert t.direction == "write" and len(t.ends_s) == 6
    assert t.counts.sum(axis=1).tolist() == [10, 5, 0, 0, 0, 4]
    assert t.percentiles(99)[2:5] == [None, None, None] and t.percentiles(50)[5] == OURS.value_ns(
        OURS.index_of(9_000_000)
    )


def test_coarser_windows_add_the_bins_up_and_the_last_group_may_be_shorter():
    lines = [binned_line(200 * w, 0, [100_000 * w]) for w in range(1, 6)]
    [t] = latency_over_time(kept({"fslab_clat_hist.1.log": "\n".join(lines)}, 200, COARSENESS, None))
    two = t.coarsened(3)
    assert (two.window_ms, two.starts_s, two.ends_s) == (400, (0.0, 0.4, 0.8), (0.4, 0.8, 1.0))
    assert two.counts.sum(axis=1).tolist() == [2, 2, 1] and t.coarsened(5) is t
    assert two.percentiles(100) == [OURS.value_ns(OURS.index_of(v)) for v in (200_000, 400_000, 500_000)]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("not json", "no fio histogram logs"),
        (json.dumps({"log_hist_msec": 100}), "no fio histogram logs"),
        (json.dumps({"log_hist_msec": 0, "coarseness": 2, "bins": 464, "files": {}}), "no window"),
        (json.dumps({"log_hist_msec": 100, "coarseness": 2, "bins": 500, "files": {}}), "not a histogram fio writes"),
        (json.dumps({"log_hist_msec": 100, "coarseness": 2, "bins": 464, "epoch_ms": "x", "files": {}}), "no moment"),
        (
            json.dumps({"log_hist_msec": 100, "coarseness": 2, "bins": 464, "files": {"a": "100 0 4096 -463 1 2"}}),
            "beyond the log's 464 bins",
        ),
        (
            json.dumps({"log_hist_msec": 100, "coarseness": 2, "bins": 464, "files": {"a": "100 0 4096 1.5"}}),
            "whole numbers",
        ),
        (
            json.dumps({"log_hist_msec": 100, "coarseness": 2, "bins": 464, "files": {"a": "100 0"}}),
            "msec, direction, block size first",
        ),
        (
            json.dumps(
                {
                    "log_hist_msec": 100,
                    "coarseness": 2,
                    "bins": 464,
                    "files": {"a": f"100 0 4096 1\n{100 * (MOST_WINDOWS + 1)} 0 4096 1"},
                }
            ),
            "no run's log",
        ),
        (json.dumps({"log_hist_msec": 100, "coarseness": 2, "bins": 464, "files": {"a": 5}}), "no histogram log"),
        (json.dumps({"unreadable": "fio's histogram logs could not be read: line 3 has 2 bins"}), "line 3 has 2 bins"),
    ],
)
def test_what_is_not_a_kept_log_is_refused_saying_why(text, said):
    with pytest.raises(ValueError, match=said):
        latency_over_time(text)


def test_a_log_that_is_not_fios_is_refused_as_it_is_kept():
    with pytest.raises(ValueError, match="line 2 has 2 bins"):
        kept({"x": "100, 0, 4096, 1, 2, 3\n200, 0, 4096, 1, 2\n"}, 100, 0, None)
    with pytest.raises(ValueError, match="whole numbers"):
        read_fio_log("100, 0, 4096, lots\n")
    with pytest.raises(ValueError, match="not a histogram fio writes"):
        kept({"x": "100, 0, 4096, 1, 2, 3\n"}, 100, 0, None)
    [output] = stored_logs("", {"fslab_clat_hist.1.log": "100, 0, 4096, 1\n"}, 100, None)
    assert output.tool == HIST_TOOL and "could not be read" in json.loads(output.text)["unreadable"], (
        "kept as unreadable, the run not lost"
    )
