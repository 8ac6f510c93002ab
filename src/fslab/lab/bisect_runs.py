"""`fslab bisect`'s measurements in the lab: each `measure(release, runs)` boots the kernel once and
runs the bisected cell there `runs` times as `fslab run --kernel` runs a study in a lab VM
(lab/study.py's boot_once: the same guest command, on the study cut to the cell, Study.only), its
runs added to the bisect's one study run in the host's database, the kernel's VM their host
(model.Host, named by its release) — so `fslab summary` shows every step's runs, kernel by kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from fslab.core.errors import FslabError
from fslab.core.names import visible
from fslab.core.workdir import Workdir
from fslab.filesystems import FILESYSTEMS
from fslab.lab import kernels, vm
from fslab.lab.bisect import BisectError, KernelFailed, Outcome, Rule, Samples, bisect, check_metric, in_range, resolve
from fslab.lab.study import Numbering, boot_once, check_kernel_study
from fslab.model import Study, qualified, unqualified
from fslab.results import ResultsDB
from fslab.results.owner import Owner
from fslab.running import environment
from fslab.running.plan import Repetitions
from fslab.running.runner import claimed, study_run_settings

TAIL = 600  # characters of a failed run's error said


def one_cell(study: Study, target: str, workload: str) -> Study:
    """The study cut to one cell (`--target`, `--workload`), with no raw reference added; a target
    on the user's own devices refused (a bisect's VMs get none of them)."""
    targets = [t for t in study.targets if t.name == target]
    if not targets:
        names = ", ".join(t.name for t in study.targets)
        raise BisectError(f"--target {visible(target)}: study {study.name} has no such target; its targets: {names}")
    if targets[0].named:
        raise BisectError(
            f"--target {visible(target)}: its filesystem is made on your device {', '.join(targets[0].named)}, which "
            "fslab bisect cannot use (its VMs get no device of yours, nor --destroy-data); bisect a target on "
            "fslab's own images (the same target without device/devices), or run the study on the device under "
            "each kernel with `fslab run STUDY --kernel K --kernel K2 … --destroy-data DEVICE`"
        )
    if not any(w.name == workload for w in study.workloads):
        names = ", ".join(w.name for w in study.workloads)
        raise BisectError(
            f"--workload {visible(workload)}: study {study.name} has no such workload; its workloads: {names}"
        )
    return study.only(target, workload)


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
    study_run_id: int = field(init=False)
    numbering: Numbering = field(default_factory=Numbering, init=False)  # each kernel's runs after its boots before
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
        stored = boot_once(
            self.study, kernel, runs=runs, seed=(self.seed + self.boots) % 2**31, results=self.results,
            study_run_id=self.study_run_id, work=self.workdir, numbering=self.numbering, say=self.say,
        )  # fmt: skip
        return self._samples(stored)

    def _samples(self, stored: list[dict]) -> Samples:
        """The metric's values of a boot's runs that ended well, as the study run stored them."""
        ended_well = {r["id"] for r in stored if r["status"] == "ok" and not r["warmup"] and not r["redone"]}
        if not ended_well:
            errors = [r["error"] for r in stored if r.get("error")]
            raise KernelFailed(f"no run of the cell ended well: {visible((errors or ['no error said'])[0])[:TAIL]}")
        found = self.results.metric_values(self.study_run_id, [unqualified(self.metric)])
        values = tuple(
            value
            for (run, phase, name), value in sorted(found.items())
            if run in ended_well and qualified(phase, name) == self.metric
        )
        groups = self.results.sample_groups(self.study_run_id)
        if not values:
            reported = next(iter(groups.values.values()), {})
            raise BisectError(
                f"--metric {visible(self.metric)}: the cell's runs report no such metric; they report: "
                f"{', '.join(sorted(reported))}"
            )
        return Samples(values, groups.higher_is_better.get(self.metric, True))

    def finish(self, status: str, found: dict) -> None:
        """The study run ended; what the bisect found kept in its settings' "bisect" (the study run's
        outcome is its cells' own, as the summary reads it)."""
        if found:
            self.results.update_settings(self.study_run_id, {"bisect": self.settings["bisect"] | found})
        self.results.finish_study_run(self.study_run_id, status, {})


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
    check_kernel_study(study, releases, 1, {})  # as `fslab run --kernel` would: its text alone reaches the guest
    rule = replace(rule, resolution=resolution(study.workloads[0].kind, metric))
    # The work directory is this bisect's alone while its boots are journalled and shared there: a
    # `fslab run` or `fslab cleanup` beside it waits or is refused, never releasing a live QEMU.
    with claimed(None, workdir, None):
        measure = LabMeasure(study, metric, results, workdir, settings_of(study, releases, metric, rule), say=say)
        cell = f"{target} · {workload}"
        say(f"bisecting {metric} of {cell} over {len(releases)} kernels (study run {measure.study_run_id})")
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
