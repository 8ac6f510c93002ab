"""Ctrl-C (SIGINT) and `kill` (SIGTERM): either ends fslab "interrupted", after it has released
what it holds, whatever it is doing when the signal comes."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_received: list[int] = []  # the signals received, for what an interruption cannot be lost to
_releasing = [0]  # how deep inside `releasing` blocks the main thread is
_held_back: list[int] = []  # signals received inside one, acted on when it ends


def interrupt_on_signals() -> None:
    """From now on SIGINT and SIGTERM raise KeyboardInterrupt, whatever fslab inherited: Python
    leaves SIGINT ignored when fslab starts with it ignored (a background job of a non-interactive
    shell, some CI runners), and a user's Ctrl-C or `kill -INT` would then go unheard."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    _received.append(signum)
    if _releasing[0]:
        _held_back.append(signum)
        return
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def releasing() -> Iterator[None]:
    """A block that releases something and records it (journal.holding): a signal that comes
    meanwhile is acted on when the block has ended, not halfway through it — else the release
    is done and never recorded, and the next fslab finds it "left by an interrupted fslab". The
    same for a command's start (system.run): acted on once fslab has the process to kill.
    (Signals reach the main thread alone: another thread's block holds none back.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _releasing[0] += 1
    try:
        yield
    finally:
        _releasing[0] -= 1
        held_back = list(_held_back) if not _releasing[0] else []
        if held_back:
            _held_back.clear()  # an error leaving the block instead: _received keeps the signal (raise_if_interrupted)
    if held_back:
        raise KeyboardInterrupt(f"signal {held_back[0]}")


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt again if a signal came: an error raised while releasing what the
    interruption stopped replaces the KeyboardInterrupt, and would be taken for a run's failure."""
    if _received:
        raise KeyboardInterrupt(f"signal {_received[0]}")


def interrupted() -> bool:
    """Whether a signal came (even one an error while releasing has since replaced)."""
    return bool(_received)


def exit_status() -> int:
    """The exit status of a process a signal ended: 128 + its number (130 for Ctrl-C)."""
    return 128 + (_received[0] if _received else signal.SIGINT)
