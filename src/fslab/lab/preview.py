"""What `fslab run STUDY --plan --kernel K … [--boots N]` prints: the study as each boot runs it
(running/preview.py's lines), then per kernel what the run would do for it — its package prepared
or to fetch (with apt's download size), OpenZFS built, to build or fitting no version (only where
a target is ZFS), its boots, runs and time — the accelerator the VMs would have, the time in all
and what to install first. Nothing is fetched, built, booted, probed, attached or written: the
kernel cache, OpenZFS's, the accelerator's kept answer and apt's lists are only read.

A VM's time per run is fslab's own work per run under that kernel, measured from its stored runs
(its host is named by its release) as a run on this machine is, else EMULATED_OVERHEAD, said to be
a default; and BOOT_SECONDS a boot."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from fslab.core.errors import FslabError
from fslab.core.units import format_size
from fslab.lab import kernels as lab_kernels, openzfs, vm
from fslab.lab.study import HOST, check_kernel_study
from fslab.model import Study
from fslab.running import doctor
from fslab.running.environment import host
from fslab.running.plan import Repetitions
from fslab.running.preview import (
    Overhead,
    duration,
    here_lines,
    needs_lines,
    plan_seconds,
    run_count,
    study_lines,
    unsupported_lines,
)

# fslab's own seconds per run in a lab VM under TCG where that kernel has stored no run: its
# set-up, drop of caches and teardown emulated (docs/bisect.md's runs: some 10 s each, loaded)
EMULATED_OVERHEAD = 12.0
BOOT_SECONDS = 40.0  # a boot to its command's start and its power-off, under TCG here (loaded)


def plan_lines(
    study: Study,
    kernels: Sequence[str],
    boots: int,
    repetitions: Repetitions,
    overhead_of: Callable[[str], Overhead],
    workdir: Path,
    *,
    skip_unsupported: bool,
    destroy_flags: Sequence[str] = (),
) -> list[str]:
    """The plan over kernels, a line each. `overhead_of(host)`: fslab's own work per run of that
    host's stored runs (a lab VM's host is named by its kernel release). `destroy_flags`: the
    --destroy-data paths confirming the devices the study names, checked as the run checks them."""
    kernels = list(dict.fromkeys(kernels))
    devices = check_kernel_study(study, kernels, boots, {"repetitions": repetitions}, destroy_flags)
    head = f"{study.name}: the plan over kernels (nothing is fetched, built, booted, attached, formatted or stored)"
    lines = [head, *study_lines(study, repetitions)]
    per_boot = run_count(study, repetitions)
    rounds = "in one boot each" if boots == 1 else f"in {boots} boots each, interleaved over the kernels"
    lines.append(f"kernels ({len(kernels)}), the plan {rounds}: {per_boot * boots * len(kernels)} runs in all")
    lines += [
        f"device {path}: each VM's {passed.guest_path}; all data on it is destroyed"
        for path, passed in devices.by_path.items()
    ]
    offered = functools.cache(_offered)  # apt's lists read once, and only for a kernel not prepared
    total = 0.0
    for kernel in kernels:
        if kernel == HOST:
            said, seconds = _here(study, repetitions, overhead_of, workdir, boots, skip_unsupported)
        else:
            said, seconds = _vm(study, kernel, repetitions, overhead_of(kernel), boots, offered)
        lines += said
        total += seconds
    if any(k != HOST for k in kernels):
        lines.append(_accelerator_line())
    lines.append(f"time: about {duration(total)} in all, the kernels' boots one after another")
    lab = [reason] if any(k != HOST for k in kernels) and (reason := vm.unavailable_reason()) else []
    return lines + needs_lines(study, workdir, also=lab)


def _offered() -> dict[str, lab_kernels.KernelPackage] | str:
    """The archive's kernel packages (apt's lists, read), or why they are not known."""
    try:
        return {p.release: p for p in lab_kernels.offered(cache=lab_kernels.KERNELS)}
    except FslabError as exc:
        return f"the archive's list could not be read: {exc}"


def _vm(
    study: Study,
    release: str,
    repetitions: Repetitions,
    overhead: Overhead,
    boots: int,
    offered: Callable[[], dict[str, lab_kernels.KernelPackage] | str],
) -> tuple[list[str], float]:
    left_out = "the run would leave it out, said"
    try:
        prepared = lab_kernels.ready(release, cache=lab_kernels.KERNELS)
    except lab_kernels.KernelError as exc:
        return [f"  {release}: {exc}: {left_out}"], 0.0
    archive = offered() if prepared is None else {}
    if prepared is not None:
        package = f"prepared: linux-image-{release} {prepared.package_version} in {lab_kernels.KERNELS / release}"
    elif isinstance(archive, str):
        package = f"to fetch: linux-image-{release} ({archive})"
    elif release in archive:
        size = lab_kernels.download_size(archive[release].package)
        known = f", {format_size(size)} to download" if size else ""
        package = f"to fetch: linux-image-{release} {archive[release].version}{known}, from the archive apt knows"
    else:
        return [f"  {release}: not offered by the configured archive (apt-get update?): {left_out}"], 0.0
    lines = [f"  {release}: {package}"]
    if openzfs.needs_of(study) & {openzfs.OPENZFS_NEED}:
        lines.append(f"    {_openzfs_line(release)}")
    if not overhead.measured_runs:
        overhead = Overhead(EMULATED_OVERHEAD, 0, overhead.fill_rate)
        own = f"{EMULATED_OVERHEAD:g} s of fslab's own work per run in a VM (a default: no run of {release} stored)"
    else:
        own = overhead.describe().replace("this host's", f"{release}'s")
    seconds = boots * (BOOT_SECONDS + plan_seconds(study, repetitions, overhead))
    boot = (
        f"{boots} boot{'s' if boots > 1 else ''} × ({run_count(study, repetitions)} runs + {BOOT_SECONDS:g} s to boot)"
    )
    lines.append(f"    time: about {duration(seconds)} — {boot}; {own}")
    return lines, seconds


def _openzfs_line(release: str) -> str:
    offer = openzfs.choose(release)
    if offer is None:
        return f"no OpenZFS fits this kernel: {openzfs.no_openzfs(release)}; its ZFS targets are unsupported there"
    try:
        built = openzfs.prepared(release, cache=openzfs.OPENZFS)
    except FslabError as exc:
        return f"OpenZFS: {exc}"
    if built is not None:
        return f"OpenZFS {built.version} ({built.package_version}, {built.suite}) built for it"
    return (
        f"OpenZFS to build: {offer.suite}'s zfs-dkms {offer.series}, once, before its first boot "
        "(minutes of CPU: docs/lab.md)"
    )


def _here(
    study: Study,
    repetitions: Repetitions,
    overhead_of: Callable[[str], Overhead],
    workdir: Path,
    boots: int,
    skip_unsupported: bool,
) -> tuple[list[str], float]:
    unsupported = doctor.unsupported_targets(study)
    running = study.without({u.target for u in unsupported}) if skip_unsupported else study
    machine = host()
    overhead = overhead_of(machine.name)
    rounds = "once a round" if boots == 1 else f"once a round, {boots} rounds"
    lines = [f"  host: this machine's own kernel ({os.uname().release}), bare metal, its share {rounds}"]
    said = here_lines(running, repetitions, overhead, workdir) + unsupported_lines(
        unsupported, skip_unsupported=skip_unsupported
    )
    lines += [f"    {line}" for line in said]
    return lines, boots * plan_seconds(running, repetitions, overhead)


def _accelerator_line() -> str:
    known = vm.known_accelerator()
    if known == "kvm":
        return "accelerator: KVM (this host boot's probe found it working): a VM's figures of speed are measured"
    if known == "tcg" or not os.path.exists("/dev/kvm"):
        why = "this host boot's probe found no working KVM" if known == "tcg" else "no /dev/kvm here"
        return (
            f"accelerator: TCG, software emulation ({why}): a VM's figures of speed are no performance result — "
            "shown labelled, never judged; only what the kernel did (a behaviour metric) is compared"
        )
    return (
        "accelerator: KVM if its probe at the first boot succeeds (/dev/kvm is here), else TCG — software "
        "emulation, whose figures of speed are no performance result (shown labelled, never judged)"
    )
