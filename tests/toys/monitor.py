"""A toy monitor, as a new one is added: one module that joins the registry itself. It counts the
edges of its window it saw (start and stop: 2 when measuring() opened and closed it once) and
the devices it was given to watch."""

from fslab.monitors.base import MONITORS, Figure, Found, Measured, MonitorKind, Watched, WorkloadSaid


class EdgeCounter:
    name = "toy"

    def __init__(self, devices: int):
        self.devices, self.edges = devices, 0

    def start(self) -> None:
        self.edges += 1

    def stop(self) -> None:
        self.edges += 1

    def values(self, workload: WorkloadSaid, found: Found) -> None:
        found.values += [Measured("toy_edges", self.edges, "", False), Measured("toy_devices", self.devices, "", False)]


def edge_counter(watched: Watched) -> EdgeCounter:
    return EdgeCounter(len(watched.devices))


MONITORS.add(
    MonitorKind(
        "toy", order=99, figures=(Figure("toy_edges", "toy edges", "pct"), Figure("toy_devices")), make=edge_counter
    )
)
