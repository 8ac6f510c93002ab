from pathlib import Path

from fslab.filesystems.base import Filesystem
from fslab.system import run


class Btrfs(Filesystem):
    kind = "btrfs"
    mkfs = ("mkfs.btrfs", "-f", "-q")
    nodiscard = ("-K",)
    version_command = ("mkfs.btrfs", "--version")
    package = "btrfs-progs"

    def before_mount(self, devices: list[str]) -> None:
        # Without udev the kernel learns of a multi-device filesystem's other members only so.
        if len(devices) > 1:
            run(["btrfs", "device", "scan", *devices])

    def after_mount(self, target, devices: list[str], mountpoint: Path) -> None:  # noqa: ANN001
        if target.nocow:
            run(["chattr", "+C", str(mountpoint)])  # files fio creates inside inherit No_COW

    def details(self, device: str, mountpoint: Path) -> str:
        usage = run(["btrfs", "filesystem", "df", str(mountpoint)], check=False).stdout
        attributes = run(["lsattr", "-d", str(mountpoint)], check=False).stdout
        return f"{usage}\nlsattr -d {mountpoint}: {attributes.split()[0] if attributes else '?'}\n"
