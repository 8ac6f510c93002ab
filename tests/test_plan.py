from collections import Counter
from pathlib import Path

from fslab.plan import interleaved
from fslab.study import parse_study

STUDY = """\
[study]
name = "plan"
workloads = ["baseline"]
[[target]]
filesystem = ["ext4", "xfs", "btrfs"]
"""


def cells():
    return parse_study(STUDY, "s.toml", base_dir=Path(".")).cells


def test_every_block_holds_every_cell_once():
    plan = interleaved(cells(), 5, seed=7)
    assert len(plan) == 5 * 12
    for block in range(1, 6):
        keys = [p.cell.key for p in plan if p.block == block]
        assert Counter(keys) == Counter(c.key for c in cells())
        assert [p.position for p in plan if p.block == block] == list(range(1, 13))


def test_blocks_are_shuffled_differently_and_reproducibly():
    plan = interleaved(cells(), 5, seed=7)
    orders = {tuple(p.cell.key for p in plan if p.block == b) for b in range(1, 6)}
    assert len(orders) > 1, "every block in the same order is not interleaving"
    assert [p.cell.key for p in interleaved(cells(), 5, seed=7)] == [p.cell.key for p in plan]
    assert [p.cell.key for p in interleaved(cells(), 5, seed=8)] != [p.cell.key for p in plan]
