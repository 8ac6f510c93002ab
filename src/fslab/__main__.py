"""The `fslab` command's entry point (and `python -m fslab`): Ctrl-C and `kill` are heard from
the first moment, before the commands' imports (seconds in an emulated guest), and one
that comes during them ends fslab quietly: nothing is held yet."""

import sys

from fslab.interruption import interrupt_on_signals


def main() -> None:
    interrupt_on_signals()
    try:
        from fslab.cli import main as command
    except KeyboardInterrupt:
        sys.exit(130)
    command()


if __name__ == "__main__":
    main()
