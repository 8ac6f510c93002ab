#!/usr/bin/env python3
"""A lab boot's time (fslab/lab/vm.py): from `vm.boot` called to the guest's command started —
the initramfs made, QEMU started in its masking namespace, the kernel booted under the
accelerator the host has (TCG here), the host's root over 9p, the scratch disk mounted — and to
the boot's end (powered off, cleaned up), in wall time; and the CPU time the boot cost (QEMU's
and fslab's), which another load on the machine moves little: on an idle machine a TCG boot's
wall time is about its CPU time. Target: the command starts within 10 s under TCG here.

Run (as root): .venv/bin/python bench/lab_boot.py [--boots 3] [--kernel RELEASE]
`--smoke`: one boot; skipped (said) without root or QEMU; judges nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from fslab.lab import kernels, vm

TARGET_SECONDS = 10.0


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def one_boot(kernel: kernels.PreparedKernel, accelerator: str) -> tuple[float | None, float, float]:
    """(seconds to the command, seconds to the end, CPU seconds) of one boot running `true`."""
    with tempfile.TemporaryDirectory(prefix="fslab-bench-boot-") as directory:
        share = Path(directory)
        seen: list[float] = []
        done = threading.Event()

        def watch(started: float) -> None:  # the host's clock at which the guest says it started the command
            while not done.wait(0.05):
                if (share / "started").exists():
                    seen.append(time.monotonic() - started)
                    return

        cpu, started = cpu_seconds(), time.monotonic()
        watcher = threading.Thread(target=watch, args=(started,), daemon=True)
        watcher.start()
        try:
            result = vm.boot(kernel, "true", share=share, spec=vm.VmSpec(accelerator=accelerator), timeout=300)
        finally:
            done.set()
            watcher.join()
        total = time.monotonic() - started
        if result.status != 0:
            sys.exit(f"the boot did not run its command (status {result.status}):\n{result.console[-2000:]}")
        return (seen[0] if seen else None), total, cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=3, help="boots; medians printed")
    parser.add_argument("--kernel", help="a prepared or installed release (default: the newest installed)")
    parser.add_argument("--smoke", action="store_true", help="one boot, skipped without root or QEMU; nothing judged")
    args = parser.parse_args()
    reason = vm.unavailable_reason()
    if reason:
        if args.smoke:
            print(f"skipped: {reason}")
            return
        sys.exit(reason)
    releases = kernels.installed_releases()
    release = args.kernel or (releases[-1] if releases else None)
    if release is None:
        sys.exit("no installed kernel to boot: name one with --kernel")
    kernel = kernels.installed(release) if release in releases else kernels.prepare(release)
    accelerator = vm.accelerator()
    boots = 1 if args.smoke else args.boots
    vm.elf_kernel(kernel)  # unpacked once, before the first boot's clock
    print(f"lab boot of {release} under {accelerator}, {boots} boot(s); load average {os.getloadavg()[0]:.1f}")
    figures = [one_boot(kernel, accelerator) for _ in range(boots)]
    to_command = [f[0] for f in figures if f[0] is not None]
    shown = f"{statistics.median(to_command):.2f}" if to_command else "unknown"
    print(f"boot to the command: {shown} s wall (median)")
    print(f"boot to the end: {statistics.median(f[1] for f in figures):.2f} s wall (median)")
    print(f"CPU per boot: {statistics.median(f[2] for f in figures):.2f} s (QEMU's and fslab's)")
    print(f"load average at the end {os.getloadavg()[0]:.1f}: the wall times grow with it, the CPU time little")
    if not args.smoke and to_command:
        word = "met" if statistics.median(to_command) <= TARGET_SECONDS else "MISSED"
        print(f"target ≤ {TARGET_SECONDS:.0f} s to the command: {word}")


if __name__ == "__main__":
    main()
