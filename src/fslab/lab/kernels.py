"""Debian's kernel packages as the lab boots them: what the configured archive offers, and one
fetched (`apt-get download`: apt checks it against the archive's signed index) and unpacked
into a cache of fslab's own, with the module index the package's postinst would have made.

A release name comes from the command line or a study file: untrusted. It must match RELEASE and
be one the archive offers before any apt command sees it, and it reaches apt and dpkg only as
one argument of an argument list.

The cache, KERNELS/RELEASE/:
    PACKAGE_VERSION_amd64.deb   as apt fetched it
    root/                       dpkg -x of it (boot/vmlinuz-RELEASE, lib/modules/RELEASE with
                                modules.dep made by depmod, boot/config-RELEASE)
    ready.json                  written last: release, package, version, config's sha256
A release's directory is made under a temporary name and renamed into place complete, so a
failed or interrupted prepare leaves none half-made; one lock (fcntl) per release keeps two
fslab processes from preparing it at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fslab.core.errors import FslabError
from fslab.model import kernel_hosts

KERNELS = Path("/var/cache/fslab/kernels")
HOST = kernel_hosts.HOST  # --kernel host: this machine's own kernel, bare metal
READY = "ready.json"

# 6.1.0-56-amd64, 6.12.117+deb12-cloud-amd64, 6.1.0-55-rt-amd64: Debian's release names of
# amd64 kernels (the lab boots x86-64 guests); not a meta-package's (6.12-amd64). Nothing else
# reaches apt.
RELEASE = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,4}(?:-[0-9]{1,4}|\+deb[0-9]{1,3})-(?:(cloud|rt)-)?amd64")
FLAVOURS = {None: "generic", "cloud": "cloud", "rt": "rt"}
LIST_HINT = "`fslab lab kernels` lists the kernels the archive offers"

APT_SECONDS = 600  # a download of ~100 MB from a slow mirror
TOOL_SECONDS = 300  # dpkg -x, depmod


class KernelError(FslabError):
    pass


class KernelFailed(FslabError):
    """A kernel that could not be prepared, booted or run in the lab: `fslab run --kernel` leaves it
    out of the rounds after, `fslab bisect` skips it (each says this reason)."""


@dataclass(frozen=True)
class KernelPackage:
    release: str  # "6.1.0-56-amd64"
    package: str  # "linux-image-6.1.0-56-amd64"
    version: str  # "6.1.158-1"
    cached: bool  # prepared in the cache

    @property
    def flavour(self) -> str:
        return flavour_of(self.release)


@dataclass(frozen=True)
class PreparedKernel:
    release: str
    package_version: str
    vmlinuz: Path
    modules: Path  # the directory lib/modules/RELEASE, with modules.dep
    config_sha256: str


def flavour_of(release: str) -> str:
    found = RELEASE.fullmatch(release)
    return FLAVOURS[found.group(1)] if found else "?"


def release_key(release: str) -> tuple:
    """Orders releases as Debian made them: 6.1.0-54 < 6.1.0-56 < 6.12.100+deb12 < 6.12.117+deb12,
    then by flavour. A name that is no release sorts after every release, by its text."""
    found = RELEASE.fullmatch(release)
    if not found:
        return (1, (), release)
    version = release[: found.start(1) - 1] if found.group(1) else release.removesuffix("-amd64")
    numbers = tuple(int(n) for n in re.findall(r"[0-9]+", version.split("+")[0]))
    return (0, numbers, flavour_of(release), release)


def check_release(release: str) -> str:
    """The release name, refused unless it has the shape of a Debian amd64 kernel release."""
    if not isinstance(release, str) or not RELEASE.fullmatch(release):
        raise KernelError(f"kernel {release!r} is not a Debian kernel release such as 6.1.0-56-amd64; {LIST_HINT}")
    return release


def parse_madison(text: str) -> dict[str, str]:
    """`apt-cache madison PACKAGE...`'s lines → package → its newest version offered."""
    newest: dict[str, str] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 3 or parts[0] in newest:  # madison lists the newest version of a package first
            continue
        newest[parts[0]] = parts[1]
    return newest


def parse_search(text: str) -> list[str]:
    """`apt-cache search --names-only '^linux-image-[0-9]'`'s lines → the releases of kernel
    images (signed or not), without debug symbols, unsigned twins, templates or meta-packages."""
    releases = []
    for line in text.splitlines():
        package = line.split(" ", 1)[0]
        release = package.removeprefix("linux-image-")
        if package.startswith("linux-image-") and RELEASE.fullmatch(release):
            releases.append(release)
    return sorted(set(releases), key=release_key)


def _apt(argv: list[str], *, cwd: Path | None = None, timeout: float = 60) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=timeout, check=False)
    except FileNotFoundError:
        raise KernelError(f"{argv[0]} is not installed: the kernel lab needs Debian's apt and dpkg") from None
    except subprocess.TimeoutExpired:
        raise KernelError(f"`{' '.join(argv)}` did not end in {timeout:g} s") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-3:]
        raise KernelError(f"`{' '.join(argv)}` exited with status {done.returncode}: {' / '.join(said)}")
    return done.stdout


def _sbin(tool: str) -> str:
    """A system tool, found where a user's PATH may not look (/usr/sbin: depmod)."""
    for where in (shutil.which(tool), f"/usr/sbin/{tool}", f"/sbin/{tool}"):
        if where and os.path.exists(where):
            return where
    return tool


def offered(*, cache: Path = KERNELS) -> list[KernelPackage]:
    """The kernel images the configured archive offers (apt's lists as last updated), oldest first."""
    releases = parse_search(_apt(["apt-cache", "search", "--names-only", "^linux-image-[0-9]"]))
    if not releases:
        return []
    versions = parse_madison(_apt(["apt-cache", "madison", *(f"linux-image-{r}" for r in releases)]))
    return [
        KernelPackage(r, f"linux-image-{r}", versions[f"linux-image-{r}"], (cache / r / READY).is_file())
        for r in releases
        if f"linux-image-{r}" in versions
    ]


def download_size(package: str) -> int | None:
    """The bytes apt would download for `package` (its lists' Size), or None when they do not say."""
    try:
        text = _apt(["apt-cache", "show", "--no-all-versions", "--", package])
    except KernelError:
        return None
    sizes = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Size:")]
    return int(sizes[0]) if sizes and sizes[0].isdigit() else None


def ready(release: str, *, cache: Path = KERNELS) -> PreparedKernel | None:
    """The kernel as prepared in the cache, or None when it is not (nothing is fetched)."""
    return _ready(cache / check_release(release), release)


def _offered_one(release: str, cache: Path) -> KernelPackage:
    for package in offered(cache=cache):
        if package.release == release:
            return package
    raise KernelError(f"kernel {release} is not offered by the configured archive (apt-get update?); {LIST_HINT}")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _ready(directory: Path, release: str) -> PreparedKernel | None:
    """The prepared kernel in `directory`, if its marker is there and says so."""
    try:
        marker = json.loads((directory / READY).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("release") != release:
        return None
    root = directory / "root"
    return PreparedKernel(
        release=release,
        package_version=str(marker.get("version")),
        vmlinuz=root / "boot" / f"vmlinuz-{release}",
        modules=root / "lib" / "modules" / release,
        config_sha256=str(marker.get("config_sha256")),
    )


@contextmanager
def _locked(cache: Path, release: str) -> Iterator[None]:
    try:
        cache.mkdir(parents=True, exist_ok=True, mode=0o755)
        fd = os.open(cache / f".{release}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise KernelError(
            f"kernel {release}: cannot use the kernel cache {cache} ({exc.strerror}); run as root"
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# Fetches the package `linux-image-RELEASE` into the directory given; tests give a fake.
Downloader = Callable[[str, Path], None]


def apt_download(package: str, directory: Path) -> None:
    _apt(["apt-get", "download", "-q", "--", package], cwd=directory, timeout=APT_SECONDS)


def _say_nothing(line: str) -> None:
    pass


def prepare(
    release: str,
    *,
    cache: Path = KERNELS,
    say: Callable[[str], None] = _say_nothing,
    download: Downloader | None = None,
) -> PreparedKernel:
    """The kernel package of `release` fetched and unpacked in `cache` (once: a second call finds
    it ready). Raises KernelError naming the release and what to do."""
    check_release(release)
    directory = cache / release
    found = _ready(directory, release)
    if found is not None:
        return found
    package = _offered_one(release, cache) if download is None else None
    with _locked(cache, release):
        found = _ready(directory, release)  # another fslab prepared it while this one waited
        if found is not None:
            return found
        staging = cache / f".{release}.partial"
        shutil.rmtree(staging, ignore_errors=True)  # a killed prepare's, under the lock: nobody's now
        if directory.exists():  # a directory without its marker: not one fslab finished
            shutil.rmtree(directory)
        staging.mkdir(mode=0o755)
        try:
            say(f"{release}: downloading linux-image-{release}" + (f" {package.version}" if package else ""))
            (download or apt_download)(f"linux-image-{release}", staging)
            debs = list(staging.glob("*.deb"))
            if len(debs) != 1:
                raise KernelError(f"kernel {release}: the download left {len(debs)} packages, not 1")
            version = _apt(["dpkg-deb", "-f", "--", str(debs[0]), "Version"]).strip()
            say(f"{release}: unpacking {debs[0].name}")
            root = staging / "root"
            _apt(["dpkg-deb", "-x", "--", str(debs[0]), str(root)], timeout=TOOL_SECONDS)
            vmlinuz, modules = root / "boot" / f"vmlinuz-{release}", root / "lib" / "modules" / release
            config = root / "boot" / f"config-{release}"
            for needed in (vmlinuz, modules, config):
                if not needed.exists():
                    raise KernelError(f"kernel {release}: its package has no {needed.relative_to(root)}")
            say(f"{release}: indexing its modules (depmod)")
            _apt([_sbin("depmod"), "-b", str(root), "--", release], timeout=TOOL_SECONDS)
            marker = {"release": release, "package": f"linux-image-{release}", "version": version}
            marker["config_sha256"] = sha256_of(config)
            (staging / READY).write_text(json.dumps(marker, indent=1) + "\n")
            os.rename(staging, directory)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    say(f"{release}: ready in {directory}")
    found = _ready(directory, release)
    assert found is not None
    return found


def installed(release: str) -> PreparedKernel:
    """A kernel installed on this machine (/boot, /lib/modules), as the lab boots it: no download."""
    check_release(release)
    vmlinuz, modules = Path("/boot") / f"vmlinuz-{release}", Path("/lib/modules") / release
    config = Path("/boot") / f"config-{release}"
    for needed in (vmlinuz, modules / "modules.dep", config):
        if not needed.exists():
            raise KernelError(f"kernel {release} is not installed here (no {needed}); `fslab lab build {release}`")
    try:
        version = _apt(["dpkg-query", "-W", "-f", "${Version}", "--", f"linux-image-{release}"]).strip()
    except KernelError:
        version = "unknown"
    return PreparedKernel(release, version, vmlinuz, modules, sha256_of(config))


def installed_releases() -> list[str]:
    """Releases of the kernels installed here that the lab can boot (vmlinuz and modules), oldest first."""
    found = [
        k.name.removeprefix("vmlinuz-")
        for k in Path("/boot").glob("vmlinuz-*")
        if RELEASE.fullmatch(k.name.removeprefix("vmlinuz-"))
    ]
    return sorted((r for r in found if (Path("/lib/modules") / r / "modules.dep").exists()), key=release_key)
