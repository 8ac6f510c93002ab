"""The ARC's share of a workload's data (report/arc_share.py): where a ZFS cell's read figures may
come from the ARC, said from what its runs stored (the ARC cap in effect, the data its jobs
read), on synthetic values and on nas-stack as the study file has it at several scales."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from fslab.fio.report import FIO_REPORT
from fslab.report.arc_share import MAY_HOLD, arc_note, arc_notes
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.study import load_study
from synthetic import store_study_run

MiB, GiB = 2**20, 2**30


def reading(workload: dict) -> Callable[[bool], int]:
    """What a stored fio workload reads, as fio's report hook says it (the summary asks it so)."""
    return lambda zvol: FIO_REPORT.data_read(workload, zvol)


def test_the_arc_may_hold_the_working_set_when_its_cap_is_the_data_or_the_floor_raised_it():
    held = arc_note(4 * GiB, 4 * GiB, floor_raised=False)
    assert held == f"{MAY_HOLD}: its cap (4GiB) is at least the 4GiB the workload reads"
    assert arc_note(4 * GiB, 20 * GiB, floor_raised=False) is None, "a fifth of the data, as the seed asked: from disk"
    raised = arc_note(64 * MiB, 205 * MiB, floor_raised=True)
    assert raised is not None and raised.startswith(MAY_HOLD) and "31% of the 205MiB" in raised
    assert arc_note(None, 4 * GiB, floor_raised=True) is None, "no cap the study set: no share to keep"
    assert arc_note(64 * MiB, 0, floor_raised=True) is None


def stored_specs(scale: float) -> tuple[dict, dict]:
    """nas-stack's targets' and workloads' specs at `scale`, as a study run stores them (JSON)."""
    study = load_study("nas-stack", scale=scale)
    targets = {t.name: json.loads(json.dumps(t.spec())) for t in study.targets}
    workloads = {w.name: json.loads(json.dumps(w.spec())) for w in study.workloads}
    return targets, workloads


def flagged(scale: float) -> dict[str, list[str]]:
    targets, workloads = stored_specs(scale)
    return {w: [t for t, spec in targets.items() if arc_notes(spec, reading(workloads[w]))] for w in workloads}


def test_nas_stack_keeps_the_seeds_sizes_and_the_arcs_share_of_each_workloads_data():
    full, scaled = load_study("nas-stack"), load_study("nas-stack", scale=0.05)
    sizes = {w.name: int(w.tool.fio_options["size"]) for w in full.workloads if w.kind == "fio"}
    seeds = {"backup-write": 20 * GiB, "backup-read": 20 * GiB, "metadata": 4 * GiB, "mixed-load": 8 * GiB}
    assert sizes == seeds, "seed 003's --size"
    mixed = next(w for w in full.workloads if w.name == "mixed-load")
    assert mixed.tool.shared_file, "the seed's one --filename for its 4 jobs"
    for study in (full, scaled):
        targets, workloads = ({t.name: t for t in study.targets}, {w.name: w for w in study.workloads})
        arc = targets["zfs-mirror"].arc_max
        data = {name: w.tool.bytes_needed(False) for name, w in workloads.items() if w.kind == "fio"}
        shares = {name: round(arc / size, 2) for name, size in data.items()}
        assert shares == {"backup-write": 0.2, "backup-read": 0.2, "metadata": 1.0, "mixed-load": 0.5}


def test_nas_stack_says_where_the_arc_may_hold_the_working_set():
    """At 0.05 the ARC keeps the seed's share: only the metadata file, as large as the seed's ARC,
    may be held; at 0.01 the floor (64MiB, not 41MiB) holds more than the seed's share of every
    reading workload. Writes and targets without an ARC are never flagged."""
    zfs = ["zfs-mirror", "zfs-mirror-encrypted"]
    assert flagged(1.0) == flagged(0.05) == {
        "backup-write": [], "backup-read": [], "metadata": zfs, "mixed-load": [], "photo-ingestion": [],
    }  # fmt: skip
    assert flagged(0.01) == {
        "backup-write": [], "backup-read": zfs, "metadata": zfs, "mixed-load": zfs, "photo-ingestion": [],
    }  # fmt: skip


def test_a_dataset_whose_arc_caches_no_data_is_never_said_to_hold_the_working_set():
    targets, workloads = stored_specs(0.05)
    assert arc_notes(targets["zfs-mirror"], reading(workloads["metadata"]))
    for cache in ("metadata", "none"):
        spec = targets["zfs-mirror"] | {"properties": targets["zfs-mirror"]["properties"] | {"primarycache": cache}}
        assert arc_notes(spec, reading(workloads["metadata"])) == [], (
            f"primarycache={cache}: the ARC holds no file data"
        )


STUDY = """
[study]
name = "arc"
repetitions = 2
warmup = 0
image_size = "8GiB"

[[target]]
name = "zfs"
filesystem = "zfs"
arc_max = "1GiB"

[[target]]
name = "ext4"
filesystem = "ext4"

[[workload]]
name = "reads"
rw = "randread"
bs = "4k"
size = "1GiB"
runtime = "10s"

[[workload]]
name = "big-reads"
rw = "read"
bs = "1M"
size = "4GiB"
runtime = "10s"
"""


def test_the_note_reaches_the_zfs_cells_that_read_in_a_stored_study_run(tmp_path):
    path = tmp_path / "arc.toml"
    path.write_text(STUDY)
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = store_study_run(db, load_study(path, scale=0.05), seed=1, rng=random.Random(1))
    cells = summarize_study_run(db, study_run).cells
    notes = {(c.workload, c.target): [n for n in c.notes if n.startswith(MAY_HOLD)] for c in cells}
    raised = (
        f"{MAY_HOLD}: its cap (64MiB), the least the ZFS engines take, is 31% of the 205MiB the workload reads, "
        "more than the study's share at full size"
    )
    assert notes == {
        # the floor, not 51MiB
        ("reads", "zfs"): [f"{MAY_HOLD}: its cap (64MiB) is at least the 51MiB the workload reads"],
        ("big-reads", "zfs"): [raised],
        ("reads", "ext4"): [], ("big-reads", "ext4"): [],
    }  # fmt: skip
