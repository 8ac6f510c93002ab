#!/usr/bin/env python3
"""fslab's start-up: the CPU time (user + system) a fresh process takes to import the commands
(`import fslab.cli`) and to print `fslab --help`, `fslab cleanup --help` and `fslab run --help`,
each the median of REPEAT processes, beside a Python that imports nothing of fslab (what no
change to fslab can take away). CPU time, not wall time: another load on the machine moves it
little. Every fslab process pays this before it does anything — a test's, a fleet worker's, and
20 times over in the tests' QEMU guests (software emulation).

Run: .venv/bin/python bench/startup.py [--repeat 5]
`--smoke`: one process per command: proves the script runs, in seconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

COMMANDS = {
    "python (no fslab)": ["-c", "pass"],
    "import fslab.cli": ["-c", "import fslab.cli"],
    "fslab --help": ["-m", "fslab", "--help"],
    "fslab cleanup --help": ["-m", "fslab", "cleanup", "--help"],
    "fslab run --help": ["-m", "fslab", "run", "--help"],
}


def cpu_seconds(args: list[str]) -> float:
    """The CPU time of one fresh Python process running `args` (it must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "120"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="processes per command; the median is printed")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args()
    repeat = 1 if args.smoke else args.repeat
    print(f"fslab start-up: CPU seconds (user + system) of a fresh process, median of {repeat} (min–max)")
    for name, argv in COMMANDS.items():
        times = [cpu_seconds(argv) for _ in range(repeat)]
        print(f"  {name:<22} {statistics.median(times):6.3f} s   ({min(times):.3f}–{max(times):.3f})")


if __name__ == "__main__":
    main()
