"""A password given in a database URL on fslab's command line (`--db postgresql://u:SECRET@host/db`)
is readable by every user of the machine for as long as fslab runs: /proc/PID/cmdline, what `ps`
shows. As it starts, fslab overwrites it there with stars (Python's own copy of its arguments
keeps it: fslab connects with it), and says how to give it instead (PGPASSWORD, ~/.pgpass, a
service file: docs/fleet.md).

Not setproctitle: it joins the arguments into one and renames the process (its comm: what
`ps -C`, `pgrep` and `top` show) after its title's start; overwriting the password's own bytes
where the kernel shows them changes nothing else."""

from __future__ import annotations

import os
import re
import sys

# A URL's password: between its user's colon and its host's @ (the last @ of the argument: rather
# too much hidden than too little), or its query's password=; never across an argument's end (a
# NUL, in the kernel's copy).
_PASSWORD = re.compile(rb"((?<![\w+.-])[A-Za-z][\w+.-]*://[^:/@\0]*:)([^\0]*)(?=@)|([?&]password=)([^&#\0]*)")


def hide() -> bool | None:
    """Each password in this process's arguments replaced by as many stars where `ps` reads them
    (the arguments' own memory, through /proc/self/mem); None if none was given, else whether
    they are hidden now."""
    if not any(_PASSWORD.search(os.fsencode(arg)) for arg in sys.orig_argv):
        return None
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # after the command's name, which may hold anything
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end: the stat's fields 48 and 49 (proc(5))
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(start)
            hidden = _PASSWORD.sub(_stars, memory.read(end - start))
            memory.seek(start)
            memory.write(hidden)
    except (OSError, ValueError, IndexError):  # no /proc to write in (a kernel before 3.5 has no arg_start)
        return False
    return True


def _stars(found: re.Match[bytes]) -> bytes:
    prefix, secret = (found[1], found[2]) if found[1] is not None else (found[3], found[4])
    return prefix + b"*" * len(secret)
