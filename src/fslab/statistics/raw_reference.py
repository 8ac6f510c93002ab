"""What the raw devices under a target say about its figures (pure: samples in, findings out).

A study measures its devices bare as the physical reference: its own `raw` targets, else the raw
reference fslab adds (model/ceiling.py). Three things are read from it: each block workload's ceiling
(`ceilings`: what the bare device did in it), a target measured above the raw devices under it
(its figure is flagged: the whole interval of target / ceiling above 1.0, and "beyond" them
past 1.5), and a raw reference too fast to be a disk at all, or writing far faster than it reads
(the study's header says that the reference itself is cached, so absolute figures are not disk
figures; ratios measured in one study run still are).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fslab.core.names import image_names
from fslab.model import Roles, unqualified
from fslab.statistics.analysis import Samples, roles_of
from fslab.statistics.stats import INTERVAL_MIN_RUNS, Comparison, SamplePair, Summary, compare_pairs, median, summarize

# A target whose 95 % interval of target / raw reference lies wholly above CEILING is flagged
# as above its ceiling, above BEYOND_RAW as beyond it (a workload no raw device runs is held
# against their fastest cell, and flagged only beyond).
CEILING = 1.0
BEYOND_RAW = 1.5

# What no disk does, judged on a raw target's stored samples (docs/statistics.md):
# - answer a random read in less than this, per I/O in flight (Little's law: the mean time an I/O
#   spends in flight is at most iodepth × numjobs / IOPS, exactly that at queue depth 1). A NAND
#   page read alone takes 40–100 µs (the fastest low-latency NAND ~20 µs) before the controller
#   and the block layer add theirs; only 3D XPoint (Intel Optane, discontinued) reads faster.
FLASH_READ_US = 25.0
# - acknowledge a write in less than this: an SSD acknowledges from its own DRAM or SLC cache in
#   10–20 µs at queue depth 1 (which is why writes are judged more leniently than reads).
DEVICE_WRITE_ACK_US = 8.0
# - move more bytes per second than a PCIe 5.0 x4 link carries (32 GT/s × 4 lanes, 128b/130b).
PCIE_X4_BYTES_S = 15.75e9
# - write sequentially this much faster than it reads sequentially, in the same shape (block size,
#   I/O in flight): flash programs a page several times slower than it reads one and a platter
#   turns at one speed, so a disk's sequential writes are at most about as fast as its reads. Writes
#   well beyond them were acknowledged by a volatile cache below (the device's DRAM, the host's).
WRITES_OVER_READS = 1.5

RANDOM_READS = ("randread", "randrw")
RANDOM_WRITES = ("randwrite", "randrw")


def plain_raw(target: dict[str, Any]) -> bool:
    """A stored target that is a raw device with no layer over it."""
    return target["filesystem"] == "raw" and not target["spec"].get("layers")


def raw_references(targets: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Target → the raw targets whose IOPS, added up, are what its devices deliver bare.

    A target's own raw baselines (raw targets on its images) when the study measured them,
    else the study's first plain raw target once per device. Plain raw targets get none.
    """

    def images(t: dict[str, Any]) -> list[str]:  # targets stored before images were are named from their devices
        return t["spec"].get("images") or list(image_names(t["name"], t["spec"].get("devices", 1)))

    raws = [t for t in targets if plain_raw(t)]
    by_image = {images(t)[0]: t["name"] for t in raws}
    plains = [t for t in raws if images(t)[0] == t["name"]]
    references = {}
    for t in targets:
        if t in raws:
            continue
        found = [by_image.get(image) for image in images(t)]
        own = [name for name in found if name]
        # else one on a device of its kind (a zram target's ceiling is a zram device's), else the first
        alike = next((p["name"] for p in plains if bool(p["spec"].get("zram")) == bool(t["spec"].get("zram"))), None)
        plain = alike or next((p["name"] for p in plains), None)
        if len(own) == len(found):
            references[t["name"]] = own
        elif plain:
            references[t["name"]] = [plain] * len(found)
    return references


# Bandwidth, named alike by every kind that reports it (fio, sysbench, dd; a scenario's phases
# qualified by their name): what a workload no raw target can run is held against.
BANDWIDTHS = ("read_mb_s", "write_mb_s")


@dataclass(frozen=True)
class BeyondRaw:
    """A figure clearly beyond what the raw devices under its target delivered."""

    comparison: Comparison  # the figure / the raw reference's
    reference: str | None = None  # the raw devices' workload it was held against, when not its own

    @property
    def beyond(self) -> bool:
        """Far beyond (its interval above BEYOND_RAW), not only above its ceiling."""
        return self.comparison.ci_low is not None and self.comparison.ci_low > BEYOND_RAW


def beyond_raw(
    samples: Samples,
    references: dict[str, list[str]],
    factor: float = BEYOND_RAW,
    *,
    ceiling: float = CEILING,
    roles: Roles | None = None,
    higher_is_better: dict[str, bool] | None = None,
) -> dict[tuple[str, str], dict[str, BeyondRaw]]:
    """(workload, target) → metric → target / raw reference (ratio of geometric means, 95 % Welch
    interval), where the whole interval lies above `ceiling` (the raw devices' own cell of the
    workload) or above `factor` (their fastest cell, for a workload they did not run). Only a rate is judged (higher is
    better: `higher_is_better`, default all), since rates of several devices add up; a time does not.

    The reference is the raw devices' own cell of the workload, and then only the workload's
    primary metrics are judged. A workload the raw devices did not run (sysbench, dd, a scenario:
    they need a filesystem) is judged on its bandwidth (BANDWIDTHS, any phase) against the most
    the raw devices delivered in that direction in this study run: their fastest workload's cell.

    With several devices the reference is their sum, run by run: the k-th run of each device
    (measured in the same interleaved block) added up, as if they had been driven together, so
    the reference keeps the runs' own spread instead of pretending to a single number."""
    roles = roles_of(samples, roles)
    judged_cells: list[
        tuple[str, str, str, str | None]
    ] = []  # (workload, target, metric, the reference's workload when not its own)
    pairs: list[SamplePair] = []
    # once per set of raw devices and direction, not once per cell: the cells they could not run share it
    fastest = {
        (raws, name): _fastest(samples, raws, name)
        for raws in {tuple(r) for r in references.values() if r}
        for name in BANDWIDTHS
    }
    for (workload, target), metrics in samples.items():
        raws = references.get(target, [])
        if not raws:
            continue
        judged: dict[str, tuple[list[list[float] | None], str | None]]
        if all((workload, raw) in samples for raw in raws):
            judged = {
                metric: ([samples[(workload, raw)].get(metric) for raw in raws], None)
                for metric in roles.primary_in(workload, metrics)
            }
        elif not any((workload, raw) in samples for raw in raws):
            judged = {
                metric: fastest[(tuple(raws), unqualified(metric))]
                for metric in metrics
                if unqualified(metric) in BANDWIDTHS
            }
        else:
            continue  # some of its raw devices ran it and some failed: no sum to hold it against
        for metric, (raw_runs, reference) in judged.items():
            if not all(raw_runs) or not (higher_is_better or {}).get(metric, True):
                continue
            summed = [float(sum(runs)) for runs in zip(*raw_runs)]
            if not summed or min(summed + metrics[metric]) <= 0:
                continue
            judged_cells.append((workload, target, metric, reference))
            pairs.append(SamplePair(summed, metrics[metric]))
    found: dict[tuple[str, str], dict[str, BeyondRaw]] = {}
    for (workload, target, metric, reference), ratio in zip(
        judged_cells, compare_pairs(pairs)
    ):  # compared together: their t figures come in one pass
        limit = ceiling if reference is None else factor
        if (
            min(ratio.n_baseline, ratio.n_other) >= INTERVAL_MIN_RUNS
            and ratio.ci_low is not None
            and ratio.ci_low > limit
        ):
            found.setdefault((workload, target), {})[metric] = BeyondRaw(ratio, reference)
    return found


def _fastest(samples: Samples, raws: tuple[str, ...], metric: str) -> tuple[list[list[float] | None], str | None]:
    """Each raw device's runs of `metric` in the workload where the first device delivered the
    most (highest median), and that workload: the most the raw devices did in this study run."""
    cells = [
        (median(m[metric]), workload)
        for (workload, target), m in samples.items()
        if target == raws[0] and m.get(metric)
    ]
    if not cells:
        return [None], None
    workload = max(cells)[1]
    return [samples.get((workload, raw), {}).get(metric) for raw in raws], workload


# Where a ceiling was measured: a target of the study's, or one fslab added (model/ceiling.py).
RAW_TARGET, RAW_REFERENCE = "raw target", "raw reference"


@dataclass(frozen=True)
class Ceiling:
    """What the bare device did in a workload (a raw target's cell), or why no ceiling holds it."""

    workload: str
    source: str | None  # RAW_TARGET or RAW_REFERENCE; None: no ceiling
    target: str | None = None  # the raw target that measured it
    metric: str | None = None  # a primary metric of the workload
    figure: Summary | None = None  # its statistics over the raw target's runs
    why: str = ""  # why there is none: "no ceiling: not a block workload"


def ceilings(
    samples: Samples,
    targets: list[dict[str, Any]],
    block: dict[str, bool],
    *,
    no_ceiling: bool = False,
    roles: Roles | None = None,
) -> list[Ceiling]:
    """Each workload's ceilings, in the study's order: every plain raw target's primary metrics
    in it; else why none. `block`: workload → whether a bare device can run it (fio's kind)."""
    roles = roles_of(samples, roles)
    raws = [t for t in targets if plain_raw(t)]
    found = []
    for workload, on_a_device in block.items():
        here = [
            Ceiling(workload, source(t), t["name"], metric, summarize(metrics[metric]))
            for t in raws
            if (metrics := samples.get((workload, t["name"])))
            for metric in roles.primary_in(workload, metrics)
        ]
        if not here:
            why = "no raw device measured it"
            if not on_a_device:
                why = "not a block workload"
            elif no_ceiling:
                why = "--no-ceiling was given"
            here = [Ceiling(workload, None, why=f"no ceiling: {why}")]
        found += here
    return found


def source(target: dict[str, Any]) -> str:
    """Where a stored raw target came from: the study's own, or fslab's ceiling."""
    return RAW_REFERENCE if target["spec"].get("ceiling") else RAW_TARGET


@dataclass(frozen=True)
class CachedReference:
    """A raw target's figure no disk could have produced."""

    target: str
    workload: str
    finding: str  # "answered random reads in 17 µs each (iodepth 1)"
    limit: str  # "a disk takes at least 25 µs"
    writes_only: bool = False  # only its writes are a cache's (sequential writes far beyond its reads)


def cached_references(
    samples: Samples, targets: list[dict[str, Any]], workloads: dict[str, dict[str, str]]
) -> list[CachedReference]:
    """Every plain raw target's cell whose median is beyond what a disk does (the thresholds
    above). `workloads`: workload → the fio options it was built from (a job file has none, and is
    judged on bandwidth alone)."""
    found = []
    for t in targets:
        if not plain_raw(t):
            continue
        for workload, options in workloads.items():
            metrics = samples.get((workload, t["name"]), {})
            found += [
                CachedReference(t["name"], workload, finding, limit)
                for finding, limit in _beyond_a_disk(metrics, options)
            ]
        found += _writes_beyond_reads(samples, t["name"], workloads)
    return found


def _writes_beyond_reads(samples: Samples, target: str, workloads: dict[str, dict[str, str]]) -> list[CachedReference]:
    """A raw target's sequential writes more than WRITES_OVER_READS times faster than its
    sequential reads of the same shape (bs, iodepth, numjobs), medians of MB/s."""

    def shape(options: dict[str, str]) -> tuple[str, ...]:
        return tuple(str(options.get(k, d)) for k, d in (("bs", "4k"), ("iodepth", 1), ("numjobs", 1)))

    reads = {
        shape(o): w
        for w, o in workloads.items()
        if o.get("rw") == "read" and samples.get((w, target), {}).get("read_mb_s")
    }
    found = []
    for workload, options in workloads.items():
        writes = samples.get((workload, target), {}).get("write_mb_s")
        read = reads.get(shape(options)) if options.get("rw") == "write" else None
        if not writes or read is None:
            continue
        wrote, got = median(writes), median(samples[(read, target)]["read_mb_s"])
        if got > 0 and wrote > WRITES_OVER_READS * got:
            found.append(CachedReference(
                target, workload,
                f"wrote sequentially at {wrote:,.0f} MB/s, {wrote / got:.1f}× its sequential reads "
                f"({got:,.0f} MB/s, {read})",
                "a disk writes no faster than it reads: a volatile cache below acknowledged the writes",
                writes_only=True,
            ))  # fmt: skip
    return found


def _beyond_a_disk(metrics: dict[str, list[float]], options: dict[str, str]) -> list[tuple[str, str]]:
    def median_of(name: str) -> float | None:
        return median(metrics[name]) if metrics.get(name) else None

    out = []
    try:
        in_flight = int(options.get("iodepth", 1)) * int(options.get("numjobs", 1))
    except ValueError:
        in_flight = 0
    for direction, kinds, limit in (
        ("read", RANDOM_READS, FLASH_READ_US),
        ("write", RANDOM_WRITES, DEVICE_WRITE_ACK_US),
    ):
        iops = median_of(f"{direction}_iops")
        if in_flight and options.get("rw") in kinds and iops:
            each = in_flight / iops * 1e6
            if each < limit:
                verb = "answered random reads" if direction == "read" else "acknowledged random writes"
                out.append(
                    (
                        f"{verb} in {each:.0f} µs each ({in_flight} in flight, {iops:,.0f} IOPS)",
                        f"a disk takes at least {limit:g} µs",
                    )
                )
    for direction in ("read", "write"):
        mb_s = median_of(f"{direction}_mb_s")
        if mb_s and mb_s * 1e6 > PCIE_X4_BYTES_S:
            out.append(
                (f"{direction} {mb_s / 1e3:.1f} GB/s", f"beyond a PCIe 5.0 x4 link's {PCIE_X4_BYTES_S / 1e9:.2f} GB/s")
            )
    return out
