"""The fslab command line. Each command is thin: it calls one function elsewhere and prints.

Each command imports what it needs where it runs: every fslab process — `fslab cleanup`, a
fleet's worker, each command in the tests' emulated guests — pays for what is imported here,
before it does anything. A database (SQLAlchemy), statistics (numpy), a summary, a report and
fio's importer load only in the commands that use them.

No `from __future__ import annotations` here: typer reads every command's parameters as each
command starts (twice each), and annotations kept as text it would compile and evaluate every
time (a fiftieth of a second of every command's start); the types only a type checker imports
are quoted instead."""

import gc
import inspect
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from fslab.core import DESTROY_FLAG
from fslab.core.errors import FslabError
from fslab.core.interruption import exit_status, interrupted
from fslab.core.names import check_name, visible
from fslab.core.units import Bandwidth, parse_duration, parse_percent
from fslab.core.workdir import DEFAULT_WORKDIR, Workdir
from fslab.report.console import (
    CONSOLE_WIDTH,
    print_comparison,
    print_host_comparison,
    print_marked_table,
    print_table,
    print_view,
)
from fslab.results import reports_dir, resolve_location
from fslab.results.location import DEFAULT_DB, shown

if TYPE_CHECKING:
    from rich.progress import Progress

    from fslab.core.checks import Unsupported
    from fslab.model import Study
    from fslab.results import ResultsDB, RunRecord
    from fslab.results.owner import Owner
    from fslab.running.plan import PlannedRun
    from fslab.running.runner import Hold, RunObserver
    from fslab.statistics.analysis import Gate

app = typer.Typer(
    help="fslab: a laboratory for filesystem performance on Linux.", no_args_is_help=True, add_completion=False
)
# Piped, the tables are as a 120-column terminal shows them, and a message is one line, as the
# terminal would wrap it (a log stays greppable).
console = Console() if sys.stdout.isatty() else Console(width=CONSOLE_WIDTH, soft_wrap=True)
errors = Console(stderr=True)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", envvar="FSLAB_DB", help="Results database: an SQLite file, or a database URL. \\[default: ./fslab.db]"
    ),
]
AllowNetworkOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-network",
        metavar="CIDR",
        help="A private network of your lab's (10.231.0.0/16) where fio's servers "
        "may listen and be reached, beside loopback; repeat for each.",
    ),
]
WorkdirOption = Annotated[
    Path,
    typer.Option(
        "--workdir", envvar="FSLAB_WORKDIR", help="Where fslab keeps loop images, mount points and its journal."
    ),
]


def safe_markup(text: str) -> str:
    """Untrusted text, safe to print: no rich markup, no terminal control sequence."""
    return escape(visible(text))


# Exit statuses (docs/commands.md#exit-status): an error a user can act on ends with ERROR_EXIT, as
# a command line typer refuses does; a CI gate that fails (compare, history --fail-on-regression:
# a regression, or with --strict an undecided comparison) with GATE_FAILED — never the same number.
ERROR_EXIT = 2
GATE_FAILED = 1


def _refuse_together(option: str, why: str, given: dict[str, object]) -> None:
    """Fails naming each option of `given` that was set beside `option`, and why they cannot go together."""
    named = [name for name, value in given.items() if value]
    if named:
        raise _fail(f"{', '.join(named)} cannot go with {option}: {why}")


def _fail(message: str, code: int = ERROR_EXIT) -> typer.Exit:
    errors.print(f"[bold red]error:[/bold red] {safe_markup(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _exit_by(gate: "Gate", judged: str) -> None:
    """The one exit rule of compare and history --fail-on-regression (analysis.gate): GATE_FAILED on
    a decided regression, and with --strict on an undecided comparison of those `judged`, each said
    on stderr; else the command ends as it is (0)."""
    if gate.regressions:
        errors.print(f"[red]{gate.regressions} regression(s)[/red] {judged}", highlight=False, soft_wrap=True)
    if gate.strict and gate.undecided:
        errors.print(
            f"[red]{gate.undecided} undecided comparison(s)[/red] {judged} (--strict)", highlight=False, soft_wrap=True
        )
    if gate.failed:
        raise typer.Exit(GATE_FAILED)


def _open_db(db: str | None) -> "ResultsDB":
    """The results database; a study run whose fslab was killed is marked interrupted here,
    by whichever command opens the database first, and the user is told how to resume it."""
    from fslab.results import ResultsDB
    from fslab.results.owner import Owner

    results = ResultsDB(resolve_location(db))
    for sr in results.mark_abandoned():
        owner = Owner.from_stored(sr["owner"])
        stored = len(results.stored_runs(sr["id"]))
        errors.print(
            f"[yellow]study run {sr['id']} ({safe_markup(sr['study'])}) was "
            f"interrupted[/yellow]: its fslab (pid {owner.pid if owner else '?'}) is gone, "
            f"{stored} run(s) stored. `{safe_markup(_resume_command(results, sr['id'], owner))}` continues it.",
            highlight=False,
            soft_wrap=True,
        )
    return results


def _resume_command(results: "ResultsDB", study_run_id: int, owner: "Owner | None") -> str:
    """The command that resumes a study run, with the --db and --workdir it needs."""
    command = f"fslab run --resume {study_run_id}"
    if results.location != DEFAULT_DB:
        command += f" --db {shown(results.location)}"  # a password stays unsaid: the user has it
    if owner and owner.workdir != str(DEFAULT_WORKDIR):
        command += f" --workdir {owner.workdir}"
    return command


class _ProgressObserver:
    """A progress bar with ETA naming the current target, workload and repetition."""

    def __init__(self, progress: "Progress", then: str = ""):
        self.progress = progress
        self.task = progress.add_task("starting", total=None)
        self.then = then  # what follows the announced runs (adaptive: more until a precision)

    def announce(self, study: "Study", skipped: "list[Unsupported]") -> None:
        from fslab.study import describe_study

        said = describe_study(study, skipped=[u.target for u in skipped]) + self.then
        self.progress.console.print(f"[bold]{safe_markup(study.name)}[/bold]: {safe_markup(said)}", highlight=False)

    def notice(self, message: str) -> None:
        self.progress.console.print(visible(message), markup=False, highlight=False)

    def starting(self, planned: "PlannedRun", index: int, total: int) -> None:
        cell = planned.cell
        kind = "warm-up" if planned.warmup else "run"
        description = f"{cell.target.name} · {cell.workload.name} · {kind} {planned.repetition} (block {planned.block})"
        self.progress.update(self.task, total=total, description=safe_markup(description))

    def finished(self, planned: "PlannedRun", record: "RunRecord") -> None:
        if record.status != "ok":
            phase = f" in {record.failure.phase}" if record.failure else ""
            self.progress.console.print(
                f"[red]failed{phase}[/red] {safe_markup(record.target)} · {safe_markup(record.workload)} "
                f"· run {record.repetition}: {safe_markup(record.error or '')}",
                highlight=False,
            )
        self.progress.advance(self.task)

    def already_stored(self, planned: "PlannedRun", index: int, total: int) -> None:
        self.progress.update(self.task, total=total)
        self.progress.advance(self.task)


PoolHostsOption = Annotated[
    bool,
    typer.Option(
        "--pool-hosts",
        help="Where the runs span several hosts: pool each target's runs of every "
        "host into one cell, host treated as a block (the method line says so). "
        "\\[default: a cell per target and host, compared within each host]",
    ),
]
BaselineOption = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        help="One target every other is compared with, instead of each target's "
        "own baseline (docs/study-format.md). \\[default: each target's own]",
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Exit with status 1 too when a cell compared is undecided (its interval decides nothing yet).",
    ),
]
ThresholdOption = Annotated[
    float,
    typer.Option(
        "--threshold", parser=parse_percent, metavar="PERCENT", help="The smallest change called faster or slower."
    ),
]
StudyRunArgument = Annotated[
    str | None,
    typer.Argument(
        help=(
            "A study run id (12, or #12 where a study is named with digits), or a study name for its newest run. "
            "\\[default: the newest]"
        )
    ),
]


@app.command()
def run(
    study: Annotated[
        str | None,
        typer.Argument(
            help="A study file, or the name of a built-in study (see `fslab list`); with --resume, "
            "the study run to resume (its id). \\[default with --resume: the newest interrupted]"
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue an interrupted study run with its own plan, "
            "seed and settings; runs already stored are not run again.",
        ),
    ] = False,
    runs: Annotated[
        int | None,
        typer.Option(
            "--runs",
            min=1,
            help="Runs per cell, exactly (overrides the study's repetitions); "
            "with --target-ci or --decide, the runs before the first look.",
        ),
    ] = None,
    warmup: Annotated[
        int | None,
        typer.Option(
            "--warmup",
            min=0,
            help="Warm-up runs per cell first: stored, marked, left out "
            "of the statistics. \\[default: the study's, else 0]",
        ),
    ] = None,
    target_ci: Annotated[
        float | None,
        typer.Option(
            "--target-ci",
            parser=parse_percent,
            metavar="PERCENT",
            help="Add interleaved runs until every cell's 95 % interval is within ±PERCENT of its mean, "
            "or its comparisons are decided (as --decide's).",
        ),
    ] = None,
    decide: Annotated[
        bool,
        typer.Option(
            "--decide",
            help="Add interleaved blocks (after --runs) until every main comparison — each target against its "
            "baseline on the primary metrics — is faster, slower or equivalent, or even --max-runs could not "
            "decide it, or --time-budget ends; every interval holds its error across the looks this allows.",
        ),
    ] = False,
    max_runs: Annotated[
        int | None,
        typer.Option(
            "--max-runs", min=2, help="With --target-ci or --decide: at most this many runs per cell. \\[default: 30]"
        ),
    ] = None,
    time_budget: Annotated[
        float | None,
        typer.Option(
            "--time-budget",
            parser=parse_duration,
            metavar="DURATION",
            help="With --target-ci or --decide: add no block that would end after this long (e.g. 30m).",
        ),
    ] = None,
    baseline: BaselineOption = None,
    threshold: ThresholdOption = "3",  # type: ignore[assignment]  # parsed into a fraction
    scale: Annotated[
        float | None,
        typer.Option(
            "--scale", help="Multiply image sizes, fio sizes and runtimes (e.g. 0.1 on a small machine). \\[default: 1]"
        ),
    ] = None,
    scale_sizes_only: Annotated[
        bool,
        typer.Option(
            "--scale-sizes-only",
            help="With --scale: shrink image and fio sizes only, and keep the "
            "study's runtimes (a run shorter than 2 s measures mostly overhead).",
        ),
    ] = False,
    skip_unsupported: Annotated[
        bool,
        typer.Option(
            "--skip-unsupported",
            help="Skip the targets this machine cannot run (a kernel feature or tool "
            "it lacks) and run the others; the summary lists what was skipped "
            "and why. Refusals (options, jobs, devices) still stop the study.",
        ),
    ] = False,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Seed of the interleaved run order (default: the study's, else random; always recorded)."
        ),
    ] = None,
    trace: Annotated[
        list[str] | None,
        typer.Option(
            "--trace",
            metavar="NAME",
            help="Watch every run with this opt-in monitor too (repeat, or NAME,NAME): what the kernel did "
            "with its I/O, at a cost `fslab list` states for each. `block`: request sizes, device time and "
            "queue depth at the target's devices (bpftrace; 1–2 s to attach per window; docs/monitors.md).",
        ),
    ] = None,
    redo_disturbed: Annotated[
        bool,
        typer.Option(
            "--redo-disturbed",
            help="Run a disturbed run again (something else took the CPU or memory: docs/monitors.md, "
            '"Neighbours"), at most twice; the disturbed one is stored, marked, left out of the statistics. '
            "Without it, disturbed runs count, flagged.",
        ),
    ] = False,
    no_ceiling: Annotated[
        bool,
        typer.Option(
            "--no-ceiling",
            help="Add no raw reference (the ceiling a study without a raw target is held against: docs/statistics.md); "
            "recorded with the study run.",
        ),
    ] = False,
    destroy_data: Annotated[
        list[str] | None,
        typer.Option(
            DESTROY_FLAG,
            metavar="DEVICE",
            help="Confirm that fslab may destroy all data on this device, which the study names (repeat for each).",
        ),
    ] = None,
    client: Annotated[
        list[str] | None,
        typer.Option(
            "--client",
            metavar="HOST=ADDRESS:PORT",
            help="Where a host a workload's clients names serves fio (fslab "
            "fio-server there): an IP address, never a name; repeat for each.",
        ),
    ] = None,
    allow_network: AllowNetworkOption = None,
    on: Annotated[
        str | None,
        typer.Option(
            "--on",
            metavar="HOSTS",
            help="Run on a fleet's workers instead of here (docs/fleet.md): HOST[,HOST…], label:LABEL (the "
            "workers carrying it) or all (every worker heard from lately). Needs --db postgresql://….",
        ),
    ] = None,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach",
            help="With --on: queue the study run and return at once, printing its id (`fslab status ID` follows it).",
        ),
    ] = False,
    spread: Annotated[
        bool,
        typer.Option(
            "--spread",
            help="With --on: divide the study run's planned runs among the hosts (identical hosts "
            "finishing one study sooner: each takes the plan's next block when free) instead "
            "of each host running them all; its summary pools the hosts, host a block.",
        ),
    ] = False,
    kernel: Annotated[
        list[str] | None,
        typer.Option(
            "--kernel",
            metavar="RELEASE",
            help="Run the study under each kernel named (repeat): a Debian kernel package's release (e.g. "
            "6.1.0-56-amd64), fetched and booted in a throwaway VM, or `host`, this machine's own kernel; each "
            "is a host of the study run, its runs stored as each boot ends (docs/commands.md, Kernels).",
        ),
    ] = None,
    boots: Annotated[
        int | None,
        typer.Option(
            "--boots",
            min=1,
            help="With --kernel: run each kernel's plan in this many boots, interleaved over the kernels; "
            "a speed verdict between kernels needs 2 boots each. \\[default: 1]",
        ),
    ] = None,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan",
            help=(
                "Print what the study would do here — targets and workloads "
                "after --scale, runs, disk space, estimated time, "
                "what is skipped or missing — and run nothing."
            ),
        ),
    ] = False,
    no_summary: Annotated[
        bool,
        typer.Option(
            "--no-summary",
            help="Store the runs and end there: no summary printed, no report files written (`fslab summary` "
            "makes them later); the exit status still says whether a run failed. What a lab VM's fslab runs: "
            "the host summarises its runs.",
        ),
    ] = False,
    tune_host: Annotated[
        bool,
        typer.Option(
            "--tune-host",
            help="Set what disturbs VM figures for the run — KSM off, transparent huge pages never, the "
            "performance governor, vCPUs pinned (docs/hygiene.md) — and put it back however the run ends "
            "(journalled: after a kill -9, `fslab cleanup`). Without it nothing is set; the settings are "
            "recorded with the study run either way.",
        ),
    ] = False,
    lab_progress: Annotated[
        Path | None,
        typer.Option(
            "--lab-progress",
            hidden=True,  # fslab's own, in a lab VM: the host tails it (lab/progress.py)
            help="A file the lab's host made, where each run's end is written as a line as it ends.",
        ),
    ] = None,
    lab_cell: Annotated[
        tuple[str, str] | None,
        typer.Option(
            "--lab-cell",
            hidden=True,  # fslab's own, in a lab VM: `fslab bisect`'s one cell (lab/study.py's guest_arguments)
            metavar="TARGET WORKLOAD",
            help="Run this one cell of the study alone, with no raw reference added.",
        ),
    ] = None,
    db: DbOption = None,
    workdir: WorkdirOption = DEFAULT_WORKDIR,
) -> None:
    """Run a study: provision every target, run every workload, store and summarise the results."""
    if tune_host and on is not None:
        raise _fail("--tune-host tunes this machine: it cannot go with --on (each worker's host is its own)")
    if plan and (resume or on is not None):
        raise _fail("--plan shows a new study run on this machine: give it without --resume and --on")
    if detach and on is None:
        raise _fail("--detach goes with --on: a study run on a fleet's workers")
    if spread and on is None:
        raise _fail("--spread goes with --on: it divides a study run among a fleet's workers")
    if boots is not None and not kernel:
        raise _fail("--boots goes with --kernel: it spreads each kernel's runs over that many boots")
    if kernel and spread:
        raise _fail(
            "--spread cannot go with --kernel: each worker boots its own kernels and runs the whole plan on each"
        )
    if kernel:
        _refuse_together(
            "--kernel",
            "a study run over kernels runs an exact plan (--runs, --boots), here and in lab VMs",
            {"--resume": resume, "--client": client,
             "--target-ci": target_ci is not None, "--decide": decide, "--lab-progress": lab_progress is not None,
             "--lab-cell": lab_cell is not None},
        )  # fmt: skip
    if on is not None:
        _refuse_together(
            "--on",
            "each worker resumes its unit itself and skips what its host cannot run (recorded with why)",
            {"--resume": resume, "--skip-unsupported": skip_unsupported, "--destroy-data": destroy_data,
             "--target-ci": target_ci is not None, "--decide": decide, "--lab-progress": lab_progress is not None,
             "--lab-cell": lab_cell is not None},
        )  # fmt: skip
    if resume:
        fixed = {
            "--runs": runs,
            "--warmup": warmup,
            "--target-ci": target_ci,
            "--decide": decide or None,
            "--max-runs": max_runs,
            "--time-budget": time_budget,
            "--baseline": baseline,
            "--scale": scale,
            "--scale-sizes-only": scale_sizes_only or None,
            "--seed": seed,
            "--skip-unsupported": skip_unsupported or None,
            "--no-ceiling": no_ceiling or None,
            "--trace": trace or None,
            "--redo-disturbed": redo_disturbed or None,
            "--lab-cell": lab_cell,
        }
        given = [name for name, value in fixed.items() if value is not None]
        if given:
            raise _fail(
                f"{', '.join(given)} cannot change a resumed study run: it goes on with the settings it began with"
            )
        return _resume(study, threshold, db, workdir, tuple(destroy_data or ()), tune_host, not no_summary)
    if study is None:
        raise _fail("name a study file or a built-in study (see `fslab list`), or give --resume")
    if scale_sizes_only and scale is None:
        raise _fail("--scale-sizes-only goes with --scale: give the factor sizes are multiplied by (e.g. --scale 0.1)")
    from fslab.model.ceiling import with_ceiling
    from fslab.study import load_study

    loaded = load_study(study, scale=scale or 1.0, scale_sizes_only=scale_sizes_only)
    if lab_cell is not None:
        loaded = loaded.only(*lab_cell)
        if not loaded.cells:
            raise _fail(f"--lab-cell {' · '.join(map(visible, lab_cell))}: study {loaded.name} has no such cell")
    from fslab.running.plan import Repetitions  # after the study file is read: a refused one is told without them
    from fslab.running.runner import run_study, unsupported_here

    # the plan holds the ceiling's cells, as everything that reads the study does, decided on the targets that run
    skipping = {u.target for u in unsupported_here(loaded)} if skip_unsupported else set()
    loaded = with_ceiling(loaded, no_ceiling or loaded.no_ceiling, skipping)  # --lab-cell: none added
    if trace:
        from fslab.monitors import known_traces

        loaded = replace(loaded, traces=known_traces(trace))
    if redo_disturbed:
        loaded = replace(loaded, redo_disturbed=True)
    _warn_short_runs(loaded)

    repetitions = Repetitions(
        runs=runs or loaded.repetitions,
        warmup=loaded.warmup if warmup is None else warmup,
        target_ci=target_ci,
        max_runs=max_runs or 30,
        time_budget=time_budget,
        threshold=threshold,
        decide=decide,
    )
    if plan:
        return _print_plan(
            loaded, repetitions, db, workdir, skip_unsupported, kernel or [], boots or 1, tuple(destroy_data or ())
        )
    clients = None
    if client:  # fio's client/server: its modules only for a study that drives clients
        from fslab.fio import given_clients, networks

        clients = given_clients(client, networks(allow_network or ()))
    results = _open_db(db)
    if on is not None:
        return _run_on_fleet(
            results,
            loaded,
            repetitions,
            on=on,
            detach=detach,
            seed=seed,
            baseline=baseline,
            threshold=threshold,
            spread=spread,
            summary=not no_summary,
            kernels=kernel or [],
            boots=boots or 1,
        )
    if kernel:
        from fslab.lab.study import run_on_kernels

        lab_run = _with_progress(
            lambda observer: run_on_kernels(
                loaded,
                kernel,
                results=results,
                workdir=workdir,
                boots=boots or 1,
                observer=observer,
                repetitions=repetitions,
                seed=seed,
                baseline=baseline,
                skip_unsupported=skip_unsupported,
                destroy_flags=tuple(destroy_data or ()),
                hold=_host_hygiene(tune_host, vm=any(k != "host" for k in kernel)),
            ),
            interrupted="the boots that ended are stored; the one under way stored nothing (its VM was "
            "stopped). A study run over kernels cannot be resumed: run it again for what is missing.",
        )
        return _show_and_exit(results, lab_run, summary=not no_summary, baseline=baseline, threshold=threshold)
    flags = tuple(destroy_data or ())
    study_run_id = _with_progress(
        lambda observer: run_study(
            loaded,
            results,
            Workdir(workdir),
            repetitions=repetitions,
            seed=seed,
            baseline=baseline,
            observer=_told_to_lab(observer, lab_progress),
            destroy_flags=flags,
            skip_unsupported=skip_unsupported,
            clients=clients,
            hold=_host_hygiene(tune_host),
        ),
        then=f", then more until ±{target_ci:.1%}" if target_ci else ", then more until decided" if decide else "",
    )
    _show_and_exit(results, study_run_id, summary=not no_summary, baseline=baseline, threshold=threshold)


def _told_to_lab(observer: "RunObserver", path: Path | None) -> "RunObserver":
    """In a lab VM (--lab-progress): the observer that also writes each run's end for the host."""
    if path is None:
        return observer
    from fslab.lab.progress import GuestProgress

    return GuestProgress(path, observer)


def _print_plan(
    study: "Study",
    repetitions: Any,
    db: str | None,
    workdir: Path,
    skip_unsupported: bool,
    kernels: list[str],
    boots: int,
    destroy_flags: tuple[str, ...],
) -> None:
    """`fslab run --plan` (with --kernel: lab/preview.py's, per kernel, the devices the study names
    checked as the run checks them): the plan, from the stored runs of this host (of each kernel)
    where it has any (read, never written)."""
    from fslab.results.timings import stored_timings
    from fslab.running.environment import host
    from fslab.running.preview import Overhead, plan_lines

    def overhead_of(host_name: str) -> Overhead:
        return Overhead.of(stored_timings(resolve_location(db), host_name))

    if kernels:
        from fslab.lab import preview

        lines = preview.plan_lines(
            study,
            kernels,
            boots,
            repetitions,
            overhead_of,
            workdir,
            skip_unsupported=skip_unsupported,
            destroy_flags=destroy_flags,
        )
    else:
        lines = plan_lines(study, repetitions, overhead_of(host().name), workdir, skip_unsupported=skip_unsupported)
    for line in lines:
        console.print(visible(line), markup=False, highlight=False, soft_wrap=True)


def _run_on_fleet(
    results: "ResultsDB",
    study: "Study",
    repetitions: Any,
    *,
    on: str,
    detach: bool,
    seed: int | None,
    baseline: str | None,
    threshold: float,
    spread: bool,
    summary: bool,
    kernels: list[str],
    boots: int,
) -> None:
    from fslab.fleet import dispatch

    if kernels:  # refused as a local run over kernels would be, before anything is stored
        from fslab.lab.study import check_kernel_study

        check_kernel_study(study, list(dict.fromkeys(kernels)), boots, {"repetitions": repetitions}, fleet=True)
    study_run_id = dispatch.begin(
        results, study, repetitions, on=on, seed=seed, baseline=baseline, spread=spread, kernels=kernels, boots=boots
    )
    for note in dispatch.refusing(results, study_run_id):
        errors.print(f"[yellow]note[/yellow]: {safe_markup(note)}", highlight=False)
    if detach:
        console.print(str(study_run_id), highlight=False)
        return
    try:
        dispatch.follow(
            results,
            study_run_id,
            console,
            say=lambda line: errors.print(f"[yellow]{safe_markup(line)}[/yellow]", highlight=False, soft_wrap=True),
        )
    except KeyboardInterrupt:
        errors.print(
            "[yellow]stopped following[/yellow]: the workers go on; "
            f"`fslab status {study_run_id}` shows where they are."
        )
        raise typer.Exit(exit_status()) from None
    _show_and_exit(results, study_run_id, summary=summary, baseline=baseline, threshold=threshold)


def _resume(
    ref: str | None,
    threshold: float,
    db: str | None,
    workdir: Path,
    destroy_flags: tuple[str, ...],
    tune_host: bool,
    summary: bool,
) -> None:
    from fslab.running.resume import resumable
    from fslab.running.runner import resume_study

    results = _open_db(db)
    found = resumable(results, ref)
    console.print(
        f"[bold]{safe_markup(found.study.name)}[/bold]: resuming study run "
        f"{found.study_run_id}, {len(found.stored)} run(s) already stored",
        highlight=False,
    )
    for note in found.notes:
        errors.print(f"[yellow]note[/yellow]: {safe_markup(note)}", highlight=False)
    _warn_short_runs(found.study)
    study_run_id = _with_progress(
        lambda observer: resume_study(
            found,
            results,
            Workdir(workdir),
            observer=observer,
            destroy_flags=destroy_flags,
            hold=_host_hygiene(tune_host),
        )
    )
    _show_and_exit(results, study_run_id, summary=summary, baseline=found.baseline, threshold=threshold)


# === --tune-host (lab/hygiene.py) ================================================================
# The one place a study run's host hygiene is wired: read (and with --tune-host set) inside the
# work directory's claim, recorded in the study run's environment ("vm_hygiene"), said once.
# `fslab run --kernel` (lab/study.py, run_on_kernels) holds it across all its rounds, with
# `vm=True` where a kernel boots in a VM (its vCPUs pinned); with no VM asked, --tune-host says so
# and still sets KSM, THP and the governor for the host's own runs (no vCPU to pin).
def _host_hygiene(tune_host: bool, *, vm: bool = False) -> "Hold":
    from fslab.lab import hygiene

    def say(line: str) -> None:
        errors.print(safe_markup(line), highlight=False, soft_wrap=True)

    if tune_host and not vm:
        say(
            "--tune-host: no VM to tune for (no --kernel but host): KSM, THP and the governor are set for this "
            "host's own runs, and there is no vCPU to pin"
        )
    said = say if tune_host or vm else (lambda line: None)  # a host run's own output stays as it was
    return lambda journal: hygiene.recorded(tune_host, journal, say=said, vm=vm)


def _warn_short_runs(study: "Study") -> None:
    """Said before anything runs, and not fatal: runs too short to measure much."""
    from fslab.study import short_runs

    warning = short_runs(study)
    if warning:
        errors.print(f"[yellow]warning[/yellow]: {safe_markup(warning)}", highlight=False, soft_wrap=True)


def _with_progress(start: "Callable[[RunObserver], int]", then: str = "", interrupted: str | None = None) -> int:
    """Run a study run under a progress bar; returns its id. Ctrl-C or `kill` ends it interrupted
    (exit status 128 + the signal's number: 130, 143), as do runs failing alike across targets
    (exit status 1). `then`: what follows the runs it announces."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from fslab.running.runner import StudyStopped

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    try:
        with Progress(*columns, console=console, transient=True) as progress:
            return start(_ProgressObserver(progress, then))
    except StudyStopped as exc:  # interrupted by its own runs: said in one line, as an interruption is
        errors.print(f"[red]stopped[/red]: {safe_markup(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        errors.print(
            "[yellow]interrupted[/yellow]: mounts and loop devices released; "
            + (
                interrupted
                or "the runs already done are stored. `fslab run --resume` (with the same --db and --workdir) "
                "continues it."
            )
        )
        raise typer.Exit(exit_status()) from None


def _show_and_exit(results: "ResultsDB", study_run_id: int, *, summary: bool = True, **analysis: Any) -> None:
    """The summary (without `summary`, where the runs are: --no-summary); exit status 1 when any
    run of the study run failed (this session's or an earlier one's)."""
    if summary:
        failed = _show(results, study_run_id, **analysis)
    else:
        failed = sum(r["status"] != "ok" for r in results.runs(study_run_id, ["status"]))
        console.print(
            f"Study run {study_run_id} stored in {shown(results.location)}; `fslab summary {study_run_id}` shows it",
            highlight=False,
        )
    if failed:
        errors.print(f"[red]{failed} run(s) failed[/red]; their errors are in the summary and the database.")
        raise typer.Exit(1)


def _show(results: "ResultsDB", study_run_id: int, **asked: Any) -> int:
    """Print the summary and write its report files; how many of its runs failed. Asked for
    again while nothing it is made of changed, and its report files are as written, it is
    printed as it was kept (report/kept.py), not worked out again."""
    from fslab.report import kept
    from fslab.report.formats import report_files

    study_run = results.study_run(study_run_id)
    if study_run is None:
        raise FslabError(f"no study run {study_run_id} in the database")
    folder = kept.folder_of(study_run, reports_dir(results.location))
    digest = kept.made_of_now(results, study_run, kept.Asked.of(study_run, **asked))
    files = [(f.name, f.made_of) for f in report_files()]
    if (found := kept.kept(folder, digest, files)) is not None:
        view, written = found
        print_view(console, view, report=folder / "summary.md")
    else:
        from fslab.report.files import write_reports
        from fslab.report.formats import Source
        from fslab.report.sections import summary_view
        from fslab.report.summary import summarize_study_run

        summary = summarize_study_run(results, study_run_id, **asked)
        source = Source(results, summary)  # the sections worked out once, for the console and summary.md
        view = summary_view(summary, source.sections)
        print_view(console, view, report=folder / "summary.md")
        written = write_reports(results, summary, reports_dir(results.location), source)
        kept.keep(folder, view, source.made_of, files)
    console.print(
        f"Results in {shown(results.location)}; report files: {', '.join(str(p) for p in written)}", highlight=False
    )
    return view.failures


@app.command()
def summary(
    study_run: StudyRunArgument = None,
    baseline: BaselineOption = None,
    threshold: ThresholdOption = "3",  # type: ignore[assignment]  # parsed into a fraction
    precision: Annotated[
        float | None,
        typer.Option(
            "--precision",
            parser=parse_percent,
            metavar="PERCENT",
            help="Say how many runs a ratio within ±PERCENT would need. \\[default: the threshold]",
        ),
    ] = None,
    units: Annotated[
        Bandwidth | None,
        typer.Option(
            "--units",
            help="Bandwidth in decimal MB/s or binary MiB/s, in the tables and "
            "the report files. \\[default: the study's units, else MB/s]",
        ),
    ] = None,
    pool_hosts: PoolHostsOption = False,
    db: DbOption = None,
) -> None:
    """Show the summary of a stored study run (tables, comparisons, ranking) and write its report files."""
    with _without_cyclic_collector():
        results = _open_db(db)
        found = _find_study_run(results, study_run)
        _show(
            results,
            found["id"],
            baseline=baseline,
            threshold=threshold,
            precision=precision,
            units=units,
            pool_hosts=pool_hosts,
        )


@app.command()
def export(
    study_run: StudyRunArgument = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="The folder to write into (made if need be, in an existing "
            "directory). \\[default: the study run's report folder]",
        ),
    ] = None,
    form: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="csv or parquet (or a format a module of fslab.report.formats "
            "adds). Parquet needs pyarrow: pip install 'fslab\\[parquet]'.",
        ),
    ] = "csv",
    db: DbOption = None,
) -> None:
    """Write a study run's tables for pandas: runs (every run, one row per metric) and summary
    (every cell's statistics)."""
    from fslab.report.files import export_tables, report_folder
    from fslab.report.formats import table_form_named
    from fslab.report.summary import summarize_study_run

    chosen = table_form_named(form)
    with _without_cyclic_collector():
        results = _open_db(db)
        found = _find_study_run(results, study_run)
        summary = summarize_study_run(results, found["id"])
        folder = output or report_folder(summary, reports_dir(results.location))
        for path in export_tables(results, summary, folder, chosen):
            console.print(str(path), markup=False, highlight=False)


@contextmanager
def _without_cyclic_collector() -> Iterator[None]:
    """For a command that reads a study run, writes what it says and ends within seconds (summary,
    export, report): Python's cyclic garbage collector stays off while it works, and what it made is
    frozen as it ends. The collector would walk the objects of every module the command loads and
    every sample it reads, pass after pass, and Python's last collection as it exits all of them
    once more (each a tenth of a second of a summary of 2,000 runs); what little such a command
    leaves in cycles is freed with the process."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _find_study_run(results: "ResultsDB", ref: str | None) -> dict:
    found = results.study_run(ref)
    if found is None:
        raise _fail(f"no study run {ref or ''} in {shown(results.location)}".replace("  ", " "))
    return found


@app.command()
def compare(
    older: Annotated[
        str,
        typer.Argument(
            help=(
                "The study run to compare against (id: 12 or #12; or a study name for its newest run); "
                "with --hosts, the study run whose hosts are compared."
            )
        ),
    ],
    newer: Annotated[
        str | None, typer.Argument(help="The study run compared (id: 12 or #12); none with --hosts.")
    ] = None,
    hosts: Annotated[
        tuple[str, str] | None,
        typer.Option(
            "--hosts",
            metavar="A B",
            help="Compare host B with host A (the baseline) on one study run: every target and workload both ran, B/A.",
        ),
    ] = None,
    kernels: Annotated[
        tuple[str, str] | None,
        typer.Option(
            "--kernels",
            metavar="A B",
            help="Compare kernel B with kernel A (the baseline) on one study run (`fslab run --kernel`): as --hosts, "
            "each kernel's host (a lab VM's is named by its release; 'host': this machine's own kernel).",
        ),
    ] = None,
    threshold: ThresholdOption = "3",  # type: ignore[assignment]  # parsed into a fraction
    regression: Annotated[
        float,
        typer.Option(
            "--regression",
            parser=parse_percent,
            metavar="PERCENT",
            help="A cell decided slower by more than this is a regression: exit status 1.",
        ),
    ] = "5",  # type: ignore[assignment]
    strict: StrictOption = False,
    pool_hosts: PoolHostsOption = False,
    db: DbOption = None,
) -> None:
    """Compare two study runs of one study cell by cell, or two hosts (--hosts) or kernels (--kernels)
    of one study run; exit 1 if any cell regressed, or with --strict if any is undecided (for CI gates)."""
    from fslab.model import Host
    from fslab.report.summary import compare_hosts, compare_runs, kernel_hosts
    from fslab.statistics.analysis import gate, regressions

    results = _open_db(db)
    a = _find_study_run(results, older)
    if kernels is not None:
        if hosts is not None or newer is not None or pool_hosts:
            raise _fail("--kernels compares two kernels of one study run: name one study run, without --hosts")
        hosts = kernel_hosts(results, a["id"], kernels)
    if hosts is not None:
        if newer is not None or pool_hosts:
            raise _fail("--hosts compares two hosts of one study run: name one study run, without --pool-hosts")
        compared = compare_hosts(results, a["id"], *hosts, threshold=threshold)
        facts = {h.name: h for h in results.hosts(a["id"])}
        older_host, newer_host = (facts.get(name) or Host(name, None, "–", "–", 0, 0) for name in hosts)
        regressed = regressions(compared.rows, regression)
        print_host_comparison(
            console, a, older_host, newer_host, compared.rows, regressed, threshold, regression, compared.left_out
        )
    else:
        if newer is None:
            raise _fail("compare needs two study runs (OLDER NEWER), or one with --hosts A B")
        b = _find_study_run(results, newer)
        if a["study"] != b["study"]:
            raise _fail(
                f"study run {a['id']} is of study '{a['study']}' and "
                f"{b['id']} of '{b['study']}': compare runs of one study"
            )
        compared = compare_runs(results, a["id"], b["id"], threshold=threshold, pool_hosts=pool_hosts)
        regressed = regressions(compared.rows, regression)
        print_comparison(console, a, b, compared.rows, regressed, threshold, regression, compared.left_out)
    _exit_by(
        gate([r.comparison for r in compared.rows], regression, strict=strict),
        f"among the {len(compared.rows)} comparison(s)",
    )


@app.command()
def bisect(
    study: Annotated[str, typer.Argument(help="A study file, or the name of a built-in study (see `fslab list`).")],
    target: Annotated[str, typer.Option("--target", help="The cell's target (one of the study's).")],
    workload: Annotated[str, typer.Option("--workload", help="The cell's workload (one of the study's).")],
    metric: Annotated[
        str,
        typer.Option(
            "--metric",
            help="The metric bisected (e.g. write_buffered_share). Under TCG (no KVM) only one whose figures do "
            "not depend on the CPU's speed: a speed metric is refused.",
        ),
    ],
    kernels: Annotated[
        str | None,
        typer.Option(
            "--kernels",
            metavar="A,B,…",
            help="Kernel releases in order, the known-good first and the known-bad last "
            "(6.1.0-54-amd64, or 6.1.0-54: the generic flavour).",
        ),
    ] = None,
    kernel_range: Annotated[
        str | None,
        typer.Option(
            "--range",
            metavar="A..B",
            help="Every kernel the archive offers from A (known good) to B (known bad), of A's flavour, in release "
            "order (`fslab lab kernels` lists them).",
        ),
    ] = None,
    runs: Annotated[int, typer.Option("--runs", min=2, help="Runs per boot before a step's first look.")] = 5,
    max_runs: Annotated[
        int,
        typer.Option(
            "--max-runs", min=2, help="A step's budget of runs: undecided beyond it (or when it could not decide)."
        ),
    ] = 10,
    threshold: ThresholdOption = "3",  # type: ignore[assignment]  # parsed into a fraction
    scale: Annotated[
        float | None,
        typer.Option("--scale", help="Multiply image sizes, fio sizes and runtimes (as `fslab run --scale`)."),
    ] = None,
    db: DbOption = None,
    workdir: WorkdirOption = DEFAULT_WORKDIR,
) -> None:
    """Find the first kernel package where one cell's metric changes: each step boots a kernel in the lab,
    runs the cell until its verdict against the known-good end is same, different or undecided, skips a
    kernel that fails (said), names the first different package and confirms it with an A/B against its
    predecessor. Exit 0 when it names one package and the A/B confirms it, 1 when it does not."""
    from fslab.lab.bisect import Rule
    from fslab.lab.bisect_runs import run_bisect

    results = _open_db(db)
    outcome, study_run_id = run_bisect(
        study,
        target=target,
        workload=workload,
        metric=metric,
        kernels_given=kernels,
        range_given=kernel_range,
        rule=Rule.for_metric(metric, threshold=threshold, runs=runs, max_runs=max_runs),
        scale=scale,
        results=results,
        workdir=Workdir(workdir),
        say=lambda line: console.print(safe_markup(line), highlight=False, soft_wrap=True),
    )
    if outcome.stopped:
        console.print(f"stopped: {safe_markup(outcome.stopped)}", highlight=False, soft_wrap=True)
    elif outcome.first_bad:
        after = safe_markup(outcome.last_good or "")
        console.print(
            f"first {outcome.direction} kernel: {safe_markup(outcome.first_bad)}, after {after} ({outcome.boots} "
            f"boots; the A/B {'confirms' if outcome.confirmed else 'does not confirm'} it)",
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print(
            f"the first {outcome.direction} kernel is one of {safe_markup(', '.join(outcome.suspects))}",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    console.print(f"Results in {shown(results.location)}: `fslab summary {study_run_id}` shows every step's runs.")
    if not (outcome.first_bad and outcome.confirmed):
        raise typer.Exit(GATE_FAILED)


@app.command("import")
def import_results(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH",
            help="fio JSON output files, or directories holding them (every regular file under them is tried).",
        ),
    ],
    study: Annotated[
        str,
        typer.Option(
            "--study", help="The study the imported runs belong to: compare it with other study runs of that name."
        ),
    ] = "imported",
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="The target every imported run is of. \\[default: each file's directory name — in "
            "bench-fio's tree, its target's —, else 'imported'; client/server output: TARGET@HOST]",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Import existing fio JSON output (plain json or json+, fio 2.x or 3.x, client/server too;
    bench-fio's output tree) as a study run, and show its summary.

    Each fio job name becomes a workload — one per set of job options where files ran it with
    different ones —, each file a run of its cells (docs/import.md). A file that is not fio's JSON,
    or is malformed, is reported and skipped; fio's log files and bench-fio's preconditioning runs
    are passed over, counted; the rest are imported.

    Exit status: 0 when every file was imported; 1 when some were skipped, or a job reported an
    error, and the rest imported; 2 when nothing could be imported.
    """
    from fslab.model.records import now
    from fslab.results.importer import import_files

    for name, value in (("--study", study), ("--target", target)):
        try:
            if value is not None:
                check_name(value)
        except ValueError as exc:
            raise _fail(f"{name}: {exc}") from None
    imported = import_files(study, paths, target)
    for s in imported.skipped:
        errors.print(
            f"[yellow]skipped[/yellow] {safe_markup(visible(s.path))}: {safe_markup(visible(s.why))}",
            highlight=False,
            soft_wrap=True,
        )
    if not imported.runs:
        raise _fail(
            f"nothing imported: no fio JSON output among {len(imported.skipped) + len(imported.passed_over)} file(s)",
            code=2,
        )
    for line in imported.grouping():
        console.print(safe_markup(line), highlight=False, soft_wrap=True)
    results = _open_db(db)
    study_run_id = results.store_imported(imported, imported.environment(), imported.settings(now()))
    console.print(
        f"imported {len(imported.files)} file(s), {len(imported.runs)} "
        f"run(s), as study run {study_run_id} of study {safe_markup(study)}",
        highlight=False,
    )
    failed = _show(results, study_run_id)
    if imported.skipped or failed:
        raise typer.Exit(1)


@app.command()
def report(
    study_runs: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[STUDY-RUN]...",
            help=(
                "Study run ids (12 or #12), or a study name for its newest run; several (of one study) are compared "
                "with the first. \\[default: the newest]"
            ),
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="DIR",
            help="The folder for report.html, and figures/ with --figures (made if missing). "
            "\\[default: the study run's folder beside the database, where `fslab summary` writes]",
        ),
    ] = None,
    figures: Annotated[
        bool,
        typer.Option(
            "--figures",
            help="Also write every chart as an SVG figure, in figures/ beside the page (for papers "
            "and slides, sharp at any size; about 60 ms of CPU a chart, drawn on every CPU).",
        ),
    ] = False,
    png: Annotated[
        bool,
        typer.Option(
            "--png",
            help="Also write each figure as PNG (implies --figures; half as much CPU again as the SVGs).",
        ),
    ] = False,
    png_scale: Annotated[
        int | None,
        typer.Option(
            "--png-scale",
            metavar="N",
            help="Each PNG at N pixels per CSS pixel, 1 to 4 (implies --png; 2 is sharp on slides and "
            "high-density screens and takes about twice the CPU). \\[default: 1, the page's size]",
        ),
    ] = None,
    time_figures: Annotated[
        bool,
        typer.Option(
            "--time-figures",
            help="Also write the charts of a run's course over time (throughput, latency heatmap, latency "
            "over time) as figures (implies --figures; they are more than half of the figures' CPU).",
        ),
    ] = False,
    history_of: Annotated[
        str | None,
        typer.Option(
            "--history",
            metavar="STUDY",
            help="Write the study's trend page instead (history.html): each cell's primary metric across its "
            "study runs, a facet per host, flagged steps marked and listed (as `fslab history STUDY`).",
        ),
    ] = None,
    baseline: BaselineOption = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            parser=parse_percent,
            metavar="PERCENT",
            help="The smallest change called faster or slower. \\[default: 3 %; with "
            "--history: the threshold the study's newest study run ran with, else 3 %]",
        ),
    ] = None,
    regression: Annotated[
        float,
        typer.Option(
            "--regression",
            parser=parse_percent,
            metavar="PERCENT",
            help="With several study runs: a cell significantly slower than "
            "in the first by more than this is named a regression.",
        ),
    ] = "5",  # type: ignore[assignment]
    units: Annotated[
        Bandwidth | None,
        typer.Option(
            "--units", help="Bandwidth in decimal MB/s or binary MiB/s. \\[default: the study's units, else MB/s]"
        ),
    ] = None,
    pool_hosts: PoolHostsOption = False,
    db: DbOption = None,
) -> None:
    """Write one self-contained HTML page of a study run (or several compared), or with --history
    the study's trend page; with --figures, its charts also as SVG figures (--png: and PNG)."""
    # altair, vl-convert, jinja2: a quarter second no other command needs to wait for
    from fslab.report.figures import PNG_SCALE
    from fslab.report.page import default_folder, write_report

    # the collector off, as for a summary: it walked the page's thousands of chart objects, pass after
    # pass (a tenth of a second of a page of 2,000 runs; bench/report_scale.py)
    with _without_cyclic_collector():
        if png or png_scale is not None:  # a PNG is a figure's other file
            figures, png_scale = True, PNG_SCALE if png_scale is None else png_scale
        figures = figures or time_figures
        results = _open_db(db)
        if history_of is not None:
            return _trend_report(results, history_of, study_runs, output, figures, png_scale, baseline, threshold)
        threshold = 0.03 if threshold is None else threshold
        found = [_find_study_run(results, ref) for ref in study_runs or (None,)]
        folder = output.absolute() if output is not None else default_folder(reports_dir(results.location), found)
        with _figures_progress(figures) as rendered:
            written = write_report(
                results,
                found,
                folder,
                baseline=baseline,
                threshold=threshold,
                units=units,
                regression=regression,
                figures=figures,
                png_scale=png_scale,
                time_figures=time_figures,
                rendered=rendered,
                pool_hosts=pool_hosts,
            )
        console.print(f"Report: {written.page}", highlight=False, soft_wrap=True)
        if figures:
            left_out = written.over_time_left_out
            console.print(
                f"Figures ({len(written.figures)} files, "
                f"{'SVG and PNG' if png_scale else 'SVG'}): {written.page.parent / 'figures'}"
                + (
                    f"; {left_out} charts of a run's course over time are on the page only (--time-figures)"
                    if left_out
                    else ""
                ),
                highlight=False,
                soft_wrap=True,
            )


def _trend_report(
    results: "ResultsDB",
    study: str,
    study_runs: list[str] | None,
    output: Path | None,
    figures: bool,
    png_scale: int | None,
    baseline: str | None,
    threshold: float | None,
) -> None:
    """`fslab report --history STUDY`: the trend page, and with --figures its charts as files."""
    from fslab.report.trend_page import trend_folder, write_trend
    from fslab.statistics.history_reading import read_history

    if study_runs or baseline is not None:
        raise _fail(
            "--history writes a study's trend page from all its study runs: give no STUDY-RUN and no --baseline with it"
        )
    found = read_history(results, study, threshold=threshold)
    folder = output.absolute() if output is not None else trend_folder(reports_dir(results.location), study)
    with _figures_progress(figures) as rendered:
        written = write_trend(found, study, folder, figures=figures, png_scale=png_scale, rendered=rendered)
    console.print(f"Trend page: {written.page}", highlight=False, soft_wrap=True)
    if figures:
        console.print(
            f"Figures ({len(written.figures)} files, "
            f"{'SVG and PNG' if png_scale else 'SVG'}): {written.page.parent / 'figures'}",
            highlight=False,
            soft_wrap=True,
        )


@contextmanager
def _figures_progress(figures: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar while figures are rendered, on a terminal (a page has a hundred charts)."""
    if not figures or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("figures"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console, transient=True
    ) as progress:
        task = progress.add_task("figures", total=None)
        yield lambda done, total: progress.update(task, completed=done, total=total)


@app.command()
def history(
    study: Annotated[
        str | None,
        typer.Argument(
            metavar="[STUDY]",
            help="A study's name: each cell's primary metric across its study runs, per host, with every step "
            "between consecutive study runs that is a change. \\[default: list the study runs stored]",
        ),
    ] = None,
    host: Annotated[
        list[str] | None,
        typer.Option(
            "--host",
            metavar="HOST",
            help="With STUDY: only the runs of this host (repeat for "
            "several). \\[default: every host, each its own series]",
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            metavar="METRIC",
            help="With STUDY: this metric (e.g. read_iops, write_lat_p99_us; "
            "repeat for several) instead of each workload's primary ones.",
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            parser=parse_percent,
            metavar="PERCENT",
            help="With STUDY: the smallest step called a change. \\[default: "
            "the threshold its newest study run ran with, else 3 %]",
        ),
    ] = None,
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression",
            help="With STUDY: exit with status 1 when a step into the newest study run of the hosts shown "
            "is a regression (decided slower beyond the threshold), for CI.",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="With STUDY: --fail-on-regression, and exit with status 1 too when a step into the newest "
            "study run is undecided (its interval decides nothing yet).",
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """List the study runs stored in the database; with STUDY, its history: each cell's metric over
    its study runs and the steps that are changes."""
    results = _open_db(db)
    if study is None:
        from fslab.model.records import imported_from

        given = [
            name
            for name, value in (
                ("--host", host),
                ("--metric", metric),
                ("--threshold", threshold),
                ("--fail-on-regression", fail_on_regression or None),
                ("--strict", strict or None),
            )
            if value is not None
        ]
        if given:
            raise _fail(f"{', '.join(given)} go with a STUDY: name the study whose history to judge")
        rows = [
            [
                str(sr["id"]),
                visible(sr["study"]),
                f"{sr['started_at']:%Y-%m-%d %H:%M}",
                "imported" if imported_from(sr) else sr["status"],
                str(sr["repetitions"]),
                visible(sr["environment"].get("kernel", "")),
            ]
            for sr in results.study_runs()
        ]
        print_table(
            console,
            "study runs",
            ["id", "study", "started (UTC)", "status", "runs per cell", "kernel"],
            rows,
            [True, False, False, False, True, False],
        )
        return
    from fslab.report import trend
    from fslab.statistics.history_reading import read_history

    found = read_history(results, study, hosts=host, metrics=metric, threshold=threshold)
    for series in found.series:
        rows = [[visible(cell) for cell in row] for row in trend.series_rows(series)]
        print_marked_table(
            console,
            visible(trend.series_title(series)),
            trend.series_columns(found),
            rows,
            trend.SERIES_RIGHT,
            styles=[{"slower": "red", "faster": "green"}.get(c, "") for c in trend.row_classes(series)],
        )
    flagged = trend.flagged_lines(found)
    console.print(
        f"{len(found.flagged)} step(s) flagged, {len(found.drifts)} drift(s)" + (":" if flagged else "."),
        highlight=False,
    )
    for line, _ in flagged:
        console.print(f"  {visible(line)}", markup=False, highlight=False, soft_wrap=True)
    console.print(visible(trend.method_line(found)), markup=False, highlight=False, soft_wrap=True)
    if fail_on_regression or strict:
        from fslab.statistics.analysis import gate

        steps = [s.comparison for s in found.latest_steps]
        _exit_by(
            gate(steps, found.threshold, strict=strict),
            f"among the {len(steps)} step(s) into study run {found.latest}, the newest shown",
        )


@app.command()
def worker(
    name: Annotated[
        str | None,
        typer.Option(
            "--name", help="The host's name in the fleet, which `fslab run --on` names. \\[default: the host name]"
        ),
    ] = None,
    labels: Annotated[
        str | None,
        typer.Option(
            "--labels",
            metavar="LABEL[,LABEL…]",
            help="What this host has (e.g. ssd,nvme): `fslab run --on label:ssd` runs on the workers labelled ssd.",
        ),
    ] = None,
    heartbeat_lapse: Annotated[
        float,
        typer.Option(
            "--heartbeat-lapse",
            min=1.0,
            metavar="SECONDS",
            help="How long a worker may go unheard before its unit is taken again by the next worker of its name.",
        ),
    ] = 60.0,
    fio_address: Annotated[
        str | None,
        typer.Option(
            "--fio-address",
            metavar="ADDRESS[:PORT]",
            help="Serve fio here for the study runs whose workloads name this host among "
            "their clients, only while they run (never every address): an IP address "
            "of this host's on loopback or in an --allow-network; port 8765 by default.",
        ),
    ] = None,
    allow_network: AllowNetworkOption = None,
    db: DbOption = None,
    workdir: WorkdirOption = DEFAULT_WORKDIR,
) -> None:
    """Serve a fleet on this host: take this host's units from the shared PostgreSQL database one at
    a time, run each here, store its runs there (docs/fleet.md).

    Ctrl-C or SIGTERM releases the run under way and gives its unit back to be taken again; the
    worker then exits 130 after Ctrl-C, 0 after SIGTERM (a service manager's stop).

    With --fio-address it also serves fio for other hosts' shared-storage runs that name it among
    their clients (docs/shared-storage.md)."""
    from fslab.fio import address_and_port, networks
    from fslab.fleet import worker as serving
    from fslab.fleet.roster import checked_labels
    from fslab.lab.study import run_unit_on_kernels

    if name is not None:
        try:
            check_name(name)
        except ValueError as exc:
            raise _fail(f"--name: {exc}") from None
    location = resolve_location(db)
    allowed = networks(allow_network or ())
    fio = address_and_port(fio_address, allowed, "--fio-address") if fio_address is not None else None
    settings = serving.WorkerSettings(
        location,
        name,
        checked_labels([x.strip() for x in (labels or "").split(",") if x.strip()]),
        workdir,
        heartbeat_lapse,
        fio,
        allowed,
        run_unit_on_kernels,  # a unit over kernels: the lab runs it (the fleet's sibling floor)
    )
    say = lambda line: console.print(visible(line), markup=False, highlight=False)  # noqa: E731
    try:
        serving.serve(settings, say)
    except KeyboardInterrupt:
        errors.print(
            "[yellow]worker stopped[/yellow]: the run under way was "
            "released; its unit goes to the next worker of this name."
        )
        # SIGTERM is how a service manager stops a service: a normal end, not a failure (143
        # would be one to systemd); Ctrl-C ends it as an interrupted command, 130.
        raise typer.Exit(0 if exit_status() == 128 + signal.SIGTERM else exit_status()) from None


@app.command()
def status(
    study_run: Annotated[
        str | None,
        typer.Argument(
            help=("A fleet's study run id (12 or #12), or a study name for its newest run. \\[default: the newest]")
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Where a study run on a fleet stands: per host, its runs done of planned, the run under way, ETA.

    Then the fleet's workers, each with the fslab it runs and the schema that writes."""
    from fslab.fleet import dispatch

    results = _open_db(db)
    found = _find_study_run(results, study_run)
    if not dispatch.units.hosts_of(results.engine, found["id"]):
        raise _fail(
            f"study run {found['id']} ({found['study']}) did not run on a fleet: `fslab summary {found['id']}` shows it"
        )
    shown, _ = dispatch.progress_table(results, found["id"])
    console.print(shown, crop=False)
    console.print(dispatch.workers_table(results), crop=False)


db_app = typer.Typer(help="The results database itself: copy its study runs into another.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("copy")
def db_copy(
    source: Annotated[
        str, typer.Argument(metavar="SRC", help="The database copied from: an SQLite file, or a database URL.")
    ],
    destination: Annotated[
        str,
        typer.Argument(
            metavar="DST",
            help="The database copied into (typically the team's postgresql://…): made if new, migrated if older.",
        ),
    ],
) -> None:
    """Copy every study run of SRC that DST lacks into DST, with its targets, workloads, hosts,
    runs, metrics and raw outputs.

    Ids are DST's own; a study run is recognised by its identity, kept wherever it is copied, so
    copying again adds nothing. A study run still running is left for a later copy.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from fslab.results import ResultsDB
    from fslab.results.copy import copy_study_runs, open_source

    src, dst = open_source(source), ResultsDB(destination, named="DST")
    columns = (TextColumn("copying runs"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("copy", total=None)
        outcome = copy_study_runs(src, dst, lambda done, total: progress.update(task, completed=done, total=total))
    for old_id, new_id in outcome.copied.items():
        console.print(f"study run {old_id} copied as study run {new_id}", highlight=False)
    for old_id, why in outcome.left.items():
        errors.print(f"[yellow]left[/yellow] study run {old_id}: {safe_markup(why)}", highlight=False)
    console.print(
        f"{len(outcome.copied)} study run(s), {outcome.runs} run(s) copied "
        f"into {shown(destination)}; {len(outcome.already)} already there",
        highlight=False,
        soft_wrap=True,
    )


@app.command("list")
def list_things(
    section: Annotated[
        str | None,
        typer.Argument(
            metavar="[SECTION|NAME]",
            help="Show one section (studies, workloads, sets, kinds, scenarios, filesystems, "
            "layers, sources, monitors, formats), or what is named so (zfs, luks, sysbench). \\[default: all]",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document, a key per section, for scripts.")
    ] = False,
) -> None:
    """What fslab can do: built-in studies and workloads, workload kinds, scenarios, filesystems,
    layers, device sources, and every option a study may give them; the monitors and report formats."""
    import json

    from fslab.cli.catalogue import catalogue, tables

    found = catalogue()
    if section is not None:
        found = found.narrowed(section)
    if as_json:
        console.out(json.dumps(found.as_json(), indent=2, ensure_ascii=False), highlight=False)
        return
    for table in tables(found):
        print_table(console, table.title, table.columns, table.rows, [False] * len(table.columns))


@app.command()
def doctor(
    study: Annotated[
        str | None,
        typer.Argument(
            metavar="[STUDY]",
            help=(
                "A study file or built-in study: list what it needs that this machine lacks, exit 1 on any. "
                "\\[default: every check; exit 1 only when something fslab always needs is missing]"
            ),
        ),
    ] = None,
    workdir: WorkdirOption = DEFAULT_WORKDIR,
) -> None:
    """What this machine can do: tools and versions, kernel support, root, free space — each with what needs it."""
    from fslab.running import doctor as doctor_checks

    if study is not None:
        from fslab.study import load_study

        loaded = load_study(study)
        lacking = doctor_checks.study_needs(loaded, workdir)
        for line in lacking:
            console.print(f"  {visible(line)}", markup=False, highlight=False, soft_wrap=True)
        if lacking:
            skip = "`fslab run --skip-unsupported` runs the targets it can"
            lacks = f"study '{loaded.name}' needs {len(lacking)} thing(s) this machine lacks (above)"
            raise _fail(f"{lacks}; {skip}", code=1)
        said = f"{visible(loaded.name)}: this machine has everything the study needs"
        console.print(said, markup=False, highlight=False)
        return
    needs = doctor_checks.machine_checks(workdir)
    status = [("ok", "") if n.check.ok else ("missing", "red") if n.blocking else ("absent", "yellow") for n in needs]
    rows = [
        [n.check.name, word, n.by, visible(n.check.detail), "" if n.check.ok else visible(n.check.fix)]
        for n, (word, _) in zip(needs, status)
    ]
    columns = ["check", "status", "needed by", "detail", "how to get it"]
    print_table(console, "this machine", columns, rows, [False] * 5, styles=[style for _, style in status])
    from fslab.cli.catalogue import from_outside

    if extended := from_outside():
        console.print(
            f"extended here with: {visible(', '.join(extended))}", markup=False, highlight=False, soft_wrap=True
        )
    blocking = sum(n.blocking for n in needs)
    if blocking:
        _print_hygiene()
        raise _fail(f"{blocking} check(s) that fslab always needs failed", code=1)
    absent = [n.by for n in needs if not n.check.ok and n.by != doctor_checks.ALWAYS and n.refuses]
    unmeasured = [n.by for n in needs if not n.check.ok and not n.refuses]
    if unmeasured:
        console.print(
            f"not measured here: {', '.join(dict.fromkeys(unmeasured))} (runs go on without its figures; "
            "their summary says why)",
            highlight=False,
            soft_wrap=True,
        )
    if absent:
        console.print(
            f"absent here: {', '.join(dict.fromkeys(absent))}; a study using them is refused "
            "(`fslab run --skip-unsupported` skips those targets). "
            "`fslab doctor STUDY` checks what one study needs.",
            highlight=False,
            soft_wrap=True,
        )
    _print_hygiene()


def _print_hygiene() -> None:
    """doctor's table of what on this host disturbs a lab VM's figures (lab/hygiene.py)."""
    from fslab.lab import hygiene

    found = hygiene.read()
    judged = found.judgements()
    word = {True: "may disturb", False: "ok", None: "–"}
    rows = [[j.name, visible(j.reading), word[j.disturbs], j.why] for j in judged]
    styles = ["yellow" if j.disturbs else "" for j in judged]
    columns = ["setting", "reading", "VM figures", "why"]
    print_table(console, "host hygiene (lab VMs)", columns, rows, [False] * 4, styles=styles)
    if found.disturbing():
        console.print("`fslab run --tune-host` sets them for a run and puts them back after.", highlight=False)


@app.command()
def cleanup(workdir: WorkdirOption = DEFAULT_WORKDIR) -> None:
    """Release mounts and loop devices an interrupted fslab left behind (from its journal)."""
    work = Workdir(workdir)
    with work.claim():
        outcomes = work.journal.clean_up()
    if not outcomes:
        console.print("nothing to clean up")
    colour = {"released": "green", "left alone": "yellow", "failed": "red"}
    for o in outcomes:
        detail = f": {safe_markup(o.detail)}" if o.detail else ""
        console.print(
            f"{safe_markup(o.kind)} {safe_markup(o.ident)}: "
            f"[{colour[o.status]}]{o.status}[/{colour[o.status]}]{detail}",
            highlight=False,
        )
    if any(o.status != "released" for o in outcomes):
        raise typer.Exit(1)


@app.command("fio-server")
def fio_server(
    address: Annotated[
        str,
        typer.Option(
            "--address",
            help="The IP address of this host's that fio's server listens on "
            "(never every address): loopback, or in an --allow-network.",
        ),
    ],
    port: Annotated[int, typer.Option("--port", help="The TCP port it listens on (1024-65535).")] = 8765,
    allow_network: AllowNetworkOption = None,
    workdir: WorkdirOption = DEFAULT_WORKDIR,
) -> None:
    """Serve fio for shared-storage runs (clients = [...]): `fio --server` on one address, held in
    the journal, until Ctrl-C or SIGTERM.

    A fio server runs any job a client that reaches it sends, as root: run it on a lab network only
    (docs/shared-storage.md)."""
    from fslab.fio import Endpoint, checked_address, checked_port, networks, serve_until_stopped

    where = Endpoint(checked_address(address, networks(allow_network or ()), "--address"), checked_port(port, "--port"))
    work = Workdir(workdir)
    try:
        with work.claim():
            serve_until_stopped(work.journal, where, lambda line: console.print(safe_markup(line), highlight=False))
    except KeyboardInterrupt:
        console.print("fio server stopped")


lab_app = typer.Typer(
    help="The kernel lab: Debian's kernel packages, booted in throwaway VMs (docs/lab.md).", no_args_is_help=True
)
app.add_typer(lab_app, name="lab")


@lab_app.command("kernels")
def kernels_command(
    flavour: Annotated[
        str | None, typer.Option("--flavour", help="Only this flavour: generic, cloud or rt. \\[default: all]")
    ] = None,
) -> None:
    """The kernel packages the configured archive offers (apt's lists as last updated: `apt-get
    update` refreshes them), oldest first, and which are prepared in fslab's cache."""
    from fslab.lab.kernels import FLAVOURS, KERNELS, KernelError, offered

    if flavour is not None and flavour not in FLAVOURS.values():
        raise KernelError(f"--flavour {flavour!r} is not one of {', '.join(FLAVOURS.values())}")
    found = [p for p in offered() if flavour is None or p.flavour == flavour]
    rows = [[safe_markup(p.release), p.flavour, safe_markup(p.version), "yes" if p.cached else ""] for p in found]
    print_table(console, f"kernel packages ({len(rows)}; cache: {KERNELS})", ["release", "flavour", "package version",
                "cached"], rows, [False] * 4)  # fmt: skip
    if not rows:
        console.print("none offered: is the archive configured (/etc/apt/sources.list.d), and `apt-get update` run?")


@lab_app.command("build")
def build_command(
    kernel: Annotated[
        str, typer.Argument(metavar="KERNEL", help="A release `fslab lab kernels` lists (6.1.0-56-amd64).")
    ],
) -> None:
    """Prepare a kernel for the lab ahead of a run: its package fetched from the archive (apt
    checks its signature), unpacked into fslab's cache with its module index; once — a prepared
    kernel is not fetched again. Then OpenZFS for it, where a version in the archive fits the
    kernel: Debian's zfs-dkms built once against that kernel's headers (minutes of CPU), its tools
    beside it; where none fits, fslab says so. Runs as root."""
    import os

    from fslab.lab import kernels, openzfs

    kernels.check_release(kernel)
    if os.geteuid() != 0:
        raise kernels.KernelError(
            f"`fslab lab build {kernel}` runs as root (apt-get download, the cache in /var/cache)"
        )

    def say(line: str) -> None:
        console.print(safe_markup(line), highlight=False)

    prepared = kernels.prepare(kernel, say=say)
    say(f"{prepared.release}: package {prepared.package_version}, config sha256 {prepared.config_sha256[:16]}…")
    built = openzfs.prepare_if_fits(prepared.release, say=say)  # its sentence said where none fits
    if built is not None:
        say(f"{prepared.release}: OpenZFS {built.package_version} ({built.suite}) in {built.directory}")


def _help_of(doc: str | None) -> str | None:
    """A command's help from its docstring: each paragraph's lines joined into one, which the
    terminal wraps to its own width (typer's help keeps a docstring's line breaks as they are)."""
    if doc is None:
        return None
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in inspect.cleandoc(doc).split("\n\n"))


for _command in (*app.registered_commands, *db_app.registered_commands, *lab_app.registered_commands):
    _command.help = _command.help or _help_of(_command.callback.__doc__ if _command.callback else None)


def main(password_hidden: bool | None = None) -> None:
    """The commands (entered through fslab.__main__, which hears signals first and hides a
    password given in a URL from `ps`: `password_hidden`, None if none was given): every error a
    user can act on is printed here, once, without a traceback."""
    gc.freeze()  # what the imports made lives as long as fslab: the collector need not walk it on every pass
    if password_hidden is not None:
        hidden = "fslab hid it there as it started, not before" if password_hidden else "fslab could not hide it there"
        errors.print(
            "[yellow]warning[/yellow]: a password given in a database URL on the command line is for every user "
            f"of this machine to read in `ps` ({hidden}): "
            "give it by PGPASSWORD, ~/.pgpass or a service file instead (docs/fleet.md)",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    try:
        app(prog_name="fslab", standalone_mode=True)
    except FslabError as exc:
        sys.exit(_fail(str(exc)).exit_code)
    except SystemExit as exc:  # typer ends any command a signal stopped with 130; SIGTERM's is 143
        if exc.code == 130 and interrupted():
            sys.exit(exit_status())
        raise


if __name__ == "__main__":
    main()
