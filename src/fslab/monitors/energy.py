"""CPU package energy, where the machine counts it: RAPL, through the kernel's powercap class
(/sys/class/powercap/intel-rapl:N/energy_uj; AMD's processors appear there too). Always on.

Only package domains count (`name` "package-N", at the top level `intel-rapl:N`): their
subdomains (core, uncore, dram: `intel-rapl:N:M`) are parts of them or outside the CPU, and
`psys` covers the whole platform. Each counter is µJ since some moment, wrapping to 0 past
`max_energy_range_uj`: a reading below the one before wrapped once (a window shorter than a wrap,
minutes even at full power). Read at the window's edges and every ENERGY_PERIOD seconds between,
so that it is counted over the workload's own interval (base.counted_from), as CPU time is.

    cpu_package_energy_joules          every package's energy over the window
    cpu_package_energy_joules_per_gib  per GiB the workload read and wrote (none: it says nothing)

Where nothing can be counted — no powercap package domain (a VM, most ARM machines), or a
counter unreadable (energy_uj is root's alone since Linux 5.10) — there is no value, never a 0:
the run's note says why (NOT_MEASURABLE), and its summary says so once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fslab.core.checks import Check
from fslab.model.findings import NOT_MEASURABLE, Finding
from fslab.monitors.base import (
    MONITORS,
    Figure,
    Found,
    Measured,
    MonitorKind,
    Sampler,
    Watched,
    WorkloadSaid,
    counted_from,
)

POWERCAP = Path("/sys/class/powercap")
ENERGY_PERIOD = 1.0  # seconds between readings: a counter wraps in minutes, and a cut is interpolated
GIB = 2**30
WHAT = "CPU package energy"
_PACKAGE = re.compile(r"intel-rapl:\d+")


@dataclass(frozen=True)
class Domain:
    """A package's counter: where it is, and where it wraps (µJ)."""

    path: Path
    wraps_at: int


def package_domains(root: Path = POWERCAP) -> list[Domain] | str:
    """The package domains under a powercap tree, or why there are none to read."""
    if not root.is_dir():
        return "no RAPL"
    found = []
    for zone in sorted(root.iterdir()):
        if not _PACKAGE.fullmatch(zone.name):
            continue
        try:
            if not (zone / "name").read_text().strip().startswith("package"):
                continue
            int((zone / "energy_uj").read_text())  # readable, or not measurable
            found.append(Domain(zone / "energy_uj", int((zone / "max_energy_range_uj").read_text())))
        except PermissionError:
            return "no RAPL reading (energy_uj is readable by root alone)"
        except (OSError, ValueError) as exc:
            return f"no RAPL reading ({zone.name}: {exc})"
    return found or "no RAPL"


def consumed(before: int, after: int, wraps_at: int) -> int:
    """µJ from one reading of a counter to the next, across one wrap."""
    return after - before if after >= before else after + wraps_at - before


@dataclass(frozen=True)
class Energy:
    """µJ every package consumed from the first reading to this one (a number: base.Sampler
    interpolates a reading between two)."""

    microjoules: int


class EnergyCounter:
    """Sums package counters into one that never wraps: each reading adds what every counter
    consumed since the last (the sampler reads often enough that a counter wraps once at most)."""

    def __init__(self, domains: Sequence[Domain]):
        self.domains = list(domains)
        self.last: list[int] | None = None
        self.total = 0

    def read(self) -> Energy:
        now = [int(d.path.read_text()) for d in self.domains]
        if self.last is not None:
            self.total += sum(consumed(a, b, d.wraps_at) for a, b, d in zip(self.last, now, self.domains))
        self.last = now
        return Energy(self.total)


def judged(joules: float, workload: WorkloadSaid) -> list[Measured]:
    values = [Measured("cpu_package_energy_joules", joules, "J", False)]
    moved = (workload.read_bytes or 0) + (workload.written_bytes or 0)
    if moved > 0:
        values.append(Measured("cpu_package_energy_joules_per_gib", joules / (moved / GIB), "J/GiB", False))
    return values


def not_measurable(why: str) -> Finding:
    return Finding(NOT_MEASURABLE, f"{WHAT}: not measurable here: {why}", implausible=False)


class EnergyMonitor:
    name = "energy"

    def __init__(self, root: Path = POWERCAP):
        domains = package_domains(root)
        self.why = domains if isinstance(domains, str) else None
        self.counter = EnergyCounter(domains if isinstance(domains, list) else [])
        self.sampler = Sampler(self.counter.read, "fslab-energy-monitor", ENERGY_PERIOD)

    def start(self) -> None:
        if self.why is None:
            self.sampler.start()

    def stop(self) -> None:
        if self.why is None:
            self.sampler.stop()

    def values(self, workload: WorkloadSaid, found: Found) -> None:
        if self.why is not None:
            found.flags.append(not_measurable(self.why))
            return
        readings = counted_from(self.sampler.samples, workload.counted_from, workload.counted_until)
        if len(readings) >= 2:
            found.values.extend(judged((readings[-1].microjoules - readings[0].microjoules) / 1e6, workload))


def energy_monitor(watched: Watched) -> EnergyMonitor:
    return EnergyMonitor()


def energy_checks() -> list[Check]:
    domains = package_domains()
    ok = not isinstance(domains, str)
    detail = f"{len(domains)} package(s)" if not isinstance(domains, str) else domains
    return [Check("RAPL", ok, detail, "RAPL: not in a VM", required=False)]


MONITORS.add(
    MonitorKind(
        "energy",
        order=70,
        figures=(Figure("cpu_package_energy_joules"), Figure("cpu_package_energy_joules_per_gib")),
        make=energy_monitor,
        help="CPU package energy per run and per GiB moved (RAPL), where the machine counts it",
        checks=energy_checks,
        cost="nothing without RAPL (here); with it, 1 reading a second of each package's energy_uj (not measured)",
    ),
    own=True,
)
