"""Where the results database is, and whether fslab may use it: the --db value (else $FSLAB_DB,
else fslab.db), the report folder beside it, and an engine for it — a database URL, or an SQLite
file checked to be a regular file (or a new name) before SQLite writes its pages there.
SQLAlchemy is imported by what makes an engine or reads a URL: naming a database needs none."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fslab.core.errors import FslabError

if TYPE_CHECKING:
    import sqlalchemy as sa

DEFAULT_DB = "fslab.db"
DB_ENV = "FSLAB_DB"


class DatabaseUnusable(FslabError):
    """The results database named cannot be opened, or is not fslab's to write."""


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
    return engine


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
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()
