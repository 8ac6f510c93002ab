"""The ceiling: the bare device under a study's targets, measured in the same study run.

A figure faster than the device under it was answered by a cache (the host's, on a virtual
disk), compression or a copy-on-write layout, not by the device. A study with a plain `raw`
target that runs measures that device itself (a target --skip-unsupported skips takes its raw
baselines with it: doctor.with_their_raw_baselines); for any other, fslab adds a raw reference
to the plan unless the user opts out (--no-ceiling, recorded with the study run): one raw target per kind of
device the study's targets use — a loop image in the work directory like theirs (the largest
of their sizes, filled as theirs), a zram device, or each of the user's own devices the study
names (confirmed with --destroy-data: measuring it bare destroys nothing the study's runs do
not) — running every workload a bare device can run (model.on_a_block_device: fio's, with
each one's own rw, bs and iodepth), at least CEILING_RUNS times, interleaved with the study's
runs (running/plan.py). Its cells are shown, labelled, and left out of every comparison, ranking and
conclusion (report/summary.py); statistics/raw_reference.py judges the study's figures against them.

Pure: a study in, a study out.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import replace
from typing import Any

from fslab.model import Study, Target, on_a_block_device

# Runs of a ceiling's cell at least: the fewest a 95 % interval is drawn from (statistics/stats.py).
CEILING_RUNS = 3

# Names no study file can give (a name starts with a letter or digit: core/names.py), nor a sweep
# or a raw baseline make (name[…], name/raw).
LOOP_CEILING = "(ceiling)"
ZRAM_CEILING = "(ceiling: zram)"


def with_ceiling(study: Study, no_ceiling: bool = False, skipped: Collection[str] = ()) -> Study:
    """The study with its raw references added (none where it measures a plain raw target, or
    runs no workload a bare device can run), or, `no_ceiling`, as it is and marked so. Decided on
    the targets that run: those `skipped` (--skip-unsupported: doctor.unsupported_targets, a
    skipped target's raw baselines with it) neither stand for a raw target nor size the ceiling."""
    if no_ceiling:
        return replace(study, no_ceiling=True)
    return replace(study, targets=[*study.targets, *ceiling_targets(study.without(set(skipped)))])


def ceiling_targets(study: Study) -> list[Target]:
    """A raw target per kind of device the study's targets use, when it has no plain raw target."""
    own = [t for t in study.targets if not t.ceiling]
    has_raw = any(t.filesystem == "raw" and not t.layers for t in own)
    if has_raw or not any(on_a_block_device(w) for w in study.workloads):
        return []
    found = []
    images = [t for t in own if t.on_images]
    if images:
        found.append(_raw(LOOP_CEILING, images, image_size=max(t.image_size for t in images)))
    zram = [t for t in own if t.zram]
    if zram:
        found.append(_raw(ZRAM_CEILING, zram, image_size=max(t.image_size for t in zram), zram=True))
    for device in dict.fromkeys(d for t in own for d in t.named):
        found.append(_raw(f"(ceiling: {device})", [t for t in own if device in t.named], named=(device,)))
    return found


def _raw(name: str, like: list[Target], **device: object) -> Target:
    """A raw target on a device like those of `like` (their fill and discards, the first's size)."""
    first = like[0]
    fields: dict[str, Any] = {
        "image_size": first.image_size,
        "image_fill": first.image_fill,
        "blkdiscard": first.blkdiscard,
    }
    return Target(
        name=name, filesystem="raw", mkfs_options=(), mount_options="", baseline=name, ceiling=True, **(fields | device)
    )


def copies_per_block(runs: int) -> int:
    """How many times a ceiling's cell runs in each of the study's first `runs` blocks: once, or
    more where the study runs fewer than CEILING_RUNS (at --runs 1, three times in its one block,
    shuffled among the study's runs like any other)."""
    return math.ceil(CEILING_RUNS / max(runs, 1))
