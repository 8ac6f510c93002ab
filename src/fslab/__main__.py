"""The `fslab` command's entry point (and `python -m fslab`): Ctrl-C and `kill` are heard from
the first moment, before the commands' imports (seconds in an emulated guest), and one
that comes during them ends fslab quietly: nothing is held yet. A password given in a URL is
hidden from `ps` as soon (core/argv_passwords.py)."""

import os
import sys

from fslab.core.argv_passwords import hide as hide_passwords
from fslab.core.interruption import exit_status, interrupt_on_signals


def main() -> None:
    interrupt_on_signals()
    password_hidden = hide_passwords()  # from `ps`, before anything else: every user of the machine reads it there
    # fslab does no linear algebra, and OpenBLAS (numpy's, and scipy's own copy) would start a
    # thread per core with its buffers as it loads: a tenth of a second of CPU in every command
    # that computes a statistic, `fslab summary` too (bench/pg_scale.py). Read as it loads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from fslab.cli import main as command
    except KeyboardInterrupt:
        sys.exit(exit_status())
    command(password_hidden)


if __name__ == "__main__":
    main()
