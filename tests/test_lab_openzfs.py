"""The kernel lab's OpenZFS (fslab.lab.openzfs), pure lane: which OpenZFS fits which kernel, what a
study needs loaded in a guest, the guest memory its ARC cap needs, the cache's records, and the
guest setup's shell text, run by bash with stand-ins for insmod, modprobe and zpool, under hostile
names. The build itself, and the setup in a real guest, are tests/test_openzfs_guest.py's."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fslab.core.errors import FslabError, Refused
from fslab.lab import openzfs
from fslab.study import load_study

RELEASE = "6.1.0-56-amd64"


@pytest.mark.parametrize(
    ("release", "suite"),
    [
        ("6.1.0-56-amd64", "bookworm"),
        ("6.1.0-47-cloud-amd64", "bookworm"),
        ("6.12.117+deb12-amd64", "bookworm-backports"),
        ("6.12.100+deb12-cloud-amd64", "bookworm-backports"),
        ("6.14.3+bpo-amd64", "bookworm-backports"),
        ("5.10.0-33-amd64", "bookworm"),
    ],
)
def test_each_kernel_gets_the_openzfs_that_builds_for_it(release, suite):
    offer = openzfs.choose(release)
    assert offer is not None and offer.suite == suite
    assert offer.oldest <= openzfs.kernel_series(release) <= offer.newest
    assert offer.series == {"bookworm": "2.1", "bookworm-backports": "2.3"}[suite]


@pytest.mark.parametrize(
    ("release", "said"),
    [
        ("6.18.44-fc-v657", "no OpenZFS in the archive supports 6.18 (6.18.44-fc-v657)"),
        ("6.15.1-amd64", "no OpenZFS in the archive supports 6.15"),
        ("3.2.0-4-amd64", "no OpenZFS in the archive supports 3.2"),
        ("6.1.0-56-rt-amd64", "zfs-dkms does not build for PREEMPT_RT kernels"),
        ("6.12.117+deb12-rt-amd64", "zfs-dkms does not build for PREEMPT_RT kernels"),
    ],
)
def test_a_kernel_no_openzfs_fits_gets_none_and_a_plain_sentence(release, said, tmp_path):
    assert openzfs.choose(release) is None
    assert said in openzfs.no_openzfs(release)
    with pytest.raises(FslabError, match="no OpenZFS in the archive supports"):
        openzfs.prepare(release, cache=tmp_path / "cache", say=lambda _: None)
    assert not (tmp_path / "cache").exists(), "nothing downloaded, nothing made"


@pytest.mark.parametrize("release", ["../../etc", "6.1; rm -rf /", "-o6.1", "", "6.1.0 56", "6.1.0-56-amd64/..", "x6"])
def test_a_name_that_is_no_kernel_release_is_refused(release, tmp_path):
    with pytest.raises(Refused, match="is not a kernel release"):
        openzfs.prepare(release, cache=tmp_path, say=lambda _: None)
    with pytest.raises(Refused):
        openzfs.setup_script(release, {"openzfs"}, cache=tmp_path)


def fake_build(cache: Path, release: str = RELEASE, order: tuple[str, ...] = ("spl", "znvpair", "zfs")) -> Path:
    """A cache directory as prepare leaves it (modules and tools stand-ins), ready."""
    directory = cache / release
    (directory / "modules").mkdir(parents=True)
    for module in order:
        if module != "crc32c_generic":  # the kernel's own: not in the cache
            (directory / "modules" / f"{module}.ko").write_bytes(b"")
    sbin = directory / "root" / "sbin"
    sbin.mkdir(parents=True)
    (directory / "root" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    for tool in ("zpool", "zfs"):
        (sbin / tool).write_text(
            '#!/bin/sh\n[ "$1" = version ] && printf "zfs-2.1.11-1+deb12u1\\nzfs-kmod-2.1.11-1+deb12u1\\n"\n'
        )
        (sbin / tool).chmod(0o755)
    record = {
        "release": release,
        "version": "2.1.11",
        "package_version": "2.1.11-1+deb12u1",
        "suite": "bookworm",
        "load_order": list(order),
    }
    (directory / "ready").write_text(json.dumps(record))
    return directory


def test_a_ready_build_is_taken_as_it_is_without_a_command_run(tmp_path, monkeypatch):
    fake_build(tmp_path)

    def no_command(*args, **kwargs):
        raise AssertionError(f"ran {args}")

    monkeypatch.setattr(openzfs, "run", no_command)
    said: list[str] = []
    built = openzfs.prepare(RELEASE, cache=tmp_path, say=said.append)
    assert (built.version, built.package_version, built.suite) == ("2.1.11", "2.1.11-1+deb12u1", "bookworm")
    assert built.load_order == ("spl", "znvpair", "zfs") and built.modules == tmp_path / RELEASE / "modules"
    assert said == []
    assert openzfs.prepared("6.12.117+deb12-amd64", cache=tmp_path) is None, "another kernel is not built"


def test_a_planted_record_naming_no_module_is_refused(tmp_path):
    directory = fake_build(tmp_path, order=("spl", "zfs"))
    record = json.loads((directory / "ready").read_text())
    (directory / "ready").write_text(json.dumps(record | {"load_order": ["spl", "zfs; touch /tmp/pwned"]}))
    with pytest.raises(Refused, match="not a record fslab writes"):
        openzfs.prepared(RELEASE, cache=tmp_path)
    (directory / "ready").write_text(json.dumps(record | {"release": "6.12.117+deb12-amd64"}))
    with pytest.raises(Refused, match="not a record fslab writes"):
        openzfs.prepared(RELEASE, cache=tmp_path)


def test_needs_of_the_nas_stack_and_btrfs_vs_zfs_studies():
    nas = load_study("nas-stack", scale=0.02)
    assert openzfs.needs_of(nas) == {"openzfs", "md-raid1", "luks", "lvm"}
    assert openzfs.needs_of(load_study("btrfs-vs-zfs", scale=0.02)) == {"openzfs"}
    assert openzfs.needs_of(load_study("quick")) <= {"openzfs"}


def test_guest_memory_leaves_each_arc_cap_below_it():
    # nas-stack caps the ARC at 4 GiB: × 0.02, 82 MiB, within the default guest; at full size the
    # guest needs more than the cap (the module takes no zfs_arc_max of all its memory or more).
    assert openzfs.memory_mib(load_study("nas-stack", scale=0.02)) == openzfs.GUEST_MEMORY_MIB
    assert openzfs.memory_mib(load_study("nas-stack")) == 4096 + openzfs.ARC_HEADROOM_MIB
    assert openzfs.memory_mib(load_study("btrfs-vs-zfs")) == openzfs.GUEST_MEMORY_MIB, "no cap: the default"


def stand_ins(directory: Path, log: Path, *, failing: str = "") -> dict[str, str]:
    """insmod and modprobe that log their arguments (one line each, NUL-separated) and touch that
    does nothing: the environment the setup text runs in."""
    directory.mkdir()
    for tool in ("insmod", "modprobe", "touch"):
        status = 1 if tool == failing else 0
        (directory / tool).write_text(
            f'#!/bin/bash\nprintf "{tool}" >> {log}\nprintf "\\0%s" "$@" >> {log}\necho >> {log}\nexit {status}\n'
        )
        (directory / tool).chmod(0o755)
    return {"PATH": f"{directory}:/usr/bin:/bin", "HOME": str(directory)}


def logged(log: Path) -> list[list[str]]:
    return [line.split("\0") for line in log.read_text().splitlines()] if log.exists() else []


HOSTILE = 'c\'ache $(touch pwned) `touch pwned2`; touch pwned3 "x"'


def test_the_setup_loads_every_module_in_order_from_a_hostile_path_and_runs_nothing_else(tmp_path):
    cache = tmp_path / HOSTILE
    fake_build(cache, order=("spl", "crc32c_generic", "znvpair", "zfs"))
    script = openzfs.setup_script(RELEASE, {"openzfs", "md-raid1", "luks"}, cache=cache)
    log = tmp_path / "log"
    env = stand_ins(tmp_path / "bin", log)
    done = subprocess.run(
        ["bash", "-c", script + 'echo "PATH=$PATH"; echo "LD=$LD_LIBRARY_PATH"'],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not any(p.name.startswith("pwned") for p in tmp_path.iterdir()), "nothing in the names ran"
    calls = logged(log)
    modules = cache / RELEASE / "modules"
    layers = [["modprobe", "--", m] for m in ("dm_mod", "dm_crypt", "md_mod", "raid1")]
    if Path("/sys/module/zfs").exists():  # a host with the module loaded: the setup loads none
        assert calls[:4] == layers and all(c[0] != "insmod" for c in calls)
    else:
        assert calls[:8] == [
            *layers,
            ["insmod", str(modules / "spl.ko")],
            ["modprobe", "--", "crc32c_generic"],
            ["insmod", str(modules / "znvpair.ko")],
            ["insmod", str(modules / "zfs.ko"), f"zfs_arc_min={32 * 2**20}"],
        ]
    assert f"PATH={cache / RELEASE / 'root' / 'sbin'}:" in done.stdout
    assert f"LD={cache / RELEASE / 'root' / 'lib' / 'x86_64-linux-gnu'}\n" in done.stdout


@pytest.mark.skipif(Path("/sys/module/zfs").exists(), reason="the setup loads no module where one is loaded")
def test_a_module_that_does_not_load_is_said_and_nothing_after_it_is_done(tmp_path):
    cache = tmp_path / "cache"
    fake_build(cache)
    env = stand_ins(tmp_path / "bin", tmp_path / "log", failing="insmod")
    script = (
        openzfs.setup_script(RELEASE, {"openzfs"}, cache=cache) + 'echo "study ran: $FSLAB_ZFS_KERNEL_ONLY $PATH"\n'
    )
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)
    # The shell goes on (vm.boot runs the setup in the guest's init): the study's fslab finds no
    # ZFS, zfs-fuse ruled out, and says its targets are unsupported.
    assert done.returncode == 0 and f"study ran: 1 {env['PATH']}\n" in done.stdout, "PATH as it was"
    assert f"fslab setup: insmod {cache / RELEASE / 'modules' / 'spl.ko'} failed" in done.stderr
    assert len(logged(tmp_path / "log")) == 1, "nothing after the module that failed"


def test_the_setup_refuses_zpool_of_another_zfs(tmp_path):
    cache = tmp_path / "cache"
    fake_build(cache)
    (cache / RELEASE / "root" / "sbin" / "zpool").unlink()  # PATH's next zpool (zfs-fuse's, say) answers
    other = tmp_path / "other"
    other.mkdir()
    (other / "zpool").write_text("#!/bin/sh\necho zfs-fuse\n")
    (other / "zpool").chmod(0o755)
    env = stand_ins(tmp_path / "bin", tmp_path / "log")
    env["PATH"] += f":{other}"
    script = openzfs.setup_script(RELEASE, {"openzfs"}, cache=cache)
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "fslab setup: zpool is not" in done.stderr


def test_the_setup_refuses_what_it_does_not_know_and_a_build_that_is_not_there(tmp_path):
    with pytest.raises(Refused, match="neither OpenZFS nor a layer"):
        openzfs.setup_script(RELEASE, {"lvm", "dm_crypt; reboot"}, cache=tmp_path)
    with pytest.raises(FslabError, match=f"OpenZFS is not built for {RELEASE}.*fslab lab build {RELEASE}"):
        openzfs.setup_script(RELEASE, {"openzfs"}, cache=tmp_path)
    assert "insmod" not in openzfs.setup_script(RELEASE, {"lvm"}, cache=tmp_path), "no OpenZFS asked, none needed"
    assert os.listdir(tmp_path) == []


ZFS_STUDY = """\
[study]
name = "z"
repetitions = 1
image_size = "512MiB"

[fio]
size = "8MiB"
runtime = "1s"

[[workload]]
name = "w"
rw = "read"
bs = "1m"

[[target]]
name = "z"
filesystem = "zfs"
arc_max = "256MiB"

[[target]]
name = "e"
filesystem = "ext4"
layers = ["luks"]
"""


def test_a_boot_of_a_kernel_no_openzfs_fits_leaves_it_out_and_says_so(tmp_path, monkeypatch):
    from fslab.study import parse_study

    study = parse_study(ZFS_STUDY, "z.toml", base_dir=tmp_path)
    monkeypatch.setattr(openzfs, "prepare", lambda *a, **k: pytest.fail("no build for a kernel none fits"))
    setup = openzfs.for_guest(study, "6.18.44-fc-v657", cache=tmp_path, say=lambda _: None)
    assert setup.notes == (
        "no OpenZFS in the archive supports 6.18 (6.18.44-fc-v657): bookworm's zfs-dkms 2.1 builds for 3.10 to 6.2; "
        "bookworm-backports's zfs-dkms 2.3 builds for 4.18 to 6.14; its ZFS targets are unsupported there",
    )
    assert "insmod" not in setup.script and "modprobe -- dm_crypt" in setup.script
    assert "export FSLAB_ZFS_KERNEL_ONLY=1" in setup.script, "the guest's fslab finds no ZFS: never zfs-fuse"
    assert setup.memory_mib == openzfs.GUEST_MEMORY_MIB


def test_a_boot_of_a_kernel_openzfs_fits_has_it_built_and_loaded(tmp_path, monkeypatch):
    from fslab.study import parse_study

    fake_build(tmp_path)
    built: list[str] = []
    monkeypatch.setattr(openzfs, "prepare", lambda release, **_: built.append(release))
    setup = openzfs.for_guest(parse_study(ZFS_STUDY, "z.toml", base_dir=tmp_path), RELEASE, cache=tmp_path)
    assert built == [RELEASE] and setup.notes == ()
    assert f"insmod {tmp_path / RELEASE / 'modules' / 'zfs.ko'} zfs_arc_min=" in setup.script


def test_with_kernel_only_set_zfs_fuse_is_no_engine(monkeypatch):
    from fslab.filesystems import zfs_engine

    monkeypatch.setattr(zfs_engine, "KERNEL_MODULE", Path("/nonexistent/zfs"))
    monkeypatch.setattr(zfs_engine.shutil, "which", lambda name: f"/usr/sbin/{name}")  # zfs-fuse installed
    monkeypatch.setattr(zfs_engine, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "0.7.0", ""))
    monkeypatch.delenv(zfs_engine.KERNEL_ONLY, raising=False)
    found = zfs_engine.engine()
    assert found is not None and found.fuse and zfs_engine.runs_on_fuse()
    monkeypatch.setenv(zfs_engine.KERNEL_ONLY, "1")
    assert zfs_engine.engine() is None and not zfs_engine.runs_on_fuse()


def test_the_lab_build_step_says_when_no_openzfs_fits_and_builds_none(tmp_path):
    said: list[str] = []
    assert openzfs.prepare_if_fits("6.18.44-fc-v657", cache=tmp_path / "c", say=said.append) is None
    assert said == [openzfs.no_openzfs("6.18.44-fc-v657")] and not (tmp_path / "c").exists()
    fake_build(tmp_path)
    built = openzfs.prepare_if_fits(RELEASE, cache=tmp_path, say=said.append)
    assert built is not None and built.release == RELEASE


def test_a_boot_of_a_kernel_openzfs_cannot_be_built_for_leaves_it_out_and_says_why(tmp_path, monkeypatch):
    from fslab.study import parse_study

    def no_headers(release, **_):
        raise FslabError(f"the configured archive has no linux-headers-{release} to build OpenZFS with")

    monkeypatch.setattr(openzfs, "prepare", no_headers)
    setup = openzfs.for_guest(
        parse_study(ZFS_STUDY, "z.toml", base_dir=tmp_path), "6.12.100+deb12-amd64", cache=tmp_path
    )
    assert setup.notes == (
        "OpenZFS could not be built for 6.12.100+deb12-amd64 (the configured archive has no "
        "linux-headers-6.12.100+deb12-amd64 to build OpenZFS with); its ZFS targets are unsupported there",
    )
    assert "insmod" not in setup.script and "FSLAB_ZFS_KERNEL_ONLY=1" in setup.script


def test_each_boot_of_a_study_over_kernels_gets_the_setup_memory_disk_and_time_its_study_needs(tmp_path, monkeypatch):
    from fslab.lab import vm
    from test_lab_study import A, FakeLab, _run

    asked: list[tuple[str, list[str]]] = []

    def for_guest(study, release, **_):  # noqa: ANN001, ANN202
        asked.append((release, [t.name for t in study.targets]))
        return openzfs.GuestSetup("echo set up", 3072, ("a note",), scratch_bytes=5 * 2**30, timeout=1234.0)

    monkeypatch.setattr(openzfs, "for_guest", for_guest)
    lab = FakeLab(tmp_path)
    _run(tmp_path, lab, [A], boots=2)
    assert asked == [(A, ["ext4", "btrfs", "(ceiling)"])] * 2, "the study as the guest runs it"
    given = [{k: v for k, v in options.items() if k != "journal"} for options in lab.options]  # (test_lab_study's)
    assert (
        given
        == [{"setup": "echo set up", "spec": vm.VmSpec(memory_mib=3072), "timeout": 1234.0, "scratch_bytes": 5 * 2**30}]
        * 2
    )


def test_the_unpacked_headers_include_their_common_half_where_they_were_unpacked(tmp_path):
    release = "6.12.117+deb12-amd64"
    arch = tmp_path / "usr" / "src" / f"linux-headers-{release}"
    arch.mkdir(parents=True)
    (arch / "Makefile").write_text("include /usr/src/linux-headers-6.12.117+deb12-common/Makefile\n")
    common, obj = openzfs._headers_tree(tmp_path, release)
    assert (common, obj) == (tmp_path / "usr" / "src" / "linux-headers-6.12.117+deb12-common", arch)
    assert (arch / "Makefile").read_text() == f"include {common}/Makefile\n"
    (arch / "Makefile").write_text("include /usr/src/x-common/Makefile\n$(shell reboot)\n")
    with pytest.raises(FslabError, match="not the one-line include fslab expects"):
        openzfs._headers_tree(tmp_path, release)


def test_openzfs_own_libraries_are_the_dependencies_of_exactly_its_version():
    depends = (
        "libc6 (>= 2.34), libnvpair3linux (= 2.3.2-2~bpo12+2), libuutil3linux (= 2.3.2-2~bpo12+2), "
        "libzfs6linux (= 2.3.2-2~bpo12+2), libzpool6linux (= 2.3.2-2~bpo12+2), python3 | python3-minimal, "
        "libblkid1 (>= 2.16), zfs-modules | zfs-dkms (= 2.3.1)"
    )
    assert openzfs._exact_dependencies(depends, "2.3.2-2~bpo12+2") == [
        "libnvpair3linux",
        "libuutil3linux",
        "libzfs6linux",
        "libzpool6linux",
    ]
