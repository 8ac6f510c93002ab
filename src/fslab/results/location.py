"""Where the results database is, and whether fslab may use it: the --db value (else $FSLAB_DB,
else fslab.db), the report folder beside it, and an engine for it — a database URL, or an SQLite
file checked to be a regular file (or a new name) before SQLite writes its pages there; its
driver's errors of a database that failed (gone, locked, its server away) raised as DatabaseLost.
SQLAlchemy is imported by what makes an engine or reads a URL: naming a database needs none."""

from __future__ import annotations

import os
import stat
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fslab.core.errors import FslabError

if TYPE_CHECKING:
    import sqlalchemy as sa

DEFAULT_DB = "fslab.db"
DB_ENV = "FSLAB_DB"


class DatabaseUnusable(FslabError):
    """The results database named cannot be opened, or is not fslab's to write."""


class DatabaseLost(DatabaseUnusable):
    """The results database failed a command: its server stopped or out of reach, its file gone,
    locked or damaged. What fslab committed before stays committed. Every engine fslab makes
    raises this in place of the driver's error (engine_for: the one seam), so that no command
    shows a traceback for it; `noting` adds what the caller knows was not stored, and what then."""

    def __init__(self, location: str, reason: str, check: str, then: str = "run the command again") -> None:
        self.location, self.reason, self.check, self.then = location, reason, check, then
        super().__init__(f"the results database {location} failed: {reason}; {check}, then {then}")

    def noting(self, note: str, then: str | None = None) -> DatabaseLost:
        """The same failure, with `note` (what was not stored) and what to do `then`, once it answers."""
        stop = "" if self.reason.endswith((".", "?", "!")) else "."  # a driver's may end a sentence itself
        return DatabaseLost(self.location, f"{self.reason}{stop} {note}", self.check, then or self.then)


def resolve_location(db: str | None) -> str:
    """The --db value, else $FSLAB_DB, else fslab.db in the current directory."""
    return db or os.environ.get(DB_ENV) or DEFAULT_DB


def reports_dir(location: str) -> Path:
    """Where report files go: beside an SQLite file, or in the current directory for a server."""
    return (Path.cwd() if "://" in location else Path(location).resolve().parent) / "reports"


# What the results database may not be: SQLite would write its pages over whatever is there.
_NOT_A_FILE = {
    stat.S_IFBLK: "a block device",
    stat.S_IFCHR: "a character device",
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}
BUSY_SECONDS = 5  # how long a store waits for another program's lock on an SQLite file before it fails
POSTGRESQL_DRIVER = "pip install 'psycopg[binary]' (psycopg 3, what SQLAlchemy uses for postgresql:// URLs)"


def engine_for(location: str, named: str = "--db") -> sa.Engine:
    """An engine for a database URL, or for an SQLite file after checking it is one fslab may
    write; `named`: what the user called it (an option, an argument), which a refusal names."""
    import sqlalchemy as sa

    engine = (
        sa.create_engine(f"sqlite:///{_sqlite_file(location, named)}")
        if "://" not in location
        else _engine_of_url(location, named)
    )
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    sa.event.listen(engine, "handle_error", partial(_lost, location))
    return engine


def failed(exc: BaseException, dbapi: Any, location: str) -> DatabaseLost | None:
    """The driver's error `exc` (of DB-API module `dbapi`) as a DatabaseLost, if it tells a database
    that failed rather than a statement fslab got wrong: a connection lost or refused, a file
    locked, gone or damaged (OperationalError, InterfaceError, a bare DatabaseError); else None."""
    if not isinstance(exc, (dbapi.OperationalError, dbapi.InterfaceError)) and type(exc) is not dbapi.DatabaseError:
        return None
    return DatabaseLost(shown(location), reason(exc, location), _check(location))


def _lost(location: str, context: sa.engine.ExceptionContext) -> None:
    """SQLAlchemy's handle_error event: its driver's error raised as a DatabaseLost (failed)."""
    if context.is_pre_ping:  # a pooled connection found dead before use: SQLAlchemy connects anew itself
        return
    lost = failed(context.original_exception, context.dialect.loaded_dbapi, location)
    if lost is not None:
        raise lost


def reason(exc: BaseException, location: str) -> str:
    """The driver's message, one line, without the URL's password should a driver quote it."""
    said = " ".join(str(exc).split())
    password = _password(location)
    return said.replace(password, "***") if password else said


def _password(location: str) -> str | None:
    if "://" not in location:
        return None
    import sqlalchemy as sa

    try:
        return sa.make_url(location).password
    except (sa.exc.ArgumentError, ValueError):
        return None


def what_to_do(location: str, named: str) -> str:
    """What a user does about a results database fslab cannot open."""
    if "://" not in location:
        return f"check that no other program holds it locked; else name another {named}, or restore it from a backup"
    # a server away (stopped, restarting, out of reach) says so in the reason
    return (
        "check that its server is up and reachable from here, and the "
        f"user's password (PGPASSWORD, ~/.pgpass), or name another {named}"
    )


def _check(location: str) -> str:
    """What a user checks of a results database that failed in the middle of a command."""
    if "://" not in location:
        return (
            f"check that {location} and its directory are still there and writable, "
            "and that no other program holds it locked"
        )
    return "check that its server is up and reachable from here"


def _engine_of_url(location: str, named: str) -> sa.Engine:
    import sqlalchemy as sa

    try:
        url = sa.make_url(location)
        if url.drivername == "postgresql":  # psycopg 3, whichever driver this SQLAlchemy defaults to
            url = url.set(drivername="postgresql+psycopg")
        # A server may be restarted, or a connection cut, between two runs of a long study: a
        # pooled connection is checked before it is used again.
        return sa.create_engine(url, pool_pre_ping=url.get_backend_name() != "sqlite")
    except ImportError as exc:
        hint = (
            POSTGRESQL_DRIVER
            if location.startswith("postgresql")
            else f"install the Python package that provides {exc.name}"
        )
        raise DatabaseUnusable(
            f"the results database {shown(location)} needs the database "
            f"driver {exc.name}, which is not installed: {hint}"
        ) from None
    except (sa.exc.ArgumentError, ValueError) as exc:  # a malformed URL, or an engine SQLAlchemy does not know
        why = (
            str(exc) if isinstance(exc, sa.exc.ArgumentError) else "its port is not a number"
        )  # a ValueError's text quotes the URL
        raise DatabaseUnusable(
            f"{named} {shown(location)}: {why}; write a file name for SQLite, or postgresql://user@host/database"
        ) from None


def _sqlite_file(location: str, named: str) -> Path:
    """The SQLite file named: a regular file, or a new name in an existing directory. Its journal
    files beside it must be regular files too — SQLite writes them as readily as the database."""
    path = Path(location).absolute()
    if not path.parent.is_dir():
        raise DatabaseUnusable(
            f"{named} {location}: the directory {path.parent} does not "
            "exist; create it, or name a file in an existing directory"
        )
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))):
        try:
            kind = stat.S_IFMT(os.lstat(candidate).st_mode)
        except FileNotFoundError:
            continue
        if kind != stat.S_IFREG:
            what = _NOT_A_FILE.get(kind, "not a regular file")
            raise DatabaseUnusable(
                f"{named} {location}: {candidate} is {what}, not a database file; "
                "fslab writes results only to a regular file (or a new file name)"
            )
    return path


def shown(location: str) -> str:
    """A location fit to print, log or store: a URL without its password (in its user part or
    its parameters)."""
    if "://" not in location:
        return location
    import sqlalchemy as sa

    try:
        url = sa.make_url(location)
        # libpq also takes the password as a parameter (…?password=): hidden as well
        url = url.set(query={key: "hidden" if key.lower() == "password" else value for key, value in url.query.items()})
        return url.render_as_string(hide_password=True)
    except (sa.exc.ArgumentError, ValueError):  # not a URL SQLAlchemy reads (a port not a number)
        return location.split("://", 1)[0] + "://…"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # The wait first: switching a new database to WAL needs it whole, and another fslab making its
    # tables meanwhile (tests/test_results.py, processes opening one new database at once) would
    # otherwise refuse it at once ("database is locked").
    cursor.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
