"""Results databases built through fslab's own API, as `fslab run` stores a study run, with
nothing run: for the tests of what reads a stored study run (summaries, reports, exports) and for
bench/report_scale.py. What is tested there is the reading, not the run; a run is tested where
the run itself is.

A study run is ordered by fslab's own Planner (warm-up blocks, then measured blocks, a new order
each, from the study run's seed) and stored run by run (ResultsDB.begin_study_run, record_run,
finish_study_run). Each run keeps a real fio json+ output (tests/fixtures/fio, latency bins and
all) with the metrics fio_parser.parse_metrics reads from it, scaled per target and given a few % of
seeded noise so cells differ; the monitors' metrics (CPU, device traffic, write amplification,
space); fio's bandwidth and IOPS logs (tool "fio_log") and its histogram logs (tool "fio_hist",
drawn from the fixture's own latency bins); device facts, the exact job file, mount
options read back, the filesystem's own description and the phases' timings. A workload of another
kind (sysbench, dd, rsync, a scenario) keeps its tools' real outputs (tests/fixtures: each of its
phases' own) and the metrics its kind's own parser reads from them, made noisy alike. A target named in
`failing` fails every run as the runner stores a failure (no metric, the failed command). A
study run of a fleet (`hosts`) has each planned run once on each host, scaled and made noisy as
that host's SyntheticHost says, with the host's facts recorded as the runner records them. Every
run's metrics are flagged primary as its study names them (`[study] primary`), as the runner does."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

from fslab.core.names import file_name
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Provisioned
from fslab.fio import hist as fio_hist, output as fio_parser
from fslab.fio.workload import FioJob, job_for
from fslab.model import Host, Metric, RawOutput, Roles, Study, Workload, with_primary
from fslab.model.findings import Finding
from fslab.model.records import RunFailure, now
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.running import environment
from fslab.running.plan import PlannedRun, Planner, Repetitions, Tally
from fslab.scenarios.kind import Scenario
from fslab.study import load_study
from fslab.workloads import kind_of, rsync
from fslab.workloads.base import tool_of

FIXTURES = Path(__file__).parent / "fixtures"
FIO_OUTPUTS = FIXTURES / "fio"
MiB = 2**20
OTHER_SCALE = 0.9  # of a target `scale` does not name
# What dd's judge says of a run too short to time: a finding that flags its cell.
FLAGGED = Finding("too_short_to_time", "dd took 0.008 s, under 0.01 s: no rate can be read from it", implausible=True)


def fixture_for(options: dict) -> str:
    """The real fio output of a job that moves data the way a workload does (fslab's own jobs
    where there is one: they report the total latency's percentiles, as fslab asks fio to)."""
    rw = options.get("rw") or "read"  # fio's default
    if rw in ("randrw", "rw"):
        return "randrw-2jobs"
    if "read" in rw:
        return "fslab-rand_read"
    return "buffered-randwrite" if rw.startswith("rand") else "fslab-seq_write"


@cache
def fio_output(name: str) -> tuple[str, tuple[Metric, ...]]:
    """A fixture's text and the metrics fslab reads from it."""
    text = (FIO_OUTPUTS / f"{name}.json").read_text()
    return text, tuple(fio_parser.parse_metrics(text))


@dataclass(frozen=True)
class SyntheticHost:
    """A host of a synthetic fleet: what its runs' throughput is multiplied by, and their noise; how
    it ran its kernel (a lab VM's accelerator, CPU and QEMU: model.Host); and, by filesystem, the
    share of its direct writes the page cache took (`buffered`: a write_buffered_share stored with
    each run of a fio workload that writes, as the page-cache monitor stores it; none: not stored)."""

    scale: float = 1.0
    noise: float = 0.03  # the standard deviation of each figure's factor around 1
    kernel: str = "6.1.0-test"
    accelerator: str = "host"
    cpu_model: str = "Test CPU"
    qemu_version: str | None = None
    buffered: Mapping[str, float] | None = None

    def facts(self, name: str) -> Host:
        vm = {"disk_cache": "none", "disk_aio": "io_uring"} if self.accelerator != "host" else {}
        return Host(
            name, f"machine-{name}", self.kernel, self.cpu_model, 4, 8 * 2**30,
            accelerator=self.accelerator, qemu_version=self.qemu_version, **vm,
        )  # fmt: skip


def noisy(metrics: list[Metric], rng: random.Random, scale: float, noise: float = 0.03) -> list[Metric]:
    """fio's metrics scaled to a target (throughput by `scale`, latency by its inverse), each with
    a few % of noise: samples of one cell differ as runs do. The I/O count is scaled alone: no
    draw of its own, so that the others' draws stay those of the studies made before fio reported it."""
    out = []
    for m in metrics:
        factor = (1 / scale if "lat" in m.name else scale) if m.unit != "%" else 1.0
        drawn = 1.0 if m.name == fio_parser.IOS else rng.gauss(1.0, noise)
        out.append(replace(m, value=m.value * factor * drawn))
    return out


def monitored(rng: random.Random, moved: dict[str, float], filesystem: str, compressing: bool) -> list[Metric]:
    """What the runner's monitors store beside a run (runner.Windows, monitors/): host CPU, the
    devices' traffic and write amplification, the space used."""
    user, system, iowait = rng.uniform(2, 15), rng.uniform(5, 30), rng.uniform(10, 60)
    written, read = moved.get("write_bytes", 0.0), moved.get("read_bytes", 0.0)
    found = [
        Metric("host_cpu_busy_pct", user + system, "%", False),
        Metric("host_cpu_busy_peak_pct", min(100.0, (user + system) * rng.uniform(1.2, 2)), "%", False),
        Metric("host_cpu_user_pct", user, "%", False), Metric("host_cpu_system_pct", system, "%", False),
        Metric("host_cpu_iowait_pct", iowait, "%", False),
        Metric("device_read_bytes", read * rng.uniform(1.0, 1.05), "B", False),
        Metric("device_written_bytes", written * rng.uniform(1.0, 1.4), "B", False),
    ]  # fmt: skip
    if written:
        found.append(Metric("write_amplification", found[-1].value / written, "×", False))
    if read:
        found.append(Metric("device_read_ratio", found[-2].value / read, "×", False))
    if filesystem != "raw":
        used = 2 * 1024**3 * rng.uniform(1.0, 1.02)
        found += [
            Metric("space_used_bytes", used, "B", False),
            Metric("space_grown_bytes", used * rng.uniform(0, 0.01), "B", False),
        ]
        if compressing:
            found.append(Metric("compression_ratio", rng.uniform(1.0, 1.1), "×", True))
    return found


def fio_logs(rng: random.Random, metrics: dict[str, float], intervals: int = 100) -> str:
    """fio's bandwidth and IOPS logs of a run (write_bw_log, write_iops_log at log_avg_msec=600),
    in fio's own format, one line per interval and direction: "msec, value, direction, 0, 0"."""
    files = {}
    for unit in ("bw", "iops"):
        lines = []
        for i in range(1, intervals + 1):
            for code, direction in enumerate(fio_parser.DIRECTIONS):
                iops = metrics.get(f"{direction}_iops")
                if iops:
                    value = iops if unit == "iops" else metrics[f"{direction}_mib_s"] * 1024  # KiB/s
                    lines.append(f"{i * 600}, {round(value * rng.gauss(1.0, 0.05))}, {code}, 0, 0\n")
        files[f"{fio_parser.LOG_PREFIX}_{unit}.1.log"] = "".join(lines)
    return json.dumps({"log_avg_msec": 600, "files": files})


@cache
def hist_logs(fixture: str, windows: int = 50, window_ms: int = 1200) -> str:
    """fio's histogram logs of a run (write_hist_log at log_hist_msec=1200, two of fio_logs' windows,
    fslab's coarseness) as a run keeps them (fio_hist.kept): per job, direction and window, the
    completions a window of its IOPS holds, drawn (seeded, Poisson) from the fixture's own
    completion-latency bins."""
    import numpy as np  # the tests' and the bench's, not fslab's

    document = json.loads((FIO_OUTPUTS / f"{fixture}.json").read_text())
    rng = np.random.default_rng(sum(map(ord, fixture)))
    bins = fio_hist.Bins.of_width(29 * 64 >> fio_hist.COARSENESS, fio_hist.COARSENESS)
    files = {}
    for job, entry in enumerate(document["jobs"], 1):
        lines = []
        for code, direction in enumerate(fio_parser.DIRECTIONS):
            part = entry[direction]
            found = {int(value): n for value, n in part["clat_ns"].get("bins", {}).items()}
            if not found or not part["iops"]:
                continue
            shares = np.zeros(bins.count)
            for value, n in found.items():
                shares[bins.index_of(value)] += n
            counts = rng.poisson(shares / shares.sum() * part["iops"] * window_ms / 1000, size=(windows, bins.count))
            lines += [
                f"{(i + 1) * window_ms + int(rng.integers(0, 4))}, {code}, 4096, " + ", ".join(map(str, row))
                for i, row in enumerate(counts)
            ]
        files[f"{fio_parser.LOG_PREFIX}_clat_hist.{job}.log"] = "\n".join(lines) + "\n"
    return fio_hist.kept(files, window_ms, fio_hist.COARSENESS, None)


def device_facts(index: int, image_size: int, target: str) -> list[dict]:
    return [{
        "device": f"/dev/loop{index}", "kind": "loop", "size": image_size, "diskseq": 40 + index, "model": None,
        "serial": None, "wwn": None, "firmware": None, "rotational": False, "logical_sector": 512,
        "physical_sector": 512, "scheduler": "none", "nr_requests": 128, "queue_depth": None, "discard": True,
        "backing_file": f"/var/tmp/fslab/images/{target}.img",
    }]  # fmt: skip


FS_DETAILS = {
    "ext4": "\n".join(
        f"Filesystem feature {i}:  has_journal ext_attr resize_inode dir_index filetype extent 64bit flex_bg"
        for i in range(30)
    ),
    "xfs": "\n".join(
        f"meta-data=/dev/loop0 isize=512 agcount=4, agsize=524288 blks  sectsz=512 attr=2 (line {i})" for i in range(12)
    ),
    "btrfs": "Data, single: total=2.00GiB, used=1.99GiB\nSystem, DUP: total=8.00MiB, used=16.00KiB\n"
    "Metadata, DUP: total=256.00MiB, used=2.20MiB\nGlobalReserve, single: total=5.50MiB, used=0.00B",
}
EFFECTIVE = {
    "zfs": "rw,relatime,user_id=0,group_id=0,default_permissions,allow_other",
    "ext4": "rw,relatime",
    "xfs": "rw,relatime,attr2,inode64,logbufs=8,logbsize=32k,noquota",
    "btrfs": "rw,relatime,ssd,discard=async,space_cache=v2,subvolid=5,subvol=/",
}


def effective_options(filesystem: str, requested: str) -> str | None:
    if filesystem not in EFFECTIVE:  # raw has none; ZFS's are its properties, not mount options
        return None
    asked = [o for o in requested.split(",") if o and o != "defaults"]
    base = EFFECTIVE[filesystem].split(",")
    if "noatime" in asked:
        base = [o for o in base if o != "relatime"]
    return ",".join(dict.fromkeys(base + asked))


def store_study_run(
    db: ResultsDB,
    study: Study,
    *,
    seed: int,
    rng: random.Random,
    scale: Mapping[str, float] = {},
    failing: Mapping[str, tuple[str, RunFailure]] = {},
    env: dict | None = None,
    hosts: Mapping[str, SyntheticHost] = {},
    flagged: Collection[str] = (),
    repetitions: Repetitions | None = None,
) -> int:
    """One study run of `study` (its repetitions and warm-ups, or `repetitions`) as the runner stores it, block by
    block in the Planner's order from `seed`, each run committed as it finishes; `failing`: the
    error line and failure of every run of the targets it names; `hosts`: each planned run is run
    on each of them (none: one run, stored with no host, as before schema 10); `flagged`: the
    workloads every successful run of which its kind found implausible (FLAGGED: too short to
    time, as dd's and rsync's judge). Returns the study run's id."""
    repetitions = repetitions or Repetitions(runs=study.repetitions, warmup=study.warmup)
    env = environment.collect(Path(study.path).parent) if env is None else env
    versions = {kind: FILESYSTEMS[kind].version() for kind in {t.filesystem for t in study.targets}}
    study_run_id = db.begin_study_run(study, seed, env, versions, repetitions.describe(), Owner.current(Path.cwd()))
    planner, tally = Planner(study.cells, repetitions, seed), Tally()
    for name, host in hosts.items():
        db.record_host(study_run_id, host.facts(name))
    clock = now()
    on: list[tuple[str | None, SyntheticHost]] = [*hosts.items()] or [(None, SyntheticHost())]
    while block := planner.next_block(tally.samples, roles=tally.roles, blocks=tally.blocks):
        for planned in block:
            for host_name, host in on:
                target_scale = scale.get(planned.cell.target.name, OTHER_SCALE) * host.scale
                record = replace(
                    _record(planned, clock, rng, target_scale, failing.get(planned.cell.target.name), host.noise),
                    host=host_name,
                )
                record = _buffered(record, host, planned, rng)
                record = replace(record, metrics=with_primary(record.metrics, planned.cell.workload.primary))
                if planned.cell.workload.name in flagged and record.status == "ok":
                    record = replace(record, notes=[FLAGGED])
                clock = record.finished_at + timedelta(seconds=rng.uniform(1, 3))
                db.record_run(study_run_id, record)
            tally.add(
                planned,
                record.status == "ok",
                {m.key: m.value for m in record.metrics},
                record.started_at,
                record.finished_at,
                Roles.of(planned.cell.workload.name, record.metrics),
            )
    db.finish_study_run(study_run_id, "finished", planner.outcome())
    return study_run_id


def _buffered(record: RunRecord, host: SyntheticHost, planned: PlannedRun, rng: random.Random) -> RunRecord:
    """A run with the write_buffered_share its host's `buffered` gives its filesystem (a few points
    of noise, within [0, 1]), where it wrote."""
    share = (host.buffered or {}).get(planned.cell.target.filesystem)
    if share is None or record.status != "ok" or not any(m.name == "write_iops" for m in record.metrics):
        return record
    value = min(1.0, max(0.0, share + rng.gauss(0, 0.01)))
    return replace(record, metrics=[*record.metrics, Metric("write_buffered_share", value, "", False)])


def _record(
    planned: PlannedRun,
    started,
    rng: random.Random,
    scale: float,
    failed: tuple[str, RunFailure] | None,
    noise: float = 0.03,
) -> RunRecord:  # noqa: ANN001
    target, workload = planned.cell.target, planned.cell.workload
    loop = planned.position % 8
    record = RunRecord(
        target=target.name, workload=workload.name, repetition=planned.repetition, warmup=planned.warmup,
        block=planned.block, position=planned.position, started_at=started, finished_at=started, status="failed",
        buffered=not workload.direct, image_size=target.image_size, mount_options_requested=target.mount_options,
        data_pattern=workload.tool.data_pattern(), device_facts=device_facts(loop, target.image_size, target.name),
    )  # fmt: skip
    fs = FILESYSTEMS[target.filesystem]
    if failed:
        record.error, record.failure = failed
        record.options_applied = fs.options_applied(target.spec(), None, "")
        record.timings = {"provision": rng.uniform(0.3, 1.5)}
        record.finished_at = started + timedelta(seconds=record.timings["provision"])
        return record
    if workload.kind != "fio":
        return _tool_record(record, planned, rng, scale, noise)
    fio = tool_of(workload, FioJob)
    fixture = fixture_for(fio.fio_options or fio.job.jobs()[0])  # a job file's: its first job's
    text, parsed = fio_output(fixture)
    metrics = noisy(list(parsed), rng, scale, noise)
    values = {m.name: m.value for m in metrics}
    seconds = workload.seconds
    moved = {
        "read_bytes": values.get("read_mib_s", 0.0) * MiB * seconds,
        "write_bytes": values.get("write_mib_s", 0.0) * MiB * seconds,
    }
    effective = effective_options(target.filesystem, target.mount_options)
    directory = None if target.filesystem == "raw" else Path("/var/tmp/fslab/mnt") / file_name(target.name)
    ready = Provisioned(top=f"/dev/loop{loop}", directory=directory, bottom=(f"/dev/loop{loop}",))
    timings = {
        "provision": rng.uniform(0.3, 1.5),
        "layout": rng.uniform(0, 3),
        "drop_caches": rng.uniform(0.05, 0.2),
        "workload": seconds * rng.uniform(1.05, 1.08),
        "parse": 0.01,
        "teardown": rng.uniform(0.1, 0.5),
    }
    details = FS_DETAILS.get(target.filesystem, "")
    return replace(
        record, status="ok", finished_at=started + timedelta(seconds=sum(timings.values())),
        job_file=job_for(workload, ready),
        outputs=[RawOutput("", "fio", text), *fio_parser.stored_bins("", text),
                 RawOutput("", fio_parser.LOG_TOOL, fio_logs(rng, values)),
                 RawOutput("", fio_hist.HIST_TOOL, hist_logs(fixture))],
        device=ready.described, direct_io_loop=True,
        mkfs_command=None if target.filesystem == "raw"
        else [f"mkfs.{target.filesystem}", "-f" if target.filesystem != "ext4" else "-F", ready.top],
        mount_options_effective=effective, fs_details=details, timings=timings,
        options_applied=fs.options_applied(target.spec(), effective, details),
        metrics=metrics + monitored(rng, moved, target.filesystem, fs.compresses(effective, details)),
    )  # fmt: skip


def stored_study(
    directory: Path, text: str, db: ResultsDB, *, name: str = "study.toml", seed: int = 1, **store: Any
) -> int:
    """The study `text`, written to `directory` and read as `fslab run` reads it, stored as one
    study run in `db` (store_study_run's `scale` and `failing`; noise seeded by `seed`). Returns
    the study run's id."""
    path = directory / name
    path.write_text(text)
    return store_study_run(db, load_study(path), seed=seed, rng=random.Random(seed), **store)


def study_run_of(db: ResultsDB, ref: str | int | None = None) -> dict:
    """The study run `ref` (as ResultsDB.study_run finds it: by default the newest), which the
    test stored."""
    found = db.study_run(ref)
    assert found is not None, f"no study run {ref} in {db.location}"
    return found


# What a run of a kind leaves, by kind, in place of what tool_outputs gives: a test's toy kind, or a
# test's other fixture (monkeypatch.setitem: for that test alone).
OUTPUTS: dict[str, Callable[[Workload], list[RawOutput]]] = {}


def tool_outputs(workload: Workload) -> list[RawOutput]:
    """What a run of a workload of another kind than fio's leaves, as its kind stores it: its
    tools' real outputs (tests/fixtures), one per measured step or phase (OUTPUTS' where given)."""
    if workload.kind in OUTPUTS:
        return OUTPUTS[workload.kind](workload)
    fixture = lambda kind, name: (FIXTURES / kind / name).read_text()  # noqa: E731
    dd = [("write", fixture("dd", "write-64m-direct-random.txt")), ("read", fixture("dd", "read-1g-direct.txt"))]
    if workload.kind == "dd":
        return [RawOutput(step, "dd", text) for step, text in dd]
    if workload.kind == "sysbench":
        return [RawOutput("", "sysbench", fixture("sysbench", "run-seed000-random.txt"))]
    if workload.kind == "rsync":
        return [RawOutput("", "rsync", f"{rsync.measured_line(1.2, 0.1, 0.4)}\n{fixture('rsync', 'three-files.txt')}")]
    outputs = []
    for phase in (p for p in tool_of(workload, Scenario).phases if p.measured):
        if phase.action == "fio":
            text = fio_output(fixture_for(phase.options))[0]
            outputs += [RawOutput(phase.name, "fio", text), *fio_parser.stored_bins(phase.name, text)]
        elif phase.action == "dd":
            outputs += [RawOutput(f"{phase.name}.{step}", "dd", text) for step, text in dd]
        elif phase.action == "sysbench":
            outputs.append(RawOutput(phase.name, "sysbench", fixture("sysbench", "run-seed000-random.txt")))
        if phase.extents:
            outputs.append(RawOutput(phase.name, "filefrag", fixture("monitors", "filefrag-ext4.txt")))
        if phase.snapshot_every:
            outputs.append(RawOutput(phase.name, "snapshots", " ".join(f"fslab-{i}" for i in range(12))))
    return outputs


def _tool_record(record: RunRecord, planned: PlannedRun, rng: random.Random, scale: float, noise: float) -> RunRecord:
    """A successful run of a workload of another kind than fio's: its tools' outputs and the
    metrics its kind reads from them, scaled and noisy as fio's are."""
    target, workload = planned.cell.target, planned.cell.workload
    outputs = tool_outputs(workload)
    metrics = noisy(kind_of(workload).parse(outputs), rng, scale, noise)
    timings = {"provision": rng.uniform(0.3, 1.5), "workload": rng.uniform(2, 5), "teardown": rng.uniform(0.1, 0.5)}
    effective = effective_options(target.filesystem, target.mount_options)
    details = FS_DETAILS.get(target.filesystem, "")
    applied = FILESYSTEMS[target.filesystem].options_applied(target.spec(), effective, details)
    finished = record.started_at + timedelta(seconds=sum(timings.values()))
    return replace(
        record,
        status="ok",
        finished_at=finished,
        outputs=outputs,
        timings=timings,
        mount_options_effective=effective,
        options_applied=applied,
        metrics=metrics,
    )
