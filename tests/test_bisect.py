"""fslab bisect's search and verdicts (lab/bisect.py), pure: every boot is a fake `measure` that
gives synthetic values of a metric per kernel, and counts its boots."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from conftest import fslab_in_process
from fslab.lab.bisect import (
    BAD,
    GOOD,
    NEITHER,
    SKIPPED,
    BisectError,
    KernelFailed,
    Rule,
    Samples,
    bisect,
    check_metric,
    in_range,
    resolve,
)
from fslab.lab.kernels import KernelPackage
from fslab.statistics.stats import EQUIVALENT, SLOWER

RELEASES = [
    "6.1.0-54-amd64",
    "6.1.0-55-amd64",
    "6.1.0-56-amd64",
    "6.12.100+deb12-amd64",
    "6.12.107+deb12-amd64",
    "6.12.117+deb12-amd64",
]
FIRST_BAD = "6.12.100+deb12-amd64"

# Btrfs's write_buffered_share of a 32 MiB direct write, as measured here: 128 KiB of metadata on a
# kernel that writes directly (0.0039, now and then 0.00389), nearly all of it where direct writes
# are buffered (0.89–1.0). Lower is better.
DIRECT = (0.00390625, 0.00390625, 0.00388804)
BUFFERED = (1.0, 0.888, 1.0, 0.918, 0.962)


@dataclass
class FakeLab:
    """Boots counted per release; `share` gives a release's values, `broken` the releases that fail."""

    first_bad: str | None = FIRST_BAD
    broken: dict[str, str] = field(default_factory=dict)
    noisy: frozenset[str] = frozenset()
    boots: list[tuple[str, int]] = field(default_factory=list)
    seed: int = 7

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def __call__(self, release: str, runs: int) -> Samples:
        self.boots.append((release, runs))
        if release in self.broken:
            raise KernelFailed(f"{release}: {self.broken[release]}")
        bad = self.first_bad is not None and RELEASES.index(release) >= RELEASES.index(self.first_bad)
        if release in self.noisy:  # a kernel whose figure wanders, 10 times either way of the good one's
            values = [DIRECT[0] * 10 ** self.rng.uniform(-1, 1) for _ in range(runs)]
        else:
            values = [self.rng.choice(BUFFERED if bad else DIRECT) for _ in range(runs)]
        return Samples(tuple(values), higher_is_better=False)


def run(lab: FakeLab, **rule) -> tuple:
    said: list[str] = []
    outcome = bisect(RELEASES, lab, rule=Rule(**rule), versions={r: f"v-{r}" for r in RELEASES}, say=said.append)
    return outcome, said


def test_the_first_package_with_buffered_direct_writes_is_named_in_five_boots_and_confirmed():
    """Catches a linear search, a step judged against the wrong end, and an A/B not measured afresh."""
    lab = FakeLab()
    outcome, said = run(lab)
    assert outcome.first_bad == FIRST_BAD and outcome.last_good == "6.1.0-56-amd64", said
    assert outcome.boots <= 5, said
    assert outcome.direction == SLOWER  # the share rose: lower is better
    assert outcome.confirmed and outcome.confirmation is not None
    ab = outcome.confirmation.comparison
    assert ab is not None and ab.verdict == SLOWER and ab.interval is not None and ab.interval[0] > 1.03
    # the A/B's two kernels booted afresh after the search: the last two boots
    assert [r for r, _ in lab.boots[-2:]] == ["6.1.0-56-amd64", FIRST_BAD]
    assert len(lab.boots) == outcome.boots + outcome.confirmation.boots
    # each step said as it went: kernel, its package, boots, runs, verdict and interval
    step_lines = [line for line in said if line.startswith("step")]
    assert step_lines and all("boot" in line and "runs" in line and "CI" in line for line in step_lines), said
    assert any(FIRST_BAD in line and "(v-6.12.100+deb12-amd64)" in line and "slower" in line for line in said)
    assert any("6.1.0-56-amd64" in line and EQUIVALENT in line for line in step_lines), said
    assert said[-1].startswith("confirmed: 6.12.100+deb12-amd64 is slower than 6.1.0-56-amd64 on the metric")


@pytest.mark.parametrize("first_bad", RELEASES[1:])
def test_every_change_point_is_found(first_bad):
    """Catches an off-by-one at either end of the search (the first step bad, the last one good)."""
    outcome, said = run(FakeLab(first_bad=first_bad))
    assert outcome.first_bad == first_bad and outcome.confirmed, said
    assert outcome.last_good == RELEASES[RELEASES.index(first_bad) - 1]
    assert outcome.boots <= 5, said


def test_a_kernel_that_fails_to_boot_is_skipped_said_and_a_neighbour_tried():
    """Catches a failed boot taken as good or bad, or ending the bisect."""
    lab = FakeLab(first_bad="6.12.107+deb12-amd64", broken={"6.1.0-56-amd64": "QEMU: the kernel did not boot"})
    outcome, said = run(lab)
    assert outcome.first_bad == "6.12.107+deb12-amd64" and outcome.confirmed, said
    skipped = [s for s in outcome.steps if s.call == SKIPPED]
    assert [s.release for s in skipped] == ["6.1.0-56-amd64"]
    assert any("6.1.0-56-amd64" in line and "skipped — " in line and "did not boot" in line for line in said), said
    # its neighbour was tried next
    tried = [r for r, _ in lab.boots]
    assert tried[tried.index("6.1.0-56-amd64") + 1] == FIRST_BAD


def test_a_skipped_kernel_beside_the_change_leaves_a_range_named():
    """Catches a skipped kernel assumed good: the change may be in it."""
    outcome, said = run(FakeLab(broken={"6.1.0-56-amd64": "its package failed to download"}))
    assert outcome.first_bad is None
    assert outcome.suspects == ("6.1.0-56-amd64", FIRST_BAD), said
    assert any(line.startswith("the first slower kernel is one of 6.1.0-56-amd64, 6.12.100") for line in said), said
    assert outcome.confirmation is not None and outcome.confirmation.release == FIRST_BAD  # the range confirmed


def test_ends_that_do_not_differ_stop_the_bisect():
    lab = FakeLab(first_bad=None)
    outcome, said = run(lab)
    assert outcome.stopped.startswith("the ends do not differ"), said
    assert outcome.suspects == () and outcome.confirmation is None and not outcome.confirmed
    assert [r for r, _ in lab.boots] == [RELEASES[0], RELEASES[-1]]


def test_an_undecided_step_is_said_and_the_search_goes_on_around_it():
    """Catches an undecided step taken as good or bad."""
    lab = FakeLab(first_bad="6.12.107+deb12-amd64", noisy=frozenset({"6.1.0-56-amd64"}))
    outcome, said = run(lab)
    undecided = [s for s in outcome.steps if s.call == NEITHER]
    assert [s.release for s in undecided] == ["6.1.0-56-amd64"], said
    assert any("6.1.0-56-amd64" in line and "→ undecided: budget spent" in line for line in said), said
    assert outcome.first_bad == "6.12.107+deb12-amd64" and outcome.confirmed, said


def test_an_undecided_step_beside_the_change_leaves_a_range():
    outcome, said = run(FakeLab(noisy=frozenset({"6.1.0-56-amd64"})))
    assert outcome.first_bad is None and outcome.suspects == ("6.1.0-56-amd64", FIRST_BAD), said


def test_a_step_not_yet_decided_boots_again_with_the_runs_its_comparison_asks_and_the_reference_topped_up():
    """Catches a step judged once only, and intervals drawn at 95 % however many looks a step had."""
    rng = random.Random(3)

    def measure(release: str, runs: int) -> Samples:
        middle = 1.0 if RELEASES.index(release) < 3 else 1.12  # a 12 % change, CV 1.5 %
        return Samples(tuple(middle * rng.gauss(1, 0.015) for _ in range(runs)))

    said: list[str] = []
    outcome = bisect(RELEASES, measure, rule=Rule(runs=3, max_runs=12), say=said.append)
    assert outcome.first_bad == FIRST_BAD, said
    assert any(s.boots > 1 for s in outcome.steps[1:]), said
    assert any("good end 6.1.0-54-amd64: one more boot" in line for line in said), said
    assert outcome.steps[0].boots > 1 and outcome.steps[0].runs > 3
    levels = {s.comparison.level for s in outcome.steps if s.comparison is not None}
    assert levels == {1 - 0.05 / 10}, levels  # 10 looks: after 3 runs, then each run up to 12


def test_a_step_that_differs_the_other_way_is_not_called_bad():
    def measure(release: str, runs: int) -> Samples:
        value = {"6.1.0-56-amd64": 0.001}.get(release, 1.0 if RELEASES.index(release) >= 3 else DIRECT[0])
        return Samples((value,) * runs, higher_is_better=False)

    outcome = bisect(RELEASES, measure)
    other = next(s for s in outcome.steps if s.release == "6.1.0-56-amd64")
    assert other.call == NEITHER and "the bad end is slower" in other.reason
    assert outcome.suspects == ("6.1.0-56-amd64", FIRST_BAD)


def test_the_good_end_failing_or_a_bad_list_is_an_error():
    with pytest.raises(BisectError, match="known-good end 6.1.0-54-amd64 failed"):
        run(FakeLab(broken={"6.1.0-54-amd64": "no such package"}))
    with pytest.raises(BisectError, match="known-bad end"):
        run(FakeLab(broken={RELEASES[-1]: "the guest panicked"}))
    with pytest.raises(BisectError, match="at least two different"):
        bisect(["6.1.0-54-amd64"], FakeLab())
    with pytest.raises(BisectError, match="--max-runs 2 is below --runs 3"):
        Rule(runs=3, max_runs=2)


def test_calls_are_three_way():
    assert {GOOD, BAD, NEITHER} == {"same", "different", "undecided"}


def test_a_speed_metric_is_refused_under_tcg_saying_why_and_what_to_do():
    with pytest.raises(BisectError) as refused:
        check_metric("write_iops", "tcg", "speed")
    message = str(refused.value)
    assert "--metric write_iops" in message and "TCG" in message and "KVM" in message and "bare metal" in message
    check_metric("write_buffered_share", "tcg", "independent")
    check_metric("write_amplification", "tcg", "dependent")
    check_metric("write_iops", "kvm", "speed")


OFFERED = [
    KernelPackage(r, f"linux-image-{r}", f"v{i}", cached=False)
    for i, r in enumerate(
        [
            "6.12.117+deb12-amd64",  # as apt lists them: in no useful order
            "6.1.0-53-amd64",
            "6.1.0-54-amd64",
            "6.1.0-54-cloud-amd64",
            "6.1.0-55-amd64",
            "6.1.0-56-rt-amd64",
            "6.1.0-56-amd64",
            "6.12.100+deb12-amd64",
            "6.12.107+deb12-amd64",
            "6.12.117+deb12-cloud-amd64",
        ]
    )
]


def test_a_range_is_one_flavour_in_release_order():
    chosen = [k.release for k in in_range("6.1.0-54..6.12.117", OFFERED)]
    assert chosen == RELEASES
    cloud = [k.release for k in in_range("6.1.0-54-cloud-amd64..6.12.117", OFFERED)]
    assert cloud == ["6.1.0-54-cloud-amd64", "6.12.117+deb12-cloud-amd64"]
    with pytest.raises(BisectError, match="not older"):
        in_range("6.12.117..6.1.0-54", OFFERED)
    with pytest.raises(BisectError, match="FIRST..LAST"):
        in_range("6.1.0-54", OFFERED)
    with pytest.raises(BisectError, match="no generic kernel package '6.1.0-99'.*fslab lab kernels"):
        in_range("6.1.0-99..6.12.117", OFFERED)


def test_names_resolve_to_offered_packages_and_flavours_are_read():
    assert resolve("6.12.100", OFFERED).release == "6.12.100+deb12-amd64"
    assert resolve("6.12.100+deb12", OFFERED).release == "6.12.100+deb12-amd64"
    assert resolve("6.1.0-56-rt-amd64", OFFERED).version == "v5"
    assert resolve("6.1.0-56", OFFERED, "rt").release == "6.1.0-56-rt-amd64"


# --- the command, as far as it goes without a VM ---------------------------------------------


def bisect_command(*args: str, tmp_path) -> tuple[int, str]:
    result = fslab_in_process("bisect", "quick", *args, "--db", str(tmp_path / "r.db"), cwd=tmp_path)
    return result.returncode, result.stdout + result.stderr


def test_the_command_refuses_a_speed_metric_under_tcg_before_any_kernel_is_fetched(tmp_path, monkeypatch):
    """Catches a refusal after downloads and boots, or none at all."""
    from fslab.lab import kernels, vm

    monkeypatch.setattr(vm, "accelerator", lambda: "tcg")
    monkeypatch.setattr(kernels, "offered", lambda **_: pytest.fail("kernels asked for before the metric was checked"))
    status, said = bisect_command(
        "--target", "btrfs", "--workload", "seq_write", "--metric", "write_iops", "--range", "6.1.0-54..6.12.117",
        tmp_path=tmp_path,
    )  # fmt: skip
    assert status == 2, said
    assert "--metric write_iops: a speed metric" in said and "KVM" in said and "bare metal" in said


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "btrfs", "--workload", "seq_write", "--metric", "write_buffered_share"], "--kernels A,B,C"),
        (
            ["--target", "zfs", "--workload", "seq_write", "--metric", "m", "--range", "a..b"],
            "--target zfs: study quick",
        ),
        (["--target", "btrfs", "--workload", "mail", "--metric", "m", "--kernels", "a,b"], "--workload mail: study"),
    ],
)
def test_the_command_says_what_is_missing_or_wrong(tmp_path, args, message):
    status, said = bisect_command(*args, tmp_path=tmp_path)
    assert status == 2 and message in said, said


def test_a_share_near_zero_is_judged_on_its_difference_where_a_ratio_cannot_call_it_same():
    """Catches a share judged on its ratio: Btrfs's metadata share (~0.4 %, wandering by 20 % in a
    VM) is never "equivalent" within a ratio's 3 %, so each 6.1 step comes out undecided; on the
    difference of means (±5 points) it is the same as the good end, and the change is named."""
    wandering = (0.0032, 0.0041, 0.0047, 0.0036, 0.0052)

    class Wandering(FakeLab):
        def __call__(self, release: str, runs: int) -> Samples:
            found = super().__call__(release, runs)
            if found.values[0] > 0.5:
                return found
            return Samples(tuple(self.rng.choice(wandering) for _ in range(runs)), higher_is_better=False)

    by_ratio = bisect(RELEASES, Wandering(), rule=Rule())
    assert by_ratio.first_bad is None or by_ratio.boots > 5  # the ratio's rule cannot call a 6.1 step same
    said: list[str] = []
    lab = Wandering()
    outcome = bisect(RELEASES, lab, rule=Rule.for_metric("write_buffered_share"), say=said.append)
    assert outcome.first_bad == FIRST_BAD and outcome.boots <= 5 and outcome.confirmed, said
    step = next(line for line in said if line.startswith("step") and "6.1.0-56" in line)
    assert "equivalent, difference" in step and "within ±0.05" in step, step
    assert Rule.for_metric("write_iops").difference is None


def test_a_kernel_whose_guest_crashes_fails_its_step_said_by_its_crash(tmp_path, monkeypatch):
    """lab/bisect_runs.py's measure (lab/study.py's boot_once): vm.boot's GuestCrashed is a failed
    kernel (bisect skips it), said as the console said it."""
    from types import SimpleNamespace

    from fslab.core.workdir import Workdir
    from fslab.lab import vm
    from fslab.lab.bisect_runs import LabMeasure, one_cell, settings_of
    from fslab.results import ResultsDB
    from fslab.study import load_study

    oops = "BUG: kernel NULL pointer dereference, address: 0000000000000000 in ext4_mb_load_buddy_gfp+0xbc/0x380 [ext4]"

    def crashing(kernel, command, **_):  # noqa: ANN001, ANN202
        raise vm.GuestCrashed(kernel.release, oops, console="")

    monkeypatch.setattr(vm, "boot", crashing)
    study = one_cell(load_study("quick"), "btrfs", "seq_write")
    rule = Rule.for_metric("write_buffered_share")
    workdir = Workdir(tmp_path / "work")
    workdir.root.mkdir()
    measure = LabMeasure(
        study, "write_buffered_share", ResultsDB(str(tmp_path / "r.db")), workdir,
        settings_of(study, RELEASES[:2], "write_buffered_share", rule), prepare=lambda r: SimpleNamespace(release=r),
    )  # fmt: skip
    with pytest.raises(KernelFailed) as failed:
        measure("6.1.0-55-amd64", 3)
    assert str(failed.value) == f"the guest kernel 6.1.0-55-amd64 crashed: {oops}"
    assert not list((workdir.root / "lab").iterdir()), "its share removed"


def test_a_kernels_measure_is_one_boot_of_fslab_run_on_the_cell_its_runs_after_its_boots_before(tmp_path, monkeypatch):
    """lab/bisect_runs.py's measure through lab/study.py's boot_once, with test_lab_study's stand-in
    VM (a real guest database from the very command given): the guest runs `fslab run` on the
    study cut to the cell, as a boot of `fslab run --kernel` does; each boot's runs stored in the
    bisect's one study run, a kernel's numbered after its boots before; a step's samples are the
    metric's values of that boot's runs. Catches a second guest path, and samples of another boot."""
    from fslab.core.workdir import Workdir
    from fslab.lab import vm
    from fslab.lab.bisect_runs import LabMeasure, one_cell, settings_of
    from fslab.results import ResultsDB
    from fslab.study import load_study
    from test_lab_study import STUDY, FakeLab

    lab = FakeLab(tmp_path)
    monkeypatch.setattr(vm, "boot", lab.boot)
    path = tmp_path / "kernels.toml"
    path.write_text(STUDY)
    study = one_cell(load_study(path), "btrfs", "seq_write")
    good, bad = RELEASES[0], RELEASES[-1]
    workdir = Workdir(tmp_path / "work")
    workdir.root.mkdir()
    results = ResultsDB(str(tmp_path / "r.db"))
    said: list[str] = []
    measure = LabMeasure(
        study, "write_iops", results, workdir, settings_of(study, [good, bad], "write_iops", Rule()),
        say=said.append, prepare=lab.prepare,
    )  # fmt: skip
    first, again, other = measure(good, 3), measure(good, 2), measure(bad, 3)

    argv = lab.booted[0]["argv"]
    assert argv[1:5] == ["-m", "fslab", "run", "/fslab-share/study.toml"] and argv[-1] == "--no-summary"
    at = argv.index("--lab-cell")
    assert argv[at + 1 : at + 3] == ["btrfs", "seq_write"] and "--no-ceiling" in argv
    assert [b["options"]["--runs"] for b in lab.booted] == ["3", "2", "3"]
    assert len({b["options"]["--seed"] for b in lab.booted}) == 3, "each boot its own order"
    runs = results.runs(measure.study_run_id)
    assert {(r["target"], r["workload"]) for r in runs} == {("btrfs", "seq_write")}, "the one cell, no raw reference"
    assert sorted(r["repetition"] for r in runs if r["host"] == good) == [1, 2, 3, 4, 5]
    assert sorted(r["repetition"] for r in runs if r["host"] == bad) == [1, 2, 3]
    assert {h.name for h in results.hosts(measure.study_run_id)} == {good, bad}
    stored = results.host_samples(measure.study_run_id)
    assert list(first.values + again.values) == stored[("seq_write", "btrfs", good)]["write_iops"]
    assert list(other.values) == stored[("seq_write", "btrfs", bad)]["write_iops"]
    assert first.higher_is_better and len(again.values) == 2
    assert f"{good}: booting" in said and f"{good}: btrfs · seq_write · run 4: ok" in said, said
    assert not list((workdir.root / "lab").iterdir()), "each boot's share removed"
    with pytest.raises(BisectError, match="--metric nothing: the cell's runs report no such metric; .*write_iops"):
        LabMeasure(study, "nothing", results, workdir, measure.settings, prepare=lab.prepare)(good, 2)


def test_a_bisect_of_a_target_on_the_users_device_is_refused_naming_it_and_what_to_do(tmp_path, monkeypatch):
    """Its VMs would get no --destroy-data (nor the device): refused before any kernel is listed."""
    from fslab.lab import kernels

    monkeypatch.setattr(kernels, "offered", lambda **_: pytest.fail("kernels asked for before the target was checked"))
    (tmp_path / "mine.toml").write_text(
        '[study]\nname = "mine"\n\n[[workload]]\nname = "w"\nrw = "write"\nbs = "1m"\nsize = "32MiB"\n\n'
        '[[target]]\nname = "disk"\nfilesystem = "ext4"\ndevice = "/dev/sdz"\n'
    )
    result = fslab_in_process(
        "bisect", "mine.toml", "--target", "disk", "--workload", "w", "--metric", "write_buffered_share",
        "--kernels", "6.1.0-54,6.12.117", "--db", str(tmp_path / "r.db"), cwd=tmp_path,
    )  # fmt: skip
    said = result.stdout + result.stderr
    assert result.returncode == 2, said
    assert "--target disk: its filesystem is made on your device /dev/sdz" in said, said
    assert "--destroy-data DEVICE" in said and "without device" in said, said


def test_the_guests_fslab_run_cuts_the_study_to_the_cell_fslab_bisect_gave_it(tmp_path):
    """`fslab run --lab-cell TARGET WORKLOAD` (lab/study.py's guest_arguments for a cut study):
    its plan is that cell alone; a cell the study lacks is refused, and the option
    is a guest's own (not with --kernel)."""
    plan = fslab_in_process("run", "quick", "--lab-cell", "btrfs", "seq_write", "--runs", "2", "--plan", cwd=tmp_path)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "targets (1):\n  btrfs: btrfs" in plan.stdout and "workloads (1):\n  seq_write:" in plan.stdout, plan.stdout
    assert "runs: 1 cells × 2 = 2" in plan.stdout, plan.stdout
    missing = fslab_in_process("run", "quick", "--lab-cell", "zfs", "seq_write", "--plan", cwd=tmp_path)
    assert missing.returncode == 2 and "--lab-cell zfs · seq_write: study quick has no such cell" in missing.stderr
    lab = fslab_in_process(
        "run", "quick", "--lab-cell", "btrfs", "seq_write", "--kernel", "6.1.0-54-amd64", cwd=tmp_path
    )
    assert lab.returncode == 2 and "--lab-cell cannot go with --kernel" in lab.stderr, lab.stderr


def test_a_bisect_of_a_job_files_cell_is_refused_as_a_run_over_kernels_refuses_it(tmp_path, monkeypatch):
    """A lab VM reads the study's text alone (lab/study.py's check_kernel_study): refused before any boot."""
    from fslab.lab import kernels, vm

    monkeypatch.setattr(kernels, "offered", lambda **_: OFFERED)
    monkeypatch.setattr(vm, "accelerator", lambda: "tcg")
    monkeypatch.setattr(vm, "boot", lambda *_, **__: pytest.fail("a VM booted for a study its guest cannot read"))
    (tmp_path / "job.fio").write_text("[j]\nrw=read\nsize=1m\n")
    (tmp_path / "jobs.toml").write_text(
        '[study]\nname = "jobs"\n\n[[workload]]\nname = "mine"\njob_file = "job.fio"\n\n'
        '[[target]]\nname = "b"\nfilesystem = "btrfs"\n'
    )
    result = fslab_in_process(
        "bisect", "jobs.toml", "--target", "b", "--workload", "mine", "--metric", "write_buffered_share",
        "--kernels", "6.1.0-54,6.12.117", "--db", str(tmp_path / "r.db"), cwd=tmp_path,
    )  # fmt: skip
    said = result.stdout + result.stderr
    assert result.returncode == 2 and "workload 'mine' names a job_file" in said, said
    if (tmp_path / "r.db").exists():
        from fslab.results import ResultsDB

        assert ResultsDB(str(tmp_path / "r.db")).study_runs() == [], "no study run begun"


def test_a_bisect_holds_its_work_directory_so_no_run_or_cleanup_beside_it_releases_its_vms(tmp_path, monkeypatch):
    """Its boots are journalled and shared in the work directory: while it bisects, a `fslab run`
    or `fslab cleanup` there is refused (WorkdirBusy), and once it ends the directory is free."""
    from fslab.core.workdir import Workdir, WorkdirBusy
    from fslab.lab import bisect_runs, kernels, vm
    from fslab.lab.bisect import Rule
    from fslab.results import ResultsDB

    monkeypatch.setattr(kernels, "offered", lambda **_: OFFERED)
    monkeypatch.setattr(vm, "accelerator", lambda: "tcg")
    workdir = Workdir(tmp_path / "work")
    busy: list[str] = []

    class Stop(Exception):
        pass

    def bisecting(*_, **__):  # noqa: ANN202
        with pytest.raises(WorkdirBusy) as refused, Workdir(workdir.root).claim():
            pass
        busy.append(str(refused.value))
        raise Stop

    monkeypatch.setattr(bisect_runs, "bisect", bisecting)
    with pytest.raises(Stop):
        bisect_runs.run_bisect(
            "quick", target="btrfs", workload="seq_write", metric="write_buffered_share",
            kernels_given="6.1.0-54,6.12.117", range_given=None, rule=Rule.for_metric("write_buffered_share"),
            scale=None, results=ResultsDB(str(tmp_path / "r.db")), workdir=workdir, say=lambda _: None,
        )  # fmt: skip
    assert busy and "another fslab" in busy[0], busy
    with Workdir(workdir.root).claim():  # free again
        pass
