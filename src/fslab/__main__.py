"""The `fslab` command's entry point (and `python -m fslab`): Ctrl-C and `kill` are heard from
the first moment, before the commands' imports (seconds in an emulated guest), and one
that comes during them ends fslab quietly: nothing is held yet."""

import os
import sys

from fslab.interruption import interrupt_on_signals


def main() -> None:
    interrupt_on_signals()
    # fslab does no linear algebra, and OpenBLAS (numpy's, and scipy's own copy) would start a
    # thread per core with its buffers as it loads: a tenth of a second of CPU in every command
    # that computes a statistic, `fslab summary` too (bench/pg_scale.py). Read as it loads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from fslab.cli import main as command
    except KeyboardInterrupt:
        sys.exit(130)
    command()


if __name__ == "__main__":
    main()
