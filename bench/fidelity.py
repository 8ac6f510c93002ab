#!/usr/bin/env python3
"""Fidelity: does fslab measure what fio measures by hand?

The same fio job (4 KiB random reads, QD16, direct I/O, 8 s) on ext4 on a 4 GiB loop image,
alternated A B A B for 5 pairs: A = by hand (losetup, mkfs.ext4, mount, fio on the command
line, IOPS read from fio's JSON), B = `fslab run --no-ceiling` of a one-cell study (its one run,
no raw reference beside it). Prints each pair and the median ratio fslab/hand; the target is
0.97–1.03.

Run as root: python bench/fidelity.py [--pairs 5] [--runtime 8]
`--smoke`: one pair of 0.5 s on a 128 MiB image (a 16 MiB file): proves the script runs, in
seconds; its figures are printed, not judged against the target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

FIO_ARGS = [
    "--rw=randread", "--bs=4k", "--iodepth=16", "--ioengine=libaio", "--direct=1", "--randseed=24301",
    "--refill_buffers", "--group_reporting",
]  # fmt: skip
STUDY = """\
[study]
name = "fidelity"
repetitions = 1
image_size = "{image_mib}MiB"
[[target]]
filesystem = "ext4"
[[workload]]
name = "rand_read"
rw = "randread"
bs = "4k"
iodepth = 16
size = "{size_mib}MiB"
runtime = "{runtime:g}s"
"""


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


@dataclass(frozen=True)
class Size:
    """The image (MiB), the file fio reads (MiB) and its runtime (s: fio by hand reads whole ones,
    so it is given in ms), alike for both sides."""

    image_mib: int
    size_mib: int
    runtime: float

    def fio_args(self) -> list[str]:
        return [*FIO_ARGS, f"--size={self.size_mib}m"]


def by_hand(scratch: Path, size: Size) -> float:
    """What a careful person types: fresh image, mkfs, mount, drop caches, fio."""
    image, mnt = scratch / "hand.img", scratch / "hand-mnt"
    mnt.mkdir(exist_ok=True)
    with open(image, "wb") as f:
        f.truncate(size.image_mib * 2**20)
    device = sh("losetup", "--direct-io=on", "--find", "--show", str(image)).strip()
    try:
        sh("mkfs.ext4", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", device)
        sh("mount", device, str(mnt))
        try:
            # lay the file out first, as fio would, then drop caches and measure
            sh("fio", "--name=rand_read", f"--directory={mnt}", *size.fio_args(), "--create_only=1")
            sh("sync")
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
            measured = [f"--runtime={size.runtime * 1000:g}ms", "--time_based", "--output-format=json"]
            out = sh("fio", "--name=rand_read", f"--directory={mnt}", *size.fio_args(), *measured)
            return json.loads(out[out.index("{") :])["jobs"][0]["read"]["iops"]
        finally:
            sh("umount", str(mnt))
    finally:
        sh("losetup", "--detach", device)
        image.unlink()


def through_fslab(scratch: Path, size: Size, pair: int) -> float:
    study = scratch / "fidelity.toml"
    study.write_text(STUDY.format(image_mib=size.image_mib, size_mib=size.size_mib, runtime=size.runtime))
    db = scratch / "fidelity.db"
    # One run against one fio by hand: no raw reference beside it (a ceiling's runs would be stored
    # in the same study run), and the figure read is ext4's in the study run just made.
    argv = ["run", str(study), "--db", str(db), "--workdir", str(scratch / "wd"), "--seed", str(pair), "--no-ceiling"]
    subprocess.run([sys.executable, "-m", "fslab", *argv], check=True, capture_output=True)
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        return conn.execute(
            sa.text(
                "select m.value from metrics m join runs r on r.id = m.run_id"
                " where m.name = 'read_iops' and r.target = 'ext4' "
                "and r.study_run_id = (select max(id) from study_runs)"
            )
        ).scalar_one()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--runtime", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, in seconds: the script runs; nothing judged")
    args = parser.parse_args()
    pairs, size = (1, Size(128, 16, 0.5)) if args.smoke else (args.pairs, Size(4096, 1024, args.runtime))
    ratios = []
    with tempfile.TemporaryDirectory(prefix="fslab-fidelity-", dir="/var/tmp") as tmp:
        scratch = Path(tmp)
        print(f"{'pair':>4}  {'by hand IOPS':>12}  {'fslab IOPS':>10}  {'fslab/hand':>10}")
        for pair in range(1, pairs + 1):
            hand = by_hand(scratch, size)
            fslab = through_fslab(scratch, size, pair)
            ratios.append(fslab / hand)
            print(f"{pair:>4}  {hand:>12,.0f}  {fslab:>10,.0f}  {fslab / hand:>10.3f}", flush=True)
    median = statistics.median(ratios)
    verdict = f"{'within' if 0.97 <= median <= 1.03 else 'OUTSIDE'} the 0.97–1.03 target"
    verdict = "smoke: not judged" if args.smoke else verdict
    print(f"median ratio fslab/hand over {pairs} pair(s): {median:.3f} ({verdict})")


if __name__ == "__main__":
    main()
