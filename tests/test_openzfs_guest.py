"""ZFS on the OpenZFS kernel module: zvol targets, the ARC cap and native encryption, in a QEMU
guest.

This machine's ZFS is zfs-fuse, which has no zvols, no zfs_arc_max and no encryption. OpenZFS's tools
conflict with zfs-fuse, so the kernel lab (fslab.lab.openzfs.prepare, run by `make test`) unpacks
them and builds the modules for the guest's kernel into a cache; the guest runs the lab's setup
(openzfs.setup_script: the modules loaded, the tools first on its PATH) before the study. No udev
runs in the guest, so fslab must find the volume's /dev/zd* device by asking it for its dataset name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fslab.lab import openzfs
from fslab.results import ResultsDB
from fslab.study import parse_study
from guest import SCRATCH, GuestJob, guest_kernel, result_of, unavailable_reason

REPO = Path(__file__).resolve().parent.parent

STUDY = """\
[study]
name = "openzfs"
repetitions = 1
image_size = "512MiB"
image_fill = "sparse"

[fio]
size = "8MiB"  # what a run reads is laid out first: each MiB costs the guest emulated CPU
runtime = "1s"

# One run a target (each costs the guest seconds of emulated CPU): the encrypted dataset writes,
# the others read.
[[workload]]
name = "seq_write"
rw = "write"
bs = "1m"
iodepth = 16
targets = ["encrypted"]

[[workload]]
name = "rand_read"
rw = "randread"
bs = "4k"
iodepth = 16
targets = ["zvol", "dataset-arc"]

[[target]]
name = "zvol"
filesystem = "zfs"
zvol = true
properties = { volblocksize = "16k" }

[[target]]
name = "dataset-arc"
filesystem = "zfs"
arc_max = "256MiB"
properties = { recordsize = "16k", compression = "off" }

[[target]]
name = "encrypted"
filesystem = "zfs"
properties = { encryption = "aes-256-gcm", compression = "off" }
"""

# After the lab's setup (openzfs.setup_script), which loaded the modules and put the tools first.
IN_GUEST = """
c_max() {{ awk '$1=="c_max" {{print $3}}' /proc/spl/kstat/zfs/arcstats; }}
echo "module: $(cat /sys/module/zfs/version) zpool: $(command -v zpool)"
echo "c_max before: $(c_max)"
.venv/bin/fslab run /fslab-share/study.toml --no-ceiling --db {scratch}/results.db --workdir {scratch}/fslab
echo "study: $?"
echo "c_max after: $(c_max)"
echo "pools: $(zpool list -H | wc -l)"
cp {scratch}/results.db* /fslab-share/
"""


def built() -> openzfs.PreparedOpenZFS | None:
    """OpenZFS as the lab built it for the guest's kernel (make test builds it), else None."""
    return openzfs.prepared(guest_kernel()[1].name)


def guest_job() -> GuestJob | None:
    """The boot these tests need (conftest starts it early); None without OpenZFS built."""
    if unavailable_reason() or (found := built()) is None:
        return None
    study = parse_study(STUDY, "study.toml", base_dir=REPO)
    setup = openzfs.setup_script(found.release, openzfs.needs_of(study))
    return GuestJob("openzfs", setup + IN_GUEST.format(scratch=SCRATCH), REPO, {"study.toml": STUDY})


@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"the OpenZFS tests boot a guest kernel: {reason}")
    job = guest_job()
    if job is None:
        pytest.skip(
            f"no OpenZFS built for the guest kernel {guest_kernel()[1].name} in {openzfs.OPENZFS}: "
            "make test builds it (fslab.lab.openzfs.prepare)"
        )
    result = result_of(job, tmp_path_factory)
    assert result.status == 0 and "study: 0" in result.output, f"{result.output[-3000:]}\n{result.console[-2000:]}"
    db = ResultsDB(str(result.share / "results.db"))
    return result, db, {(r["target"], r["workload"]): r for r in db.runs(db.study_run()["id"])}


def test_the_lab_setup_loaded_the_module_and_tools_of_its_cache(guest):
    result, _, _ = guest
    found = built()
    assert found is not None
    assert f"module: {found.package_version} zpool: {found.root / 'sbin' / 'zpool'}\n" in result.output
    assert "fslab setup:" not in result.output


def test_a_zvol_target_runs_on_the_volume_the_engine_made(guest):
    _, db, runs = guest
    run = runs[("zvol", "rand_read")]
    assert run["status"] == "ok", run["error"]
    found = built()
    assert found is not None
    assert run["fs_details"].startswith(f"engine: OpenZFS kernel module {found.package_version}"), "not zfs-fuse"
    assert "volblocksize\t16K" in run["fs_details"] and "type\tvolume" in run["fs_details"]
    device = run["device"].split()[0]
    assert device.startswith("/dev/zd") and f"filename={device}" in run["job_file"], "fio ran on the volume itself"
    assert "zfs create -V" in " ".join(run["mkfs_command"])
    samples = db.sample_groups(db.study_run()["id"]).values
    assert min(samples[("rand_read", "zvol")]["read_iops"]) > 0


def test_the_arc_cap_is_in_force_for_the_run_and_lifted_after(guest):
    result, _, runs = guest
    run = runs[("dataset-arc", "rand_read")]
    assert run["status"] == "ok", run["error"]
    assert f"arc_max: 256 MiB (arcstats c_max = {256 * 2**20})" in run["fs_details"]
    before = result.output.split("c_max before: ")[1].split()[0]
    after = result.output.split("c_max after: ")[1].split()[0]
    assert before == after != str(256 * 2**20), "the module's own cap is back"
    assert "pools: 0" in result.output


def test_an_encrypted_dataset_runs_with_a_key_fslab_made_and_kept_in_no_file(guest):
    _, _, runs = guest
    assert set(runs) == {("zvol", "rand_read"), ("dataset-arc", "rand_read"), ("encrypted", "seq_write")}
    run = runs[("encrypted", "seq_write")]
    assert run["status"] == "ok", run["error"]
    details = run["fs_details"]
    for line in (
        "encryption\taes-256-gcm\t",
        "keyformat\traw\t",
        "keystatus\tavailable\t",
        "keylocation\tprompt\tlocal",
        "encryptionroot\tfslab_",
    ):
        assert line in details, line  # zfs read the key on its standard input: no file named
    assert "key: 32 random bytes fslab made for this run alone" in details
    assert "keyformat=raw" in run["mkfs_command"] and not any("keylocation" in arg for arg in run["mkfs_command"])
