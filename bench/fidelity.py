#!/usr/bin/env python3
"""Fidelity: does fslab measure what fio measures by hand?

The same fio job (4 KiB random reads, QD16, direct I/O, 8 s) on ext4 on a 4 GiB loop image,
alternated A B A B for 5 pairs: A = by hand (losetup, mkfs.ext4, mount, fio on the command
line, IOPS read from fio's JSON), B = `fslab run` of a one-cell study. Prints each pair and the
median ratio fslab/hand; the target is 0.97–1.03.

Run as root: python bench/fidelity.py [--pairs 5] [--runtime 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import sqlalchemy as sa

IMAGE_SIZE = 4 * 2**30
FIO_ARGS = ["--rw=randread", "--bs=4k", "--iodepth=16", "--size=1g", "--ioengine=libaio", "--direct=1", "--randseed=24301", "--refill_buffers", "--group_reporting"]
STUDY = """\
[study]
name = "fidelity"
repetitions = 1
image_size = "4GiB"
[[target]]
filesystem = "ext4"
[[workload]]
name = "rand_read"
rw = "randread"
bs = "4k"
iodepth = 16
size = "1GiB"
runtime = "{runtime}s"
"""


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def by_hand(scratch: Path, runtime: int) -> float:
    """What a careful person types: fresh image, mkfs, mount, drop caches, fio."""
    image, mnt = scratch / "hand.img", scratch / "hand-mnt"
    mnt.mkdir(exist_ok=True)
    with open(image, "wb") as f:
        f.truncate(IMAGE_SIZE)
    device = sh("losetup", "--direct-io=on", "--find", "--show", str(image)).strip()
    try:
        sh("mkfs.ext4", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", device)
        sh("mount", device, str(mnt))
        try:
            # lay the file out first, as fio would, then drop caches and measure
            sh("fio", "--name=rand_read", f"--directory={mnt}", *FIO_ARGS, "--create_only=1")
            sh("sync")
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
            out = sh("fio", "--name=rand_read", f"--directory={mnt}", *FIO_ARGS, f"--runtime={runtime}", "--time_based", "--output-format=json")
            return json.loads(out[out.index("{"):])["jobs"][0]["read"]["iops"]
        finally:
            sh("umount", str(mnt))
    finally:
        sh("losetup", "--detach", device)
        image.unlink()


def through_fslab(scratch: Path, runtime: int, pair: int) -> float:
    study = scratch / "fidelity.toml"
    study.write_text(STUDY.format(runtime=runtime))
    db = scratch / "fidelity.db"
    subprocess.run([sys.executable, "-m", "fslab", "run", str(study), "--db", str(db), "--workdir", str(scratch / "wd"), "--seed", str(pair)], check=True, capture_output=True)
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "select m.value from metrics m join runs r on r.id = m.run_id where m.name = 'read_iops' order by r.id desc limit 1"
        )).scalar_one()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--runtime", type=int, default=8)
    args = parser.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory(prefix="fslab-fidelity-", dir="/var/tmp") as tmp:
        scratch = Path(tmp)
        print(f"{'pair':>4}  {'by hand IOPS':>12}  {'fslab IOPS':>10}  {'fslab/hand':>10}")
        for pair in range(1, args.pairs + 1):
            hand = by_hand(scratch, args.runtime)
            fslab = through_fslab(scratch, args.runtime, pair)
            ratios.append(fslab / hand)
            print(f"{pair:>4}  {hand:>12,.0f}  {fslab:>10,.0f}  {fslab / hand:>10.3f}", flush=True)
    median = statistics.median(ratios)
    verdict = "within" if 0.97 <= median <= 1.03 else "OUTSIDE"
    print(f"median ratio fslab/hand over {args.pairs} pairs: {median:.3f} ({verdict} the 0.97–1.03 target)")


if __name__ == "__main__":
    main()
