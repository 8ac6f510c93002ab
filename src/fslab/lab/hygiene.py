"""What on the host disturbs a lab VM's figures, read, judged and — with `--tune-host` — set for the run.

Four things: KSM (ksmd merging identical pages, QEMU's guest RAM among them: copy-on-write faults
and latency spikes), transparent huge pages (khugepaged and direct compaction stalling guest page
faults; QEMU madvises guest RAM, so "madvise" is "always" for a VM), the CPU frequency governor
(a ramping CPU makes a run's first seconds slower), and vCPU pinning (unpinned vCPU threads migrate
between CPUs). `read()` reads them; the study run records the reading (its environment's
"vm_hygiene") and says it once. `tuned(True, journal)` sets KSM off, THP never (defrag never), the
governor performance where there is one, and pins vCPU threads (`pin_cpus`, `pin_vcpus`): each
sysfs write is journalled before it is made (the file's identity, the value found, the value set),
restored however the run ends, and by `fslab cleanup` after a kill -9. A restore acts only on the
same file (device and inode) still holding the value fslab set, and writes back only one of the
file's own choices: anything else is left alone and said.

THP is set to never rather than madvise: with madvise QEMU's guest RAM still gets huge pages when
the host happens to have them free, so the backing (and the TLB costs) varies from boot to boot
with the host's fragmentation, and khugepaged collapses guest memory mid-run; never costs every
kernel compared the same small constant.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fslab.core.errors import FslabError, Refused
from fslab.core.identity import FileId, open_own, process
from fslab.core.journal import Entry, Journal, releaser

# The filesystem root the settings are read under (tests: a fake tree); a journal entry naming
# another root is refused, so a planted line cannot point fslab's writes elsewhere.
ROOT = Path("/")
KSM_RUN = "sys/kernel/mm/ksm/run"
KSM_SHARED = "sys/kernel/mm/ksm/pages_shared"
THP_ENABLED = "sys/kernel/mm/transparent_hugepage/enabled"
THP_DEFRAG = "sys/kernel/mm/transparent_hugepage/defrag"
CPUS = "sys/devices/system/cpu"
GOVERNOR = "cpufreq/scaling_governor"
GOVERNORS = "cpufreq/scaling_available_governors"
# One fslab tunes the host at a time: two would take each other's settings for the host's own.
LOCK = "run/fslab/tune-host.lock"
KIND = "host-setting"
NOT_PRESENT = "not present"
UNREADABLE = "unreadable"
ABSENT = (NOT_PRESENT, UNREADABLE)  # nothing fslab can judge or set
KSM_CHOICES = ("0", "1", "2")  # stop, run, stop and unmerge everything (Documentation/admin-guide/mm/ksm.rst)
# The files fslab writes, relative to the root: nothing else is ever written, whatever a journal says.
_TUNABLE = re.compile(
    r"sys/kernel/mm/ksm/run|sys/kernel/mm/transparent_hugepage/(?:enabled|defrag)"
    r"|sys/devices/system/cpu/cpu[0-9]{1,5}/cpufreq/scaling_governor"
)
_BRACKETED = re.compile(r"\[([^\]\s]+)\]")


@dataclass(frozen=True)
class Judgement:
    """One setting as read, and whether it disturbs a VM's figures (None: not present, nothing to say)."""

    name: str  # "KSM", "THP", "THP defrag", "governor", "vCPU pinning"
    reading: str  # short: "on", "madvise", "schedutil (cpu0-1)", "not present", "unpinned"
    disturbs: bool | None
    why: str  # one line


@dataclass(frozen=True)
class HostHygiene:
    """The host's settings that disturb a VM, as read (NOT_PRESENT where the kernel has no such
    file, UNREADABLE where fslab cannot read it)."""

    ksm_run: str  # "0", "1", "2", or one of ABSENT
    ksm_pages_shared: int | None
    thp_enabled: str  # the bracketed choice: "always", "madvise", "never", or one of ABSENT
    thp_defrag: str
    governors: dict[str, str] = field(default_factory=dict)  # "cpu0" → its governor; empty: no cpufreq
    pinned: tuple[int, ...] = ()  # the CPUs fslab pins QEMU's vCPU threads to; (): none (the default)

    def judgements(self) -> list[Judgement]:
        return [self._ksm(), self._thp(), self._defrag(), self._governor(), self._pinning()]

    def disturbing(self) -> list[Judgement]:
        return [j for j in self.judgements() if j.disturbs]

    def line(self) -> str:
        """The console's one line: "host hygiene: KSM on (may disturb VM figures), THP never, …"."""
        parts = [
            f"{j.name} {j.reading}" + (" (may disturb VM figures)" if j.disturbs else "") for j in self.judgements()
        ]
        return "host hygiene: " + ", ".join(parts)

    def as_json(self) -> dict:
        """The study run's environment["vm_hygiene"] (docs/results.md)."""
        facts = asdict(self) | {"pinned": list(self.pinned)}
        return facts | {"disturbing": [j.name for j in self.disturbing()]}

    def _ksm(self) -> Judgement:
        if self.ksm_run in ABSENT:
            return Judgement("KSM", self.ksm_run, None, "no KSM that fslab can read: nothing it can judge or set")
        if self.ksm_run == "1":
            return Judgement(
                "KSM", "on", True, "ksmd merges identical guest pages: copy-on-write faults, latency spikes"
            )
        still = f"; {self.ksm_pages_shared} pages merged before stay so until written" if self.ksm_pages_shared else ""
        return Judgement("KSM", "off", False, f"ksmd merges nothing new{still}")

    def _thp(self) -> Judgement:
        value = self.thp_enabled
        if value in ABSENT:
            return Judgement("THP", value, None, "no transparent huge pages that fslab can read")
        if value in ("always", "madvise"):
            return Judgement(
                "THP",
                value,
                True,
                "guest RAM gets huge pages when the host has them free (QEMU madvises it): backing varies "
                "from boot to boot, khugepaged collapses it mid-run",
            )
        return Judgement("THP", value, False, "guest RAM in small pages, the same every boot")

    def _defrag(self) -> Judgement:
        value = self.thp_defrag
        if value in ABSENT:
            return Judgement("THP defrag", value, None, "no transparent huge pages that fslab can read")
        if self.thp_enabled == "never":
            return Judgement("THP defrag", value, False, "no huge pages are asked for while THP is never")
        if value in ("always", "madvise", "defer+madvise"):
            return Judgement(
                "THP defrag", value, True, "a guest page fault waits for direct compaction: stalls of milliseconds"
            )
        return Judgement("THP defrag", value, False, "no guest page fault waits for compaction")

    def _governor(self) -> Judgement:
        if not self.governors:
            return Judgement(
                "governor", NOT_PRESENT, None, "no cpufreq here (a VM, or a fixed frequency): nothing fslab can set"
            )
        by_governor: dict[str, list[str]] = {}
        for cpu, governor in self.governors.items():
            by_governor.setdefault(governor, []).append(cpu)
        reading = ", ".join(f"{g} ({_cpu_list(cpus)})" for g, cpus in by_governor.items())
        if set(by_governor) == {"performance"}:
            return Judgement("governor", reading, False, "every CPU at its highest frequency from the start")
        return Judgement("governor", reading, True, "a CPU not at performance ramps its frequency with load")

    def _pinning(self) -> Judgement:
        if not self.pinned:
            return Judgement(
                "vCPU pinning", "unpinned", True, "the scheduler migrates vCPU threads between CPUs: cold caches"
            )
        return Judgement("vCPU pinning", f"CPU {_cpu_list(self.pinned)}", False, "each vCPU thread stays on its CPU")


def _cpu_list(cpus: Sequence[int] | Sequence[str]) -> str:
    return ",".join(str(c).removeprefix("cpu") for c in cpus)


def read(root: Path | None = None) -> HostHygiene:
    """The host's settings as they are now (no file is written). A file the kernel lacks reads
    NOT_PRESENT, one fslab cannot read UNREADABLE: never an error."""
    root = ROOT if root is None else root
    shared = _read(root / KSM_SHARED)
    return HostHygiene(
        ksm_run=_read(root / KSM_RUN),
        ksm_pages_shared=int(shared) if shared.isdigit() else None,
        thp_enabled=_chosen(_read(root / THP_ENABLED)),
        thp_defrag=_chosen(_read(root / THP_DEFRAG)),
        governors={cpu: _read(root / CPUS / cpu / GOVERNOR) for cpu in _cpufreq_cpus(root)},
        pinned=_tuning[-1].cpus if _tuning else (),
    )


def _read(path: Path) -> str:
    """The file's text; NOT_PRESENT when the kernel has no such file, and "unreadable" when it
    cannot be read (a container's masked /sys): a study run goes on without the reading."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return NOT_PRESENT
    except OSError:
        return UNREADABLE


def _chosen(text: str) -> str:
    """The bracketed choice of a THP file ("always [madvise] never" → "madvise")."""
    if text in ABSENT:
        return text
    found = _BRACKETED.search(text)
    return found.group(1) if found else text


def _cpufreq_cpus(root: Path) -> list[str]:
    try:
        names = os.listdir(root / CPUS)
    except FileNotFoundError:
        return []
    cpus = [n for n in names if re.fullmatch(r"cpu[0-9]{1,5}", n) and os.path.exists(root / CPUS / n / GOVERNOR)]
    return sorted(cpus, key=lambda n: int(n[3:]))


def choices(path: Path) -> tuple[str, ...]:
    """The values a tunable file takes, as the kernel offers them: a THP file lists its own, a
    governor its directory's scaling_available_governors, KSM's run 0, 1 and 2."""
    if path.name == "run":
        return KSM_CHOICES
    if path.name == "scaling_governor":
        return tuple(_read(path.with_name("scaling_available_governors")).split())
    return tuple(_read(path).replace("[", " ").replace("]", " ").split())


def _current(path: Path) -> str:
    text = _read(path)
    return _chosen(text) if path.parent.name == "transparent_hugepage" else text


# --- tuning -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One sysfs file set for the run: relative to the root, the value found, the value set."""

    path: str
    old: str
    new: str


def planned(found: HostHygiene, root: Path | None = None) -> tuple[list[Change], list[str]]:
    """What --tune-host changes on this host, and what it cannot (said, not fatal): only the
    settings not as wanted, each to a value the file offers."""
    root = ROOT if root is None else root
    wanted = [(KSM_RUN, found.ksm_run, "0"), (THP_ENABLED, found.thp_enabled, "never")]
    wanted += [(THP_DEFRAG, found.thp_defrag, "never")]
    wanted += [(f"{CPUS}/{cpu}/{GOVERNOR}", governor, "performance") for cpu, governor in found.governors.items()]
    changes, cannot, files = [], [], set()
    for path, old, new in wanted:
        if old in ABSENT or old == new:
            continue
        try:  # CPUs of one cpufreq policy share its file (cpuN/cpufreq links to policyM): written once
            st = os.stat(root / path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in files:
            continue
        files.add((st.st_dev, st.st_ino))
        if new not in choices(root / path):
            cannot.append(f"/{path} offers no {new} ({' '.join(choices(root / path))}): left {old}")
            continue
        changes.append(Change(path, old, new))
    return changes, cannot


@dataclass
class Tuning:
    """What a tuned() block holds: the changes made (restored when it ends), what could not be
    changed, and the CPUs QEMU's vCPU threads go to (empty when not tuning: no pinning)."""

    enabled: bool
    changes: list[Change] = field(default_factory=list)
    cannot: list[str] = field(default_factory=list)
    cpus: tuple[int, ...] = ()


_tuning: list[Tuning] = []  # the tuned() block this process is in (pin_cpus asks it)


@contextmanager
def tuned(
    enabled: bool,
    journal: Journal,
    *,
    root: Path | None = None,
    say: Callable[[str], None] | None = None,
    pin: bool = True,
) -> Iterator[Tuning]:
    """The host tuned for lab VMs for the block when `enabled` (--tune-host), else nothing written.
    Each change is journalled before it is made and restored however the block ends (an exception,
    SIGINT, SIGTERM: core/interruption.py raises KeyboardInterrupt); after a kill -9, the next
    `fslab run` or `fslab cleanup` in the same work directory restores it from the journal. The
    caller holds the work directory (Workdir.claim), and has released what a killed fslab left.
    `say` hears of a setting someone changed meanwhile (left as they set it); `pin`: whether a VM's
    vCPU threads are to be pinned (pin_cpus), not when no VM runs."""
    if not enabled:
        yield Tuning(False)
        return
    root = ROOT if root is None else root
    with _host_lock(root, journal), ExitStack() as held:
        changes, cannot = planned(read(root), root)
        tuning = Tuning(True, [], cannot, _vcpu_cpus() if pin else ())
        held.callback(_say_unrestored, root, tuning.changes, say)  # first in, so called once all are restored
        for change in changes:
            held.enter_context(_set(journal, root, change))
            tuning.changes.append(change)
        _tuning.append(tuning)
        try:
            yield tuning
        finally:
            _tuning.remove(tuning)


def _say_unrestored(root: Path, changes: list[Change], say: Callable[[str], None] | None) -> None:
    for change in changes:
        now = _current(root / change.path)
        if now != change.old and say is not None:
            say(f"--tune-host: /{change.path} left at {now}: set since fslab set {change.new} (it was {change.old})")


@contextmanager
def _set(journal: Journal, root: Path, change: Change) -> Iterator[None]:
    path = root / change.path
    if change.new not in choices(path):
        raise Refused(f"{path}: {change.new!r} is not among the values it offers ({' '.join(choices(path))})")
    identity = _identity(path)
    proof = identity.proof() | {"root": str(root), "old": change.old, "new": change.new}
    with journal.holding(KIND, str(path), **proof):  # written (and fsynced) before the file is
        _write(path, change.new)
        if _current(path) != change.new:
            raise FslabError(f"{path} did not take {change.new} (it reads {_current(path)}); nothing else was changed")
        yield


def _identity(path: Path) -> FileId:
    st = os.lstat(path)  # a symlink or anything but a plain file is no setting of the kernel's
    if not (st.st_mode & 0o170000 == 0o100000):
        raise Refused(f"{path} is not a regular file: fslab writes only the kernel's own settings files")
    return FileId.of(st)


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.write(fd, f"{value}\n".encode())
    except OSError as exc:
        raise FslabError(f"{path}: writing {value} failed: {exc.strerror}") from None
    finally:
        os.close(fd)


@releaser("host-setting")  # (KIND, spelt out: tests/test_guard_identity.py reads it)
def restore(entry: Entry, workdir: Any) -> str:
    """Put one setting back as fslab found it: only the very file fslab changed (device and
    inode), only while it still holds what fslab set (else someone set it since: theirs now), and
    only to a value it offers. Says what it did."""
    root, old, new = entry.proof.get("root"), entry.proof.get("old"), entry.proof.get("new")
    if not isinstance(root, str) or Path(root) != ROOT or not isinstance(old, str) or not isinstance(new, str):
        raise Refused(f"{entry.ident}: the journal's entry is not one fslab writes for a host setting")
    path = Path(entry.ident)
    if not path.is_relative_to(ROOT) or not _TUNABLE.fullmatch(path.relative_to(ROOT).as_posix()):
        raise Refused(f"{entry.ident} is not a setting --tune-host changes; left alone")
    try:
        found = _identity(path)
    except FileNotFoundError:
        return "gone (the kernel removed it: a CPU went offline?); nothing to restore"
    if found != FileId.from_proof(entry.proof):
        raise Refused(f"{path} is not the file fslab set (its identity differs); left alone")
    now = _current(path)
    if now == old:
        return f"already {old}"
    if now != new:  # the host's to keep: a user (or another tool) set it since
        return f"left at {now}: set since fslab set {new} (it was {old})"
    if old not in choices(path):
        raise Refused(f"{path}: the journal's {old!r} is not among the values it offers; left {now}")
    _write(path, old)
    return f"restored to {old} (fslab had set {new})"


@contextmanager
def _host_lock(root: Path, journal: Journal) -> Iterator[None]:
    """This host tuned by this fslab alone; and not over what a killed fslab left tuned from
    another work directory (its values would be taken for the host's own)."""
    lock_path = root / LOCK
    os.makedirs(lock_path.parent, mode=0o700, exist_ok=True)
    fd = open_own(lock_path, os.O_RDWR | os.O_CREAT)
    with os.fdopen(fd, "r+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _record(lock.read()).get("pid", "unknown")
            raise FslabError(
                f"another fslab (pid {holder}) holds this host tuned (--tune-host): wait for it, "
                "or run without --tune-host"
            ) from None
        left = _record(lock.read())
        other = left.get("workdir")
        if isinstance(other, str) and other != str(journal.workdir.root) and _left_tuned(Path(other)):
            raise FslabError(
                f"a killed fslab (pid {left.get('pid')}) left this host tuned; `fslab cleanup --workdir {other}` "
                "restores it first (else its settings would be taken for the host's own)"
            )
        _rewrite(lock, json.dumps({"pid": os.getpid(), "workdir": str(journal.workdir.root), "since": time.time()}))
        try:
            yield
        finally:
            _rewrite(lock, "")  # all restored: no killed fslab's settings to warn of


def _record(text: str) -> dict:
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _rewrite(lock: Any, text: str) -> None:
    lock.seek(0)
    lock.truncate(0)
    lock.write(text)
    lock.flush()


def _left_tuned(workdir: Path) -> bool:
    """Whether that work directory's journal still holds a host setting (read only, never acted on)."""
    from fslab.core.workdir import Workdir

    try:
        return any(e.kind == KIND for e in Workdir(workdir).journal.read()[0])
    except (OSError, FslabError):
        return False


# --- vCPU pinning -------------------------------------------------------------------------------


def _vcpu_cpus() -> tuple[int, ...]:
    """The CPUs vCPU threads go to: those fslab may use but the first (CPU 0 takes most of the
    host's interrupts and housekeeping), or all of them on a one-CPU machine."""
    allowed = sorted(os.sched_getaffinity(0))
    return tuple(allowed[1:] or allowed)


def pin_cpus(vcpus: int = 1) -> tuple[int, ...]:
    """The CPUs to pin a VM's `vcpus` vCPU threads to, one each in turn (vCPU n → cpus[n % len]):
    empty unless inside a tuned(True, …) block (no pinning by default). For vm.boot:

        cpus = hygiene.pin_cpus(spec.cpus)
        argv += hygiene.QEMU_THREAD_NAMES          # (always: a -name costs nothing)
        ...                                        # QEMU started as `qemu`
        if cpus:
            hygiene.pin_vcpus(qemu.pid, cpus, spec.cpus)
    """
    if not _tuning or not _tuning[-1].cpus:
        return ()
    cpus = _tuning[-1].cpus
    return tuple(cpus[n % len(cpus)] for n in range(max(1, vcpus)))


_VCPU_THREAD = re.compile(r"CPU ([0-9]+)/(?:KVM|TCG|HVF|WHPX)")
# QEMU names its threads ("CPU 0/TCG") only when asked: vm.boot adds these to QEMU's arguments
# (or debug-threads=on to a -name of its own) for pin_vcpus to find them.
QEMU_THREAD_NAMES = ("-name", "fslab,debug-threads=on")


def pin_vcpus(pid: int, cpus: Sequence[int], vcpus: int = 1, *, timeout: float = 30.0) -> dict[int, int]:
    """Pin the vCPU threads of fslab's own QEMU (a child of this process) each to its CPU
    (vCPU n → cpus[n % len(cpus)]), once QEMU has made them (waited for, up to `timeout`);
    QEMU's other threads (main loop, I/O) go to the CPUs fslab may use besides, when there are
    any. Returns {thread id: CPU}."""
    if _parent(pid) != os.getpid():
        raise Refused(f"process {pid} is not a QEMU fslab started: its threads are not pinned")
    if not cpus:
        raise FslabError("pin_vcpus needs the CPUs to pin to (pin_cpus())")
    deadline = time.monotonic() + timeout
    while len(threads := _vcpu_threads(pid)) < vcpus:
        if time.monotonic() > deadline or process(pid) is None:
            raise FslabError(
                f"QEMU (pid {pid}) showed {len(threads)} of its {vcpus} vCPU thread(s) in {timeout:.0f} s: "
                f"it names them only when started with {' '.join(QEMU_THREAD_NAMES)}"
            )
        time.sleep(0.05)  # polling /proc: QEMU tells no one when its vCPU threads exist
    found = process(pid)  # (a child just started may not have run QEMU yet: asked once it has vCPU threads)
    if found is None or not found.comm.startswith("qemu-system"):
        raise Refused(f"process {pid} is not a QEMU fslab started: its threads are not pinned")
    pinned = {}
    for tid, n in threads.items():
        os.sched_setaffinity(tid, {cpus[n % len(cpus)]})
        pinned[tid] = cpus[n % len(cpus)]
    rest = set(os.sched_getaffinity(0)) - set(cpus)
    if rest:
        for tid in _threads(pid):
            if tid not in threads:
                _set_affinity(tid, rest)
    return pinned


def _set_affinity(tid: int, cpus: set[int]) -> None:
    try:
        os.sched_setaffinity(tid, cpus)
    except ProcessLookupError:  # a thread that ended meanwhile
        pass


def _parent(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _vcpu_threads(pid: int) -> dict[int, int]:
    """{thread id: vCPU number} of QEMU's vCPU threads ("CPU 0/TCG", "CPU 1/KVM")."""
    found = {}
    for tid in _threads(pid):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            continue
        if match := _VCPU_THREAD.fullmatch(name):
            found[tid] = int(match.group(1))
    return found


# --- the study run's record ---------------------------------------------------------------------


@contextmanager
def recorded(
    enabled: bool, journal: Journal, *, say: Callable[[str], None], root: Path | None = None, vm: bool = True
) -> Iterator[dict]:
    """tuned() around a study run, yielding what its environment records ({"vm_hygiene": …}: the
    settings the run ran under, whether fslab set them, and as it found them), and saying once
    what they are. `vm`: whether the run boots VMs (else no vCPU is pinned)."""
    found = read(root)
    with tuned(enabled, journal, root=root, say=say, pin=vm) as tuning:
        during = read(root) if enabled else found
        record = during.as_json() | {"tuned": enabled}
        if enabled:
            record["as_found"] = found.as_json()
            record["changed"] = [asdict(c) for c in tuning.changes]
            for line in tuning.cannot:
                say(f"--tune-host: {line}")
        if enabled:
            set_now = ", ".join(f"/{c.path} {c.new}" for c in tuning.changes) or "nothing (all as wanted)"
            say(f"{found.line()}; --tune-host sets for the run: {set_now}")
        else:
            say(found.line() + ("; --tune-host sets them for the run" if found.disturbing() else ""))
        yield {"vm_hygiene": record}
