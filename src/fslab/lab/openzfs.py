"""OpenZFS for a lab kernel: Debian's zfs-dkms built once per kernel release into a cache, the tools
of the same version unpacked beside it, and the guest shell text that loads it (`setup_script`).

Which OpenZFS fits a kernel is chosen from what the archive offers (`OFFERS`, checked against the
source's own META once downloaded): bookworm's contrib zfs-dkms 2.1 builds for kernels up to 6.2,
bookworm-backports' 2.3 for kernels up to 6.14; for any other kernel there is none, and fslab says
so. Nothing is installed on the host: zfsutils-linux conflicts with zfs-fuse, which fslab uses on
a kernel without the module, and the kernel's headers are the lab's business, not the host's. The
packages (zfs-dkms, zfsutils-linux and its libraries; linux-headers and the linux-kbuild they need)
are downloaded with apt (which verifies them) and unpacked into the cache:

    /var/cache/fslab/openzfs/<release>/
        modules/*.ko     built against that kernel's headers (vermagic checked)
        root/            zfsutils-linux and its libraries: sbin/zpool, sbin/zfs, lib/x86_64-linux-gnu
        ready            written last (JSON): the OpenZFS version, its package, the modules' load order

The build (configure + make: some 2.5 min of CPU on an idle core) runs once per kernel, locked;
what an interrupted one left is discarded by the next.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.errors import FslabError, Refused
from fslab.core.system import CommandError, run
from fslab.core.units import format_size
from fslab.filesystems.zfs_engine import KERNEL_ONLY

if TYPE_CHECKING:
    from fslab.model import Study

OPENZFS = Path("/var/cache/fslab/openzfs")
ARCHIVE = "http://deb.debian.org/debian"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


@dataclass(frozen=True)
class Offer:
    """An OpenZFS series the archive offers as zfs-dkms, and the kernels (major, minor) it builds for."""

    suite: str
    series: str
    oldest: tuple[int, int]
    newest: tuple[int, int]

    def describe(self) -> str:
        return f"{self.suite}'s zfs-dkms {self.series} builds for {_dotted(self.oldest)} to {_dotted(self.newest)}"


# Oldest first: a kernel both fit takes the stable release's own (bookworm's 2.1 for 6.1 kernels).
# The ranges are each series' META (Linux-Minimum, Linux-Maximum) of the version the suite offers:
# 2.1.11 (bookworm) and the 2.3 series (bookworm-backports, 2.3.2 when written).
OFFERS = (
    Offer("bookworm", "2.1", (3, 10), (6, 2)),
    Offer("bookworm-backports", "2.3", (4, 18), (6, 14)),
)

# A kernel release as Debian names one ("6.1.0-56-amd64", "6.12.117+deb12-cloud-amd64"): it is a
# path component of the cache and an apt package name's tail, so nothing else passes.
_RELEASE = re.compile(r"[0-9]+\.[0-9]+[0-9a-z.+~-]*")
_MODULE = re.compile(r"[a-z0-9_]+")  # a kernel module's name as modinfo and modprobe give it


def check_release(release: str) -> str:
    """The release, or Refused unless it is a kernel release as Debian names one."""
    if not _RELEASE.fullmatch(release) or ".." in release or len(release) > 100:
        raise Refused(f"{release!r} is not a kernel release (like 6.1.0-56-amd64): no OpenZFS is looked up for it")
    return release


def kernel_series(release: str) -> tuple[int, int]:
    """The kernel's (major, minor): what an OpenZFS series says it supports."""
    major, minor = check_release(release).split(".")[:2]
    return int(major), int(re.match(r"[0-9]+", minor).group())  # type: ignore[union-attr]  # _RELEASE's digits


def choose(release: str) -> Offer | None:
    """The OpenZFS that fits the kernel release, or None when no version the archive offers does
    (`no_openzfs` says why)."""
    if _preempt_rt(release):
        return None
    series = kernel_series(release)
    return next((offer for offer in OFFERS if offer.oldest <= series <= offer.newest), None)


def no_openzfs(release: str) -> str:
    """The plain sentence of why no OpenZFS fits the kernel (choose gave None)."""
    if _preempt_rt(release):
        return f"no OpenZFS in the archive supports {release}: zfs-dkms does not build for PREEMPT_RT kernels"
    offers = "; ".join(offer.describe() for offer in OFFERS)
    return f"no OpenZFS in the archive supports {_dotted(kernel_series(release))} ({release}): {offers}"


def _preempt_rt(release: str) -> bool:
    return "-rt-" in check_release(release)  # Debian's rt flavours: zfs-dkms's dkms.conf refuses PREEMPT_RT


def _dotted(series: tuple[int, int]) -> str:
    return f"{series[0]}.{series[1]}"


@dataclass(frozen=True)
class PreparedOpenZFS:
    """OpenZFS built for one kernel release, as its cache directory's `ready` records it."""

    release: str
    version: str  # the module's own version ("2.1.11"), as /sys/module/zfs/version says
    package_version: str  # zfs-dkms's and zfsutils-linux's ("2.1.11-1+deb12u1")
    suite: str  # where it came from ("bookworm", "bookworm-backports")
    directory: Path  # the cache's directory of this release
    load_order: tuple[str, ...]  # the modules, each after what it depends on

    @property
    def modules(self) -> Path:
        return self.directory / "modules"

    @property
    def root(self) -> Path:
        """zfsutils-linux and its libraries, unpacked."""
        return self.directory / "root"


def prepared(release: str, *, cache: Path = OPENZFS) -> PreparedOpenZFS | None:
    """OpenZFS as built for the release, or None where it has not been (or not to the end)."""
    directory = cache / check_release(release)
    try:
        record = json.loads((directory / "ready").read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise FslabError(
            f"{directory / 'ready'} is unreadable ({exc}): delete {directory} and prepare it again"
        ) from exc
    order = tuple(str(name) for name in record.get("load_order", ()))
    if record.get("release") != release or not order or not all(_MODULE.fullmatch(name) for name in order):
        raise Refused(f"{directory / 'ready'} is not a record fslab writes: delete {directory} and prepare it again")
    return PreparedOpenZFS(
        release=release,
        version=str(record["version"]),
        package_version=str(record["package_version"]),
        suite=str(record["suite"]),
        directory=directory,
        load_order=order,
    )


def prepare(release: str, *, cache: Path = OPENZFS, say: Callable[[str], None] = print) -> PreparedOpenZFS:
    """OpenZFS for the kernel release, built into the cache unless it is there already. Idempotent
    and locked (two fslab processes build it once); raises FslabError naming the release when no
    OpenZFS fits it or the build fails, and what to do."""
    check_release(release)
    offer = choose(release)
    if offer is None:
        raise FslabError(no_openzfs(release))
    if (found := prepared(release, cache=cache)) is not None:
        return found
    with _locked(cache):
        if (found := prepared(release, cache=cache)) is not None:
            return found  # another fslab built it while this one waited
        say(f"OpenZFS for {release}: {offer.suite}'s zfs-dkms {offer.series}, built once into {cache / release}")
        staging = cache / f"{release}.partial"
        for left in (staging, cache / release):  # what an interrupted build left, never ready
            _remove_own(cache, left)
        staging.mkdir()
        try:
            record = _build(release, offer, cache, staging, say)
        except BaseException:
            _remove_own(cache, staging)
            raise
        staging.rename(cache / release)
        ready = cache / release / "ready"
        ready.with_suffix(".partial").write_text(json.dumps(record, indent=1) + "\n")
        ready.with_suffix(".partial").replace(ready)
    found = prepared(release, cache=cache)
    assert found is not None
    say(f"OpenZFS {found.version} ({found.package_version}, {found.suite}) for {release} ready in {found.directory}")
    return found


def prepare_if_fits(
    release: str, *, cache: Path = OPENZFS, say: Callable[[str], None] = print
) -> PreparedOpenZFS | None:
    """`fslab lab build KERNEL`'s OpenZFS step: built (prepare) where one fits the kernel, else the
    plain sentence said and None: the kernel is no less ready, its ZFS targets unsupported there."""
    if choose(release) is None:
        say(no_openzfs(release))
        return None
    return prepare(release, cache=cache, say=say)


@contextmanager
def _locked(cache: Path) -> Iterator[None]:
    _own_directory(cache)
    fd = os.open(cache / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits while another fslab builds
        yield
    finally:
        os.close(fd)


def _own_directory(directory: Path) -> None:
    """The cache exists as a directory of this user's that no one else may write."""
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise Refused(
            f"{directory} is not a directory of fslab's own (a symlink, another owner, or writable by others)"
        )


def _remove_own(cache: Path, path: Path) -> None:
    """Delete a release's directory in the cache (a name check_release passed, not a symlink)."""
    if path.parent != cache or not check_release(path.name.removesuffix(".partial")):
        raise Refused(f"{path} is not a directory of fslab's OpenZFS cache {cache}")
    if path.is_symlink():
        raise Refused(f"{path} is a symlink, not fslab's: left as it is")
    if path.exists():
        shutil.rmtree(path)


def _apt(cache: Path, suite: str) -> list[str]:
    """apt-get's options for a private configuration of the suite's contrib section alone: the
    host's own sources, lists and preferences are neither read nor changed."""
    base = cache / "apt" / suite
    (base / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (base / "sources").mkdir(exist_ok=True)
    (base / "preferences").mkdir(exist_ok=True)
    (base / "sources" / "contrib.sources").write_text(
        f"Types: deb\nURIs: {ARCHIVE}\nSuites: {suite}\nComponents: contrib\nSigned-By: {KEYRING}\n"
    )
    return [
        "-o", "Dir::Etc::SourceList=/dev/null",
        "-o", f"Dir::Etc::SourceParts={base / 'sources'}",
        "-o", f"Dir::Etc::PreferencesParts={base / 'preferences'}",
        "-o", f"Dir::State::Lists={base / 'lists'}",
        "-o", "Dir::Etc::Preferences=/dev/null",
    ]  # fmt: skip


def _field(apt_show: str, name: str) -> str:
    """One field of `apt-cache show`'s first record."""
    for line in apt_show.split("\n\n")[0].splitlines():
        if line.startswith(f"{name}: "):
            return line.split(": ", 1)[1]
    return ""


def _exact_dependencies(depends: str, version: str) -> list[str]:
    """The packages a Depends field asks for at exactly `version`: OpenZFS's own libraries."""
    found = []
    for clause in depends.split(","):
        match = re.fullmatch(r"\s*([a-z0-9][a-z0-9.+-]*)\s*\(=\s*([^)\s]+)\)\s*", clause.split("|")[0])
        if match and match.group(2) == version:
            found.append(match.group(1))
    return found


def _build(release: str, offer: Offer, cache: Path, staging: Path, say: Callable[[str], None]) -> dict[str, object]:
    debs = staging / "debs"
    debs.mkdir()
    apt = _apt(cache, offer.suite)
    say(f"apt-get update ({offer.suite} contrib, fslab's own lists in {cache / 'apt' / offer.suite})")
    run(["apt-get", *apt, "update", "-qq"], timeout=600)
    shown = run(["apt-cache", *apt, "show", "--no-all-versions", "zfsutils-linux"]).stdout
    version = _field(shown, "Version")
    if not version.startswith(offer.series + "."):
        raise FslabError(
            f"{offer.suite} contrib offers zfsutils-linux {version or 'in no version'}, not the {offer.series} series "
            f"fslab chose for {release}: fslab's OPENZFS offers need updating"
        )
    packages = ["zfs-dkms", "zfsutils-linux", *_exact_dependencies(_field(shown, "Depends"), version)]
    say(f"apt-get download {' '.join(packages)} ({version})")
    run(["apt-get", *apt, "download", *(f"{p}={version}" for p in packages)], cwd=debs, timeout=900)

    headers = _download_headers(release, staging / "headers-debs", say)
    source, root, tree = staging / "source", staging / "root", staging / "headers"
    _unpack(debs.glob("zfs-dkms_*.deb"), source)
    _unpack((d for d in debs.glob("*.deb") if not d.name.startswith("zfs-dkms_")), root)
    _unpack((d for d in headers.glob("*.deb") if not d.name.startswith("pahole_")), tree)
    _unpack(headers.glob("pahole_*.deb"), staging / "tools")
    path = {"PATH": f"{staging / 'tools' / 'usr' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    build = next((source / "usr" / "src").glob("zfs-*"), None)
    if build is None:
        raise FslabError(f"zfs-dkms {version} holds no source in usr/src: the package is not what fslab expects")
    meta = dict(
        line.split(":", 1) for line in (build / "META").read_text().splitlines() if ":" in line and line[0] != " "
    )
    module_version = meta["Version"].strip()
    supported = (_series(meta.get("Linux-Minimum", "0.0")), _series(meta.get("Linux-Maximum", "0.0")))
    if not supported[0] <= kernel_series(release) <= supported[1]:
        raise FslabError(
            f"zfs-dkms {version} builds for kernels {_dotted(supported[0])} to {_dotted(supported[1])}, not {release}: "
            f"no OpenZFS in the archive supports {_dotted(kernel_series(release))}"
        )
    common, arch = _headers_tree(tree, release)

    say(f"building OpenZFS {module_version} for {release} (configure and make: minutes of CPU)")
    try:
        configured = run(
            ["./configure", "-q", "--with-config=kernel", f"--with-linux={common}", f"--with-linux-obj={arch}"],
            cwd=build,
            timeout=3600,
            env=path,
        )
        (staging / "configure.log").write_text(configured.stdout + configured.stderr)
        made = run(["make", "-s", f"-j{os.cpu_count() or 1}"], cwd=build, timeout=7200, env=path)
        (staging / "make.log").write_text(made.stdout + made.stderr)
    except CommandError as exc:
        config_log = build / "config.log"  # configure's own account of a failed check, kept with the output
        kept = "\n".join(config_log.read_text(errors="replace").splitlines()[-300:]) if config_log.exists() else ""
        (staging.parent / f"{release}.failed.log").write_text(exc.stdout + exc.stderr + "\n--- config.log\n" + kept)
        raise FslabError(
            f"OpenZFS {module_version} did not build for {release}: {exc}; "
            f"the log is in {staging.parent / (release + '.failed.log')}"
        ) from exc
    modules = staging / "modules"
    modules.mkdir()
    for ko in sorted((build / "module").rglob("*.ko")):
        shutil.copy2(ko, modules / ko.name)
    order = _load_order(modules, release)
    headers_used = sorted(d.name for d in headers.glob("*.deb"))  # what it was built against, recorded
    for temporary in (source, tree, debs, staging / "headers-debs", staging / "tools"):
        shutil.rmtree(temporary)  # the objects, the source and the headers: ~500 MiB, built once
    say(f"built {len(order)} modules ({format_size(sum(f.stat().st_size for f in modules.iterdir()))})")
    return {
        "release": release,
        "version": module_version,
        "package_version": version,
        "suite": offer.suite,
        "load_order": order,
        "headers": headers_used,
    }


def _series(text: str) -> tuple[int, int]:
    major, _, minor = text.strip().partition(".")
    return int(major), int(minor or 0)


def _download_headers(release: str, into: Path, say: Callable[[str], None]) -> Path:
    """linux-headers-<release> and what it needs to build a module (its -common headers, the
    linux-kbuild tools, pahole) from the host's configured archive, where the kernel package is."""
    into.mkdir()
    name = f"linux-headers-{release}"
    try:
        shown = run(["apt-cache", "show", "--no-all-versions", name]).stdout
    except CommandError as exc:
        raise FslabError(
            f"the configured archive has no {name} to build OpenZFS with (apt-get update, or check the release): {exc}"
        ) from exc
    wanted = [name] + [
        clause.split()[0]
        for clause in _field(shown, "Depends").split(",")
        if re.match(r"\s*linux-(headers-.*-common|kbuild-)", clause)
    ]
    # pahole: the 6.12 packages ship vmlinux with their headers, so kbuild gives each module its BTF
    # (CONFIG_DEBUG_INFO_BTF_MODULES), with pahole, which no headers package depends on.
    wanted.append("pahole")
    say(f"apt-get download {' '.join(wanted)}")
    run(["apt-get", "download", *wanted], cwd=into, timeout=900)
    return into


def _unpack(debs: Iterable[Path], into: Path) -> None:
    into.mkdir(exist_ok=True)
    for deb in sorted(debs):
        run(["dpkg-deb", "-x", str(deb), str(into)], timeout=600)


def _headers_tree(tree: Path, release: str) -> tuple[Path, Path]:
    """The unpacked headers' source (-common) and object (the release's own) directories. The
    release's Makefile includes the -common one by its installed path, pointed here instead; the
    scripts and tools links are relative (../../lib/linux-kbuild-*), and so resolve in the tree."""
    arch = tree / "usr" / "src" / f"linux-headers-{release}"
    makefile = arch / "Makefile"
    text = makefile.read_text()
    included = re.fullmatch(r"include (/usr/src/linux-headers-[0-9a-z.+~-]+-common)/Makefile\n?", text.strip() + "\n")
    if included is None:
        raise FslabError(f"{makefile} of linux-headers-{release} is not the one-line include fslab expects")
    common = tree / included.group(1).lstrip("/")
    makefile.write_text(f"include {common}/Makefile\n")
    return common, arch


def _load_order(modules: Path, release: str) -> list[str]:
    """The built modules, each after what it depends on (modinfo's depends; a dependency not among
    them is the kernel's own, loaded by name), each checked built for `release` (its vermagic)."""
    depends: dict[str, list[str]] = {}
    for ko in sorted(modules.glob("*.ko")):
        info = run(["modinfo", "-F", "vermagic", str(ko)]).stdout.split()
        if not info or info[0] != release:
            raise FslabError(f"{ko.name} was built for {info[0] if info else 'no kernel'}, not {release}")
        text = run(["modinfo", "-F", "depends", str(ko)]).stdout.strip()
        depends[ko.stem] = [d for d in text.split(",") if d]
    if "zfs" not in depends:
        raise FslabError(f"OpenZFS's build for {release} made no zfs.ko (only {', '.join(depends) or 'nothing'})")
    order: list[str] = []

    def visit(module: str) -> None:
        if module in order:
            return
        for dependency in depends.get(module, ()):
            visit(dependency)
        order.append(module)

    visit("zfs")
    return order


# The guest side. A study's targets need, in the guest: OpenZFS (any ZFS target), and each layer a
# target stacks (md RAID1, LUKS, LVM: the guest kernel's own modules, by the names LAYERS gives).
OPENZFS_NEED = "openzfs"

# zfs_arc_min as the module is loaded: the least floor it takes (32 MiB, 2 << SPA_MAXBLOCKSHIFT).
# The module takes a zfs_arc_max only above its floor, which is by default 1/32 of memory (64 MiB
# in a 2 GiB guest): lowered, every cap fslab sets (SCALED_ARC_FLOOR, 64 MiB, and up) is above it.
ARC_MIN = 32 * 2**20
GUEST_MEMORY_MIB = 2048  # vm.VmSpec's default
ARC_HEADROOM_MIB = 1024  # beside the largest ARC cap: the RAM overlay's copies, fio, the page cache


def needs_of(study: Study) -> set[str]:
    """What the study's targets need loaded in a guest: "openzfs" and the layers they stack."""
    needs: set[str] = set()
    for target in study.targets:
        if target.filesystem == "zfs":
            needs.add(OPENZFS_NEED)
        needs.update(target.layers)
    return needs


def memory_mib(study: Study) -> int:
    """The guest memory (MiB) for the study: enough that each target's ARC cap (as scaled) is
    below the guest's memory, which the module requires of a zfs_arc_max, with room beside it."""
    caps = [target.arc_max for target in study.targets if target.arc_max]
    if not caps:
        return GUEST_MEMORY_MIB
    return max(GUEST_MEMORY_MIB, -(-max(caps) // 2**20) + ARC_HEADROOM_MIB)


@dataclass(frozen=True)
class GuestSetup:
    """What a study's boot of a kernel needs: the setup text (vm.boot's `setup`), the guest's
    memory (VmSpec's memory_mib), and what was left out, said (no OpenZFS fits the kernel)."""

    script: str
    memory_mib: int
    notes: tuple[str, ...] = ()
    scratch_bytes: int = 4 * 2**30  # the guest's scratch disk (vm.boot's; a sparse file on the host)
    timeout: float = 900  # seconds: the boot's limit (vm.boot's)


def for_guest(study: Study, release: str, *, cache: Path = OPENZFS, say: Callable[[str], None] = print) -> GuestSetup:
    """The setup of a boot of `release` for the study: OpenZFS built for it first where a target
    needs it (once: prepare). Where no OpenZFS fits the kernel, the setup leaves it out and says
    so: the guest's fslab then finds no ZFS (never zfs-fuse), and its ZFS targets are unsupported
    there; likewise where it cannot be built (the kernel's headers gone from the archive, or a
    failed build: the note says prepare's error)."""
    needs = needs_of(study)
    notes: list[str] = []
    if OPENZFS_NEED in needs and choose(release) is None:
        needs.discard(OPENZFS_NEED)
        notes.append(f"{no_openzfs(release)}; its ZFS targets are unsupported there")
    elif OPENZFS_NEED in needs:
        try:
            prepare(release, cache=cache, say=say)
        except FslabError as exc:  # its headers gone from the archive, say, or a build that failed
            needs.discard(OPENZFS_NEED)
            notes.append(f"OpenZFS could not be built for {release} ({exc}); its ZFS targets are unsupported there")
    return GuestSetup(
        setup_script(release, needs, cache=cache),
        memory_mib(study),
        tuple(notes),
        scratch_bytes=scratch_bytes(study),
        timeout=boot_seconds(study),
    )


SCRATCH_FLOOR = 4 * 2**30  # vm.SCRATCH_BYTES


def scratch_bytes(study: Study) -> int:
    """The guest's scratch disk for the study: every target's images at once (a study's runs are
    interleaved, its images kept to its end), twice over for what workloads lay beside them (an
    rsync source's own image), and a GiB for the work directory and the database. The disk is a
    sparse file on the host: what the guest never writes costs nothing."""
    images = sum(t.image_size * t.devices for t in study.targets if t.on_images and t.raw_baseline_of is None)
    return max(SCRATCH_FLOOR, 2 * images + 2**30)


BOOT_SECONDS_PER_RUN = 180.0  # a run's set-up, measurement and teardown under TCG, at the most seen (nas-stack)


def boot_seconds(study: Study) -> float:
    """The boot's time limit: what the study's runs take under emulation at the most (a guest
    that hangs is killed at it), and vm.boot's 900 s at the least."""
    runs = len(study.cells) * (study.repetitions + study.warmup)
    return max(900.0, 300.0 + runs * BOOT_SECONDS_PER_RUN)


def setup_script(release: str, needs: Iterable[str], *, cache: Path = OPENZFS) -> str:
    """Guest shell text (bash, run in the shell that then runs the study's command: its exports
    reach it) loading what `needs` names: the layers' modules from the guest kernel's own
    (modprobe), OpenZFS's modules from the cache (insmod, each after what it depends on: `depmod
    -a` of a whole kernel costs half a minute of emulated CPU), its tools first on PATH and its
    libraries on LD_LIBRARY_PATH. It never ends the shell (vm.boot runs it in the guest's init):
    what fails is said ("fslab setup: …" on stderr) and what depends on it is not done, so the
    study's fslab finds the layer or OpenZFS missing and says so (zfs-fuse, on the host's root the
    guest sees, is ruled out: zfs_engine.KERNEL_ONLY). Only checked names are in it, each quoted."""
    from fslab.devices.layers import LAYERS  # the registry joins its modules on first use

    check_release(release)
    wanted = sorted(set(needs))
    lines = [
        f"# fslab's guest setup for {release}: {', '.join(wanted) or 'nothing'} (fslab.lab.openzfs.setup_script)",
        f"export {KERNEL_ONLY}=1",
        'fslab_setup_failed() { echo "fslab setup: $1" >&2; return 1; }',
    ]
    modules: list[str] = []
    for need in wanted:
        if need == OPENZFS_NEED:
            continue
        if need not in LAYERS:
            raise Refused(f"{need!r} is neither OpenZFS nor a layer fslab knows ({', '.join(LAYERS)}): not loaded")
        modules += [m for m in LAYERS[need].modules if m not in modules]
    for module in modules:
        lines.append(_modprobe(module))
    if OPENZFS_NEED in wanted:
        lines += _openzfs_lines(release, cache)
    return "\n".join(lines) + "\n"


def _modprobe(module: str) -> str:
    if not _MODULE.fullmatch(module):
        raise Refused(f"{module!r} is not a kernel module's name: not loaded")
    return f"modprobe -- {shlex.quote(module)} || fslab_setup_failed {shlex.quote(f'modprobe {module} failed')}"


def _or_fail(command: str, said: str) -> str:
    """`command`, else `said` and the OpenZFS function's end (fslab_openzfs)."""
    return f"{command} || {{ fslab_setup_failed {shlex.quote(said)}; return 1; }}"


def _openzfs_lines(release: str, cache: Path) -> list[str]:
    built = prepared(release, cache=cache)
    if built is None:
        raise FslabError(f"OpenZFS is not built for {release} in {cache}: `fslab lab build {release}` builds it")
    q = shlex.quote
    lines = [
        f"# OpenZFS {built.version} ({built.package_version}, {built.suite}): the rest skipped at the first failure",
        "fslab_openzfs() {",
        "    if [ ! -e /sys/module/zfs ]; then",
    ]
    for module in built.load_order:
        if not _MODULE.fullmatch(module):
            raise Refused(f"{module!r} in {built.directory / 'ready'} is not a kernel module's name: not loaded")
        ko = built.modules / f"{module}.ko"
        if not ko.exists():
            lines.append(f"        {_modprobe(module)} || return 1")  # the kernel's own
            continue
        arguments = f" zfs_arc_min={ARC_MIN}" if module == "zfs" else ""
        lines.append("        " + _or_fail(f"insmod {q(str(ko))}{arguments}", f"insmod {ko} failed"))
    sbin, lib = built.root / "sbin", built.root / "lib" / "x86_64-linux-gnu"
    path = ":".join(q(str(d)) for d in (sbin, built.root / "usr" / "sbin", built.root / "usr" / "bin"))
    want = f"zfs-kmod-{built.package_version}"
    lines += [
        "    fi",
        f"    export PATH={path}:$PATH",
        f"    export LD_LIBRARY_PATH={q(str(lib))}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}",
        "    " + _or_fail(f'[ "$(command -v zpool)" = {q(str(sbin / "zpool"))} ]', f"zpool is not {sbin}/zpool"),
        "    " + _or_fail(f"zpool version | grep -qxF -- {q(want)}", f"the loaded module is not {want}"),
        # Copied up into the guest's RAM overlay: a run's dropped page cache would have them read
        # over 9p again, at each target's teardown.
        f"    touch -c -- {q(str(sbin / 'zpool'))} {q(str(sbin / 'zfs'))} {q(str(lib))}/lib* 2>/dev/null || true",
        "}",
        "fslab_openzfs",
    ]
    return lines
