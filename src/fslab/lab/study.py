"""`fslab run STUDY --kernel K [--kernel K2 …] [--kernel host] [--boots N]`: one study run in the
host's database whose runs ran under several kernels, each a host of the study run named by its
release (model.Host, accelerator recorded), "host" this machine's own kernel on bare metal.

Each kernel's share is the study's whole plan, run `boots` times, each time in a fresh boot of a lab
VM (vm.boot): fslab itself runs it there (`fslab run` on the study file fslab wrote to the share,
checked again by the guest's own guard) into the guest's SQLite database, which it copies to the
share as it ends. The host then stores that boot's runs as runs of the kernel's host with the
boot's id, their repetitions and blocks renumbered after the boots before (results/copy.py's
append_runs): runs stream back per boot, stored as soon as their boot ends. "host" runs the plan
here with the ordinary runner, once per round, stored under this machine's name and boot id.
Rounds interleave the kernels — K1 boot 1, K2 boot 1, host, K1 boot 2, … — so drift spreads over
them. A kernel that cannot be prepared or booted, or whose guest crashes (vm.GuestCrashed), is
said in one line, recorded in the study run's settings ("lab": "failed") and left out of the
rounds after; the others go on.

A target on the user's own devices (confirmed with --destroy-data, as a run here would have them)
runs on those very devices in each VM, passed through as virtio-blk disks (passthrough.py), and
here with the ordinary runner's guard; a device that is no longer the one confirmed, or is in use,
when a boot comes stops the study run.

`fslab bisect` measures a kernel with one such boot (boot_once): its study cut to one cell
(Study.only, which the guest's `fslab run --lab-cell` cuts alike), its runs stored in the bisect's
study run as a round's are, numbered after that kernel's boots before.

The work directory is claimed once for the whole run, and the host's hygiene (lab/hygiene.py,
--tune-host) held inside that claim across every round, restored however the run ends; each
boot's QEMU and boot directory are journalled there (`fslab cleanup` ends what a kill -9 left).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from fslab.core.errors import FslabError
from fslab.core.workdir import Workdir
from fslab.filesystems import FILESYSTEMS
from fslab.lab import kernels as lab_kernels, openzfs, passthrough as lab_passthrough, progress, vm
from fslab.lab.kernels import KernelFailed
from fslab.model import Host, Study, kernel_hosts
from fslab.results import ResultsDB
from fslab.results.copy import append_runs
from fslab.results.db import add_to_lab
from fslab.results.location import DatabaseLost, DatabaseUnusable, shown
from fslab.results.owner import Owner
from fslab.running import environment
from fslab.running.plan import Repetitions, new_seed
from fslab.running.runner import (
    Hold,
    RunObserver,
    StudyCannotRun,
    StudyStopped,
    claimed,
    held,
    run_study,
    study_run_settings,
)

HOST = lab_kernels.HOST  # --kernel host: this machine's own kernel, bare metal
GUEST_SHARE = Path(vm.SHARE)  # where the guest sees the share
GUEST_SCRATCH = Path(vm.SCRATCH)  # the guest's scratch disk: its work directory and database
STUDY_FILE, RESULTS_FILE = "study.toml", "results.db"

Say = Callable[[str], None]


class LabStudyError(FslabError):
    pass


@dataclass
class _Kernel:
    """A kernel of the study run as the rounds go: its prepared package (None: "host", or not yet)."""

    release: str
    prepared: Any = None
    failed: str | None = None  # why it was left out (prepare or boot failed)
    ran: bool = False  # a share of it stored (a failure at a later boot leaves its earlier boots' runs)


@dataclass
class Numbering:
    """Where the next boot's runs of each host start: its repetitions after the boots before,
    per (target, workload, warm-up), and its blocks after theirs."""

    repetitions: dict[tuple[str, str, str, bool], int] = field(default_factory=dict)
    blocks: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, stored: list[dict], hosts: set[str]) -> Numbering:
        """The numbering after the runs stored of `hosts` (a fleet's unit taken again)."""
        found = cls()
        for row in stored:
            if row["host"] in hosts:
                key = (row["host"], row["target"], row["workload"], bool(row["warmup"]))
                found.repetitions[key] = max(found.repetitions.get(key, 0), row["repetition"])
                found.blocks[row["host"]] = max(found.blocks.get(row["host"], 0), row["block"] or 0)
        return found

    def repetition(self, host: str, target: str, workload: str, warmup: bool, repetition: int) -> int:
        """The repetition a run of the next boot of `host` numbered `repetition` has in the study run."""
        return repetition + self.repetitions.get((host, target, workload, bool(warmup)), 0)

    def renumbered(self, host: str, boot_id: str | None, rows: list[dict]) -> list[dict]:
        """The rows of one boot of `host` as the study run keeps them; the numbering moved past them."""
        block_offset = self.blocks.get(host, 0)
        out = []
        for row in rows:
            out.append(
                row
                | {
                    "host": host,
                    "boot_id": boot_id,
                    "repetition": self.repetition(
                        host, row["target"], row["workload"], row["warmup"], row["repetition"]
                    ),
                    "block": row["block"] + block_offset,
                }
            )
        for row in out:
            key = (host, row["target"], row["workload"], bool(row["warmup"]))
            self.repetitions[key] = max(self.repetitions.get(key, 0), row["repetition"])
            self.blocks[host] = max(self.blocks.get(host, 0), row["block"])
        return out


def run_on_kernels(
    study: Study,
    kernels: Sequence[str],
    *,
    results: ResultsDB,
    workdir: Path,
    boots: int = 1,
    observer: RunObserver | None = None,
    prepare: Callable[..., Any] | None = None,
    boot: Callable[..., Any] | None = None,
    destroy_flags: Sequence[str] = (),
    hold: Hold | None = None,
    **run_options: Any,
) -> int:
    """The study run's id. `run_options`: run_study's (repetitions, seed, baseline,
    skip_unsupported), each given to every kernel's share alike. `prepare` and `boot` are
    kernels.prepare and vm.boot (a test's stand-ins where given). `destroy_flags`: the
    --destroy-data paths that confirm the user's devices the study names. The work directory is
    claimed for the whole run, and `hold` (the host's hygiene, --tune-host: runner.Hold) held
    across all its rounds, its boots' QEMUs journalled there."""
    kernels = list(dict.fromkeys(kernels))
    devices = check_kernel_study(study, kernels, boots, run_options, destroy_flags)
    prepare, boot = prepare or lab_kernels.prepare, boot or vm.boot
    repetitions: Repetitions = run_options.pop("repetitions", None) or Repetitions(study.repetitions, study.warmup)
    seed = run_options.pop("seed", None)
    plan_seed = seed if seed is not None else study.seed if study.seed is not None else new_seed()
    study = replace(study, repetitions=repetitions.runs, warmup=repetitions.warmup)
    work = Workdir(workdir)
    lab: dict[str, Any] = {"kernels": kernels, "boots": boots, "failed": []}
    settings = (
        repetitions.describe()
        | ({"baseline": run_options["baseline"]} if run_options.get("baseline") else {})
        | study_run_settings(study, [])
        | {"lab": lab}
    )
    versions = {kind: FILESYSTEMS[kind].version() for kind in {t.filesystem for t in study.targets}}
    if observer:
        observer.announce(study, [])
    run_options["destroy_flags"] = tuple(destroy_flags)  # "host"'s runs: its runner checks the devices too
    here = study if HOST in kernels else None  # only this machine's share makes images in the work directory
    with claimed(here, work, observer), held(hold, work) as holding:
        study_run_id = results.begin_study_run(
            study, plan_seed, environment.collect(work.root) | holding, versions, settings, Owner.current(work.root)
        )
        say = observer.notice if observer else _silent
        run = _Run(study, results, study_run_id, work, repetitions, boot, say, observer, prepare, run_options, devices)
        state = [_Kernel(k) for k in kernels]
        status = "interrupted"
        try:
            run.rounds(state, boots, plan_seed, lab)
            status = "finished"
        finally:
            results.finish_study_run(study_run_id, status, run.outcome)
    if not any(k.ran for k in state):
        raise LabStudyError(
            f"study run {study_run_id}: no kernel ran it: " + "; ".join(f"{k.release}: {k.failed}" for k in state)
        )
    return study_run_id


def run_unit_on_kernels(
    study: Study,
    lab: dict,
    *,
    results: ResultsDB,
    study_run_id: int,
    plan_seed: int,
    repetitions: Repetitions,
    work: Workdir,
    machine: Host,
    say: Say,
    observer: RunObserver | None = None,
    fence: Callable[[Any], None] | None = None,
    check: Callable[[], None] | None = None,
    busy: Callable[..., None] | None = None,
    prepare: Callable[..., Any] | None = None,
    boot: Callable[..., Any] | None = None,
    **run_options: Any,
) -> tuple[dict, list[dict]]:
    """A fleet's worker's unit of a study run over kernels (fleet/worker.py): the rounds of
    run_on_kernels for this worker's `machine`, each kernel's runs stored in the fleet's study run
    `study_run_id` under its host as kernel_host names it on a worker ("RELEASE@WORKER"; "host":
    the worker's own name). `lab`: the study run's settings' (fleet/units.py's KernelShare decoded
    it). A unit taken again (its worker stopped or gone) goes on: the shares this worker recorded
    done (lab's "done") are not run again, the kernels it recorded failed stay out, and the runs of
    a share cut short (stored, if at all, only as a whole boot) are numbered after those stored.
    `fence`: called in the transaction that stores a boot's runs (and records its share done),
    raising where the unit's lease was taken meanwhile (none stored). `check`: called before each
    share, raising where the worker may no longer run (its host lock lost). The outcome of its
    cells, and its kernels that failed; LabStudyError where no kernel ran a share here."""
    kernels = [str(k) for k in lab["kernels"]]
    boots = int(lab["boots"])
    check_kernel_study(
        study, kernels, boots, {}, fleet=True
    )  # the database's text: each a release, before anything runs
    run = _Run(
        study, results, study_run_id, work, repetitions, boot or vm.boot, say, observer, prepare or lab_kernels.prepare,
        dict(run_options), machine=machine, worker=True, fence=fence, check=check,
    )  # fmt: skip
    mine = {run.host_name(k) for k in kernels}
    run.numbering = Numbering.of(results.runs(study_run_id, _NUMBERED), mine)
    state = [_Kernel(k) for k in kernels]
    before = [f for f in lab.get("failed", []) if f.get("host") in mine]
    done = {d.get("host") for d in lab.get("done", [])}
    for kernel in state:
        kernel.failed = next((f["why"] for f in before if f.get("kernel") == kernel.release), None)
        kernel.ran = run.host_name(kernel.release) in done  # a share stored before it was taken again
    here = study if HOST in kernels else None
    with claimed(here, work, observer, busy):
        run.rounds(state, boots, plan_seed, lab)
    failed = [f for f in lab.get("failed", []) if f.get("host") in mine]
    if not any(k.ran for k in state):
        raise LabStudyError("no kernel ran here: " + "; ".join(f"{k.release}: {k.failed}" for k in state))
    return run.outcome, failed


_NUMBERED = ("host", "target", "workload", "warmup", "repetition", "block")


def check_kernel_study(
    study: Study,
    kernels: Sequence[str],
    boots: int,
    run_options: dict,
    destroy_flags: Sequence[str] = (),
    *,
    fleet: bool = False,
) -> lab_passthrough.Passthrough:
    """What a study run over kernels refuses before anything begins, all at once; the user's
    devices it names, confirmed by `destroy_flags` and unused, as the VMs get them. `fleet`: to
    run on a fleet's workers (`--on`), where each release is checked now (the units would all
    fail) and no device of the user's reaches a VM."""
    problems = []
    if not kernels:
        problems.append("--kernel: name at least one kernel release (or host)")
    if fleet:
        for release in kernels:
            if release != HOST:
                try:
                    lab_kernels.check_release(release)
                except FslabError as exc:
                    problems.append(f"--kernel: {exc}")
    if boots < 1:
        problems.append(f"--boots {boots}: give 1 or more")
    if boots > 1 and kernels == [HOST]:
        problems.append("--boots: this machine's own kernel boots once; name a kernel package to boot it again")
    repetitions = run_options.get("repetitions")
    if repetitions is not None and repetitions.adaptive:
        problems.append(
            "--target-ci and --decide cannot go with --kernel: each boot runs an exact plan (give --runs and --boots)"
        )
    devices, named = lab_passthrough.Passthrough(), list(dict.fromkeys(d for t in study.targets for d in t.named))
    if fleet and named:  # --on refuses --destroy-data: never told to add it
        problems.append(
            f"{study.path} names the user's device(s) {', '.join(named)}: a study on a user's devices cannot go "
            "to a fleet's VMs; run it over kernels here (--kernel and --destroy-data, without --on)"
        )
    else:
        devices, refused = lab_passthrough.plan(study, destroy_flags)
        problems += refused
    problems += _not_self_contained(study)
    if problems:
        raise LabStudyError("the study cannot run on kernels; nothing was started:\n  " + "\n  ".join(problems))
    return devices


def _not_self_contained(study: Study) -> list[str]:
    """The study reaches the guest as its text alone (the share): a file beside it is not there."""
    try:
        tables = tomllib.loads(study.source).get("workload", [])
    except tomllib.TOMLDecodeError:
        return []
    named = [w.get("name", "?") for w in tables if isinstance(tables, list) and isinstance(w, dict) and "job_file" in w]
    return [
        f"{study.path}: workload {name!r} names a job_file; a lab VM reads the study's text alone: write the "
        'job\'s options in the study ([[workload]] with kind = "fio" and its options)'
        for name in named
    ]


def guest_arguments(study: Study, repetitions: Repetitions, seed: int, run_options: dict) -> list[str]:
    """`fslab run`'s options in the guest: the same study as here (scaled, its ceiling, traces),
    the same exact plan, this boot's seed (the devices' --destroy-data: Passthrough.guest_flags)."""
    args = ["--runs", str(repetitions.runs), "--warmup", str(repetitions.warmup), "--seed", str(seed)]
    if study.scale != 1.0:
        args += ["--scale", repr(study.scale)] + (["--scale-sizes-only"] if study.scale_sizes_only else [])
    if study.no_ceiling:
        args.append("--no-ceiling")
    for trace in study.traces:
        args += ["--trace", trace]
    if study.redo_disturbed:
        args.append("--redo-disturbed")
    if study.cell is not None:  # the guest cuts the study's text to the same cell (Study.only)
        args += ["--lab-cell", *study.cell]
    if run_options.get("baseline"):
        args += ["--baseline", run_options["baseline"]]
    if run_options.get("skip_unsupported"):
        args.append("--skip-unsupported")
    args += ["--threshold", f"{repetitions.threshold * 100:g}"]
    return args + ["--lab-progress", str(GUEST_SHARE / progress.FILE)]  # its runs told to the host as they end


def guest_command(arguments: list[str]) -> str:
    """The guest's shell text: fslab's own, every argument quoted; its database copied to the share
    whatever fslab's exit status (a failed run is stored too), which is the command's. No summary
    there: the host summarises the runs it stores (under emulation the guest's would take seconds,
    statistics and reports loaded for it)."""
    run = shlex.join(
        [
            sys.executable, "-m", "fslab", "run", str(GUEST_SHARE / STUDY_FILE),
            "--db", str(GUEST_SCRATCH / RESULTS_FILE), "--workdir", str(GUEST_SCRATCH / "work"), *arguments,
            "--no-summary",
        ]
    )  # fmt: skip
    copy = shlex.join(["cp", str(GUEST_SCRATCH / RESULTS_FILE), str(GUEST_SHARE / RESULTS_FILE)])
    return f"{run}; status=$?; {copy} && exit $status"


def boot_once(
    study: Study,
    kernel: Any,
    *,
    runs: int,
    seed: int,
    results: ResultsDB,
    study_run_id: int,
    work: Workdir,
    numbering: Numbering,
    say: Say | None = None,
) -> list[dict]:
    """One boot of a prepared kernel (kernels.PreparedKernel) running the study `runs` times a cell,
    no warm-up, as a round of `fslab run --kernel` boots it (`fslab bisect`'s measurement): the same
    guest command, its progress said, its runs stored in `study_run_id` as runs of the kernel's host
    numbered after its boots before (`numbering`, kept by the caller across boots). The rows stored;
    KernelFailed where its VM did not boot, crashed or stored nothing. No user's device is passed
    through: a study naming one is refused before (its guest would have no --destroy-data)."""
    study = replace(study, repetitions=runs, warmup=0)  # the boot's time limit is of these runs
    run = _Run(study, results, study_run_id, work, Repetitions(runs), vm.boot, say or _silent, numbering=numbering)
    return run.booted(kernel, seed, kernel.release)[1]


def _silent(_: str) -> None:
    pass


@dataclass
class _Run:
    """One study run over kernels, as its shares are stored into it."""

    study: Study
    results: ResultsDB
    study_run_id: int
    work: Workdir  # claimed by run_on_kernels for the whole run (boot_once: by its caller)
    repetitions: Repetitions
    boot: Callable[..., Any]  # vm.boot (a test's stand-in where given)
    say: Say
    observer: RunObserver | None = None  # this machine's runs told as they run
    prepare: Callable[..., Any] = lab_kernels.prepare
    run_options: dict = field(default_factory=dict)
    devices: lab_passthrough.Passthrough = field(default_factory=lab_passthrough.Passthrough)
    numbering: Numbering = field(default_factory=Numbering)
    outcome: dict[str, dict] = field(default_factory=dict)
    machine: Host | None = None  # the machine that runs it (None: this one, environment.host())
    worker: bool = False  # on a fleet's worker: its hosts named so (model/kernel_hosts.py)
    fence: Callable[[Any], None] | None = None  # a fleet's unit: raises in a boot's store once its lease is taken
    check: Callable[[], None] | None = None  # a fleet's unit: raises before a share where its worker may not run it
    recording: dict | None = None  # on a worker: the share under way's entry of lab's "done", stored with its runs
    stored: bool = False  # the share under way's runs stored (_store)

    def host_name(self, kernel: str) -> str:
        """The host `kernel`'s runs are stored under (model/kernel_hosts.py: the one rule)."""
        if self.machine is None:
            self.machine = environment.host()
        return kernel_hosts.kernel_host(kernel, self.machine.name, worker=self.worker)

    def rounds(self, state: list[_Kernel], boots: int, plan_seed: int, lab: dict) -> None:
        """Rounds interleave the kernels — K1 boot 1, K2 boot 1, host, K1 boot 2, … —, each share's
        seed its round's; a share recorded done (lab's "done": a unit taken again) is not run again."""
        done = {(d.get("host"), d.get("boot")) for d in lab.get("done", [])}
        for round_ in range(1, boots + 1):
            for kernel in (k for k in state if k.failed is None):
                if (self.host_name(kernel.release), round_) not in done:
                    if self.check is not None:  # e.g. a worker's host lock, between boots of its VMs too
                        self.check()
                    self.share(kernel, round_, boots, (plan_seed + round_ - 1) % 2**31, lab)

    def share(self, kernel: _Kernel, round_: int, boots: int, seed: int, lab: dict) -> None:
        """A kernel's share of one round: its runs stored, its cells' outcome added; or, where it
        fails, the kernel left out of the rounds after, said and recorded in `lab`'s failed."""
        where = f"{kernel.release}, boot {round_} of {boots}" if kernel.release != HOST else f"here, round {round_}"
        host = self.host_name(kernel.release)
        # on a worker, recorded done in the transaction storing its runs (_fenced): a unit taken again
        # after a stop between the two would store the boot again
        self.recording = {"host": host, "boot": round_} if self.worker else None
        self.stored = False
        try:
            stored = self.here(seed, where) if kernel.release == HOST else self.guest(kernel, seed, where)
        except KernelFailed as exc:
            kernel.ran = kernel.ran or self.stored  # this machine's share stopped (StudyStopped): its runs kept
            kernel.failed = str(exc)
            failed = {"kernel": kernel.release, "boot": round_, "why": kernel.failed, "host": host}
            lab.setdefault("failed", []).append(failed)
            self.results.add_to_lab(self.study_run_id, "failed", failed)
            self.say(f"{where}: skipped, {kernel.failed}")
            return
        if self.recording is not None:  # stored (_fenced): a unit taken again runs only what is not recorded done
            lab.setdefault("done", []).append(self.recording)
        kernel.ran = True
        for cell, o in stored.items():
            before = self.outcome.get(cell)
            self.outcome[cell] = o | ({"runs": before.get("runs", 0) + o.get("runs", 0)} if before else {})

    def guest(self, kernel: _Kernel, seed: int, where: str) -> dict:
        """One boot of a kernel's VM running the plan: its runs stored, its cells' outcome."""
        if kernel.prepared is None:
            try:
                kernel.prepared = self.prepare(kernel.release, say=self.say)
            except FslabError as exc:
                raise KernelFailed(f"its package could not be prepared: {exc}") from None
        return self.booted(kernel.prepared, seed, where)[0]

    def booted(self, prepared: Any, seed: int, where: str) -> tuple[dict, list[dict]]:
        """One boot of a prepared kernel's VM running the plan: its cells' outcome, and the runs stored."""
        try:  # the modules its targets need loaded in the guest: OpenZFS (built once), md, dm-crypt, LVM
            setup = openzfs.for_guest(self.study, prepared.release, say=self.say)
        except FslabError as exc:
            raise KernelFailed(f"OpenZFS could not be built for it: {exc}") from None
        for note in setup.notes:
            self.say(f"{where}: {note}")
        arguments = guest_arguments(self.study, self.repetitions, seed, self.run_options)
        command = guest_command(arguments + self.devices.guest_flags())
        # the devices proven again right before the boot (Refused: the study run stops), QEMU's to use
        with boot_share(self.work.root) as share, self.devices.opened(self.say) as disks:
            (share / STUDY_FILE).write_text(self.devices.guest_source(self.study))
            self.say(f"{where}: booting")
            started = time.monotonic()
            streamed: set[tuple] = set()  # the runs told as the guest ran them
            name = self.host_name(prepared.release)  # its host: named by its release (on a worker, and the worker's)
            told = partial(self._streamed, where, name, streamed)
            try:
                with progress.tailing(progress.make(share), told):
                    booted = self.boot(
                        prepared,
                        command,
                        share=share,
                        setup=setup.script,
                        spec=vm.VmSpec(memory_mib=setup.memory_mib, disks=disks),
                        timeout=setup.timeout,
                        scratch_bytes=setup.scratch_bytes,
                        journal=self.work.journal,  # its QEMU and boot directory, for `fslab cleanup` after a kill -9
                    )
            except vm.GuestCrashed as exc:  # its kernel panicked or oopsed: said as the console said it
                raise KernelFailed(str(exc)) from None
            except FslabError as exc:
                raise KernelFailed(f"it did not boot: {exc}") from None
            database = share / RESULTS_FILE
            tail = " / ".join((booted.output or booted.console or "").strip().splitlines()[-3:]) or "it said nothing"
            if not database.is_file():
                ended = (
                    f"ended with status {booted.status}"
                    if booted.status is not None
                    else "did not boot or hung before its command,"
                    if booted.seconds_to_command is None  # its guest never said it began the command
                    else "did not end"
                )
                raise KernelFailed(f"its VM {ended} and stored no results ({tail})")
            try:
                stored, rows = self._store(database, name, booted.boot_id, where, streamed=streamed)
            except KernelFailed as exc:  # fslab in the guest refused the study, say: what it said
                raise KernelFailed(f"{exc} ({tail})") from None
            self.results.record_host(self.study_run_id, replace(booted.host, name=name))
            self.say(_stored_line(where, stored, started))
            return stored, rows

    def here(self, seed: int, where: str) -> dict:
        """This machine's share of one round: the ordinary runner into a database of its own (its
        runs told as they run), then stored as a boot's are."""
        host = replace(self.machine or environment.host(), name=self.host_name(HOST))
        with boot_share(self.work.root) as share:
            self.say(f"{where}: running on this machine's kernel")
            started = time.monotonic()
            own, stopped = ResultsDB(str(share / RESULTS_FILE)), None
            try:
                run_study(
                    self.study, own, self.work, repetitions=self.repetitions, seed=seed,
                    observer=_Quiet(self.observer), host=host, already_claimed=True, **self.run_options,
                )  # fmt: skip
            except StudyCannotRun as exc:
                raise KernelFailed(f"it cannot run here: {exc}") from None
            except StudyStopped as exc:  # its runs so far are stored, then it is left out as a failed kernel is
                stopped = str(exc)
            finally:
                own.engine.dispose()
            stored, _ = self._store(share / RESULTS_FILE, host.name, environment.boot_id(), where)
            self.results.record_host(self.study_run_id, host)
            self.say(_stored_line(where, stored, started))
            if stopped:
                raise KernelFailed(stopped)
            return stored

    def _fenced(self, conn: Any) -> None:
        """In the transaction storing a boot's runs on a worker: the unit's lease checked, then the
        share recorded done — its runs and its record stored together, or neither."""
        if self.fence is not None:
            self.fence(conn)
        if self.recording is not None:
            add_to_lab(conn, self.study_run_id, "done", self.recording)

    def _streamed(self, where: str, host: str, streamed: set[tuple], said: progress.Progress) -> None:
        """A line of a guest's progress, told as it comes (progress.tailing's thread): a run numbered
        as the study run will store it."""
        if said.notice is not None:
            self.say(f"{where}: {said.notice}")
        elif (run := said.run) is not None:
            target = self.devices.host_names().get(run.target, run.target)  # as _store names it
            repetition = self.numbering.repetition(host, target, run.workload, run.warmup, run.repetition)
            streamed.add((target, run.workload, run.warmup, repetition))
            self.say(_run_line(where, target, run.workload, run.warmup, repetition, run.status, run.error))

    def _store(
        self, database: Path, host: str, boot_id: str | None, where: str, *, streamed: set[tuple] | None = None
    ) -> tuple[dict, list[dict]]:
        """One boot's study run copied into this one: its cells' outcome with how many runs (_TOTAL),
        and the rows stored.
        `streamed`: the guest's runs told as they ran; the others are told now (None: all were told)."""
        try:
            source = ResultsDB(str(database), named=f"the database of {where}")
        except DatabaseUnusable as exc:  # damaged by a crash or a time-out, say: this kernel's share is lost
            raise KernelFailed(f"its database is unusable: {exc}") from None
        try:
            found = source.study_runs()
            if len(found) != 1:
                raise KernelFailed(f"its database holds {len(found)} study runs, not one")
            (guest_run,) = found
            names = self.devices.host_names()  # a device's ceiling, named in the guest by the guest's path

            def adjust(rows: list[dict]) -> list[dict]:
                named = [row | {"target": names.get(row["target"], row["target"])} for row in rows]
                return self.numbering.renumbered(host, boot_id, named)

            stored = append_runs(source, guest_run["id"], self.results, self.study_run_id, adjust, fence=self._fenced)
            self.stored = True
        except DatabaseLost as exc:
            if exc.location != shown(str(database)):
                raise  # this study run's own database: the run stops, as any run's would
            raise KernelFailed(f"its database is unusable: {exc.reason}") from None
        finally:
            source.engine.dispose()
        late = 0
        for row in stored:
            if (
                streamed is not None
                and (row["target"], row["workload"], bool(row["warmup"]), row["repetition"]) not in streamed
            ):
                late += 1
                self.say(_run_line(where, row["target"], row["workload"], bool(row["warmup"]), row["repetition"],
                                   row["status"], row.get("error") or ""))  # fmt: skip
        cells = {f"{_renamed(k, names)} @ {host}": v for k, v in (guest_run.get("outcome") or {}).items()}
        ok = sum(r["status"] == "ok" for r in stored)
        return cells | {_TOTAL: {"runs": len(stored), "ok": ok, "late": late}}, stored


def _run_line(where: str, target: str, workload: str, warmup: bool, repetition: int, status: str, error: str) -> str:
    said = "ok" if status == "ok" else f"{status}: {error}"
    return f"{where}: {target} · {workload} · {'warm-up' if warmup else 'run'} {repetition}: {said}"


def _renamed(cell: str, names: dict[str, str]) -> str:
    """A cell ("target · workload") with its target's host name."""
    target, sep, workload = cell.partition(" · ")
    return names.get(target, target) + sep + workload


_TOTAL = "(runs)"  # not a cell: how many runs a boot stored, for its progress line


def _stored_line(where: str, stored: dict, started: float) -> str:
    """A boot's (or this machine's share's) last line: its runs stored, in how long."""
    total = stored.pop(_TOTAL, {"runs": 0, "ok": 0})
    failed, late = total["runs"] - total["ok"], total.get("late", 0)
    told = f"; {late} told only as it ended (the guest's progress did not reach the host)" if late else ""
    counted = f"{total['runs']} run(s)" + (f" ({failed} failed)" if failed else "")
    return f"{where}: {counted} stored in {time.monotonic() - started:.0f} s{told}"


@contextmanager
def boot_share(root: Path) -> Iterator[Path]:
    """A folder of fslab's own under the work directory for one boot (its study file in, its
    database out), removed after: proved the very folder made (device and inode) first."""
    parent = root / "lab"
    parent.mkdir(parents=True, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix="share-", dir=parent))
    identity = (made.stat().st_dev, made.stat().st_ino)
    try:
        yield made
    finally:
        now = os.lstat(made)
        if (now.st_dev, now.st_ino) == identity and not made.is_symlink():
            shutil.rmtree(made, ignore_errors=True)


class _Quiet:
    """The observer of this machine's share: its runs told as they run, the study announced once (by run_on_kernels)."""

    def __init__(self, observer: RunObserver | None):
        self.observer = observer

    def announce(self, study: Study, skipped: list) -> None:
        if self.observer and skipped:
            self.observer.notice("here: skipped " + ", ".join(f"{u.target} ({u.why})" for u in skipped))

    def notice(self, message: str) -> None:
        if self.observer:
            self.observer.notice(message)

    def starting(self, planned: Any, index: int, total: int) -> None:
        if self.observer:
            self.observer.starting(planned, index, total)

    def finished(self, planned: Any, record: Any) -> None:
        if self.observer:
            self.observer.finished(planned, record)

    def already_stored(self, planned: Any, index: int, total: int) -> None:
        if self.observer:
            self.observer.already_stored(planned, index, total)
