"""The order of runs: every cell once per block, each block in a new random order.

Interleaving spreads the machine's drift over all cells instead of loading it onto the last
ones; the seed makes the order reproducible and is recorded with the study run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fslab.study import Cell


@dataclass(frozen=True)
class PlannedRun:
    block: int  # 1-based; also the repetition number of every cell in it
    position: int  # 1-based place within the block
    cell: Cell


def interleaved(cells: list[Cell], blocks: int, seed: int) -> list[PlannedRun]:
    """`blocks` randomised blocks, each holding every cell once."""
    rng = random.Random(seed)
    plan = []
    for block in range(1, blocks + 1):
        order = list(cells)
        rng.shuffle(order)
        plan += [PlannedRun(block, position, cell) for position, cell in enumerate(order, start=1)]
    return plan


def new_seed() -> int:
    return random.SystemRandom().randrange(2**31)
