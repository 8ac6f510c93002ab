"""The host lock: one benchmark at a time on a host, across study runs and every worker of its
name. Two workers started with one --name (a mistake, or a restart's overlap) take turns.

It is a PostgreSQL advisory lock per host name, held by a database session of the worker's own
(its lock session, apart from the queue's) for a unit's whole run, and for the whole of a request
to serve fio (a fio server's jobs load the host as a benchmark does: shared_storage.py).

- A worker that dies releases it at once: its session ends with its process. A host that vanishes
  (power, network) releases it when the server gives up on the session, after about twice the
  worker's lapse (the session's TCP keepalives and user timeout, set by the worker).
- The lock session is looked at every beat (a second at most) by a thread of its own; a run
  starts only while its host lock was confirmed a moment ago (a worker cut off from the database
  waits before its next run, the run under way goes on).
- A session lost under a held lock (the server restarted, its backend terminated) is replaced
  and the lock taken again at once. A waiting worker takes a free lock only once it has seen it
  free for GRACE beats in a row, so the holder that lost its session takes it back first. One
  that finds it taken by another worker has lost it: its unit stops before its next run and goes
  back to the queue (a run it stores after its unit's lease was taken is kept aside: lease.py).
- Presence: each lock session holds a shared lock on its name for the worker's whole life, so a
  second worker of one name finds the first (pg_locks, pg_stat_activity: its process, host and
  address, since when) and says so at start.

Host names are keyed by their CRC-32: two names that collide only take turns needlessly."""

from __future__ import annotations

import os
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fslab.core.errors import FslabError
from fslab.fleet import queue

if TYPE_CHECKING:
    import psycopg

# The advisory locks' first key (pg_locks.classid): "fslh", the host lock; "fslw", a worker's presence.
HOST_LOCKS = 0x66736C68
PRESENCE = 0x66736C77
GRACE = 3  # beats a free host lock is seen free before a waiting worker takes it
STALE = 3  # beats after which an unconfirmed lock holds back the next run


class HostLockLost(FslabError):
    """Another worker of this host's name took the host lock after this one lost its session."""


@dataclass(frozen=True)
class Holder:
    """Another session holding a lock of this host's name: a worker, as its lock session shows it."""

    what: str  # its application name: "fslab worker pid P on NODE"
    address: str | None  # where it connects from (None: a Unix socket)
    since: datetime  # when its session began (UTC)

    def __str__(self) -> str:
        where = f" from {self.address}" if self.address else ""
        return f"{self.what}{where}, up since {self.since:%Y-%m-%d %H:%M:%S} UTC"


def key(name: str) -> int:
    """The advisory lock's second key for a host name, as PostgreSQL's int4 takes it (signed)."""
    crc = zlib.crc32(name.encode())
    return crc - (1 << 32) if crc >= 1 << 31 else crc


_OTHERS = """
SELECT a.application_name, host(a.client_addr), a.backend_start AT TIME ZONE 'UTC'
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid::bigint = %(class)s AND l.objid::bigint = %(key)s & 4294967295 AND l.objsubid = 2
  AND l.granted AND l.pid <> pg_backend_pid()
ORDER BY a.backend_start
"""


class HostLock:
    """The host lock of worker `name` (one per worker process). Its lock session is used by its
    own thread alone (the keeper); the main thread asks through `held()` and `check()`."""

    def __init__(self, location: str, name: str, lapse: float, say: Callable[[str], None], beat: float = 1.0):
        self.conninfo, self.name, self.lapse, self.say = queue.conninfo(location), name, lapse, say
        self.beat = min(beat, lapse / 4)
        self.key = key(name)
        self._session: psycopg.Connection | None = None  # in the keeper's thread
        self._changed = threading.Condition()
        self._wanted = False  # the main thread wants the lock (taking or holding it)
        self._held = False
        self._lost: str | None = None  # why the lock was lost under a unit (cleared when it is released)
        self._confirmed = 0.0  # time.monotonic() of the last look that found the lock session alive
        self._free_since: float | None = None  # while waiting: since when the lock was seen free
        self._holders: list[Holder] = []  # while waiting: who holds it
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> list[Holder]:
        """Connect, then keep the session in a thread of its own; the other workers of this
        name present now (none known if the database does not answer yet)."""
        try:
            self._connect()
            others = self._others(PRESENCE)
        except Exception as exc:  # noqa: BLE001  (the keeper connects once it answers)
            self.say(f"host lock: cannot connect yet ({type(exc).__name__}); trying again")
            self._close()
            others = []
        self._thread = threading.Thread(target=self._keep, name="fslab-hostlock", daemon=True)
        self._thread.start()
        return others

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=self.lapse)

    @contextmanager
    def held(self, waiting: Callable[[str], None], still_wanted: Callable[[], bool] = lambda: True) -> Iterator[bool]:
        """The host lock, held for the block; `waiting(why)` is told, once per holder, while
        another worker of this name holds it. Yields False, having waited in vain, once
        `still_wanted()` says the wait is no longer needed."""
        told: list[Holder] | None = None
        with self._changed:
            self._wanted, self._lost = True, None
            self._changed.notify_all()
        try:
            while True:
                with self._changed:
                    if self._held:
                        break
                    holders = list(self._holders)
                    self._changed.wait(timeout=self.beat)
                if holders and holders != told:
                    told = holders
                    waiting(
                        f"host {self.name} is busy: {holders[0]} holds its host lock (another worker of this "
                        "name); waiting for it"
                    )
                if not still_wanted():
                    yield False
                    return
            yield True
        finally:
            with self._changed:
                self._wanted = False
                self._changed.notify_all()
                while self._held and not self._stopped:  # released by the keeper (or with its session)
                    self._changed.wait(timeout=self.beat)

    def check(self, waiting: Callable[[str], None]) -> None:
        """Before a run: the host lock confirmed a moment ago (a worker cut off from the database
        waits here until its lock session answers), else HostLockLost."""
        told = False
        while True:
            with self._changed:
                if self._lost is not None:
                    raise HostLockLost(self._lost)
                if time.monotonic() - self._confirmed <= STALE * self.beat:
                    return
                self._changed.wait(timeout=self.beat)
            if not told and time.monotonic() - self._confirmed > STALE * self.beat:
                told = True
                unheard = time.monotonic() - self._confirmed
                waiting(
                    f"host lock of {self.name} not confirmed for {unheard:.0f} s (the database does not answer): "
                    "the next run waits"
                )

    # The keeper's thread: everything on the lock session happens here.

    def _keep(self) -> None:
        while True:
            with self._changed:
                if self._stopped:
                    self._close()
                    return
                wanted, held = self._wanted, self._held
            was_connected, lost_now = self._session is not None, False  # lost now: connect again at once
            try:
                if self._session is None:
                    self._connect()
                    if held and wanted:
                        self._take_again()
                    elif held:  # released with the session lost: a new session holds nothing
                        self._released()
                elif wanted and not held:
                    self._try_take()
                elif held and not wanted:
                    self._release()
                else:
                    self._session.execute("SELECT 1")
                    self._confirm()
            except Exception as exc:  # noqa: BLE001  (its session lost: a new one, and the lock taken again if held)
                if was_connected:
                    self.say(f"host lock: its database session was lost ({type(exc).__name__}); connecting again")
                    lost_now = True
                self._close()
            with self._changed:
                releasing = self._held and not self._wanted and self._session is not None
                if not self._stopped and not releasing and not lost_now:
                    self._changed.wait(timeout=self.beat)  # woken at once when the main thread wants or leaves the lock

    def _connect(self) -> None:
        import psycopg

        margin, probe = max(int(self.lapse), 1), max(int(self.lapse) // 4, 1)
        session = psycopg.connect(
            self.conninfo, autocommit=True, connect_timeout=max(margin, 2),
            application_name=f"fslab worker pid {os.getpid()} on {socket.gethostname()}"[:63],
            keepalives=1, keepalives_idle=margin, keepalives_interval=probe, keepalives_count=4,
            tcp_user_timeout=4 * margin * 1000,  # the client gives up after the server (its old session freed first)
        )  # fmt: skip
        # The server gives up on a silent session (its lock freed) after about twice the lapse.
        session.execute(f"SET tcp_keepalives_idle = {margin}; SET tcp_keepalives_interval = {probe}")
        session.execute(f"SET tcp_keepalives_count = 4; SET tcp_user_timeout = {2 * margin * 1000}")
        session.execute("SELECT pg_advisory_lock_shared(%s, %s)", (PRESENCE, self.key))
        self._session = session  # confirming nothing yet: a lock held before is taken again first

    def _close(self) -> None:
        session, self._session = self._session, None
        self._free_since = None  # looked at afresh from a new session: a holder that lost its own takes it back first
        if session is not None:
            try:
                session.close()
            except Exception:  # noqa: BLE001  (already gone)
                pass
        with self._changed:
            self._changed.notify_all()

    def _confirm(self) -> None:
        with self._changed:
            self._confirmed = time.monotonic()
            self._changed.notify_all()

    @property
    def _connected(self) -> psycopg.Connection:
        """The keeper's session, where it is connected (a lost one is found by its use)."""
        if self._session is None:
            raise ConnectionError("no database session")
        return self._session

    def _others(self, kind: int) -> list[Holder]:
        rows = self._connected.execute(_OTHERS, {"class": kind, "key": self.key}).fetchall()
        return [Holder(what or "an fslab worker", address, since) for what, address, since in rows]

    def _try_take(self) -> None:
        """Waiting: take the lock once it was seen free GRACE beats in a row."""
        holders = self._others(HOST_LOCKS)
        self._confirm()
        now = time.monotonic()
        with self._changed:
            self._holders = holders
            if holders:
                self._free_since = None
                return
            if self._free_since is None:
                self._free_since = now
            if now - self._free_since < GRACE * self.beat:
                return
        taken = self._try_lock()
        with self._changed:
            self._held, self._free_since, self._holders = taken, None, []
            self._changed.notify_all()

    def _try_lock(self) -> bool:
        """Whether this session holds the host lock now (taken now, or held already)."""
        row = self._connected.execute("SELECT pg_try_advisory_lock(%s, %s)", (HOST_LOCKS, self.key)).fetchone()
        return row is not None and bool(row[0])

    def _take_again(self) -> None:
        """A new session under a held lock: taken again at once, or lost to whoever took it."""
        taken = self._try_lock()
        if taken:
            self.say(f"host lock of {self.name} taken again on a new database session")
            self._confirm()
            return
        holders = self._others(HOST_LOCKS)
        holder = holders[0] if holders else "another worker"
        why = (
            f"host lock of {self.name} lost with its database session: {holder} holds it now; "
            "the unit stops before its next run"
        )
        self.say(why)
        with self._changed:
            self._held, self._lost = False, why
            self._changed.notify_all()

    def _release(self) -> None:
        self._connected.execute("SELECT pg_advisory_unlock(%s, %s)", (HOST_LOCKS, self.key))
        self._released()

    def _released(self) -> None:
        with self._changed:
            self._held = False
            self._changed.notify_all()
