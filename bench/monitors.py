#!/usr/bin/env python3
"""Monitors: do they move the result? The same short fio job — 4 KiB random reads, direct I/O,
QD16, on a file of ext4 on a loop image in /var/tmp — measured with and without every monitor a
run has (CPU sampler, device traffic, space), alternated in pairs (off on, on off, …) so
that drift falls on both sides alike. Prints
  - the median of the pairs' IOPS ratios, with monitors ÷ without (target: 0.99–1.01), and
  - each monitor's own cost: median seconds in start and stop (at the window's edges, inside
    what fio measures only if the workload were timed by fslab) and in values (after it), and
    the CPU time fslab itself used while fio ran (the sampler thread's cost).

Run as root: python bench/monitors.py [--pairs 6] [--runtime 3]
`--smoke`: two pairs of 0.25 s on a 32 MiB file: proves the script runs, in seconds; its figures
are printed, not judged against the target.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from fslab.core.system import run
from fslab.core.workdir import Workdir
from fslab.devices.layers import Stack
from fslab.devices.loop import attached, image_file, on_loops
from fslab.filesystems import FILESYSTEMS
from fslab.model import Target
from fslab.monitors import Monitor, WorkloadSaid, collect, for_run, measuring

MiB = 2**20


class Timed:
    """A monitor with the seconds of each of its calls written down."""

    def __init__(self, monitor: Monitor, seconds: dict[str, dict[str, list[float]]]):
        self.monitor, self.name, self.seconds = monitor, monitor.name, seconds[monitor.name]

    def _timed(self, call: str, *args) -> None:  # noqa: ANN002
        start = time.perf_counter()
        getattr(self.monitor, call)(*args)
        self.seconds[call].append(time.perf_counter() - start)

    def start(self) -> None:
        self._timed("start")

    def stop(self) -> None:
        self._timed("stop")

    def values(self, workload, found) -> None:  # noqa: ANN001
        self._timed("values", workload, found)


def fio(path: Path, file_size: int, runtime: float, scratch: Path) -> dict:
    # in ms: fio takes a bare runtime in whole seconds, and '0.5' as none (it then read the file once)
    argv = [
        "fio",
        "--name=bench",
        f"--filename={path}",
        "--rw=randread",
        "--bs=4k",
        "--direct=1",
        "--ioengine=libaio",
        "--iodepth=16",
        f"--size={file_size}",
        f"--runtime={runtime * 1000:g}ms",
        "--time_based",
        "--randrepeat=1",
        "--output-format=json",
    ]
    return json.loads(run(argv, cwd=scratch).stdout)["jobs"][0]["read"]


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--runtime", type=float, default=3.0)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args()
    pairs, runtime, file_size = (2, 0.25, 32 * MiB) if args.smoke else (args.pairs, args.runtime, 256 * MiB)
    iops: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    seconds: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    found_last = None
    load_before = Path("/proc/loadavg").read_text().split()[0]
    with tempfile.TemporaryDirectory(prefix="fslab-monitors-", dir="/var/tmp") as tmp:
        workdir = Workdir(Path(tmp) / "wd")
        workdir.prepare()
        target = Target("bench", "ext4", (), "", 2 * file_size, "sparse")
        journal = workdir.journal
        with (
            image_file(journal, workdir.images, "bench", target.image_size, fill=None) as image,
            attached(journal, image) as loop,
        ):
            with FILESYSTEMS["ext4"].provision(
                journal, Stack.on(on_loops([loop])), workdir.mounts / "bench", target
            ) as made:
                assert made.directory is not None, "ext4 mounted"
                path = made.directory / "bench.0"
                layout = ["fio", "--name=layout", f"--filename={path}", "--rw=write", "--bs=1m", "--direct=1"]
                run([*layout, f"--size={file_size}", "--output=/dev/null"], cwd=Path(tmp))
                for pair in range(pairs):
                    for monitored in (False, True) if pair % 2 == 0 else (True, False):
                        monitors = (
                            [Timed(m, seconds) for m in for_run([loop.device], made.directory, None)]
                            if monitored
                            else []
                        )
                        before = own_cpu()
                        with measuring(monitors):
                            result = fio(path, file_size, runtime, Path(tmp))
                        cpu[monitored].append(own_cpu() - before)
                        if monitors:
                            found_last = collect(monitors, WorkloadSaid(read_bytes=result["io_bytes"]))
                        iops[monitored].append(result["iops"])
    ratios = [on / off for on, off in zip(iops[True], iops[False])]
    median = statistics.median(ratios)
    print(f"{pairs} pairs, {runtime:g} s of 4 KiB random reads (direct, QD16) on ext4 on a loop image")
    print(
        f"median IOPS without monitors {statistics.median(iops[False]):.0f}, with {statistics.median(iops[True]):.0f}"
    )
    print(f"pair ratios (with ÷ without): {', '.join(f'{r:.4f}' for r in ratios)}")
    judged = "smoke: not judged" if args.smoke else f"{'within' if 0.99 <= median <= 1.01 else 'OUTSIDE'} 0.99–1.01"
    print(f"median IOPS ratio: {median:.4f} ({judged})")
    noise = {side: statistics.stdev(v) / statistics.mean(v) for side, v in iops.items()}
    print(
        f"run-to-run CV of IOPS: {noise[False]:.1%} without monitors, {noise[True]:.1%} with; "
        f"load average before {load_before}, after {Path('/proc/loadavg').read_text().split()[0]}"
    )
    if noise[False] > 0.01 and not args.smoke:
        print(
            "the machine's own noise exceeds 1 %: the ratio cannot be "
            "judged to 1 % here; the monitors' cost below is what they take"
        )
    extra = statistics.median(cpu[True]) - statistics.median(cpu[False])
    print(
        f"fslab's own CPU while fio ran: {statistics.median(cpu[False]) * 1000:.1f} "
        f"ms without monitors, {statistics.median(cpu[True]) * 1000:.1f} ms with "
        f"({extra / runtime:.2%} of one CPU)"
    )
    print(f"{'monitor':<8} {'start (ms)':>10} {'stop (ms)':>10} {'values (ms)':>11}")
    for name, calls in seconds.items():
        print(
            f"{name:<8} "
            + " ".join(
                f"{statistics.median(calls[c]) * 1000:>{w}.3f}"
                for c, w in (("start", 10), ("stop", 10), ("values", 11))
            )
        )
    if found_last is not None:
        print("last run's values: " + ", ".join(f"{v.name} {v.value:.4g} {v.unit}" for v in found_last.values))
        for flag in found_last.flags:
            print(f"flag ({flag.kind}): {flag.says}")


if __name__ == "__main__":
    main()
