"""What this machine can do for fslab, what is missing, and how to get it.

`fslab doctor` prints every check, each with what needs it: fslab itself (root, loop devices,
fio, losetup: without them nothing runs) or one filesystem, layer or feature a study may use
(absent, such an entry only keeps the targets that use it from running). `fslab run` refuses to
start while a check the study depends on fails, so a study never dies half-way for a missing
tool; `fslab doctor STUDY` lists what one study needs that this machine lacks. What one target
alone lacks is told as `Unsupported`: `fslab run --skip-unsupported` skips that target and runs
the others.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fslab import monitors
from fslab.core import cgroups
from fslab.core.checks import Check, Unsupported, by_target, tool_check
from fslab.core.units import format_size
from fslab.devices import layers, zram
from fslab.filesystems import FILESYSTEMS
from fslab.model import Study
from fslab.running.environment import LOSETUP, filesystem_of
from fslab.workloads import Registered, kinds

# What `Need.by` says of the checks fslab cannot run any study without.
ALWAYS = "fslab"


@dataclass(frozen=True)
class Need:
    """One check, and what needs it: ALWAYS, or the filesystem, layer, workload kind or feature
    that cannot be used without it ("xfs targets", "md-raid1 layer")."""

    check: Check
    by: str
    refuses: bool = True  # a study using it is refused without it (an always-on monitor's is not: runs go on)

    @property
    def blocking(self) -> bool:
        """Missing, and fslab cannot run any study without it."""
        return self.by == ALWAYS and self.check.required and not self.check.ok


def _basic_checks() -> list[Check]:
    root = os.geteuid() == 0
    loop = Path("/dev/loop-control").exists()
    return [
        Check(
            "root",
            root,
            "running as root" if root else f"running as uid {os.geteuid()}",
            "run fslab as root (sudo): it formats and mounts loop images",
        ),
        Check(
            "loop devices",
            loop,
            "/dev/loop-control present" if loop else "no /dev/loop-control",
            "a kernel with CONFIG_BLK_DEV_LOOP",
        ),
        *_tool_checks(required=True),
        tool_check("losetup", LOSETUP, "util-linux"),
    ]


def machine_checks(workdir: Path) -> list[Need]:
    """Every check `fslab doctor` shows, with what needs it."""
    needs = [Need(c, ALWAYS) for c in _basic_checks() + workdir_checks(workdir)]
    for kind, fs in FILESYSTEMS.items():
        needs += [Need(c, f"{kind} targets") for c in fs.machine_checks()]
    needs += [Need(c, f"{kind.name} workloads") for kind, c in _optional_tools()]
    needs += [Need(_layer_check(name), f"targets on {name}") for name in layers.LAYERS]
    needs += [
        Need(check, _needed_by(kind), refuses=bool(kind.trace))
        for kind in monitors.kinds()
        for check in _monitor_checks(kind)
    ]
    return needs + [Need(_zram_check(), "zram targets"), Need(_memory_limit_check(), "memory_limit workloads")]


def study_needs(study: Study, workdir: Path) -> list[str]:
    """What `study` needs that this machine lacks, each once: what its runs need (machine_needs)
    and what each target's filesystem, layers and zram need (its Unsupported)."""
    return list(dict.fromkeys(machine_needs(study, workdir) + [str(u) for u in unsupported_targets(study)]))


def machine_needs(study: Study, workdir: Path) -> list[str]:
    """What every run of `study` needs that this machine lacks: what fslab always needs, a memory
    limit it sets, and its workload kinds' tools."""
    used = {w.kind for w in study.workloads}
    tools = [
        f"{c.name} (for the {kind.name} workloads): {c.detail} — {c.fix}"
        for kind, c in _optional_tools()
        if kind.name in used and not c.ok
    ]
    return study_problems(study, workdir) + tools


def _monitor_checks(kind: monitors.MonitorKind) -> list[Check]:
    return list(kind.checks()) if kind.checks else []


def _needed_by(kind: monitors.MonitorKind) -> str:
    return f"--trace {kind.trace}" if kind.trace else f"the {kind.name} monitor"


def _optional_tools() -> list[tuple[Registered, Check]]:
    """The tools of the workload kinds fslab can run without (sysbench, rsync), each with its kind."""
    return [
        (kind, tool_check(kind.tool.command, kind.tool.version_command, kind.tool.package, False))
        for kind in kinds()
        if kind.tool and not kind.tool.required
    ]


def _tool_checks(*, required: bool) -> list[Check]:
    """The tools the workload kinds drive that fslab cannot start without (fio)."""
    return [
        tool_check(kind.tool.command, kind.tool.version_command, kind.tool.package, required)
        for kind in kinds()
        if kind.tool and kind.tool.required == required
    ]


def _memory_limit_check() -> Check:
    found = cgroups.find_hierarchy()
    ok = not isinstance(found, str)
    return Check(
        "memory limits",
        ok,
        f"{found}: memory_limit workloads can run" if ok else str(found),
        "a kernel with CONFIG_MEMCG and its memory controller mounted, to use memory_limit",
        required=False,
    )


def _layer_check(name: str) -> Check:
    why = layers.missing(name)
    return Check(
        f"{name} layer",
        why is None,
        why or "kernel support and tools present",
        "a kernel with it and its tools, to use it in a study",
        required=False,
    )


def _zram_check() -> Check:
    why = zram.missing()
    can = "zram-control present, or its module there to load: zram = true targets can run"
    return Check("zram", why is None, why or can, "a kernel with CONFIG_ZRAM, to use zram = true", required=False)


def workdir_checks(workdir: Path) -> list[Check]:
    where = filesystem_of(workdir / "images")
    in_ram = where["fstype"] in ("tmpfs", "ramfs")
    return [
        Check(
            "work directory",
            not in_ram,
            f"{where['path']} on {where['fstype']} ({where['source']})",
            "choose a --workdir on a disk: loop images in RAM measure memory, not storage",
            required=False,
        ),
        Check(
            "free space",
            where["free_bytes"] > 2**30,
            f"{format_size(where['free_bytes'])} free",
            "free space in the work directory or choose another --workdir",
            required=False,
        ),
    ]


def study_problems(study: Study, workdir: Path) -> list[str]:
    """What stops the whole study on this machine (root, loop devices, fio, a memory limit it
    cannot set, what a --trace it asks for needs); empty when nothing does."""
    problems = [
        f"{c.name}: {c.detail} — {c.fix}" for c in _basic_checks() + workdir_checks(workdir) if not c.ok and c.required
    ]
    limited = [w.name for w in study.workloads if w.memory_limit is not None]
    why = cgroups.missing() if limited else None
    if why:  # every target runs the workload: nothing of the study could be skipped instead
        problems.append(f"memory_limit of workload(s) {', '.join(limited)}: {why}")
    traced = [
        f"{c.name} (for {_needed_by(kind)}): {c.detail} — {c.fix}"
        for name, kind in monitors.traces().items()
        if name in study.traces
        for c in _monitor_checks(kind)
        if c.required and not c.ok
    ]
    return problems + traced


def unsupported_targets(study: Study) -> list[Unsupported]:
    """The study's targets this machine cannot run, each once with all it lacks: its filesystem's
    tools or kernel support, a layer, what its filesystem lacks for it (a zvol on zfs-fuse) or zram;
    then the raw baselines of those targets, which go with them."""
    lacking = {
        kind: [f"{c.name}: {c.detail} — {c.fix}" for c in FILESYSTEMS[kind].machine_checks() if not c.ok]
        for kind in {t.filesystem for t in study.targets}
    }
    found = [Unsupported(t.name, why) for t in study.targets for why in lacking[t.filesystem]]
    return with_their_raw_baselines(
        study, by_target(found + layer_problems(study) + filesystem_problems(study) + zram_problems(study))
    )


def with_their_raw_baselines(study: Study, unsupported: list[Unsupported]) -> list[Unsupported]:
    """`unsupported` and the raw baselines of its targets (raw_baseline = true): a raw baseline
    measures its target's devices bare, for that target alone, so it runs only with it — left
    in, it would be ranked with the other targets and taken for the study's own raw target, so
    that fslab added no ceiling for them (model/ceiling.py)."""
    gone = {u.target for u in unsupported}
    return unsupported + [
        Unsupported(
            t.name,
            f"it is the raw baseline of '{t.raw_baseline_of}', which "
            "cannot run here: it measures that target's devices alone",
        )
        for t in study.targets
        if t.raw_baseline_of in gone and t.name not in gone
    ]


def zram_problems(study: Study) -> list[Unsupported]:
    why = zram.missing() if any(t.zram for t in study.targets) else None
    problems = [Unsupported(t.name, f"it is on zram, and {why}") for t in study.targets if t.zram and why]
    # fslab writes random (incompressible) data: a zram device takes its whole size in memory
    available = memory_available()
    for t in study.targets:
        needed = t.image_size * t.devices
        if t.zram and needed > available * 0.8:
            problems.append(
                Unsupported(
                    t.name,
                    f"it needs {format_size(needed)} of zram, and this machine has "
                    f"{format_size(available)} of memory available: lower image_size",
                )
            )
    return problems


def memory_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def filesystem_problems(study: Study) -> list[Unsupported]:
    """What a target asks of its filesystem that this machine's lacks (its filesystem knows)."""
    return [Unsupported(t.name, why) for t in study.targets for why in FILESYSTEMS[t.filesystem].target_problems(t)]


def layer_problems(study: Study) -> list[Unsupported]:
    """Layers under a filesystem (md RAID, LUKS, LVM) this kernel or its tools lack."""
    missing = {layer: layers.missing(layer) for target in study.targets for layer in target.layers}
    return [
        Unsupported(t.name, f"it needs {layer}, and {missing[layer]}")
        for t in study.targets
        for layer in t.layers
        if missing[layer]
    ]
