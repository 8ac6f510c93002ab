"""LUKS (dm-crypt) under a filesystem: the layer (LAYERS "luks"), the cryptsetup luksFormat options a
study may add, and how fslab's mappings are closed when a journal holds them ("luks")."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from fslab.core.journal import Entry, Journal, releaser
from fslab.core.system import run
from fslab.devices.layers.base import BY_FSLAB, LAYERS, NAMES_A_FILE, Layer, running_ours
from fslab.model.options import Flag, Integer, Matches, OneOf, Size, ToolOptions

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir

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


@releaser("luks")
def close_luks(entry: Entry, workdir: Workdir) -> None:
    if running_ours(entry, workdir, f"/dev/mapper/{entry.ident}"):
        run(["cryptsetup", "close", entry.ident])


@contextmanager
def build(
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


LAYERS.add(
    Layer(
        "luks",
        "dm-crypt (CONFIG_BLK_DEV_DM, CONFIG_DM_CRYPT)",
        ("dm_mod", "dm_crypt"),
        ("cryptsetup", "--version"),
        "cryptsetup",
        CRYPTSETUP_OPTIONS,
        build=build,
    ),
    own=True,
)
