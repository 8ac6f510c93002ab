"""`fslab run STUDY --kernel K --kernel host --on HOSTS` for real (tests/fleet.py's workers in
network namespaces, a PostgreSQL on their bridge): each worker runs its unit under each kernel, a
lab VM booted on it from Debian's package (TCG here) and its own kernel, the runs streaming into
the shared database under the hosts model/kernel_hosts.py names, "RELEASE@WORKER" and the
worker's own. A worker that cannot boot a VM (no QEMU on its PATH) fails that kernel's share,
recorded with why, and runs the rest; a worker of another fslab refuses the unit and runs
nothing. The pure lane's side: tests/test_fleet_kernels.py."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from fleet import fleet
from fslab.lab import kernels as lab_kernels, vm
from test_fleet import registered, stored, study_file
from test_fleet_versions import unit_of

pytestmark = [pytest.mark.root, pytest.mark.guest]

KERNEL = "6.1.0-56-amd64"  # the lab's tests' kernel (docs/lab.md): prepared in the cache by `fslab lab build`


def without_qemu(directory: Path) -> Path:
    """A PATH directory with every program of this one's PATH but QEMU: a host that cannot boot a VM."""
    bin_dir = directory / "no-qemu-bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            if name != vm.QEMU and not (bin_dir / name).exists():
                (bin_dir / name).symlink_to(Path(folder) / name)
    return bin_dir


def test_a_study_over_kernels_runs_on_each_worker_under_each_kernel_stored_by_kernel_and_worker(fleet_lab, tmp_path):
    reason = vm.unavailable_reason()
    if reason:
        pytest.skip(f"no lab VM here: {reason}")
    if lab_kernels.ready(KERNEL) is None:
        pytest.skip(f"{KERNEL} is not in the lab's cache (fslab lab build {KERNEL})")
    with fleet(fleet_lab, tmp_path) as f:
        f.start(0, "w1")
        f.start(1, "bare", path=str(without_qemu(tmp_path)))
        f.wait("two workers", registered(f, 2))
        ran = f.fslab_in_process(
            "run", study_file(tmp_path, 1), "--no-ceiling", "--kernel", KERNEL, "--kernel", "host", "--on", "w1,bare"
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        study_run = int(f.sql("SELECT max(id) FROM study_runs"))
        assert stored(f, study_run) == [
            (host, "ext4", "seq_write", "1", "1") for host in (f"{KERNEL}@w1", "bare", "w1")
        ], "w1's VM and both workers' own kernels, each its host, each run once"
        assert f.sql(f"SELECT count(*) FROM runs WHERE study_run_id = {study_run} AND status <> 'ok'") == "0"
        facts = {
            line.split("|")[0]: line.split("|")[1:]
            for line in f.sql(
                f"SELECT name, facts->>'accelerator', facts->>'kernel' FROM hosts WHERE study_run_id = {study_run}"
            ).splitlines()
        }
        assert facts[f"{KERNEL}@w1"][0] in ("tcg", "kvm") and facts[f"{KERNEL}@w1"][1] == KERNEL, facts
        assert facts["w1"][0] == facts["bare"][0] == "host", facts

        assert unit_of(f, study_run, "w1") == ("done", "")
        state, why = unit_of(f, study_run, "bare")
        assert state == "done" and why.startswith(f"{KERNEL} failed: it did not boot: "), why
        assert f"{vm.QEMU} is not installed" in why, why
        (failed,) = json.loads(f.sql(f"SELECT settings->'lab'->'failed' FROM study_runs WHERE id = {study_run}"))
        assert (failed["kernel"], failed["host"], failed["boot"]) == (KERNEL, f"{KERNEL}@bare", 1)
        status = f.fslab_in_process("status", str(study_run))
        assert re.search(r"w1\s+done\s+2\s+2", status.stdout) and re.search(r"bare\s+done\s+1\s+2", status.stdout), (
            status.stdout
        )

        report = json.loads((tmp_path / "reports" / f"fleet-{study_run}" / "summary.json").read_text())
        kernels = {c["target"]: c.get("kernel") for c in report["cells"]}
        assert kernels[f"ext4 @ {KERNEL}@w1"] == KERNEL and kernels["ext4 @ w1"] == os.uname().release, kernels

        compared = f.fslab_in_process("compare", str(study_run), "--kernels", "host@w1", KERNEL)
        said = " ".join(compared.stdout.split())
        assert compared.returncode in (0, 1) and f"host {KERNEL}@w1 against host w1" in said, compared.stderr + said
        both = f.fslab_in_process("compare", str(study_run), "--kernels", "host", KERNEL)
        assert both.returncode == 2 and "Traceback" not in both.stderr, both.stderr
        assert "kernel 'host' ran on 2 hosts" in both.stderr and "KERNEL@WORKER" in both.stderr, both.stderr

        old = f.start(2, "old", fslab_version="0.0.9")  # a host not yet upgraded
        f.wait("the third worker", registered(f, 3))
        queued = f.fslab_in_process("run", study_file(tmp_path, 1), "--kernel", "host", "--on", "old", "--detach")
        assert queued.returncode == 0, queued.stderr
        refused_run = int(queued.stdout.strip())
        f.wait("old's unit refused", lambda: unit_of(f, refused_run, "old")[0] == "refused")
        assert "was made by fslab" in unit_of(f, refused_run, "old")[1] and stored(f, refused_run) == []
        assert f"unit refused: study run {refused_run} on old" in old.output()
        assert [f.stop(w) for w in f.workers] == [0, 0, 0]
