"""`fslab bisect`'s measurements in the lab: each `measure(release, runs)` boots the kernel once
(kernels.prepare, vm.boot), runs the bisected cell there `runs` times with fslab's own runner into
the guest's database on its scratch disk, and adds those runs to the bisect's one study run in the
host's database, the kernel's VM their host (model.Host, named by its release) — so `fslab
summary` shows every step's runs, kernel by kernel.

The guest side is this module run as a program (`python -m fslab.lab.bisect_runs …`, main below):
the study file's text comes through the share (the guest may not read the user's directory: vm's
masking), its cell is cut out as the host cut it, and the database is handed back by SQLite's own
backup (the share is 9p, where SQLite's WAL does not work).
"""

from __future__ import annotations

import shlex
import sqlite3
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from fslab.core.errors import FslabError
from fslab.core.names import visible
from fslab.core.workdir import Workdir
from fslab.filesystems import FILESYSTEMS
from fslab.lab import kernels, vm
from fslab.lab.bisect import BisectError, KernelFailed, Outcome, Rule, Samples, bisect, check_metric, in_range, resolve
from fslab.lab.study import Numbering, boot_share
from fslab.model import Study
from fslab.results import ResultsDB
from fslab.results.copy import append_runs
from fslab.results.owner import Owner
from fslab.running import environment
from fslab.running.plan import Repetitions
from fslab.running.runner import study_run_settings

GUEST_DB = "guest.db"
STUDY_FILE = "study.toml"
# The guest's kernel has the filesystems as modules: loaded before the runs (fslab's own text).
SETUP = "for m in loop btrfs xfs; do modprobe -q $m; done"
BOOT_SECONDS = 1800.0  # a boot, its runs under emulation and its power-off
TAIL = 600  # characters of a failed boot's output or console said


def one_cell(study: Study, target: str, workload: str) -> Study:
    """The study cut to one cell (`--target`, `--workload`), with no raw reference added."""
    targets = [t for t in study.targets if t.name == target]
    if not targets:
        names = ", ".join(t.name for t in study.targets)
        raise BisectError(f"--target {visible(target)}: study {study.name} has no such target; its targets: {names}")
    workloads = [w for w in study.workloads if w.name == workload]
    if not workloads:
        names = ", ".join(w.name for w in study.workloads)
        raise BisectError(
            f"--workload {visible(workload)}: study {study.name} has no such workload; its workloads: {names}"
        )
    return replace(study, targets=targets, workloads=workloads, baseline=None, no_ceiling=True)


def settings_of(study: Study, releases: Sequence[str], metric: str, rule: Rule) -> dict:
    """Stored with the bisect's study run: what it bisected, and its repetitions as the summary reads
    them — runs added as they came (decide), so its intervals are drawn over the same looks."""
    repetitions = Repetitions(runs=rule.runs, max_runs=rule.max_runs, threshold=rule.threshold, decide=True)
    cell = study.cells[0]
    bisect = {"kernels": list(releases), "target": cell.target.name, "workload": cell.workload.name, "metric": metric}
    return repetitions.describe() | study_run_settings(study, []) | {"bisect": bisect}


@dataclass
class LabMeasure:
    """measure(release, runs) for bisect(): one boot of the kernel, `runs` runs of the one cell,
    stored in the study run it began (`study_run_id`); a kernel that fails says so (KernelFailed)."""

    study: Study  # one cell (one_cell)
    metric: str
    results: ResultsDB
    workdir: Workdir
    settings: dict
    say: Callable[[str], None] = lambda _: None
    prepare: Callable[[str], kernels.PreparedKernel] | None = None  # default: kernels.prepare into its cache
    spec: vm.VmSpec = field(default_factory=vm.VmSpec)
    timeout: float = BOOT_SECONDS
    study_run_id: int = field(init=False)
    numbering: Numbering = field(default_factory=Numbering, init=False)  # lab/study.py's: each host's runs in turn
    seed: int = field(default=0, init=False)
    boots: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.seed = self.study.seed if self.study.seed is not None else 0
        versions = {kind: FILESYSTEMS[kind].version() for kind in {t.filesystem for t in self.study.targets}}
        self.study_run_id = self.results.begin_study_run(
            self.study,
            self.seed,
            environment.collect(self.workdir.root),
            versions,
            self.settings,
            Owner.current(self.workdir.root),
        )

    def __call__(self, release: str, runs: int) -> Samples:
        try:
            kernel = self.prepare(release) if self.prepare else kernels.prepare(release, say=self.say)
        except FslabError as failed:
            raise KernelFailed(f"could not be prepared: {failed}") from None
        self.boots += 1
        with boot_share(self.workdir.root) as share:
            return self._measured(kernel, runs, share)

    def _measured(self, kernel: kernels.PreparedKernel, runs: int, share: Path) -> Samples:
        (share / STUDY_FILE).write_text(self.study.source)
        command = shlex.join(
            [
                sys.executable, "-m", "fslab.lab.bisect_runs", f"{vm.SHARE}/{STUDY_FILE}", self.study.path,
                self.study.cells[0].target.name, self.study.cells[0].workload.name, str(runs), repr(self.study.scale),
                "1" if self.study.scale_sizes_only else "0", str(self.seed + self.boots), f"{vm.SHARE}/{GUEST_DB}",
            ]
        )  # fmt: skip
        try:
            boot = vm.boot(
                kernel, command, share=share, spec=self.spec, setup=SETUP, timeout=self.timeout,
                journal=self.workdir.journal,
            )  # fmt: skip
        except vm.GuestCrashed as crashed:  # its kernel panicked or oopsed: said as the console said it
            raise KernelFailed(str(crashed)) from None
        except FslabError as failed:
            raise KernelFailed(f"could not be booted: {failed}") from None
        if boot.status is None:
            raise KernelFailed(f"did not boot or did not finish its runs: …{_tail(boot.console)}")
        if boot.status != 0 or not (share / GUEST_DB).is_file():
            raise KernelFailed(f"its runs failed in the guest (exit status {boot.status}): …{_tail(boot.output)}")
        guest = ResultsDB(str(share / GUEST_DB))
        try:
            return self._stored(guest, boot)
        finally:
            guest.engine.dispose()

    def _stored(self, guest: ResultsDB, boot: vm.Boot) -> Samples:
        """The guest's runs added to the bisect's study run; the metric's values of those that ended well."""
        stored = guest.study_run(None)
        if stored is None:
            raise KernelFailed("its guest stored no study run")
        renumbered = partial(self.numbering.renumbered, boot.host.name, boot.boot_id)
        append_runs(guest, stored["id"], self.results, self.study_run_id, renumbered)
        self.results.record_host(self.study_run_id, boot.host)
        groups = guest.sample_groups(stored["id"])
        found = next(iter(groups.values.values()), {})
        if not found:
            errors = [r["error"] for r in guest.runs(stored["id"], ["error"]) if r["error"]]
            raise KernelFailed(f"no run of the cell ended well: {visible((errors or ['no error said'])[0])[:TAIL]}")
        if self.metric not in found:
            raise BisectError(
                f"--metric {visible(self.metric)}: the cell's runs report no such metric; they report: "
                f"{', '.join(sorted(found))}"
            )
        return Samples(tuple(found[self.metric]), groups.higher_is_better.get(self.metric, True))

    def finish(self, status: str, found: dict) -> None:
        """The study run ended; what the bisect found kept in its settings' "bisect" (the study run's
        outcome is its cells' own, as the summary reads it)."""
        if found:
            self.results.update_settings(self.study_run_id, {"bisect": self.settings["bisect"] | found})
        self.results.finish_study_run(self.study_run_id, status, {})


def _tail(text: str) -> str:
    return visible(text.strip()[-TAIL:])


def main(argv: list[str]) -> int:
    """In the guest: run the one cell `runs` times into a database on the scratch disk, and hand it
    back through the share. argv: study file, its path on the host, target, workload, runs, scale,
    sizes only (1/0), seed, the database handed back."""
    from fslab.running.runner import run_study
    from fslab.study import parse_study

    study_file, host_path, target, workload, runs, scale, sizes_only, seed, handed = argv
    text = Path(study_file).read_text()
    base = Path(host_path).parent
    study = parse_study(text, host_path, base_dir=base, scale=float(scale), scale_sizes_only=sizes_only == "1")
    cell = one_cell(study, target, workload)
    scratch = Path(vm.SCRATCH)
    database = scratch / GUEST_DB
    results = ResultsDB(str(database))
    run_study(cell, results, Workdir(scratch / "fslab"), repetitions=Repetitions(runs=int(runs)), seed=int(seed))
    results.engine.dispose()
    with sqlite3.connect(database) as source, sqlite3.connect(handed) as copy:
        source.backup(copy)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def run_bisect(
    study_ref: str,
    *,
    target: str,
    workload: str,
    metric: str,
    kernels_given: str | None,
    range_given: str | None,
    rule: Rule,
    scale: float | None,
    results: ResultsDB,
    workdir: Workdir,
    say: Callable[[str], None],
) -> tuple[Outcome, int]:
    """`fslab bisect`: the study's cell bisected over the kernels named (`--kernels A,B,C`) or ranged
    (`--range A..B`), every step's runs in one study run (its id returned with the outcome)."""
    from fslab.statistics.timing import timing_of
    from fslab.study import load_study
    from fslab.workloads import resolution

    if (kernels_given is None) == (range_given is None):
        raise BisectError("give the kernels as --kernels A,B,C (known-good first, known-bad last) or --range A..B")
    study = one_cell(load_study(study_ref, scale=scale or 1.0), target, workload)
    check_metric(metric, vm.accelerator(), timing_of(metric))
    offered = kernels.offered()
    packages = (
        in_range(range_given, offered)
        if range_given is not None
        else [resolve(name.strip(), offered) for name in (kernels_given or "").split(",") if name.strip()]
    )
    releases = [p.release for p in packages]
    rule = replace(rule, resolution=resolution(study.workloads[0].kind, metric))
    measure = LabMeasure(study, metric, results, workdir, settings_of(study, releases, metric, rule), say=say)
    say(f"bisecting {metric} of {target} · {workload} over {len(releases)} kernels (study run {measure.study_run_id})")
    status, outcome = "interrupted", None
    try:
        outcome = bisect(
            releases, measure, rule=rule, versions={p.release: p.version for p in packages}, metric=metric, say=say
        )
        status = "finished"
    finally:
        measure.finish(status, outcome_of(outcome) if outcome is not None else {})
    return outcome, measure.study_run_id


def outcome_of(outcome: Outcome) -> dict:
    """As stored with the study run (its settings' "bisect"): every step's call, and the answer."""
    steps = [
        {"kernel": s.release, "role": s.role, "boots": s.boots, "runs": s.runs, "verdict": s.verdict, "call": s.call}
        for s in (*outcome.steps, *((outcome.confirmation,) if outcome.confirmation else ()))
    ]
    return {
        "steps": steps,
        "last_good": outcome.last_good,
        "suspects": list(outcome.suspects),
        "first_bad": outcome.first_bad,
        "confirmed": outcome.confirmed,
        "stopped": outcome.stopped,
    }
