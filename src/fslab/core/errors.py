"""fslab's one error family. Everything a user can act on is a `FslabError` whose message names
the file, field, option or path and says what to do; the command line catches it in one place
(cli.main) and prints it without a traceback. Anything else escaping is a bug in fslab."""

from __future__ import annotations


class FslabError(Exception):
    """A problem the user can act on: the message is what they read."""


class Refused(FslabError):
    """The guard refused an option, a name, a path, a device or a journal entry as not fslab's
    to use; nothing was attached, formatted, deleted or signalled because of it."""
