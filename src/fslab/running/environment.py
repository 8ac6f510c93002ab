"""The machine a study ran on: kernel, distribution, CPU, memory, tool versions, work directory;
the host a run ran on (`host`)."""

from __future__ import annotations

import os
import platform
import shutil
import socket
from pathlib import Path

from fslab import version
from fslab.core.identity import mounts
from fslab.core.system import tool_version
from fslab.devices.layers import LAYERS
from fslab.filesystems import FILESYSTEMS
from fslab.model import Host
from fslab.workloads import kinds

# The tool fslab drives besides each workload kind's, filesystem's and layer's own (whose version
# commands live with them).
LOSETUP = ("losetup", "--version")


def os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def machine_id() -> str | None:
    try:
        return Path("/etc/machine-id").read_text().strip() or None
    except OSError:
        return None


def host(name: str | None = None) -> Host:
    """This machine, named `name` (a worker's --name), else by its host name."""
    return Host(
        name or socket.gethostname(), machine_id(), platform.release(), cpu_model(), os.cpu_count() or 1, memory_bytes()
    )


def boot_id() -> str | None:
    """This boot of this machine (a lab VM's own, in the VM): runs of one boot share its state."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def filesystem_of(path: Path) -> dict:
    """The filesystem holding a directory (where the loop images live, or will): type, source, free bytes."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    where = os.path.realpath(existing)
    holding = [
        m for m in mounts() if m.mountpoint == "/" or where == m.mountpoint or where.startswith(m.mountpoint + "/")
    ]
    top = (
        sorted(holding, key=lambda m: len(m.mountpoint))[-1] if holding else None
    )  # the deepest, the last mounted there
    return {
        "path": str(path),
        "fstype": top.fstype if top else "unknown",
        "source": top.source if top else "unknown",
        "free_bytes": shutil.disk_usage(existing).free,
    }


def tool_versions() -> dict[str, str | None]:
    """Every tool's version, the mkfs tools named by their command (mke2fs, mkfs.xfs, …)."""
    commands = {kind.tool.command: kind.tool.version_command for kind in kinds() if kind.tool} | {LOSETUP[0]: LOSETUP}
    commands |= {
        fs.version_command[0]: fs.version_command for fs in FILESYSTEMS.values() if hasattr(fs, "version_command")
    }
    commands |= {layer.tool[0]: layer.tool for layer in LAYERS.values()}
    return {name: tool_version(argv) for name, argv in commands.items()}


def collect(workdir: Path) -> dict:
    return {
        "fslab": version(),
        "kernel": platform.release(),
        "kernel_build": platform.version(),
        "distribution": os_release(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "python": platform.python_version(),
        "tools": tool_versions(),
        "image_directory": filesystem_of(workdir / "images"),
    }
