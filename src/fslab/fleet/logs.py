"""What the libraries under a worker log — procrastinate (a job's end, its listener or heartbeat
cut off) and psycopg's pool (a connection it tries again) — said as the worker says its own
lines: one line each, with its innermost cause, never a traceback. What each is about the worker
has said or handles itself (a unit failed, the database away: tried again); a traceback there
read as fslab's own failure."""

from __future__ import annotations

import logging
from collections.abc import Callable

LIBRARIES = ("procrastinate", "psycopg")


class _OneLine(logging.Handler):
    def __init__(self, say: Callable[[str], None]):
        super().__init__(logging.WARNING)
        self.say = say

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = " ".join(record.getMessage().split())
            error = record.exc_info[1] if record.exc_info else None
            if error is not None:
                line += f" ({type(innermost(error)).__name__}: {' '.join(str(innermost(error)).split())})"
            self.say(line)
        except Exception:  # noqa: BLE001  (as logging's own handlers: said on stderr, the worker goes on)
            self.handleError(record)


def innermost(error: BaseException) -> BaseException:
    """The cause at the end of an exception's chain (the driver's own error, under the library's)."""
    seen = {id(error)}
    while (cause := error.__cause__ or error.__context__) is not None and id(cause) not in seen:
        seen.add(id(cause))
        error = cause
    return error


def said_in_one_line(say: Callable[[str], None]) -> None:
    """From now on, the libraries' warnings and errors go to `say`, one line each, and nowhere else."""
    handler = _OneLine(say)
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.propagate = False  # not also to Python's last resort, traceback and all
