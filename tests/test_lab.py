"""The kernel lab's pure parts (fslab/lab/): release names checked before apt sees them, the
archive's kernels parsed from what apt said here (fixtures/lab), a prepare that is idempotent,
locked and leaves nothing half-made (a fake downloader building a package with the real
dpkg-deb), QEMU's argument list (cache=none and aio on every disk, writeback refused for a
measured run), what is masked from a guest, and the VM as a host. The real boots are in
test_lab_boot.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import fslab_in_process
from fslab.core.errors import FslabError
from fslab.lab import kernels, masking, vm

FIXTURES = Path(__file__).parent / "fixtures" / "lab"


# ---- release names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "release", ["6.1.0-56-amd64", "6.12.117+deb12-amd64", "6.1.0-55-cloud-amd64", "6.12.100+deb12-rt-amd64"]
)
def test_a_debian_release_name_is_taken(release):
    assert kernels.check_release(release) == release


@pytest.mark.parametrize(
    "release",
    [
        "../x", "6.1.0-56-amd64/../../etc", "6.1.0-56-amd64; rm -rf /", "$(reboot)", "6.1.0-56-amd64\n",
        "-o APT::Get::Assume-Yes=1", "6.12-amd64", "", "6.1.0-56-arm64", "6.1.0-56-amd64 ", "*",
    ],
)  # fmt: skip
def test_anything_else_is_refused_before_apt_sees_it(release, monkeypatch):
    def no_apt(argv, **kwargs):
        raise AssertionError(f"apt was asked: {argv}")

    monkeypatch.setattr(kernels, "_apt", no_apt)
    with pytest.raises(FslabError, match="fslab lab kernels"):
        kernels.prepare(release)
    with pytest.raises(FslabError, match="not a Debian kernel release"):
        kernels.installed(release)


def test_releases_are_ordered_as_debian_made_them():
    releases = ["6.12.117+deb12-amd64", "6.1.0-56-amd64", "6.12.100+deb12-amd64", "6.1.0-54-amd64", "6.1.0-9-amd64"]
    assert sorted(releases, key=kernels.release_key) == [
        "6.1.0-9-amd64", "6.1.0-54-amd64", "6.1.0-56-amd64", "6.12.100+deb12-amd64", "6.12.117+deb12-amd64",
    ]  # fmt: skip
    assert kernels.flavour_of("6.1.0-56-rt-amd64") == "rt" and kernels.flavour_of("6.1.0-56-amd64") == "generic"


# ---- what the archive offers -------------------------------------------------------------------------


def fake_apt(monkeypatch):
    said = {
        "search": (FIXTURES / "apt-cache-search.txt").read_text(),
        "madison": (FIXTURES / "apt-cache-madison.txt").read_text(),
    }
    asked = []

    def apt(argv, **kwargs):
        asked.append(argv)
        return said[argv[1]]

    monkeypatch.setattr(kernels, "_apt", apt)
    return asked


def test_offered_lists_the_signed_images_of_each_flavour_oldest_first_without_debug_or_meta_packages(
    monkeypatch, tmp_path
):
    fake_apt(monkeypatch)
    (tmp_path / "6.1.0-55-amd64").mkdir()
    (tmp_path / "6.1.0-55-amd64" / kernels.READY).write_text("{}")
    found = kernels.offered(cache=tmp_path)
    releases = [p.release for p in found]
    assert releases == sorted(releases, key=kernels.release_key)
    assert releases[0].startswith("6.1.0-47-") and releases[-1].startswith("6.12.117+deb12-")
    assert {p.flavour for p in found} == {"generic", "cloud", "rt"}
    assert not [r for r in releases if r.endswith(("-dbg", "-unsigned")) or r.startswith("6.12-")]
    by_release = {p.release: p for p in found}
    assert by_release["6.1.0-56-amd64"] == kernels.KernelPackage(
        "6.1.0-56-amd64", "linux-image-6.1.0-56-amd64", "6.1.192-2", cached=False
    )
    assert by_release["6.12.117+deb12-amd64"].version == "6.12.117-1~deb12u1"
    assert by_release["6.1.0-55-amd64"].cached
    assert len(releases) == 51  # 6.1.0-47 … -56 and 7 packages of 6.12, 3 flavours each


def test_madison_keeps_the_newest_version_a_package_is_offered_in():
    text = "linux-image-x | 2.0-1 | http://a bookworm-security/main amd64 Packages\nlinux-image-x | 1.0-1 | http://b\n"
    assert kernels.parse_madison(text) == {"linux-image-x": "2.0-1"}


def test_a_release_the_archive_does_not_offer_is_refused_naming_what_to_do(monkeypatch, tmp_path):
    asked = fake_apt(monkeypatch)
    with pytest.raises(FslabError, match=r"6\.1\.0-99-amd64 is not offered .*fslab lab kernels"):
        kernels.prepare("6.1.0-99-amd64", cache=tmp_path)
    assert [a[:2] for a in asked] == [["apt-cache", "search"], ["apt-cache", "madison"]]  # no download asked
    assert not list(tmp_path.iterdir())  # refused before its lock is taken


# ---- prepare ---------------------------------------------------------------------------------------------

RELEASE = "6.1.0-99-amd64"


def build_package(directory: Path, release: str = RELEASE, *, broken: bool = False) -> None:
    """A kernel package as Debian's has it (vmlinuz, config, modules without their index), built by
    the real dpkg-deb."""
    tree = directory / "tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: linux-image-{release}\nVersion: 6.1.999-1\nArchitecture: amd64\n"
        "Maintainer: fslab tests <tests@example.org>\nDescription: a fake kernel\n"
    )
    (tree / "boot").mkdir()
    (tree / "boot" / f"vmlinuz-{release}").write_bytes(b"not a kernel")
    if not broken:
        (tree / "boot" / f"config-{release}").write_text("CONFIG_PVH=y\n")
    modules = tree / "lib" / "modules" / release
    modules.mkdir(parents=True)
    (modules / "modules.order").write_text("")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", str(tree), str(directory / "k.deb")],
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run(["rm", "-rf", str(tree)], check=True)


class FakeDownloader:
    def __init__(self, *, broken: bool = False, fail: bool = False):
        self.calls: list[str] = []
        self.broken, self.fail = broken, fail

    def __call__(self, package: str, directory: Path) -> None:
        self.calls.append(package)
        if self.fail:
            (directory / "half.deb").write_bytes(b"half")
            raise FslabError(f"the download of {package} failed")
        build_package(directory, broken=self.broken)


def test_prepare_unpacks_indexes_and_marks_ready_once(tmp_path):
    fake = FakeDownloader()
    said: list[str] = []
    first = kernels.prepare(RELEASE, cache=tmp_path, say=said.append, download=fake)
    assert first.vmlinuz == tmp_path / RELEASE / "root" / "boot" / f"vmlinuz-{RELEASE}"
    assert (first.modules / "modules.dep").exists()  # depmod made the index the package leaves to postinst
    assert first.package_version == "6.1.999-1"
    assert first.config_sha256 == kernels.sha256_of(first.vmlinuz.parent / f"config-{RELEASE}")
    assert json.loads((tmp_path / RELEASE / kernels.READY).read_text())["version"] == "6.1.999-1"
    assert any("downloading" in line for line in said) and any("ready" in line for line in said)
    assert kernels.prepare(RELEASE, cache=tmp_path, download=fake) == first
    assert fake.calls == [f"linux-image-{RELEASE}"]  # the second found it ready
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{RELEASE}.lock", RELEASE]


@pytest.mark.parametrize("fake", [FakeDownloader(fail=True), FakeDownloader(broken=True)], ids=["download", "package"])
def test_a_failed_prepare_leaves_nothing_half_made_and_says_which_kernel(tmp_path, fake):
    with pytest.raises(FslabError, match=RELEASE.replace(".", r"\.").replace("+", r"\+") + "|linux-image"):
        kernels.prepare(RELEASE, cache=tmp_path, download=fake)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{RELEASE}.lock"]


def test_two_prepares_of_one_kernel_at_once_download_it_once(tmp_path):
    fake = FakeDownloader()
    results: list[kernels.PreparedKernel] = []
    threads = [
        threading.Thread(target=lambda: results.append(kernels.prepare(RELEASE, cache=tmp_path, download=fake)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(results) == 3 and len(set(results)) == 1
    assert fake.calls == [f"linux-image-{RELEASE}"]


# ---- QEMU's arguments ------------------------------------------------------------------------------------

KERNEL = kernels.PreparedKernel(RELEASE, "6.1.999-1", Path("/k/vmlinuz"), Path("/k/modules"), "ab" * 32)


def argv_of(disks, *, measured=True, fallback=None):
    return vm.qemu_argv(
        KERNEL, root=Path("/b/root"), initramfs=Path("/b/i.cpio"), console=Path("/b/console.log"), share=Path("/s"),
        disks=disks, spec=vm.VmSpec(measured=measured), accelerator="tcg", aio_fallback=fallback,
    )  # fmt: skip


def drives(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "-drive"]


def test_every_disk_is_virtio_blk_with_no_host_cache_and_io_uring_else_native_in_the_order_given():
    disks = (vm.Disk(Path("/w/scratch.img")), vm.Disk(Path("/w/a,b.img")))
    argv = argv_of(disks)
    assert drives(argv) == [
        "file=/w/scratch.img,format=raw,if=none,id=disk0,cache=none,aio=io_uring",
        "file=/w/a,,b.img,format=raw,if=none,id=disk1,cache=none,aio=io_uring",  # QEMU's comma, doubled
    ]
    devices = [argv[i + 1] for i, a in enumerate(argv) if a == "-device"]
    assert devices == ["virtio-blk-pci,drive=disk0", "virtio-blk-pci,drive=disk1"], "the scratch disk first: vda"
    assert drives(argv_of(disks[:1], fallback="native")) == [
        "file=/w/scratch.img,format=raw,if=none,id=disk0,cache=none,aio=native"
    ]
    argv = argv_of(())
    assert argv[argv.index("-accel") + 1] == "tcg" and argv[argv.index("-smp") + 1] == "1"
    assert "local,path=/b/root,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" in argv
    assert argv[argv.index("-name") + 1] == "fslab,debug-threads=on"  # vCPU threads named, for --tune-host's pinning


def test_a_users_device_reaches_qemu_as_its_descriptors_with_the_serial_the_guest_names_it_by():
    disks = (vm.Disk(Path("/w/scratch.img")), vm.Disk(Path("/dev/sdb"), serial="fslab-1", fds=(7, 8)))
    argv = argv_of(disks)
    assert "/dev/sdb" not in " ".join(argv), "QEMU opens nothing by name: it takes the descriptors fslab proved"
    at = argv.index("-add-fd")
    assert argv[at : at + 4] == ["-add-fd", "fd=7,set=2", "-add-fd", "fd=8,set=2"]
    assert drives(argv)[1] == (
        "file.driver=host_device,file.filename=/dev/fdset/2,format=raw,if=none,id=disk1,cache=none,aio=io_uring"
    )
    assert argv[argv.index("-device", argv.index("-device") + 1) + 1] == "virtio-blk-pci,drive=disk1,serial=fslab-1"


@pytest.mark.parametrize(
    ("disk", "said"),
    [
        (vm.Disk(Path("/dev/sdb"), serial="x,file=/etc/shadow", fds=(7, 8)), "serial 'x,file=/etc/shadow' is not"),
        (vm.Disk(Path("/dev/sdb"), serial="a" * 21, fds=(7, 8)), "is not 1 to 20"),
        (vm.Disk(Path("/dev/sdb"), cache="writeback", serial="fslab-1", fds=(7, 8)), "cache=none or directsync"),
    ],
    ids=["option-in-serial", "long-serial", "cached-device"],
)
def test_a_serial_that_is_not_plain_or_a_cached_device_is_refused(disk, said):
    with pytest.raises(FslabError, match=f"disk /dev/sdb: .*{re.escape(said)}"):
        argv_of((disk,), measured=False)


@pytest.mark.parametrize("cache", ["writeback", "unsafe", "writethrough"])
def test_a_host_cached_disk_is_refused_for_a_measured_boot_and_allowed_for_a_scratch_one(cache):
    disk = vm.Disk(Path("/w/d.img"), cache=cache, aio="threads")
    with pytest.raises(FslabError, match=f"cache={cache} .*measured=False"):
        argv_of((disk,))
    assert drives(argv_of((disk,), measured=False)) == [
        f"file=/w/d.img,format=raw,if=none,id=disk0,cache={cache},aio=threads"
    ]


@pytest.mark.parametrize(
    "disk", [vm.Disk(Path("/d"), cache="none,file=/etc/shadow"), vm.Disk(Path("/d"), aio="x"),
             vm.Disk(Path("/d"), cache="writeback", aio="native")], ids=["cache", "aio", "native-cached"],
)  # fmt: skip
def test_an_unknown_cache_or_aio_is_refused(disk):
    with pytest.raises(FslabError, match="disk /d"):
        argv_of((disk,), measured=False)


def test_the_guests_command_reaches_its_shell_quoted():
    command = "echo 'it''s' \"$HOME\"; touch /tmp/x$(id)"
    init = vm.guest_init(command, setup="modprobe raid1", cwd=Path("/w/a b"), python="/usr/bin/python3")
    assert f"bash -c {shlex.quote(command)} > /fslab-share/output.log" in init
    assert "cd '/w/a b'" in init and "\nmodprobe raid1\n" in init


def test_a_panic_ends_qemu_at_once_and_an_oops_panics():
    argv = argv_of(())
    assert "-no-reboot" in argv  # a panic's reboot (panic=-1: at once) is QEMU's exit
    assert {"panic=-1", "oops=panic"} <= set(argv[argv.index("-append") + 1].split())


def test_a_crash_is_said_by_the_first_line_of_its_report_and_the_function_it_was_in():
    console = (FIXTURES / "console-6.1.0-55-oops.txt").read_text()
    assert vm.crash_of(console) == (
        "BUG: kernel NULL pointer dereference, address: 0000000000000000 in ext4_mb_load_buddy_gfp+0xbc/0x380 [ext4]"
    )
    warned_before = "[    2.0] BUG: sleeping function called from invalid context at mm/slab.h:723\n" + console
    assert vm.crash_of(warned_before) == vm.crash_of(console), "the report that panicked"
    sysrq = (  # a panic of its own (not an oops's) is said by its line, whatever warning came before
        "[    3.5] BUG: sleeping function called from invalid context at mm/slab.h:723\n"
        "[    9.101] sysrq: Trigger a crash\n[    9.102] Kernel panic - not syncing: sysrq triggered crash\n"
    )
    assert vm.crash_of(sysrq) == "Kernel panic - not syncing: sysrq triggered crash"


def test_a_warning_or_a_bug_report_that_did_not_panic_is_no_crash():
    warned = (
        "[    3.5] BUG: sleeping function called from invalid context at mm/slab.h:723\n"
        "[    3.6] WARNING: CPU: 0 PID: 1 at fs/ext4/super.c:1 ext4_fill_super+0x1/0x2\n"
        "fslab-guest: BUG: printed by the guest's init, not its kernel\n"
    )
    assert vm.crash_of(warned) is None and vm.crash_of("") is None


def test_a_crash_line_reaches_the_user_without_its_control_characters():
    console = (
        "[ 1.0] BUG: unable to handle page fault \x1b]0;pwned\x07\n[ 1.1] Kernel panic - not syncing: Fatal exception\n"
    )
    assert vm.crash_of(console) == "BUG: unable to handle page fault \\x1b]0;pwned\\x07"


# ---- masking ---------------------------------------------------------------------------------------------


def test_secrets_are_covered_and_fslabs_own_paths_under_them_bound_back(tmp_path):
    home, etc = tmp_path / "root", tmp_path / "etc"
    for directory in (home / ".ssh", home / "checkout" / "src", home / "venv", etc / "ssh", tmp_path / "home"):
        directory.mkdir(parents=True)
    for file in (etc / "shadow", home / "checkout" / "fslab.db", home / ".pgpass"):
        file.write_text("secret")
    steps = masking.plan(
        keep=[home / "checkout", home / "checkout" / "src", home / "venv", tmp_path / "elsewhere", tmp_path],
        masked_directories=[str(home), str(tmp_path / "home"), str(etc / "ssh"), str(tmp_path / "absent")],
        masked_files=[str(etc / "shadow"), str(home / ".pgpass"), str(home / "checkout" / "fslab.db")],
    )
    assert steps["directories"] == [str(etc / "ssh"), str(tmp_path / "home"), str(home)]
    # bound back: what lies strictly inside a covered directory (not `tmp_path`, which holds them all)
    assert steps["keep"] == [str(home / "checkout"), str(home / "venv")]
    # /dev/null over: the shadow file, and the database inside a kept checkout; ~/.pgpass is covered already
    assert steps["files"] == [str(etc / "shadow"), str(home / "checkout" / "fslab.db")]


def test_the_export_lets_go_of_the_hosts_pseudo_filesystems_and_keeps_its_files_and_covers():
    e = "/var/tmp/fslab-boot-x/root"
    mountinfo = "\n".join(
        f"{n} 1 0:{n} / {point} rw - {fstype} {source} rw"
        for n, (point, fstype, source) in enumerate([
            ("/", "ext4", "/dev/vda"), ("/proc", "proc", "proc"), (e, "ext4", "/dev/vda"),
            (f"{e}/proc", "proc", "proc"), (f"{e}/proc/sys/fs/binfmt_misc", "binfmt_misc", "binfmt_misc"),
            (f"{e}/sys", "sysfs", "sysfs"), (f"{e}/sys/fs/cgroup", "tmpfs", "tmpfs"), (f"{e}/dev", "devtmpfs", "udev"),
            (f"{e}/run", "tmpfs", "tmpfs"), (f"{e}/run/user/0", "tmpfs", "tmpfs"), (f"{e}/tmp", "tmpfs", "tmpfs"),
            (f"{e}/usr", "xfs", "/dev/vdb"), (f"{e}/root", "tmpfs", "fslab-masked"),
            (f"{e}/etc/shadow", "devtmpfs", "udev"), (f"{e}/mnt/a\\040b", "debugfs", "debugfs"),
        ])
    )  # fmt: skip
    found = masking.host_state_mounts(mountinfo, e, covers=["/etc/shadow"])
    # the outermost alone (what is on them goes with them); QEMU's own /proc, /tmp's tmpfs, a real /usr,
    # a cover and a masked file's /dev/null stay
    assert found == [f"{e}/proc", f"{e}/sys", f"{e}/dev", f"{e}/run", f"{e}/mnt/a b"]
    assert f"{e}/etc/shadow" in masking.host_state_mounts(mountinfo, e), "a devtmpfs not a cover's is let go"


def test_the_default_masks_hold_the_homes_the_password_files_and_fslabs_database(tmp_path, monkeypatch):
    assert {"/root", "/home", "/etc/ssh", "/var/lib/postgresql", "/etc/fslab"} <= set(masking.MASKED_DIRECTORIES)
    assert {"/etc/shadow", "/etc/gshadow"} <= set(masking.MASKED_FILES)
    monkeypatch.setenv("FSLAB_DB", str(tmp_path / "results.db"))
    named = masking.databases([tmp_path / "team.db"])
    assert {str(tmp_path / "results.db"), str(tmp_path / "results.db-wal"), str(tmp_path / "team.db-shm")} <= set(named)


def test_qemu_runs_under_the_trampoline_in_a_private_mount_namespace(tmp_path):
    argv = masking.wrap(
        ["qemu-system-x86_64", "-m", "64"], keep=[tmp_path], stage=tmp_path / "stage", export=tmp_path / "root"
    )
    assert Path(argv[0]).name == "unshare" and argv[1:5] == ["--mount", "--propagation", "private", "--"]
    assert argv[6:9] == ["-I", "-m", "fslab.lab.masking"]
    steps = json.loads(argv[9])
    assert steps["stage"] == [str(tmp_path / "stage")] and "/root" in steps["directories"]
    assert steps["export"] == [os.path.realpath(tmp_path / "root")]
    assert argv[10] == "--" and Path(argv[11]).name == "qemu-system-x86_64" and argv[12:] == ["-m", "64"]


def test_the_trampoline_refuses_anything_but_qemu():
    done = subprocess.run(
        [vm.sys.executable, "-I", "-m", "fslab.lab.masking", "{}", "--", "/bin/sh", "-c", "id"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "runs QEMU alone" in done.stderr


# ---- the VM as a host, the initramfs, the kernel image, the accelerator ----------------------------------


def test_the_vm_is_a_host_named_by_its_release_as_the_guest_saw_itself(monkeypatch):
    monkeypatch.setattr(vm, "qemu_version", lambda: "QEMU emulator version 7.2.22")
    facts = vm.parse_facts(
        "release=6.1.0-99-amd64\nboot_id=b-1\ncpu_model=QEMU TCG CPU version 2.5+\ncpu_count=1\nmemory_kib=2012368\n"
    )
    host = vm.vm_host(KERNEL, facts, spec=vm.VmSpec(), accelerator="tcg", disks=(vm.Disk(Path("/x")),),
                      aio_fallback="native")  # fmt: skip
    assert (host.name, host.kernel, host.cpu_model, host.cpu_count, host.memory_bytes) == (
        RELEASE,
        RELEASE,
        "QEMU TCG CPU version 2.5+",
        1,
        2012368 * 1024,
    )
    assert (host.accelerator, host.kernel_package, host.kernel_config_sha256) == ("tcg", "6.1.999-1", "ab" * 32)
    assert (host.qemu_version, host.disk_cache, host.disk_aio) == ("QEMU emulator version 7.2.22", "none", "native")
    assert host.emulated and host.vm[0] == "tcg"


def test_early_modules_come_after_what_they_need(tmp_path):
    (tmp_path / "modules.dep").write_text(
        "kernel/fs/9p/9p.ko.xz: kernel/net/9p/9pnet.ko.xz kernel/fs/netfs/netfs.ko.xz\n"
        "kernel/net/9p/9pnet.ko.xz:\nkernel/fs/netfs/netfs.ko.xz:\n"
        "kernel/net/9p/9pnet_virtio.ko.xz: kernel/net/9p/9pnet.ko.xz\n"
    )
    assert vm.load_order(tmp_path, ("9pnet_virtio", "9p", "overlay")) == [
        "kernel/net/9p/9pnet.ko.xz", "kernel/net/9p/9pnet_virtio.ko.xz", "kernel/fs/netfs/netfs.ko.xz",
        "kernel/fs/9p/9p.ko.xz",
    ]  # fmt: skip


def test_a_kernel_image_cut_short_is_not_booted():
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    header[32:40] = (64).to_bytes(8, "little")  # e_phoff
    header[54:58] = (56).to_bytes(2, "little") + (1).to_bytes(2, "little")
    segment = (1).to_bytes(4, "little") + bytes(4) + (0).to_bytes(8, "little") + bytes(16) + (200).to_bytes(8, "little")
    whole = bytes(header) + segment.ljust(56, b"\0")
    assert vm.whole_elf(whole + bytes(200)) and not vm.whole_elf(whole + bytes(10)) and not vm.whole_elf(b"MZ")


def test_the_accelerator_is_probed_once_per_host_boot(tmp_path, monkeypatch):
    probes = []
    monkeypatch.setattr(vm, "probe_kvm", lambda kernel: probes.append(kernel) or False)
    monkeypatch.setattr(vm, "_host_boot_id", lambda: "boot-1")
    assert vm.accelerator(kernel=KERNEL, cache=tmp_path) == "tcg"
    assert vm.accelerator(kernel=KERNEL, cache=tmp_path) == "tcg" and len(probes) == 1
    monkeypatch.setattr(vm, "_host_boot_id", lambda: "boot-2")
    monkeypatch.setattr(vm, "probe_kvm", lambda kernel: True)
    assert vm.accelerator(kernel=KERNEL, cache=tmp_path) == "kvm"
    assert [p.name for p in tmp_path.iterdir()] == ["accelerator-boot-2.json"]


# ---- the commands ------------------------------------------------------------------------------------------


def test_fslab_lab_kernels_prints_release_flavour_version_and_cached(monkeypatch):
    fake_apt(monkeypatch)
    result = fslab_in_process("lab", "kernels", "--flavour", "cloud")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("kernel packages (17;") and lines[1].split() == ["release", "flavour", "package",
                                                                                 "version", "cached"]  # fmt: skip
    assert lines[3].split() == ["6.1.0-47-cloud-amd64", "cloud", "6.1.170-3"]
    assert all("cloud" in line for line in lines[3:])


@pytest.mark.parametrize("kernel", ["../x", "6.1.0-56-amd64;reboot"])
def test_fslab_lab_build_refuses_what_is_no_release_saying_how_to_list_them(kernel):
    result = fslab_in_process("lab", "build", kernel)
    assert (
        result.returncode == 2
        and "fslab lab kernels" in result.stderr
        and "not a Debian kernel release" in (result.stderr)
    )


# ---- a boot's own files ------------------------------------------------------------------------------------


def test_a_boots_directory_is_journalled_proven_and_removed_by_its_releaser_alone(tmp_path, monkeypatch):
    from fslab.core.errors import Refused
    from fslab.core.journal import Entry
    from fslab.core.workdir import Workdir

    monkeypatch.setattr(vm, "BOOT_TEMP", tmp_path)
    workdir = Workdir(tmp_path / "work")
    workdir.root.mkdir()
    with vm._boot_directory(workdir.journal) as directory:
        assert directory.parent == tmp_path and directory.is_dir()
        (directory / "scratch.img").write_bytes(b"x")
        entry = next(e for e in workdir.journal.read()[0] if e.kind == vm.BOOT_KIND)
        assert entry.ident == str(directory) and entry.proof["ino"] == directory.stat().st_ino
    assert not directory.exists() and not workdir.journal.outstanding()
    # a planted entry: another directory, or the right name with another identity, is left alone
    (tmp_path / "etc").mkdir()
    with pytest.raises(Refused, match="not a lab boot's directory"):
        vm.remove_boot_directory(Entry(vm.BOOT_KIND, str(tmp_path / "etc"), entry.proof), workdir)
    directory.mkdir()
    with pytest.raises(Refused, match="identity differs"):
        vm.remove_boot_directory(Entry(vm.BOOT_KIND, str(directory), entry.proof | {"ino": 1}), workdir)
    assert directory.is_dir() and (tmp_path / "etc").is_dir()


def test_what_the_guest_leaves_in_the_share_is_never_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("host secret")
    share = tmp_path / "share"
    share.mkdir()
    (share / "output.log").symlink_to(secret)
    (share / "init.sh").symlink_to(secret)
    assert vm._read(share / "output.log") == ""  # a symlink the guest made: not read through
    vm._write_own(share / "init.sh", "#!/bin/bash\n")
    assert secret.read_text() == "host secret" and not (share / "init.sh").is_symlink()
    assert (share / "init.sh").read_text() == "#!/bin/bash\n"
