"""Ctrl-C (SIGINT) and `kill` (SIGTERM): either ends fslab "interrupted", after it has released
what it holds, whatever it is doing when the signal comes."""

from __future__ import annotations

import signal

_received: list[int] = []  # the signals received, for what an interruption cannot be lost to


def interrupt_on_signals() -> None:
    """From now on SIGINT and SIGTERM raise KeyboardInterrupt, whatever fslab inherited: Python
    leaves SIGINT ignored when fslab starts with it ignored (a background job of a non-interactive
    shell, some CI runners), and a user's Ctrl-C or `kill -INT` would then go unheard."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    _received.append(signum)
    raise KeyboardInterrupt(f"signal {signum}")


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt again if a signal came: an error raised while releasing what the
    interruption stopped replaces the KeyboardInterrupt, and would be taken for a run's failure."""
    if _received:
        raise KeyboardInterrupt(f"signal {_received[0]}")


def exit_status() -> int:
    """The exit status of a process a signal ended: 128 + its number (130 for Ctrl-C)."""
    return 128 + (_received[0] if _received else signal.SIGINT)
