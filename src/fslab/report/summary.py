"""The summary of a study run: per workload, targets as rows, and what the comparisons say,
recomputed from the stored samples every time.

One model (`StudySummary`) feeds every format: what the console and Markdown show of it, in
which order, is walked once (sections.py); the other files (formats/) and the page (html.py)
read it as they need.
"""

from __future__ import annotations

import functools
import statistics
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

from fslab.core.checks import Unsupported, by_target
from fslab.core.errors import FslabError
from fslab.core.units import Bandwidth
from fslab.model import Host, Roles, unqualified
from fslab.model.findings import DISTURBED, NOT_MEASURABLE
from fslab.model.records import OptionsApplied, SampleGroups, measured
from fslab.monitors.space import COMPRESSED_FROM
from fslab.monitors.traffic import withheld_amplifications
from fslab.report.arc_share import arc_notes
from fslab.report.kept import Asked
from fslab.results import ResultsDB
from fslab.statistics.analysis import (
    Analysis,
    AnalysisError,
    Hosted,
    Row,
    analyse,
    compare_study_runs,
    explained,
    host_blocks,
    looks_of,
    resolution_of,
)
from fslab.statistics.boots import ONE_BOOT, BootSpread, boot_count, boot_means, spreads
from fslab.statistics.raw_reference import (
    BeyondRaw,
    CachedReference,
    Ceiling,
    beyond_raw,
    cached_references,
    ceilings,
    raw_references,
)
from fslab.statistics.stats import Summary, load_student_t_meanwhile, summarize
from fslab.statistics.timing import EMULATED, timing_of, why_not_compared, why_not_within
from fslab.workloads import report_of
from fslab.workloads.offered import DIRECTIONS, NOTHING


@dataclass
class CellSummary:
    workload: str
    target: str
    failed: int
    metrics: dict[str, Summary]  # metric name → statistics over the cell's successful runs
    primary: list[str] = field(default_factory=list)  # its primary metrics (stored with them), in name order
    notes: list[str] = field(default_factory=list)  # what was found of its runs (runs.notes), each once with how often
    implausible: bool = False  # a run's figures cannot be real: the cell is flagged, never a plain result
    # the host its runs ran on, where a study run's runs span several (its target then names it: "ext4 @ host-a")
    host: str | None = None
    caveats: list[str] = field(default_factory=list)  # what goes with its figures wherever judged (Finding.caveat)
    withheld: dict[str, str] = field(default_factory=dict)  # metric key → why it is not given (not in `metrics`)
    above_ceiling: list[str] = field(default_factory=list)  # metrics whose interval lies above its ceiling
    # its runs ran emulated (TCG): its figures of speed are shown, labelled, and never judged (timing.py)
    emulated: bool = False
    kernel: str | None = None  # the kernel its runs ran on (its host's; the study run's machine's without one)

    def directions(self) -> list[str]:
        """The fio directions it has (a row each in fio's table)."""
        return [d for d in DIRECTIONS if f"{d}_iops" in self.metrics]


@dataclass(frozen=True)
class FailedRun:
    target: str
    workload: str
    repetition: int
    phase: str  # "" for a run stored before schema version 3
    error: str


@dataclass
class StudySummary:
    study_run: dict
    targets: list[dict]
    workloads: list[str]
    cells: list[CellSummary]
    analysis: Analysis
    failures: list[FailedRun] = field(default_factory=list)
    warmups: int = 0  # warm-up runs stored and left out of the statistics
    disturbed: int = 0  # measured runs a neighbour disturbed (monitors/pressure.py): counted, flagged
    redone: int = 0  # disturbed runs run again (--redo-disturbed): stored and left out of the statistics
    not_measurable: list[str] = field(default_factory=list)  # figures its runs' machines could not give, and why
    effective_mount_options: dict[str, str] = field(default_factory=dict)
    not_in_effect: dict[str, list[str]] = field(default_factory=dict)  # target → options asked for, not applied
    requested_options: dict[str, str] = field(
        default_factory=dict
    )  # target → the options it asked for, as shown (none: imported, or no run)
    buffered: set[str] = field(default_factory=set)  # workloads run through the page cache
    data: dict[str, str] = field(default_factory=dict)  # workload → the data pattern its runs recorded
    preallocation: dict[str, str] = field(
        default_factory=dict
    )  # workload → how its files were preallocated, as its kind says it (KindReport.preallocated); only those that were
    rewritten: dict[str, str] = field(
        default_factory=dict
    )  # workload → what fslab rewrote of its command, from what, as its kind says it (KindReport.rewritten)
    memory_limits: dict[str, int] = field(default_factory=dict)  # workload → the memory limit its runs recorded
    units: Bandwidth = Bandwidth.MB  # bandwidth as shown in the tables
    samples: SampleGroups = field(
        default_factory=lambda: SampleGroups({}, {}, {})
    )  # the stored samples the statistics are of
    skipped: list[Unsupported] = field(default_factory=list)  # targets --skip-unsupported left out, and why
    cached_reference: list[CachedReference] = field(default_factory=list)  # raw figures no disk could produce
    runs: list[dict] = field(
        default_factory=list
    )  # every run, failed and warm-up too, with what the summary reads of it (RUN_FACTS)
    hosts: Hosts = field(
        default_factory=lambda: Hosts([], False)
    )  # the hosts its runs ran on, and whether they are pooled
    host_facts: list[Host] = field(
        default_factory=list
    )  # each host's facts, as recorded (none before schema version 10)
    ceilings: list[Ceiling] = field(default_factory=list)  # each workload's ceiling, or why none
    # a study run over kernels (lab/study.py): per kernel's cell with runs in 2 boots or more, how
    # much its primary metrics varied from boot to boot (statistics/boots.py)
    boot_spreads: list[BootSpread] = field(default_factory=list)

    @property
    def asked(self) -> Asked:
        """How it was asked for (kept.Asked), as its analysis and tables hold it."""
        a = self.analysis
        return Asked(a.override, a.threshold, a.precision, self.units, self.hosts.pooled)

    def cells_of(self, workload: str) -> list[CellSummary]:
        return [c for c in self.cells if c.workload == workload]

    def judged_cells_of(self, workload: str) -> list[CellSummary]:
        """A workload's cells whose figures may be judged: those of a flagged cell (`implausible`)
        are in its table, marked, and in no comparison, ranking, conclusion or chart."""
        return [c for c in self.cells_of(workload) if not c.implausible]

    @property
    def flagged(self) -> set[tuple[str, str]]:
        """(workload, target) of every flagged cell: judged nowhere, `fslab compare` too."""
        return {(c.workload, c.target) for c in self.cells if c.implausible}

    def caveats_of(self, workload: str) -> dict[str, list[str]]:
        """Target → the caveats its cell of a workload carries (its figures go nowhere without them)."""
        return {c.target: c.caveats for c in self.cells_of(workload) if c.caveats}

    def left_out(self, workload: str) -> list[str]:
        """The targets whose cell of a workload is flagged, and so left out of every judgement."""
        return [c.target for c in self.cells_of(workload) if c.implausible]

    @property
    def metric_units(self) -> dict[str, str]:
        """Metric key → its unit, as stored (the same in every cell)."""
        return self.samples.units


CEILING_NOTE = (
    "ceiling: the bare device, a raw reference fslab added (--no-ceiling leaves it out); "
    "in no comparison, ranking or conclusion"
)

# What a summary reads of each run; the runs files and the page read all of it (ResultsDB.runs).
RUN_FACTS = (
    "id",
    "target",
    "workload",
    "repetition",
    "warmup",
    "redone",
    "status",
    "error",
    "failure",
    "notes",
    "data_pattern",
    "mount_options_effective",
    "fs_details",
    "buffered",
    "memory_limit",
    "options_applied",
    "host",
    "boot_id",
)

UNNAMED_HOST = "(unnamed)"  # a run stored with no host, in a study run whose other runs name theirs


@dataclass(frozen=True)
class Hosts:
    """The hosts a study run's runs ran on, by name, and how a summary treats them: with several,
    a target on each host is a cell of its own ("ext4 @ host-a"), compared only with the targets
    of that host, unless `pooled` (--pool-hosts): one cell per target, host a block."""

    names: list[str]
    pooled: bool

    @property
    def per_host(self) -> bool:
        return len(self.names) > 1 and not self.pooled

    @property
    def pooling(self) -> int:
        """How many hosts each cell pools (0: none are)."""
        return len(self.names) if len(self.names) > 1 and self.pooled else 0

    def cell_target(self, target: str, host: str | None) -> str:
        """The name a run's cell knows its target by."""
        return Hosted(target, host or UNNAMED_HOST).name if self.per_host else target

    @staticmethod
    def of(runs: list[dict], pooled: bool = False) -> Hosts:
        return Hosts(sorted({r["host"] or UNNAMED_HOST for r in runs}), pooled)


def host_values(db: ResultsDB, study_run_id: int) -> dict[tuple[str, str, str], dict[str, list[float]]]:
    """(workload, target, host) → metric → values: a study run's samples per host."""
    return {(w, t, h or UNNAMED_HOST): metrics for (w, t, h), metrics in db.host_samples(study_run_id).items()}


def cell_samples(db: ResultsDB, study_run_id: int, hosts: Hosts) -> SampleGroups:
    """A study run's samples by cell, as its summary keys them: per host where `hosts` says so."""
    groups = db.sample_groups(study_run_id)
    if not hosts.per_host:
        return groups
    return replace(
        groups,
        values={(w, hosts.cell_target(t, h)): metrics for (w, t, h), metrics in host_values(db, study_run_id).items()},
    )


@dataclass(frozen=True)
class Compared:
    """Cells of one side against the other's (`fslab compare`): newer/older, or host b / host a."""

    rows: list[Row]
    left_out: list[tuple[str, str]]  # (workload, target) flagged on either side: judged nowhere


def compare_runs(
    db: ResultsDB, older: int, newer: int, *, threshold: float = 0.03, pool_hosts: bool = False
) -> Compared:
    """Two study runs of one study, cell by cell: per host where either spans several (a target
    on a host against itself on that host), unless `pool_hosts` (each study run's hosts pooled
    as blocks, analysis.host_blocks). Two study runs of one host each are compared whatever
    their hosts' names (one machine before and after a change, or two machines)."""
    each = [Hosts.of(db.runs(sr, ("host",))) for sr in (older, newer)]
    several = any(len(h.names) > 1 for h in each)
    hosts = Hosts(sorted({n for h in each for n in h.names}) if several else [], pool_hosts)
    left_out = sorted(flagged_cells(db, older, hosts) | flagged_cells(db, newer, hosts))
    sides = [cell_samples(db, sr, hosts) for sr in (older, newer)]
    if hosts.pooling:
        sides = [replace(side, values=host_blocks(host_values(db, sr))) for side, sr in zip(sides, (older, newer))]
    facts = [{h.name: h for h in db.hosts(sr)} for sr in (older, newer)]
    host_of = {hosts.cell_target(t, h): h for sr in (older, newer) for (_, t, h) in host_values(db, sr)}

    def withheld(target: str, metric: str) -> str | None:  # each side's hosts: the cell's, or all of them
        own = (
            [f.get(host_of.get(target, "")) for f in facts]
            if hosts.per_host
            else [h for f in facts for h in f.values()]
        )
        return why_not_within(metric, own)

    compared = compare_study_runs(
        *sides, threshold=threshold, left_out=left_out, against=f"study run {older}", withheld=withheld
    )
    return Compared(compared, left_out)


def compare_hosts(db: ResultsDB, study_run_id: int, baseline: str, other: str, *, threshold: float = 0.03) -> Compared:
    """Host `other` against host `baseline` on one study run: every (workload, target) both ran,
    the ratio other/baseline with the Welch interval and verdict a summary gives (one family, BH),
    in its compared metrics and in every metric of what the kernel did (timing class not speed),
    each only where the two hosts' timing allows (timing.why_not_compared)."""
    every = host_values(db, study_run_id)
    known = sorted({h for _, _, h in every})
    for host in (baseline, other):
        if host not in known:
            raise AnalysisError(
                f"--hosts: no measured run of study run {study_run_id} ran "
                f"on host '{host}'; its hosts: {', '.join(known) or 'none'}"
            )
    if baseline == other:
        raise AnalysisError(f"--hosts: name two different hosts (both are '{baseline}')")
    groups = db.sample_groups(study_run_id)
    # what the kernel did (a metric whose timing class is not speed: the page-cache share of direct
    # I/O, write amplification, space) is compared too: between two kernels, often all that may be
    behaviour = {(w, m) for (w, _, _), metrics in every.items() for m in metrics if timing_of(m) != "speed"}
    groups = replace(groups, roles=groups.roles | Roles(compared=frozenset(behaviour)))
    few_boots: set[str] = set()
    if "lab" in ((db.study_run(study_run_id) or {}).get("settings") or {}):
        every, few_boots = _by_boots(db, study_run_id, (baseline, other))
    side = lambda host: replace(groups, values={(w, t): metrics for (w, t, h), metrics in every.items() if h == host})  # noqa: E731
    flagged = flagged_cells(db, study_run_id, Hosts(known, False))
    left_out = sorted(
        {(w, t) for w, t, _ in every if {(w, Hosted(t, baseline).name), (w, Hosted(t, other).name)} & flagged}
    )
    facts = {h.name: h for h in db.hosts(study_run_id)}
    compared = compare_study_runs(
        side(baseline),
        side(other),
        threshold=threshold,
        left_out=left_out,
        against=baseline,
        withheld=lambda target, metric: (
            why_not_compared(metric, facts.get(baseline), facts.get(other))
            or (ONE_BOOT if target in few_boots and timing_of(metric) == "speed" else None)
        ),
    )
    return Compared(compared, left_out)


def kernel_hosts(db: ResultsDB, study_run_id: int, kernels: tuple[str, str]) -> tuple[str, str]:
    """The hosts of a study run that ran `kernels` (`fslab compare --kernels A B`), named as
    model/kernel_hosts.py's kernel_host names them: a lab VM's host by its kernel release (on a fleet's
    worker W, "RELEASE@W": that host alone, never W's bare metal running that release); "host", or
    a release no host is named by, is the one host of that kernel (`--kernel host`: the machine's
    own, stored under its host name; "host@W": worker W's), a release's VMs before bare metal.
    Refused, naming the kernels present, where a kernel ran on no host, or on several (a fleet's
    workers: name one as KERNEL@WORKER)."""
    from fslab.model.kernel_hosts import HOST, kernel_host, named_kernel

    measured = {h for _, _, h in host_values(db, study_run_id)}
    present = [h for h in db.hosts(study_run_id) if h.name in measured]

    def host_of(given: str) -> str:
        if any(h.name == given for h in present):
            return given
        kernel, worker = named_kernel(given)
        if worker is not None:  # exactly the host of that kernel on that worker: never its bare metal for a VM's
            ran = [h for h in present if h.name == kernel_host(kernel, worker, worker=True)]
        elif kernel == HOST:
            ran = [h for h in present if h.accelerator == "host"]
        else:  # a release: its lab VMs' hosts, a bare-metal host running it only where no VM ran it
            ran = [h for h in present if h.kernel == kernel]
            ran = [h for h in ran if h.accelerator != "host"] or ran
        if len(ran) == 1:
            return ran[0].name
        said = ", ".join(f"{h.kernel} (host {h.name}, {h.accelerator})" for h in present) or "none recorded"
        if ran:
            raise AnalysisError(
                f"--kernels: kernel '{given}' ran on {len(ran)} hosts of study run {study_run_id} "
                f"({', '.join(h.name for h in ran)}): name one as KERNEL@WORKER (e.g. {kernel}@"
                f"{ran[0].name.rpartition('@')[2]}), or the hosts with --hosts"
            )
        raise AnalysisError(
            f"--kernels: no measured run of study run {study_run_id} ran kernel '{given}'; its kernels: {said}"
        )

    return host_of(kernels[0]), host_of(kernels[1])


def _boot_spreads(db: ResultsDB, study_run_id: int, groups: SampleGroups) -> list[BootSpread]:
    """Per kernel's cell over 2 boots or more, its primary metrics' boot-to-boot and within-boot CVs."""
    booted = {(w, t, h or UNNAMED_HOST): m for (w, t, h), m in db.boot_samples(study_run_id).items()}
    return spreads(booted, groups.roles.primary_in)


def _by_boots(
    db: ResultsDB, study_run_id: int, compared: tuple[str, str]
) -> tuple[dict[tuple[str, str, str], dict[str, list[float]]], set[str]]:
    """Between two kernels of a study run over kernels (lab/study.py): each host's samples, its boot
    means where its runs span 2 boots or more (statistics/boots.py); and the cells where either
    of the two compared spans fewer, whose speed verdicts are withheld."""
    booted = {(w, t, h or UNNAMED_HOST): m for (w, t, h), m in db.boot_samples(study_run_id).items()}
    means = {key: {metric: boot_means(values) for metric, values in m.items()} for key, m in booted.items()}
    few = {
        t
        for (_, t, h), m in booted.items()
        if h in compared and m and min(boot_count(values) for values in m.values()) < 2
    }
    return means, few


def summarize_study_run(
    db: ResultsDB,
    study_run_id: int,
    *,
    baseline: str | None = None,
    threshold: float = 0.03,
    precision: float | None = None,
    units: Bandwidth | None = None,
    pool_hosts: bool = False,
) -> StudySummary:
    """`units` (default: the study file's, else MB/s) is the bandwidth shown; `pool_hosts`: the
    runs of a target on every host are one cell, host a block (Hosts)."""
    load_student_t_meanwhile()  # while the runs and their samples are read
    study_run = db.study_run(study_run_id)
    if study_run is None:
        raise FslabError(f"no study run {study_run_id} in the database")
    chosen = tomllib.loads(study_run["study_source"]).get("study", {})
    settings = study_run.get("settings") or {}
    asked = Asked.of(
        study_run, baseline=baseline, threshold=threshold, precision=precision, units=units, pool_hosts=pool_hosts
    )
    skipped = by_target(Unsupported(**u) for u in settings.get("skipped", []))  # older study runs stored one per reason
    targets = db.targets(study_run_id)
    runs = db.runs(study_run_id, RUN_FACTS)
    hosts = Hosts.of(runs, asked.pooled)
    specs = {t["name"]: t for t in targets}
    applied = {r["id"]: _options_applied(specs[r["target"]], r) for r in runs}
    per_host = (
        [replace_target(r, hosts.cell_target(r["target"], r["host"])) for r in runs] if hosts.per_host else runs
    )  # each run as its cell knows it
    groups = cell_samples(db, study_run_id, hosts)
    stored_workloads = db.workloads(study_run_id)
    workloads = [w["name"] for w in stored_workloads]
    failures = [
        FailedRun(r["target"], r["workload"], r["repetition"], (r["failure"] or {}).get("phase", ""), r["error"] or "")
        for r in per_host
        if r["status"] != "ok"
    ]
    failed = Counter((f.workload, f.target) for f in failures)
    found = _run_notes(per_host)
    data = {r["workload"]: r["data_pattern"] for r in runs if r["data_pattern"]}
    hooks = {w["name"]: report_of(w["spec"].get("kind", "fio")) or NOTHING for w in stored_workloads}  # each kind's
    preallocation = {w["name"]: said for w in stored_workloads if (said := hooks[w["name"]].preallocated(w["spec"]))}
    rewritten = {w["name"]: said for w in stored_workloads if (said := hooks[w["name"]].rewritten(w["spec"]))}
    flattered = _flattered(per_host, applied, groups.values, preallocation)
    fio_options = {w["name"]: w["spec"].get("fio_options") or {} for w in stored_workloads}
    specs_of = {w["name"]: w["spec"] for w in stored_workloads}
    above, cached = _beyond_raw(db, study_run_id, hosts, groups, targets, fio_options)
    ceiling_targets = {t["name"] for t in targets if t["spec"].get("ceiling")}  # fslab's raw references: never judged
    steps: dict[tuple[str, str], float] = {}  # (workload, metric) → its resolution, looked up once for all its cells
    cells = [
        CellSummary(
            w,
            name,
            failed[key],
            _cell_statistics(
                groups.values.get(key, {}),
                groups.higher_is_better,
                above.get(key, {}),
                partial(_step, steps, groups.kinds, w),
            ),
            groups.roles.primary_in(w, groups.values.get(key, {})),
            [
                *found.get(key, ([], False))[0],
                *flattered.get(key, []),
                *hooks[w].cell_notes(specs_of[w], groups.values.get(key, {})),
                *arc_notes(t["spec"], functools.partial(hooks[w].data_read, specs_of[w])),
                *([CEILING_NOTE] if t["name"] in ceiling_targets else []),
            ],
            found.get(key, ([], False))[1],
            host if hosts.per_host else None,
            above_ceiling=[m for m, b in above.get(key, {}).items() if b.reference is None],
        )
        for w in workloads
        for host in (hosts.names if hosts.per_host else [None])
        for t in targets
        if (key := (w, name := hosts.cell_target(t["name"], host))) in groups.values or failed[key]
    ]
    caveats = _caveats(per_host)
    facts = db.hosts(study_run_id)
    machines = machines_of(facts, hosts)
    for cell in cells:
        cell.caveats = caveats.get((cell.workload, cell.target), [])
        _withhold(cell, groups.values.get((cell.workload, cell.target), {}))
        _kernel(cell, machines.get(cell.host, []), str((study_run.get("environment") or {}).get("kernel") or ""))
    mounts: dict[str, Counter] = defaultdict(Counter)
    not_in_effect: dict[str, set[str]] = defaultdict(set)
    requested: dict[str, str] = {}
    for r in runs:
        if r["mount_options_effective"]:
            mounts[r["target"]][r["mount_options_effective"]] += 1
        if (options := applied[r["id"]]) is not None:
            not_in_effect[r["target"]].update(options.not_in_effect)
            requested.setdefault(r["target"], options.requested)
    flagged = {(c.workload, c.target) for c in cells if c.implausible}
    compared = host_blocks(host_values(db, study_run_id)) if hosts.pooling else groups.values
    baselines = stored_baselines(targets, chosen.get("baseline"))
    judged = [t for t in targets if t["name"] not in ceiling_targets]
    hosted = None
    if hosts.per_host:
        hosted = {(h := Hosted(t["name"], host)).name: h for host in hosts.names for t in judged}
    judged_samples = {key: metrics for key, metrics in compared.items() if key not in flagged}
    blocks = None if hosts.per_host or hosts.pooling else groups.blocks
    analysis = analyse(
        judged_samples,
        groups.higher_is_better,
        list(hosted or (t["name"] for t in judged)),
        workloads,
        baselines=baselines
        if hosted is None
        else {name: Hosted(baselines[h.target], h.host).name for name, h in hosted.items()},
        baseline=asked.baseline,
        threshold=asked.threshold,
        precision=asked.precision,
        roles=groups.roles,
        kinds=groups.kinds,
        hosts=hosted,
        compare_with={w: other for w, spec in specs_of.items() if (other := spec.get("compare_with")) in specs_of},
        blocks=blocks,
        looks=looks_of(settings),  # as its planner judged it, when it added runs as they came
        machines=machines,
    )
    analysis = explained(analysis, judged_samples, blocks=blocks, notes=note_counts(per_host))
    return StudySummary(
        study_run=study_run,
        targets=targets,
        workloads=workloads,
        cells=cells,
        analysis=analysis,
        failures=failures,
        warmups=sum(1 for r in runs if r["warmup"]),
        disturbed=sum(1 for r in runs if measured(r) and any(n["kind"] == DISTURBED for n in r.get("notes") or [])),
        redone=sum(1 for r in runs if r.get("redone")),
        not_measurable=list(
            dict.fromkeys(n["says"] for r in runs for n in r.get("notes") or [] if n["kind"] == NOT_MEASURABLE)
        ),
        effective_mount_options={t: " | ".join(c) for t, c in mounts.items()},
        not_in_effect={t: sorted(o) for t, o in not_in_effect.items() if o},
        requested_options=requested,
        buffered={r["workload"] for r in runs if r["buffered"]},
        data=data,
        preallocation=preallocation,
        rewritten=rewritten,
        memory_limits={r["workload"]: r["memory_limit"] for r in runs if r.get("memory_limit")},
        units=asked.units,
        samples=groups,
        skipped=skipped,
        cached_reference=cached,
        runs=per_host,
        hosts=hosts,
        host_facts=facts,
        boot_spreads=_boot_spreads(db, study_run_id, groups) if "lab" in settings else [],
        ceilings=_ceilings(groups, targets, hosts, stored_workloads, bool(settings.get("no_ceiling"))),
    )


def machines_of(facts: list[Host], hosts: Hosts) -> dict[str | None, list[Host]]:
    """Each host's facts as a summary's analysis keys them (analyse's `machines`): by host where it
    is per host, else every host's under None (one host, or those pooled)."""
    known = {h.name: h for h in facts}
    if hosts.per_host:
        return {name: [known[name]] if name in known else [] for name in hosts.names}
    return {None: [known[name] for name in hosts.names if name in known]}


def _kernel(cell: CellSummary, machines: list[Host], machine_kernel: str) -> None:
    """A cell's kernel (its hosts', else the study run's machine's) and whether it ran emulated:
    then its figures of speed are labelled, its notes say so first."""
    cell.kernel = ", ".join(dict.fromkeys(h.kernel for h in machines)) or machine_kernel or None
    cell.emulated = any(h.emulated for h in machines)
    if cell.emulated:
        cell.notes.insert(0, EMULATED)


def _step(steps: dict[tuple[str, str], float], kinds: dict[str, str], workload: str, metric: str) -> float:
    if (workload, metric) not in steps:
        steps[(workload, metric)] = resolution_of(kinds, workload, metric)
    return steps[(workload, metric)]


def replace_target(run: dict, target: str) -> dict:
    return run if run["target"] == target else {**run, "target": target}


def _beyond_raw(
    db: ResultsDB,
    study_run_id: int,
    hosts: Hosts,
    groups: SampleGroups,
    targets: list[dict],
    fio_options: dict[str, dict],
) -> tuple[dict[tuple[str, str], dict[str, BeyondRaw]], list[CachedReference]]:
    """Each cell's figures beyond what its raw devices delivered, and the raw figures no disk could
    produce: of the devices of the same host, where the study run is summarised per host."""
    references = raw_references(targets)
    if not hosts.per_host:
        return beyond_raw(
            groups.values, references, roles=groups.roles, higher_is_better=groups.higher_is_better
        ), cached_references(groups.values, targets, fio_options)
    above: dict[tuple[str, str], dict[str, BeyondRaw]] = {}
    cached: list[CachedReference] = []
    every = host_values(db, study_run_id)
    for host in hosts.names:
        own = {(w, t): metrics for (w, t, h), metrics in every.items() if h == host}
        found = beyond_raw(own, references, roles=groups.roles, higher_is_better=groups.higher_is_better)
        above |= {(w, hosts.cell_target(t, host)): beyond for (w, t), beyond in found.items()}
        cached += [
            replace(c, target=hosts.cell_target(c.target, host)) for c in cached_references(own, targets, fio_options)
        ]
    return above, cached


def _ceilings(
    groups: SampleGroups, targets: list[dict], hosts: Hosts, workloads: list[dict], no_ceiling: bool
) -> list[Ceiling]:
    """Each workload's ceilings (of each host's raw devices, where the summary is per host)."""
    block = {w["name"]: "kind" not in w["spec"] for w in workloads}  # a workload of fio's kind is stored without one
    named = targets
    if hosts.per_host:
        named = [{**t, "name": hosts.cell_target(t["name"], host)} for host in hosts.names for t in targets]
    return ceilings(groups.values, named, block, no_ceiling=no_ceiling, roles=groups.roles)


def flagged_cells(db: ResultsDB, study_run_id: int, hosts: Hosts | None = None) -> set[tuple[str, str]]:
    """(workload, target) of every cell of a study run a run's figures of which cannot be real:
    judged nowhere, as its summary judges them (`fslab compare` too); the cells per host where
    `hosts` says so."""
    runs = db.runs(study_run_id, RUN_FACTS)
    if hosts is not None and hosts.per_host:
        runs = [replace_target(r, hosts.cell_target(r["target"], r["host"])) for r in runs]
    return {cell for cell, (_, implausible) in _run_notes(runs).items() if implausible}


def _run_notes(runs: list[dict]) -> dict[tuple[str, str], tuple[list[str], bool]]:
    """(workload, target) → what was found of its measured runs, each kind of finding once (as
    its first run said it) with how many runs it was found in, the implausible first; and
    whether any was implausible."""
    found: dict[tuple[str, str], dict[tuple[bool, str], list[str]]] = defaultdict(dict)
    totals: Counter = Counter()
    for r in runs:
        if measured(r):
            cell = (r["workload"], r["target"])
            totals[cell] += 1
            said: dict[tuple[bool, str], str] = {}  # a run's notes of one kind (one per phase) count it once
            for note in r.get("notes") or []:
                if note["kind"] == NOT_MEASURABLE:  # the machine's, said once for the study run
                    continue
                said.setdefault((not note["implausible"], note["kind"]), note["says"])
            for kind, says in said.items():
                found[cell].setdefault(kind, []).append(says)
    return {
        cell: (
            [
                ("IMPLAUSIBLE: " if not plausible else "") + f"{said[0]} ({len(said)} of {totals[cell]} runs)"
                for (plausible, _), said in sorted(notes.items())
            ],
            any(not plausible for plausible, _ in notes),
        )
        for cell, notes in found.items()
    }


def note_counts(runs: list[dict]) -> dict[tuple[str, str], dict[str, int]]:
    """(workload, target) → each kind of note its measured runs carried → in how many runs: what
    an explanation counts ("served by a cache in 3 of 3 runs")."""
    found: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in runs:
        if r["status"] == "ok" and not r["warmup"]:
            found[(r["workload"], r["target"])].update({note["kind"] for note in r.get("notes") or []})
    return {cell: dict(kinds) for cell, kinds in found.items()}


def _caveats(runs: list[dict]) -> dict[tuple[str, str], list[str]]:
    """(workload, target) → the caveats its measured runs' findings carry (Finding.caveat), each once."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in runs:
        if measured(r):
            for note in r.get("notes") or []:
                if (caveat := note.get("caveat")) and caveat not in found[(r["workload"], r["target"])]:
                    found[(r["workload"], r["target"])].append(caveat)
    return found


def _withhold(cell: CellSummary, values: dict[str, list[float]]) -> None:
    """A cell's figures that are not given (a write amplification of almost nothing:
    traffic.withheld_amplifications) taken out of its statistics, why said in its notes."""
    cell.withheld = withheld_amplifications(values)
    for key, why in cell.withheld.items():
        cell.metrics.pop(key, None)
        cell.notes.append(why)


def _flattered(
    runs: list[dict],
    applied: dict[int, OptionsApplied | None],
    values: dict[tuple[str, str], dict[str, list[float]]],
    preallocation: dict[str, str],
) -> dict[tuple[str, str], list[str]]:
    """(workload, target) → a note where a workload wrote zeros or compressible data to a target
    whose runs read back compression (what was made, not what was asked), saying what the
    compression monitor measured of its runs (the median, in the phase that compressed most): a
    ratio from COMPRESSED_FROM means the figures flatter it; a lower one, that they are those of
    uncompressed data (and why, where its files were preallocated: `preallocation`, as its kind
    says it); none, that they may."""
    notes = {}
    for r in runs:
        cell = (r["workload"], r["target"])
        if cell in notes or not (r["data_pattern"] or "").startswith(("zeros", "compressible")):
            continue
        if (options := applied[r["id"]]) is None or not options.compresses:
            continue
        wrote = f"it wrote {r['data_pattern'].split(' (')[0]} data to a compressing target"
        ratios = [
            statistics.median(v)
            for key, v in values.get(cell, {}).items()
            if unqualified(key) == "compression_ratio" and v
        ]
        if not ratios:
            notes[cell] = [
                f"{wrote}, and no compression ratio was measured: the figures may flatter it, as real data would not"
            ]
        elif (ratio := max(ratios)) >= COMPRESSED_FROM:
            notes[cell] = [f"{wrote}, which compressed it {ratio:.2f}×: the figures flatter it, as real data would not"]
        else:
            said = preallocation.get(r["workload"], "")
            why = (
                f"its files were preallocated ({said}), and preallocated blocks are written in place, uncompressed; "
                if said
                else ""
            )
            notes[cell] = [
                f"{wrote}, which stored it uncompressed ({ratio:.2f}×): {why}the figures are those of uncompressed data"
            ]
    return notes


def stored_baselines(targets: list[dict], study_baseline: str | None) -> dict[str, str]:
    """Target → the target it is compared with, as stored in its spec when the study run began
    (its own name for a target others are compared with; a skipped target's name stays, so its
    comparisons are absent, not made with a substitute: analysis.compared_with). Targets stored
    before baselines were: the study file's baseline, else the first target."""
    names = [t["name"] for t in targets]
    default = study_baseline if study_baseline is not None and study_baseline in names else names[0]
    stored = {t["name"]: t["spec"].get("baseline") for t in targets}
    return {name: default if base is None else base for name, base in stored.items()}


def _cell_statistics(
    metrics: dict[str, list[float]],
    higher_is_better: dict[str, bool],
    above_raw: dict[str, BeyondRaw],
    resolution: Callable[[str], float],
) -> dict[str, Summary]:
    """Each metric's statistics, its interval no narrower than the `resolution` its tool prints
    it to, warned where it is clearly beyond what the raw devices delivered."""
    out = {}
    for metric, values in metrics.items():
        stats = summarize(values, higher_is_better[metric], resolution(metric))
        if metric in above_raw:
            stats = replace(stats, warnings=(*stats.warnings, beyond_raw_note(above_raw[metric])))
        out[metric] = stats
    return out


def beyond_raw_note(found: BeyondRaw) -> str:
    """An observation with its possible causes, never a cause stated as fact."""
    c = found.comparison
    against = (
        "its raw devices"
        if found.reference is None
        else f"the most its raw devices delivered in this study ({found.reference})"
    )
    if not found.beyond:
        return (
            f"above its ceiling: measured {c.ratio:.2f}× (95 % CI {c.ci_low:.2f}–{c.ci_high:.2f}×) {against}, "
            "faster than the bare device: a cache, compression or a copy-on-write layout answered some of it"
        )
    return (
        f"measured {c.ratio:.1f}× (95 % CI {c.ci_low:.1f}–{c.ci_high:.1f}×) {against}: "
        "a cache, compression or a copy-on-write layout may have answered, not the device"
    )


def _options_applied(target: dict, run: dict) -> OptionsApplied | None:
    """What the run's filesystem made of the options asked for, as stored with the run; for a run
    stored before fslab stored it (schema 9), judged now from its read-back by the filesystem's
    module; None for an imported run (fslab did not make its filesystem: results/importer.py)."""
    if run["options_applied"] is not None:
        return OptionsApplied(**run["options_applied"])
    if not target["filesystem"]:
        return None
    from fslab.filesystems import FILESYSTEMS  # only for runs stored before schema 9

    return FILESYSTEMS[target["filesystem"]].options_applied(
        target["spec"], run["mount_options_effective"], run["fs_details"] or ""
    )
