#!/usr/bin/env python3
"""Reports at scale: how long `fslab summary` and `fslab report` take, and how much memory, on a
database of issue 11's size — 5 study runs of one study, each 10 targets × 20 workloads × 10
runs (10,000 runs).

The database is built through fslab's own API (ResultsDB.begin_study_run, record_run,
finish_study_run), as the runner stores runs: each run keeps a real fio json+ output
(tests/fixtures/fio, latency bins and all) with the metrics fio.parse_metrics reads from it,
scaled per target and given a few % of seeded noise so cells differ; the monitors' metrics
(CPU, device traffic, write amplification, space); fio's bandwidth and IOPS logs (tool
"fio_log"); device facts, the exact job file, mount options read back, the filesystem's own
description and the phases' timings. The study itself (raw, ext4, XFS and Btrfs variants under
built-in and own fio workloads) is stored as its text, as `fslab run` stores it.

Then the real command line runs as a user runs it, each command several times, in a process of
its own: wall time (median, min) and the child's peak RSS (os.wait4's ru_maxrss), each against
issue 11's target —
  - `fslab summary ID`           at most 1 s,
  - `fslab report ID -o DIR`     at most 3 s and 500 MB,
and, as information (no target), `fslab summary ID` with its runs files deleted first (it
writes runs.csv and runs.json again; `fslab run` writes them as it ends, so a summary asked for
later finds them current) and `fslab report ID -o DIR --figures` (every chart also as SVG and
PNG). ID is the last study run.

Run: .venv/bin/python bench/report_scale.py [--keep DIR] [--repeat 3] [--study-runs 5 --targets 10 --workloads 20 --runs 10]
The database goes into a temporary directory in /var/tmp, deleted afterwards, unless --keep
names a directory to build it in and keep it (DIR/scale.db, used as it is when it is there).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

from fslab import environment
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Provisioned
from fslab.guard.names import file_name
from fslab.model import Metric, RawOutput, Study
from fslab.plan import Repetitions
from fslab.results import ResultsDB, RunRecord
from fslab.results import db as tables
from fslab.results.db import now
from fslab.results.owner import Owner
from fslab.study import parse_study
from fslab.workloads import fio
from fslab.workloads.base import tool_of

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "fio"
MiB = 2**20

# Targets as a study would name them: the raw device (the physical reference), then ext4, XFS
# and Btrfs with and without options; the first N are taken.
TARGETS = [
    ("raw", "raw", None),
    ("ext4", "ext4", "defaults"),
    ("xfs", "xfs", "defaults"),
    ("btrfs", "btrfs", "defaults"),
    ("ext4-noatime", "ext4", "noatime"),
    ("xfs-noatime", "xfs", "noatime"),
    ("btrfs-zstd", "btrfs", "compress=zstd"),
    ("ext4-writeback", "ext4", "noatime,data=writeback"),
    ("btrfs-nodatacow", "btrfs", "nodatacow"),
    ("xfs-logbufs", "xfs", "noatime,logbufs=8"),
]
# Built-in workloads, then the study's own; the first N are taken.
BUILTIN = [
    "seq_read", "seq_write", "rand_read", "rand_write",
    "SEQ1M_Q8T1_read", "SEQ1M_Q8T1_write", "SEQ1M_Q1T1_read", "SEQ1M_Q1T1_write",
    "RND4K_Q32T1_read", "RND4K_Q32T1_write", "RND4K_Q1T1_read", "RND4K_Q1T1_write",
    "video_read", "video_write", "nas_metadata", "nas_mixed",
]  # fmt: skip
OWN = {
    "mixed_128k": {"rw": "randrw", "rwmixread": 60, "bs": "128k", "iodepth": 16},
    "rand_read_64k": {"rw": "randread", "bs": "64k", "iodepth": 8},
    "seq_write_qd1": {"rw": "write", "bs": "128k", "iodepth": 1},
    "oltp_8k": {"rw": "randrw", "rwmixread": 70, "bs": "8k", "iodepth": 32},
}
# Target scale of throughput (latency by its inverse): targets differ as filesystems do.
SCALE = {"raw": 1.0, "ext4": 0.93, "xfs": 0.95, "btrfs": 0.78, "ext4-noatime": 0.94, "xfs-noatime": 0.96, "btrfs-zstd": 0.7, "ext4-writeback": 0.97, "btrfs-nodatacow": 0.86, "xfs-logbufs": 0.95}


def study_text(targets: int, workloads: int) -> str:
    builtin = BUILTIN[:workloads]
    own = list(OWN)[: max(0, workloads - len(BUILTIN))]
    lines = [
        "[study]", 'name = "scale"', "repetitions = 10", f"workloads = {json.dumps(builtin)}", 'image_size = "16GiB"', "",
        "[fio]", 'size = "2GiB"', 'runtime = "30s"', 'ramp_time = "2s"', "",
    ]  # fmt: skip
    for name, filesystem, options in TARGETS[:targets]:
        lines += ["[[target]]", f'name = "{name}"', f'filesystem = "{filesystem}"'] + ([f'mount_options = "{options}"'] if options else []) + [""]
    for name in own:
        lines += ["[[workload]]", f'name = "{name}"'] + [f"{k} = {json.dumps(v)}" for k, v in OWN[name].items()] + [""]
    return "\n".join(lines)


def fixture_for(options: dict) -> str:
    """The real fio output of a job that moves data the way a workload does."""
    rw = options["rw"]
    if rw in ("randrw", "rw"):
        return "randrw-2jobs"
    if "read" in rw:
        return "randread-qd16"
    return "buffered-randwrite" if rw.startswith("rand") else "seqwrite-1m"


def noisy(metrics: list[Metric], rng: random.Random, scale: float) -> list[Metric]:
    """fio's metrics scaled to a target (throughput by `scale`, latency by its inverse), each with
    a few % of noise: samples of one cell differ as runs do."""
    out = []
    for m in metrics:
        factor = (1 / scale if "lat" in m.name else scale) if m.unit != "%" else 1.0
        out.append(replace(m, value=m.value * factor * rng.gauss(1.0, 0.03)))
    return out


def monitored(rng: random.Random, moved: dict[str, float], filesystem: str, compressing: bool) -> list[Metric]:
    """What the runner's monitors store beside a run (runner.Windows, monitors/): host CPU, the
    devices' traffic and write amplification, the space used."""
    user, system, iowait = rng.uniform(2, 15), rng.uniform(5, 30), rng.uniform(10, 60)
    written, read = moved.get("write_bytes", 0.0), moved.get("read_bytes", 0.0)
    found = [
        Metric("host_cpu_busy_pct", user + system, "%", False), Metric("host_cpu_busy_peak_pct", min(100.0, (user + system) * rng.uniform(1.2, 2)), "%", False),
        Metric("host_cpu_user_pct", user, "%", False), Metric("host_cpu_system_pct", system, "%", False), Metric("host_cpu_iowait_pct", iowait, "%", False),
        Metric("device_read_bytes", read * rng.uniform(1.0, 1.05), "B", False), Metric("device_written_bytes", written * rng.uniform(1.0, 1.4), "B", False),
    ]  # fmt: skip
    if written:
        found.append(Metric("write_amplification", found[-1].value / written, "×", False))
    if read:
        found.append(Metric("device_read_ratio", found[-2].value / read, "×", False))
    if filesystem != "raw":
        used = 2 * 1024**3 * rng.uniform(1.0, 1.02)
        found += [Metric("space_used_bytes", used, "B", False), Metric("space_grown_bytes", used * rng.uniform(0, 0.01), "B", False)]
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
            for code, direction in enumerate(fio.DIRECTIONS):
                iops = metrics.get(f"{direction}_iops")
                if iops:
                    value = iops if unit == "iops" else metrics[f"{direction}_mib_s"] * 1024  # KiB/s
                    lines.append(f"{i * 600}, {round(value * rng.gauss(1.0, 0.05))}, {code}, 0, 0\n")
        files[f"{fio.LOG_PREFIX}_{unit}.1.log"] = "".join(lines)
    return json.dumps({"log_avg_msec": 600, "files": files})


def device_facts(index: int, image_size: int, target: str) -> list[dict]:
    return [{
        "device": f"/dev/loop{index}", "kind": "loop", "size": image_size, "diskseq": 40 + index, "model": None, "serial": None, "wwn": None,
        "firmware": None, "rotational": False, "logical_sector": 512, "physical_sector": 512, "scheduler": "none", "nr_requests": 128,
        "queue_depth": None, "discard": True, "backing_file": f"/var/tmp/fslab/images/{target}.img",
    }]  # fmt: skip


FS_DETAILS = {
    "ext4": "\n".join(f"Filesystem feature {i}:  has_journal ext_attr resize_inode dir_index filetype extent 64bit flex_bg" for i in range(30)),
    "xfs": "\n".join(f"meta-data=/dev/loop0 isize=512 agcount=4, agsize=524288 blks  sectsz=512 attr=2 (line {i})" for i in range(12)),
    "btrfs": "Data, single: total=2.00GiB, used=1.99GiB\nSystem, DUP: total=8.00MiB, used=16.00KiB\nMetadata, DUP: total=256.00MiB, used=2.20MiB\nGlobalReserve, single: total=5.50MiB, used=0.00B",
}
EFFECTIVE = {"ext4": "rw,relatime", "xfs": "rw,relatime,attr2,inode64,logbufs=8,logbsize=32k,noquota", "btrfs": "rw,relatime,ssd,discard=async,space_cache=v2,subvolid=5,subvol=/"}


def effective_options(filesystem: str, requested: str) -> str | None:
    if filesystem == "raw":
        return None
    asked = [o for o in requested.split(",") if o and o != "defaults"]
    base = EFFECTIVE[filesystem].split(",")
    if "noatime" in asked:
        base = [o for o in base if o != "relatime"]
    return ",".join(dict.fromkeys(base + asked))


def store_study_run(db: ResultsDB, study: Study, env: dict, versions: dict, runs: int, rng: random.Random) -> int:
    """One study run as the runner stores it: runs in interleaved blocks (every cell once per
    block, a new order each), each committed as it finishes."""
    settings = Repetitions(runs=runs).describe()
    study_run_id = db.begin_study_run(study, rng.randrange(2**32), env, versions, settings, Owner.current(Path.cwd()))
    texts = {name: (FIXTURES / f"{name}.json").read_text() for name in ("randrw-2jobs", "randread-qd16", "buffered-randwrite", "seqwrite-1m")}
    parsed = {name: fio.parse_metrics(text) for name, text in texts.items()}
    cells = [(t, w) for w in study.workloads for t in study.targets]
    clock = now()
    position = 0
    for block in range(runs):
        rng.shuffle(cells)
        for index, (target, workload) in enumerate(cells):
            options = tool_of(workload, fio.FioJob).fio_options
            fixture = fixture_for(options)
            metrics = noisy(parsed[fixture], rng, SCALE.get(target.name, 0.9))
            values = {m.name: m.value for m in metrics}
            moved = {"read_bytes": values.get("read_mib_s", 0.0) * MiB * 30, "write_bytes": values.get("write_mib_s", 0.0) * MiB * 30}
            fs = FILESYSTEMS[target.filesystem]
            effective = effective_options(target.filesystem, target.mount_options)
            directory = None if target.filesystem == "raw" else Path("/var/tmp/fslab/mnt") / file_name(target.name)
            ready = Provisioned(top=f"/dev/loop{index % 8}", directory=directory, bottom=(f"/dev/loop{index % 8}",))
            workload_seconds = rng.uniform(31.5, 32.5)
            started = clock
            clock += timedelta(seconds=workload_seconds + 6)
            record = RunRecord(
                target=target.name, workload=workload.name, repetition=block + 1, warmup=False, block=block, position=position,
                started_at=started, finished_at=clock, status="ok", buffered=not workload.direct,
                job_file=fio.job_for(workload, ready), outputs=[RawOutput("", "fio", texts[fixture]), RawOutput("", fio.LOG_TOOL, fio_logs(rng, values))],
                device=ready.described, image_size=target.image_size, direct_io_loop=True,
                mkfs_command=None if target.filesystem == "raw" else [f"mkfs.{target.filesystem}", "-f" if target.filesystem != "ext4" else "-F", ready.top],
                mount_options_requested=target.mount_options, mount_options_effective=effective, fs_details=FS_DETAILS.get(target.filesystem, ""),
                data_pattern=workload.tool.data_pattern(), device_facts=device_facts(index % 8, target.image_size, target.name),
                timings={"provision": rng.uniform(0.3, 1.5), "layout": rng.uniform(0, 3), "drop_caches": rng.uniform(0.05, 0.2), "workload": workload_seconds, "parse": 0.01, "teardown": rng.uniform(0.1, 0.5)},
                metrics=metrics + monitored(rng, moved, target.filesystem, fs.compresses(effective, FS_DETAILS.get(target.filesystem, ""))),
            )  # fmt: skip
            db.record_run(study_run_id, record)
            position += 1
    db.finish_study_run(study_run_id, "finished", {})
    return study_run_id


def build(path: Path, args: argparse.Namespace) -> int:
    """The synthetic database; returns the last study run's id."""
    study = parse_study(study_text(args.targets, args.workloads), "scale.toml", base_dir=path.parent)
    study = replace(study, path=str(path.parent / "scale.toml"))
    env = environment.collect(path.parent)
    versions = {kind: FILESYSTEMS[kind].version() for kind in {t.filesystem for t in study.targets}}
    db = ResultsDB(str(path))
    rng = random.Random(11)
    last = 0
    for _ in range(args.study_runs):
        last = store_study_run(db, study, env, versions, args.runs, rng)
    db.engine.dispose()
    return last


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one command, in a process of its own (os.wait4
    returns that very child's resource usage)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        if child.returncode != 0:
            err.seek(0)
            out.seek(0)
            sys.exit(f"{' '.join(argv)} failed ({child.returncode}):\n{out.read().decode()[-2000:]}\n{err.read().decode()[-4000:]}")
    return seconds, usage.ru_maxrss * 1024


def stored(path: Path) -> tuple[int, int]:
    """Study runs and runs in the database."""
    db = ResultsDB(str(path))
    with db.engine.connect() as conn:
        runs = conn.execute(sa.select(sa.func.count()).select_from(tables.runs)).scalar()
    return len(db.study_runs()), runs


def line(name: str, results: list[tuple[float, int]], seconds: float | None = None, memory: float | None = None) -> str:
    """A command's figures: wall time (median, min of the runs) and peak RSS, against its targets."""
    times = [t for t, _ in results]
    peak = max(r for _, r in results)
    said = f"{name:<30} {len(results)}×: median {statistics.median(times):6.2f} s, min {min(times):6.2f} s, peak RSS {peak / 1e6:4.0f} MB"
    if seconds is not None:
        said += f"   target ≤ {seconds:g} s: {'met' if statistics.median(times) <= seconds else 'OVER'}"
    if memory is not None:
        said += f"; ≤ {memory / 1e6:.0f} MB: {'met' if peak <= memory else 'OVER'}"
    return said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, metavar="DIR", help="build the database in DIR and keep it (reused if it is there)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command")
    parser.add_argument("--study-runs", type=int, default=5)
    parser.add_argument("--targets", type=int, default=10, choices=range(2, len(TARGETS) + 1))
    parser.add_argument("--workloads", type=int, default=20, choices=range(1, len(BUILTIN) + len(OWN) + 1))
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fslab-report-scale-", dir="/var/tmp") as tmp:
        root = args.keep.absolute() if args.keep else Path(tmp)
        root.mkdir(exist_ok=True)
        path = root / "scale.db"
        reused = path.exists()
        start = time.perf_counter()
        last = ResultsDB(str(path)).study_run()["id"] if reused else build(path, args)
        built = time.perf_counter() - start
        study_runs, runs = stored(path)
        size = sum(p.stat().st_size for p in root.glob("scale.db*"))
        shape = "" if reused else f" ({args.targets} targets × {args.workloads} workloads × {args.runs} runs each)"
        print(f"database: {study_runs} study runs{shape}, {runs} runs, {size / 1e6:.0f} MB, " + (f"reused: {path}" if reused else f"built in {built:.0f} s"))
        env = os.environ | {"PYTHONPATH": str(ROOT / "src"), "FSLAB_DB": str(path)}
        # As an installed fslab starts: from compiled bytecode (pip compiles it as it installs;
        # without it every start compiles fslab's modules again, a tenth of a second).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src" / "fslab")], check=True)
        fslab = [sys.executable, "-m", "fslab"]
        out = Path(tmp)
        summary_files = root / "reports" / file_name(f"scale-{last}")
        kept = summary_files.exists()
        summary = [*fslab, "summary", str(last)]
        print(f"each command in a process of its own ({sys.executable} -m fslab, fslab from {ROOT / 'src'}), the last study run:")
        # `fslab run` writes runs.csv and runs.json as it ends, so a summary asked for later finds
        # them current and leaves them; without them (deleted), it writes them as well.
        results = []
        for _ in range(args.repeat):
            for name in ("runs.csv", "runs.json"):
                (summary_files / name).unlink(missing_ok=True)
            results.append(timed(summary, env, out))
        print(line(f"fslab summary {last} (writing runs.*)", results), flush=True)
        commands = [
            (f"fslab summary {last}", summary, 1.0, None, args.repeat),
            (f"fslab report {last}", [*fslab, "report", str(last), "-o", str(out / "page")], 3.0, 500e6, args.repeat),
            (f"fslab report {last} --figures", [*fslab, "report", str(last), "-o", str(out / "figures"), "--figures"], None, None, 1),
        ]
        for name, argv, seconds, memory, times in commands:
            results = [timed(argv, env, out) for _ in range(times)]
            print(line(name, results, seconds, memory), flush=True)
        if not kept:  # what `fslab summary` wrote beside the database
            shutil.rmtree(summary_files, ignore_errors=True)
            with contextlib.suppress(OSError):
                (root / "reports").rmdir()


if __name__ == "__main__":
    main()
