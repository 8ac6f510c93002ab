"""A QEMU guest running Debian's own kernel over this machine's root filesystem: the kernel lab's
vm.boot (fslab/lab/vm.py) booting the installed kernel, as the tests use it.

What this machine's kernel lacks (md RAID, device-mapper: LUKS, LVM) Debian's kernel has as
modules, so the tests of those layers boot it under QEMU (software emulation is enough) and
run fslab inside. The guest sees the host's root read-only through 9p with a RAM overlay on
top (the host's secrets masked), so it has every tool and the same fslab checkout; a shared
directory carries the command in and its output, exit status and results database out; a
scratch disk, mounted at SCRATCH, holds its work directories.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fslab.lab import kernels, vm

SCRATCH = vm.SCRATCH


class GuestUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class GuestResult:
    status: int | None  # the command's exit status; None when the guest never reported one
    output: str  # what the command printed
    console: str  # what the guest's kernel printed on its serial console
    share: Path  # the shared directory: what the command left for the host


def guest_kernel() -> tuple[Path, Path]:
    """The newest installed Debian kernel and its module directory."""
    releases = kernels.installed_releases()
    if not releases:
        raise GuestUnavailable("no kernel in /boot with modules in /lib/modules (apt-get install linux-image-amd64)")
    kernel = kernels.installed(releases[-1])
    return kernel.vmlinuz, kernel.modules


def unavailable_reason() -> str | None:
    """Why no guest can boot here, or None when one can."""
    reason = vm.unavailable_reason()
    if reason:
        return reason
    try:
        guest_kernel()
    except GuestUnavailable as exc:
        return str(exc)
    return None


def run_in_guest(
    command: str, *, cwd: Path, share: Path, memory_mib: int = 2048, scratch_gib: int = 4, timeout: float = 900
) -> GuestResult:
    """Boot the guest, run `command` (bash) in `cwd` as root, power off; `share` is the guest's
    /fslab-share. Raises GuestUnavailable when this machine cannot boot one."""
    reason = unavailable_reason()
    if reason:
        raise GuestUnavailable(reason)
    kernel = kernels.installed(guest_kernel()[1].name)
    boot = vm.boot(
        kernel, command, share=share, cwd=cwd, spec=vm.VmSpec(memory_mib=memory_mib), timeout=timeout,
        scratch_bytes=scratch_gib * 2**30,
    )  # fmt: skip
    return GuestResult(status=boot.status, output=boot.output, console=boot.console, share=share)


@dataclass(frozen=True)
class GuestJob:
    """One boot a test module needs: its command, run in `cwd`, and the files it shares (name →
    text, written into the guest's /fslab-share)."""

    name: str
    command: str
    cwd: Path
    files: dict[str, str] = field(default_factory=dict)


# A guest takes minutes of emulated CPU. conftest boots every selected module's guest when the
# test run starts (`boot_meanwhile`), one at a time in a background thread, and the host's own
# tests run meanwhile; each module's fixture then waits for its guest's result (`result_of`).
# In a parallel run (pytest-xdist) the first worker to start claims the boots, and the result
# lands in a directory every worker of the run shares, so whichever worker is handed a guest's
# tests reads it there.
_BACKGROUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fslab-guest")
_BOOTING: dict[str, Future[None]] = {}
WAIT_PER_BOOT = 1200.0  # seconds: a boot's own limit (run_in_guest) and then some


def _shared(tmp_path_factory) -> Path:  # noqa: ANN001
    """The directory of this test run's guests: the same for every worker of a parallel run."""
    base = tmp_path_factory.getbasetemp()
    directory = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "guests"
    directory.mkdir(exist_ok=True)
    return directory


def _claim(path: Path) -> bool:
    try:
        path.mkdir()
    except FileExistsError:
        return False
    return True


def _boot(job: GuestJob, directory: Path) -> None:
    """Runs the job's guest and leaves its result in `directory`/result.json, whatever happens."""
    share = directory / "share"
    try:
        share.mkdir()
        for name, text in job.files.items():
            (share / name).write_text(text)
        result = run_in_guest(job.command, cwd=job.cwd, share=share)
        record = {"status": result.status, "output": result.output, "console": result.console}
    except Exception as exc:  # noqa: BLE001 - the test waiting for it reports it
        record = {"error": f"{type(exc).__name__}: {exc}"}
    partial = directory / "result.json.partial"
    partial.write_text(json.dumps(record))
    partial.replace(directory / "result.json")


def keep_fio_options() -> None:
    """fslab in a guest checks fio options against the fio table the host keeps in its
    /var/cache/fslab (the guest's root is the host's): asking fio itself, ~250 runs of it, would
    take minutes under emulation. The guest's fio is the host's file copied up into its RAM
    overlay (keep_in_ram), known by its bytes (fio/table.py)."""
    from fslab.core.system import executable
    from fslab.fio.options import ENGINES
    from fslab.fio.table import CACHE_DIR, load_table

    fio = executable("fio")
    if fio is not None:
        load_table(fio, tuple(ENGINES), CACHE_DIR)


def boot_meanwhile(jobs: list[GuestJob], tmp_path_factory) -> None:  # noqa: ANN001
    """Boots the jobs' guests in the background, one after another, unless another worker of
    this test run already does."""
    shared = _shared(tmp_path_factory)
    if not jobs or not _claim(shared / "booter"):
        return
    for job in jobs:
        if _claim(shared / job.name):
            _BOOTING[job.name] = _BACKGROUND.submit(_boot, job, shared / job.name)


def result_of(job: GuestJob, tmp_path_factory) -> GuestResult:  # noqa: ANN001
    """The job's guest's result: waits for the boot (this process's or another worker's), or
    boots it now if nobody has."""
    directory = _shared(tmp_path_factory) / job.name
    if _claim(directory):
        _boot(job, directory)
    elif job.name in _BOOTING:
        _BOOTING[job.name].result()
    result = directory / "result.json"
    deadline = time.monotonic() + WAIT_PER_BOOT * 2  # at most one boot queued before it
    while not result.exists():
        if time.monotonic() > deadline:
            raise GuestUnavailable(f"no result of the {job.name} guest in {directory} after {WAIT_PER_BOOT * 2:.0f} s")
        time.sleep(1)
    record = json.loads(result.read_text())
    if "error" in record:
        raise GuestUnavailable(f"the {job.name} guest could not run: {record['error']}")
    return GuestResult(
        status=record["status"], output=record["output"], console=record["console"], share=directory / "share"
    )


def stop_waiting() -> None:
    """At the session's end. A parallel run's worker finishes the boots it claimed (another worker
    may be waiting for them); a serial run leaves the guests not booted yet (one booting runs to
    its end)."""
    _BACKGROUND.shutdown(
        wait=bool(os.environ.get("PYTEST_XDIST_WORKER")), cancel_futures=not os.environ.get("PYTEST_XDIST_WORKER")
    )
