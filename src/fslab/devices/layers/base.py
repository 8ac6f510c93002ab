"""Storage layers between a target's devices (fslab's loop images, zram devices, or the user's
confirmed devices) and a filesystem: md RAID1, LUKS, LVM.

A target's `layers` are built bottom first on its devices at the start of every run
(with mdadm, cryptsetup and LVM, as a user would) and taken down after it, each journalled
so that a killed run is undone like a mount is. A layer whose kernel feature or tool is
missing (`missing`) is refused before anything is formatted.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.errors import Refused
from fslab.core.identity import Owned, assert_ours, device_number, rests_on
from fslab.core.journal import Entry, Journal, releaser
from fslab.core.names import kernel_name, workdir_tag
from fslab.core.registry import Registry
from fslab.core.system import kernel_has_module, run, tool_version
from fslab.devices.source import Attached
from fslab.model import Target
from fslab.model.options import Flag, Integer, Matches, OneOf, Size, ToolOptions, check_arguments

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir

# The names kernel_name gives, with the suffixes the layers add.
_KERNEL_NAME = re.compile(r"fslab_[0-9a-f]{5}_[0-9a-f]{8}(_crypt|_vg)?")


@dataclass(frozen=True)
class Layer:
    """A layer as the registry holds it (LAYERS): what it needs, what a study may add to the
    command that creates it, and how it is built on the devices below it."""

    name: str  # as a target's `layers` names it
    kernel_feature: str  # what the kernel needs, as its configuration names it
    modules: tuple[str, ...]  # loaded before building, when not built in
    tool: tuple[str, ...]  # prints the tool's version
    package: str
    options: ToolOptions  # what a study's layer_options may add to the command that creates it
    # (journal, the devices below, the kernel name to give, the study's extra arguments) →
    # a block yielding (its device, the commands that built it, what its tool reports of it)
    build: Callable[[Journal, list[str], str, list[str]], AbstractContextManager[tuple[str, list[list[str]], str]]]


BY_FSLAB = "fslab passes it itself"
NAMES_A_FILE = "it names a file"

BITMAP = OneOf(("internal", "none"))  # a file name would put the bitmap outside the array

# mdadm --create … --level=1: fslab gives the level, the members and their count.
MDADM_OPTIONS = ToolOptions(
    "mdadm --create",
    {
        "--bitmap": BITMAP,
        "-b": BITMAP,
        "--bitmap-chunk": Size(4096, 2**30, units="kmg"),
        "--consistency-policy": OneOf(("resync", "bitmap")),
        "--data-offset": Size(0, 2**40, units="kmg", power_of_two=False),
    },
    refused={
        "--write-journal": "it names another device: a journal device",
        "--spare-devices": "it adds devices that are not the target's",
        "-x": "it adds devices that are not the target's",
        "--config": NAMES_A_FILE,
        "--backup-file": NAMES_A_FILE,
        "--chunk": "RAID1 has no chunks: mdadm refuses it at level 1",
        "-c": "RAID1 has no chunks: mdadm refuses it at level 1",
        "--layout": "RAID1 has no layout: mdadm refuses it at level 1",
        "-p": "RAID1 has no layout: mdadm refuses it at level 1",
        "--metadata": "fslab passes --metadata=1.2 itself",
        "-e": "fslab passes --metadata=1.2 itself",
        "--level": "the layer says the level",
        "-l": "the layer says the level",
        "--raid-devices": "the target's devices say how many",
        "-n": "the target's devices say how many",
        "--assume-clean": BY_FSLAB,
        "--run": BY_FSLAB,
    },
)

KEY_DERIVATION = (
    "fslab sets a fast key derivation: the key protects nothing "
    "here, and the cipher, not the derivation, is what a run measures"
)
FSLABS_KEY = "fslab makes a random key for each run and gives it itself"

CIPHER = Matches(r"[a-z0-9]+(-[a-z0-9]+)*(:[a-z0-9]+)?", "a cipher such as aes-xts-plain64")
KEY_SIZE = Integer(128, 1024)  # bits
HASH = Matches(r"[a-z0-9]+(-[a-z0-9]+)*", "a hash such as sha256")

# cryptsetup luksFormat --type luks2: fslab gives the key (a file of its own) and its derivation.
CRYPTSETUP_OPTIONS = ToolOptions(
    "cryptsetup luksFormat",
    {
        "--cipher": CIPHER,
        "-c": CIPHER,
        "--key-size": KEY_SIZE,
        "-s": KEY_SIZE,
        "--hash": HASH,
        "-h": HASH,
        "--sector-size": OneOf(("512", "1024", "2048", "4096")),
        "--integrity": OneOf(("hmac-sha256", "hmac-sha512", "poly1305", "aead")),
        "--use-urandom": Flag(),
        "--use-random": Flag(),
        "--align-payload": Integer(1, 2**32),
        "--luks2-metadata-size": Size(16384, 4 * 2**20, units="k"),
        "--luks2-keyslots-size": Size(4096, 128 * 2**20, units="km", power_of_two=False),
    },
    refused={
        **{
            flag: KEY_DERIVATION
            for flag in (
                "--pbkdf",
                "--pbkdf-force-iterations",
                "--pbkdf-memory",
                "--pbkdf-parallel",
                "--iter-time",
                "-i",
            )
        },
        **{
            flag: FSLABS_KEY
            for flag in (
                "--key-file",
                "-d",
                "--keyfile-size",
                "-l",
                "--keyfile-offset",
                "--key-slot",
                "-S",
                "--key-description",
            )
        },
        "--header": "it names a file: a detached header",
        "--header-backup-file": NAMES_A_FILE,
        "--master-key-file": NAMES_A_FILE,
        "--volume-key-file": NAMES_A_FILE,
        **{
            flag: "it reads a key from a token or the keyring"
            for flag in ("--token-id", "--token-only", "--token-type", "--token-replace", "--external-tokens-path")
        },
        "--type": "fslab formats LUKS2 (--type luks2)",
        "-M": "fslab formats LUKS2 (--type luks2)",
        "--batch-mode": BY_FSLAB,
        "-q": BY_FSLAB,
        "--offset": "it moves the data inside the device; fslab gives the whole device",
        "--integrity-no-wipe": "unwritten sectors would fail their integrity check when a workload reads them",
    },
)

READAHEAD = Matches(r"auto|none|\d{1,9}", "auto, none or a number of sectors")
YES_NO = OneOf(("y", "n"))
STRIPES = Integer(1, 128)
STRIPE_SIZE = Size(4096, 2**30, units="km")

# lvm lvcreate: fslab names the volume, gives it the whole group and shows LVM its device only.
LVCREATE_OPTIONS = ToolOptions(
    "lvcreate",
    {
        "--stripes": STRIPES,
        "-i": STRIPES,
        "--stripesize": STRIPE_SIZE,
        "-I": STRIPE_SIZE,
        "--type": OneOf(("linear", "striped")),
        "--readahead": READAHEAD,
        "-r": READAHEAD,
        "--contiguous": YES_NO,
        "-C": YES_NO,
        "--zero": YES_NO,
        "-Z": YES_NO,
        "--wipesignatures": YES_NO,
        "-W": YES_NO,
        "--alloc": OneOf(("contiguous", "cling", "normal", "anywhere", "inherit")),
    },
    refused={
        "--config": "fslab's configuration shows LVM its own device only; another could show it others",
        **{flag: "it names other devices or a file" for flag in ("--devices", "--devicesfile")},
        **{flag: "it names a profile file" for flag in ("--profile", "--commandprofile", "--metadataprofile")},
        **{flag: "fslab gives the volume the whole group" for flag in ("--extents", "-l", "--size", "-L")},
        "--name": "fslab names the volume",
        "-n": "fslab names the volume",
        "--yes": BY_FSLAB,
        "-y": BY_FSLAB,
    },
)

# Every layer, each joining as it is defined (below: md RAID1, LUKS, LVM), or from a plugin.
LAYERS: Registry[Layer] = Registry("layer")

# LVM looks at fslab's own device only, and makes its device nodes itself where no udev runs.
_LVM_CONFIG = 'devices {{ filter = [ "a|^{device}$|", "r|.*|" ] }} activation {{ udev_sync = 0 udev_rules = 0 }}'


def missing(layer: str) -> str | None:
    """What this machine lacks to build the layer, or None when it has everything."""
    spec = LAYERS[layer]
    if not all(kernel_has_module(module) for module in spec.modules):
        return f"this kernel has no {spec.kernel_feature}"
    if tool_version(spec.tool) is None:
        return f"{spec.tool[0]} is not installed (apt-get install {spec.package})"
    return None


@dataclass
class Stack:
    """The block devices a filesystem is made on, and how they were made from the target's own
    devices (fslab's loop images, zram devices, or the user's confirmed devices)."""

    devices: list[str]  # the top of the stack: what mkfs or zpool is given
    owned: Owned  # what the stack may rest on
    commands: list[list[str]] = field(default_factory=list)  # how the layers were built
    details: str = ""  # what the layers' tools report of them
    bottom: list[str] = field(default_factory=list)  # the target's own devices (default: `devices`, no layer yet)
    between: list[str] = field(default_factory=list)  # each layer's device, bottom first (the last is the top)

    def __post_init__(self) -> None:
        self.bottom = self.bottom or list(self.devices)

    @classmethod
    def on(cls, attached: Attached) -> Stack:
        """The bare devices, before any layer."""
        return cls(
            devices=list(attached.devices),
            owned=attached.owned,
            commands=list(attached.commands),
            details=attached.details,
        )

    def assert_ours(self) -> None:
        """Refuse unless every device rests on the target's own devices only."""
        for device in self.devices:
            assert_ours(device, self.owned)


@contextmanager
def built(journal: Journal, attached: Attached, target: Target) -> Iterator[Stack]:
    """The target's layers built on its devices, bottom first, and taken down after."""
    stack = Stack.on(attached)
    name = kernel_name(journal.workdir.root, target.name)
    with ExitStack() as layers:
        for layer in target.layers:
            stack.assert_ours()
            for module in LAYERS[layer].modules:
                run(["modprobe", module])  # nothing to do where it is loaded or built in
            extra = check_arguments(LAYERS[layer].options, target.layer_options.get(layer, ()))
            device, commands, details = layers.enter_context(LAYERS[layer].build(journal, stack.devices, name, extra))
            stack.devices = [device]
            stack.between.append(device)
            stack.commands += commands
            stack.details += details
        yield stack


def _running(entry: Entry, workdir: Workdir, node: str) -> bool:
    """Whether the layer's device node exists; Refused unless its name is one fslab makes in this
    work directory and the kernel shows it resting on this work directory's images only."""
    if not _KERNEL_NAME.fullmatch(entry.ident.split(" ")[0]) or not entry.ident.startswith(workdir_tag(workdir.root)):
        raise Refused(f"{entry.ident} is not a name fslab gives in {workdir.root}")
    number = device_number(node)
    if number is None:
        return False
    if not rests_on(number, workdir.owned()):
        raise Refused(
            f"{node} does not rest on fslab's images or the devices it holds in {workdir.root} only; left as it is"
        )
    return True


@releaser("md")
def stop_array(entry: Entry, workdir: Workdir) -> None:
    """Stop fslab's array and wipe its members' superblocks, so that nothing reassembles it."""
    link = Path("/dev/md") / entry.ident
    if _running(entry, workdir, str(link)):
        members = Path("/sys/block") / Path(os.path.realpath(link)).name / "slaves"
        devices = [f"/dev/{member.name}" for member in members.iterdir()]
        run(["mdadm", "--stop", str(link)])
        run(["mdadm", "--zero-superblock", *devices], check=False)
    if link.is_symlink():
        link.unlink()  # where no udev runs, mdadm made the link and leaves it


@contextmanager
def _md_raid1(
    journal: Journal, devices: list[str], name: str, extra: list[str]
) -> Iterator[tuple[str, list[list[str]], str]]:
    # --assume-clean: no initial resync competing with the workload; the halves differ only
    # where nothing was ever written, which no benchmark reads back.
    command = [
        "mdadm",
        "--create",
        f"/dev/md/{name}",
        "--run",
        "--level=1",
        f"--raid-devices={len(devices)}",
        "--metadata=1.2",
        "--assume-clean",
        *extra,
        *devices,
    ]
    with journal.holding("md", name, release_unproven=True):
        run(command)
        device = os.path.realpath(f"/dev/md/{name}")
        yield device, [command], f"mdadm --detail {device}:\n{run(['mdadm', '--detail', device], check=False).stdout}\n"


@releaser("luks")
def close_luks(entry: Entry, workdir: Workdir) -> None:
    if _running(entry, workdir, f"/dev/mapper/{entry.ident}"):
        run(["cryptsetup", "close", entry.ident])


@contextmanager
def _luks(
    journal: Journal, devices: list[str], name: str, extra: list[str]
) -> Iterator[tuple[str, list[list[str]], str]]:
    # A random key used once, given on cryptsetup's standard input (`--key-file -`: read whole, to
    # its end), so no file ever holds it and nothing outlives the run that could open the device
    # again; a fast key derivation, since the key protects nothing here.
    mapped = f"{name}_crypt"
    key = bytearray(secrets.token_bytes(64))
    try:
        format_command = [
            "cryptsetup",
            "luksFormat",
            "--type",
            "luks2",
            "--batch-mode",
            "--key-file",
            "-",
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            *extra,
            devices[0],
        ]
        open_command = ["cryptsetup", "open", "--key-file", "-", devices[0], mapped]
        run(format_command, stdin=key)
        with journal.holding("luks", mapped, release_unproven=True):
            run(open_command, stdin=key)
            key[:] = bytes(len(key))
            status = run(["cryptsetup", "status", mapped], check=False).stdout
            yield f"/dev/mapper/{mapped}", [format_command, open_command], f"cryptsetup status {mapped}:\n{status}\n"
    finally:
        key[:] = bytes(len(key))


def _lvm_command(action: str, device: str, *args: str) -> list[str]:
    return ["lvm", action, "--config", _LVM_CONFIG.format(device=device), *args]


@releaser("lvm")
def remove_volume_group(entry: Entry, workdir: Workdir) -> None:
    """Remove fslab's volume group (ident "group on device") if its volume is still active."""
    group, _, device = entry.ident.partition(" on ")
    if not re.fullmatch(r"/dev/[a-z][a-z0-9]*|/dev/mapper/fslab_\w+", device):  # a kernel name: safe in LVM's filter
        raise Refused(f"{entry.ident}: {device} is not a device fslab builds a volume group on")
    if _running(entry, workdir, f"/dev/mapper/{group}-data"):
        run(_lvm_command("vgremove", device, "--force", group))


@contextmanager
def _lvm(
    journal: Journal, devices: list[str], name: str, extra: list[str]
) -> Iterator[tuple[str, list[list[str]], str]]:
    device, group = devices[0], f"{name}_vg"
    commands = [
        _lvm_command("pvcreate", device, "--force", "--yes", device),
        _lvm_command("vgcreate", device, group, device),
        _lvm_command("lvcreate", device, "--yes", "--extents", "100%FREE", "--name", "data", *extra, group),
    ]
    with journal.holding("lvm", f"{group} on {device}", release_unproven=True):
        for command in commands:
            run(command)
        volumes = run(
            _lvm_command("lvs", device, "-o", "lv_name,vg_name,lv_size,seg_type,stripes,devices"), check=False
        ).stdout
        yield f"/dev/mapper/{group}-data", commands, f"lvs:\n{volumes}\n"


LAYERS.add(
    Layer(
        "md-raid1",
        "md RAID1 (CONFIG_BLK_DEV_MD, CONFIG_MD_RAID1)",
        ("md_mod", "raid1"),
        ("mdadm", "--version"),
        "mdadm",
        MDADM_OPTIONS,
        build=_md_raid1,
    )
)
LAYERS.add(
    Layer(
        "luks",
        "dm-crypt (CONFIG_BLK_DEV_DM, CONFIG_DM_CRYPT)",
        ("dm_mod", "dm_crypt"),
        ("cryptsetup", "--version"),
        "cryptsetup",
        CRYPTSETUP_OPTIONS,
        build=_luks,
    )
)
LAYERS.add(
    Layer(
        "lvm",
        "device-mapper (CONFIG_BLK_DEV_DM)",
        ("dm_mod",),
        ("lvm", "version"),
        "lvm2",
        LVCREATE_OPTIONS,
        build=_lvm,
    )
)
