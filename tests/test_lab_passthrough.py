"""A user's device passed through to a lab VM (`fslab run STUDY --kernel K --destroy-data DEVICE`,
lab/passthrough.py): the study file the guest reads, and — with real loop devices standing for the
user's disks and a stand-in VM (test_lab_study.FakeLab) — the host's guard before planning and again
right before each boot, on the very descriptors QEMU gets. A real boot under QEMU at the end."""

from __future__ import annotations

import fcntl
import mmap
import os
import re
import struct
import subprocess
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ran_study
from fslab.core.block_devices import confirm, opened_for_guest
from fslab.core.errors import FslabError
from fslab.core.identity import disk_proof, is_disk
from fslab.lab import passthrough, study as lab_study, vm
from fslab.model.ceiling import with_ceiling
from fslab.results import ResultsDB
from fslab.running.plan import Repetitions
from fslab.study import builtin_studies, load_study, parse_study
from test_block_devices import backing_of, plug, remove_loop, users_disk
from test_lab_study import A, FakeLab, Told

STUDY = """\
[study]
name = "passed"
repetitions = 2
image_fill = "sparse"

[[workload]]
name = "seq_write"
rw = "write"
bs = "1m"
direct = 1
size = "32MiB"
runtime = "1s"

[[target]]
name = "mine"
filesystem = "ext4"
device = "{device}"
"""


# ---- the guest's study file (pure) -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(builtin_studies()))
def test_the_toml_fslab_writes_for_the_guest_reads_back_as_every_built_in_study(name):
    document = tomllib.loads(load_study(name).source)
    assert tomllib.loads(passthrough.toml_text(document)) == document


def test_strings_with_quotes_escapes_control_characters_and_odd_keys_read_back_as_they_were():
    document = {
        "study": {"name": 'a "b" \\ c\té\x7f\x01', "weird key.with dot": 1.5e-9, "inf": float("inf"), "on": True},
        "target": [{"device": "/dev/disk/by-id/x", "devices": ["/dev/a", "/dev/b"], "zfs": {"compression": "lz4"}}],
        "top": [1, "two", [3.0]],
    }
    assert tomllib.loads(passthrough.toml_text(document)) == document


def test_the_guest_reads_the_study_with_each_device_its_by_id_name(tmp_path):
    text = STUDY.format(device="/dev/sdz") + '\n[[target]]\nfilesystem = "btrfs"\ndevices = ["/dev/sdz", "/dev/sdy"]\n'
    study = parse_study(text, "s.toml", base_dir=tmp_path)
    fake = passthrough.Passthrough(
        {
            "/dev/sdz": passthrough.Passed(_device("/dev/sdz", 1), "fslab-1"),
            "/dev/sdy": passthrough.Passed(_device("/dev/sdy", 2), "fslab-2"),
        }
    )
    guest = parse_study(fake.guest_source(study), "s.toml", base_dir=tmp_path)
    assert [t.named for t in guest.targets] == [
        ("/dev/disk/by-id/virtio-fslab-1",),
        ("/dev/disk/by-id/virtio-fslab-1", "/dev/disk/by-id/virtio-fslab-2"),
    ]
    assert fake.guest_flags() == [
        "--destroy-data", "/dev/disk/by-id/virtio-fslab-1", "--destroy-data", "/dev/disk/by-id/virtio-fslab-2",
    ]  # fmt: skip
    assert fake.host_names()["(ceiling: /dev/disk/by-id/virtio-fslab-2)"] == "(ceiling: /dev/sdy)"
    assert passthrough.Passthrough().guest_source(study) == study.source, "a study naming no device goes as written"


def test_a_value_the_guests_study_file_cannot_hold_is_refused_when_planned_with_the_other_problems(tmp_path):
    """Fails on the old code: refused only at the first boot, the work directory claimed by then."""
    study = parse_study(STUDY.format(device="/dev/fslab-no-such-disk"), "s.toml", base_dir=tmp_path)
    dated = replace(study, source=study.source + "\n[note]\nwhen = 2026-11-29\n")  # a value toml_text has no form for
    _, problems = passthrough.plan(dated, ["/dev/fslab-no-such-disk"])
    assert any("/dev/fslab-no-such-disk" in p and "not a block device" in p for p in problems), problems
    assert any(p.startswith("s.toml: a study file's value datetime.date(2026, 11, 29) (date) cannot be written")
               for p in problems), problems  # fmt: skip
    assert passthrough.plan(study, ["/dev/fslab-no-such-disk"])[1] == problems[:1], (
        "a study it can write: no such problem"
    )


def _device(node: str, number: int):  # noqa: ANN202
    from fslab.core.block_devices import BlockDevice

    return BlockDevice(node, node, number)


def test_the_guest_names_a_disk_with_a_serial_by_id_as_udev_would():
    init = vm.guest_init("true", setup="", cwd=Path("/"), python="/usr/bin/python3")
    assert 'ln -sfn "../../${disk##*/}" "/dev/disk/by-id/virtio-$id"' in init
    assert init.index("/dev/disk/by-id") < init.index("mark setup"), "made before fslab's setup and command"


# ---- the host's guard, with real loop devices and a stand-in VM -------------------------------------


class Watching(FakeLab):
    """FakeLab, and what the boot was given: each passed disk's descriptors, checked then."""

    seen: list[dict]

    def boot(self, kernel, command: str, *, share: Path, **options):  # noqa: ANN001, ANN201
        if not hasattr(self, "seen"):
            self.seen = []
        for disk in options["spec"].disks:
            self.seen.append(
                {
                    "disk": disk,
                    "rdev": [os.fstat(fd).st_rdev for fd in disk.fds],
                    "modes": [fcntl.fcntl(fd, fcntl.F_GETFL) & (os.O_ACCMODE | os.O_DIRECT) for fd in disk.fds],
                    "study": (share / "study.toml").read_text(),
                    "mount": subprocess.run(
                        ["mount", "-o", "ro", str(disk.image), str(self.tmp / "try")], capture_output=True, text=True
                    ),
                }
            )
            if self.seen[-1]["mount"].returncode == 0:  # the guard failed: the test's own mount undone
                subprocess.run(["umount", str(self.tmp / "try")], check=True)
        return super().boot(kernel, command, share=share, **options)


def _run(tmp_path: Path, lab: FakeLab, device: str, flags: list[str], *, boots: int = 1, observer=None):  # noqa: ANN001, ANN202
    path = tmp_path / "passed.toml"
    path.write_text(STUDY.format(device=device))
    study = with_ceiling(load_study(path), False, set())
    db = ResultsDB(str(tmp_path / "host.db"))
    study_run = lab_study.run_on_kernels(
        study, [A], results=db, workdir=tmp_path / "wd", boots=boots, observer=observer, prepare=lab.prepare,
        boot=lab.boot, repetitions=Repetitions(1), seed=7, destroy_flags=flags,
    )  # fmt: skip
    return db, study_run


def _boots(lab: FakeLab) -> list:
    return [c for c in lab.calls if c[0] == "boot"]


@pytest.mark.root
def test_a_confirmed_device_reaches_the_vm_as_descriptors_proven_held_exclusively_and_named_by_serial(tmp_path):
    (tmp_path / "try").mkdir()
    lab, told = Watching(tmp_path), Told()
    with users_disk() as disk:
        number = os.stat(disk.device).st_rdev
        db, study_run = _run(tmp_path, lab, disk.device, [disk.device], boots=2, observer=told)
        assert len(_boots(lab)) == 2
        first = lab.seen[0]
        assert first["disk"].serial == "fslab-1" and first["disk"].image == Path(disk.device)
        assert first["rdev"] == [number, number], "QEMU gets descriptors of that very device"
        assert sorted(first["modes"]) == sorted([os.O_RDWR | os.O_DIRECT, os.O_RDONLY | os.O_DIRECT])
        assert first["mount"].returncode != 0, "while the VM holds it, the kernel lets nothing mount it"
        assert 'device = "/dev/disk/by-id/virtio-fslab-1"' in first["study"]
        assert "--destroy-data /dev/disk/by-id/virtio-fslab-1" in lab.booted[0]["command"]
        said = [line for line in told.lines if line.startswith("about to destroy")]
        assert len(said) == 1, "said once: the second boot finds what the first left"
        assert said[0].startswith(
            f"about to destroy on {disk.device} (the VM's /dev/disk/by-id/virtio-fslab-1): ext4 ("
        )
        targets = {r["target"] for r in db.runs(study_run)}
        assert targets == {"mine", f"(ceiling: {disk.device})"}, "the guest's ceiling stored under the study's name"
        os.close(os.open(disk.device, os.O_RDONLY | os.O_EXCL))  # let go of after the boots: held by none


class LeavesLayers(FakeLab):
    """FakeLab whose guest leaves layers the host would assemble (its teardown skipped, as when it
    crashes): a LUKS2 header at the start (cryptsetup's own), an md 0.90 superblock at the end."""

    found: list[str]

    def boot(self, kernel, command: str, *, share: Path, **options):  # noqa: ANN001, ANN201
        for disk in options["spec"].disks:
            luks = self.tmp / "luks.img"
            with open(luks, "wb") as f:
                f.truncate(32 * 2**20)
            subprocess.run(
                ["cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2", "--pbkdf", "pbkdf2",
                 "--pbkdf-force-iterations", "1000", "--key-file", "-", str(luks)],
                input=b"key", check=True, capture_output=True,
            )  # fmt: skip
            size = os.lseek(disk.fds[0], 0, os.SEEK_END)
            block = mmap.mmap(-1, 2**20)  # page-aligned, as O_DIRECT needs
            block[:] = luks.read_bytes()[: 2**20]
            os.pwrite(disk.fds[0], block, 0)
            block[:] = bytes(2**20)  # md 0.90: its magic and version in the last 64 KiB-aligned 64 KiB
            block[:16] = struct.pack("<4I", 0xA92B4EFC, 0, 90, 0)
            block[20:24] = os.urandom(4)  # its set's UUID, in part
            with memoryview(block) as view:  # the mmap's own memory, not a copy
                os.pwrite(disk.fds[0], view[: 2**16], (size & ~(2**16 - 1)) - 2**16)
            block.close()
            self.found = _found(disk.image)
        return super().boot(kernel, command, share=share, **options)


def _found(device: Path | str) -> list[str]:
    """The types wipefs finds on the device (its listing only)."""
    listing = subprocess.run(["wipefs", "--no-act", "--noheadings", "--output", "TYPE", str(device)],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
    return sorted(set(listing.split()))


@pytest.mark.root
def test_what_a_guest_left_on_a_device_is_wiped_before_the_host_lets_go_of_it(tmp_path):
    """Fails on the old code: the descriptors closed with the guest's md and LUKS there, for the
    host's udev to assemble once O_EXCL was released."""
    lab, told = LeavesLayers(tmp_path), Told()
    with users_disk() as disk:
        _run(tmp_path, lab, disk.device, [disk.device], boots=2, observer=told)
        assert len(_boots(lab)) == 2 and lab.found == ["crypto_LUKS", "linux_raid_member"], "the guest's, found"
        assert _found(disk.device) == [], "nothing left for the host to assemble"
        probed = subprocess.run(["blkid", "-p", disk.device], capture_output=True, text=True)
        assert probed.returncode == 2, probed.stdout  # 2: nothing found
        wiped = [line for line in told.lines if line.startswith("wiped")]
        assert wiped == [
            f"wiped {disk.device}'s first and last 16 MiB after the VM, so that this host assembles no md, LVM, "
            "LUKS, bcache or ZFS the guest left there"
        ], "said once"


@pytest.mark.root
def test_a_device_not_confirmed_or_confirmed_through_a_symlink_to_another_is_refused_before_anything(tmp_path):
    lab = FakeLab(tmp_path)
    with users_disk() as disk, users_disk() as other:
        link = tmp_path / "looks-like-mine"
        link.symlink_to(other.device)
        for flags in ([], [str(link)], [other.device]):
            with pytest.raises(FslabError, match=f"{re.escape(disk.device)}: fslab would destroy all data on it.*"
                               f"--destroy-data {re.escape(disk.device)}"):  # fmt: skip
                _run(tmp_path, lab, disk.device, flags)
        assert lab.calls == [] and disk.intact() and other.intact()


@pytest.mark.root
def test_a_mounted_device_is_refused_when_planned_and_when_mounted_between_planning_and_the_boot(tmp_path):
    lab = FakeLab(tmp_path)
    with users_disk() as disk:
        with disk.mounted() as where:
            with pytest.raises(FslabError, match=f"{re.escape(disk.device)}: {re.escape(disk.device)} is mounted at "
                               f"{re.escape(str(where))}"):  # fmt: skip
                _run(tmp_path, lab, disk.device, [disk.device])
        assert lab.calls == []

        class MountsMeanwhile(FakeLab):
            def prepare(self, release, *, say=None):  # noqa: ANN001, ANN201 (between planning and the boot)
                self.held = disk.mounted()
                self.where = self.held.__enter__()
                return super().prepare(release, say=say)

        late = MountsMeanwhile(tmp_path)
        try:
            with pytest.raises(FslabError, match=f"refusing to pass {re.escape(disk.device)} to the VM.*is mounted at "
                               ".*Unmount it or stop what uses it, then run again"):  # fmt: skip
                _run(tmp_path, late, disk.device, [disk.device])
        finally:
            late.held.__exit__(None, None, None)
        assert _boots(late) == [] and disk.intact()


@pytest.mark.root
def test_a_loop_device_reattached_to_another_file_between_planning_and_the_boot_is_refused(tmp_path):
    """Same device number, another backing file (and diskseq): the kernel's records tell it."""
    with users_disk(own_number=True) as disk:
        stranger = tmp_path / "stranger.img"
        stranger.write_bytes(b"\0" * 2**20)

        class Reattaches(FakeLab):
            def prepare(self, release, *, say=None):  # noqa: ANN001, ANN201
                subprocess.run(["losetup", "--detach", disk.device], check=True)
                plug(disk.device, stranger)
                return super().prepare(release, say=say)

        lab = Reattaches(tmp_path)
        try:
            with pytest.raises(FslabError, match=f"{re.escape(disk.device)} is no longer the device you confirmed with "
                               f"--destroy-data {re.escape(disk.device)} .*run again"):  # fmt: skip
                _run(tmp_path, lab, disk.device, [disk.device])
            assert _boots(lab) == [] and stranger.read_bytes() == b"\0" * 2**20
            assert ResultsDB(str(tmp_path / "host.db")).study_run()["status"] == "interrupted", "the study run stops"
        finally:
            if backing_of(disk.device) == stranger:
                subprocess.run(["losetup", "--detach", disk.device], check=True)
                plug(disk.device, disk.image)  # for users_disk's own check and clean-up


@pytest.mark.root
def test_a_loop_device_detached_and_removed_between_planning_and_the_boot_is_refused_not_a_traceback(tmp_path):
    """Fails on the old code: its sysfs directory read for `refusals` was gone (FileNotFoundError)."""
    with users_disk() as disk:

        class Removes(FakeLab):
            def prepare(self, release, *, say=None):  # noqa: ANN001, ANN201 (the device gone, as unplugged)
                subprocess.run(["losetup", "--detach", disk.device], check=True)
                remove_loop(disk.device)
                return super().prepare(release, say=say)

        lab = Removes(tmp_path)
        with pytest.raises(FslabError, match=f"{re.escape(disk.device)} is no longer the device you confirmed with "
                           f"--destroy-data {re.escape(disk.device)} .*unplugged.*run again"):  # fmt: skip
            _run(tmp_path, lab, disk.device, [disk.device])
        assert _boots(lab) == []


@pytest.mark.root
def test_the_backing_file_the_kernel_records_is_part_of_a_loop_devices_proof(tmp_path):
    """A proof whose number and diskseq still hold but whose backing file differs proves nothing
    (LOOP_CHANGE_FD swaps a read-only loop device's file and keeps its diskseq)."""
    with users_disk() as disk:
        device = confirm(disk.device, [disk.device])
        assert device.proof is not None and device.proof["backing"] != "none"
        forged = device.proof | {"backing": "0:0:1"}
        fd = os.open(disk.device, os.O_RDONLY)
        try:
            assert is_disk(fd, device.proof) and not is_disk(fd, forged)
            assert not is_disk(fd, device.proof | {"diskseq": device.proof["diskseq"] + 1})
        finally:
            os.close(fd)
        assert device.still_confirmed() and disk_proof(device.number) == device.proof
        with pytest.raises(FslabError, match="is no longer the device you confirmed"):
            with opened_for_guest(type(device)(device.named, device.node, device.number, forged)):
                pass


@pytest.mark.root
def test_the_plan_over_kernels_of_a_study_naming_a_device_checks_the_flag_confirming_it(tmp_path, monkeypatch):
    """Fails on the old code: --plan --kernel never passed --destroy-data on, so refused every such study."""
    from conftest import fslab_in_process
    from fslab.lab import kernels

    monkeypatch.setattr(kernels, "KERNELS", tmp_path / "kernels")  # none prepared, none offered: said, not fetched
    monkeypatch.setattr(kernels, "offered", lambda cache: [])
    monkeypatch.setattr(vm, "known_accelerator", lambda: "tcg")
    with users_disk() as disk:
        study = tmp_path / "passed.toml"
        study.write_text(STUDY.format(device=disk.device))
        given = ("run", str(study), "--plan", "--kernel", A, "--db", str(tmp_path / "r.db"), "--workdir",
                 str(tmp_path / "wd"))  # fmt: skip
        planned = fslab_in_process(*given, "--destroy-data", disk.device)
        assert planned.returncode == 0, planned.stdout + planned.stderr
        said = f"device {disk.device}: each VM's /dev/disk/by-id/virtio-fslab-1; all data on it is destroyed"
        assert said in planned.stdout.splitlines()
        refused = fslab_in_process(*given)
        assert refused.returncode != 0
        assert (refused.stdout + refused.stderr).count(f"--destroy-data {disk.device}") == 1, "said once"
        assert disk.intact() and not (tmp_path / "r.db").exists() and not (tmp_path / "wd").exists()


# ---- the real thing: a loop device through to a TCG boot --------------------------------------------

GUEST_KERNEL = "6.1.0-54-amd64"  # prepared by test_lab_study_guest's run (fetched once, cached)


@pytest.mark.root
@pytest.mark.guest
@pytest.mark.long  # 3 min here beside other work (a TCG boot, fslab's start and one run in it)
def test_a_loop_device_passed_through_runs_a_short_study_in_a_real_vm(tmp_path, workdir):
    reason = vm.unavailable_reason()
    if reason:
        pytest.skip(f"no lab VM here: {reason}")
    with users_disk() as disk:
        text = STUDY.format(device=disk.device).replace("repetitions = 2", "repetitions = 1")
        result, results, study_run = ran_study(
            tmp_path, text, workdir, "--kernel", GUEST_KERNEL, "--destroy-data", disk.device, "--no-ceiling"
        )
        [run] = results.runs(study_run)
        assert run["status"] == "ok" and run["host"] == GUEST_KERNEL, result.stdout
        [facts] = run["device_facts"]
        assert facts["serial"] == "fslab-1" and facts["device"].startswith("/dev/vd"), "the guest's own view of it"
        said = result.stdout + result.stderr
        assert f"about to destroy on {disk.device} (the VM's /dev/disk/by-id/virtio-fslab-1): ext4" in said
        assert disk.read_file() is None, "the guest's fslab wiped it"
        assert subprocess.run(["blkid", "-p", disk.device]).returncode == 2, "and the host what the guest left there"
