"""fio writing a block device whole once: an image made full (devices/loop.image_file's `fill`),
so that no run measures the host filesystem allocating its blocks."""

from __future__ import annotations

from fslab.core.journal import Journal
from fslab.core.scratch import scratch_directory
from fslab.core.system import run_held


def fill_device(journal: Journal, device: str) -> None:
    """Write the whole of `device` once, in 1 MiB direct writes."""
    # fio runs in a private directory of its own: it writes side files into its current one
    with scratch_directory(journal) as scratch:
        run_held(
            journal,
            [
                "fio",
                "--name=fill",
                f"--filename={device}",
                "--rw=write",
                "--bs=1m",
                "--iodepth=16",
                "--direct=1",
                "--ioengine=libaio",
                "--output=/dev/null",
            ],
            cwd=scratch,
        )
