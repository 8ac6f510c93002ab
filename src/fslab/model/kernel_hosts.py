"""Where a kernel's runs are stored: a host of the study run (model.Host) named by the kernel. One
rule, for `fslab run --kernel` here (lab/study.py) and on a fleet's workers (fleet/worker.py),
read back by `fslab compare --kernels` (report/summary.py's kernel_hosts) and `fslab status`
(fleet/units.py) — kept here, below all of them (the lab and the fleet are sibling floors):

  here:                   a lab VM's host is its release ("6.1.0-56-amd64"); "host" this machine's name;
  on a fleet's worker W:  "RELEASE@W" — two workers booting one release are two hosts, their runs
                          never merged —; "host" the worker's own name W, as a plain unit's.

A worker's name holds no "@" (fslab worker refuses one), so a name splits one way only."""

from __future__ import annotations

HOST = "host"  # --kernel host: the machine's own kernel, bare metal
AT = "@"


def kernel_host(kernel: str, machine: str, *, worker: bool = False) -> str:
    """The host name of `kernel`'s runs ("host" or a release) run by `machine` (this machine's
    host name, or a fleet's worker's `--name`); `worker`: on a fleet's worker."""
    if kernel == HOST:
        return machine
    return f"{kernel}{AT}{machine}" if worker else kernel


def named_kernel(name: str) -> tuple[str, str | None]:
    """What `fslab compare --kernels` was given: (kernel, worker) from "RELEASE@WORKER" or
    "host@WORKER"; (name, None) from a name without one."""
    kernel, at, worker = name.rpartition(AT)
    return (kernel, worker) if at and kernel and worker else (name, None)
