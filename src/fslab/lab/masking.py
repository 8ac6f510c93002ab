"""The host's secrets masked from a guest: not yet (the first boot runs QEMU unmasked)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def wrap(argv: Sequence[str], *, keep: Sequence[Path]) -> list[str]:
    return list(argv)
