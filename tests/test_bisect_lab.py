"""fslab bisect for real: Debian's kernel packages booted under QEMU (TCG here), the study of
docs/bisect.md (a 1 MiB direct sequential write on Btrfs) run in each, Btrfs's write_buffered_share
bisected — the issue's done-when over six packages, and a kernel made unbootable on purpose (a
prepared kernel whose vmlinuz is truncated, in a cache of the test's own) skipped.

Each boot costs one to three minutes under emulation on this shared machine (to the command, Python's
imports over 9p, then five runs): 9 min 26 s for both (the done-when 6 min 9 s), marked `long`, left
out of `make test`, run by `make test-long`."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from conftest import fresh_workdir, fslab_in_process
from fslab.lab import kernels, vm
from fslab.lab.bisect import SKIPPED, Rule, bisect
from fslab.lab.bisect_runs import LabMeasure, one_cell, settings_of
from fslab.results import ResultsDB
from fslab.study import load_study

pytestmark = [pytest.mark.root, pytest.mark.guest, pytest.mark.long, pytest.mark.xdist_group("guests")]

DOC = Path(__file__).parent.parent / "docs" / "bisect.md"
SIX = ["6.1.0-54", "6.1.0-55", "6.1.0-56", "6.12.100", "6.12.107", "6.12.117"]
FIRST_BAD = "6.12.100+deb12-amd64"
METRIC = "write_buffered_share"


@pytest.fixture(scope="module")
def study_file(tmp_path_factory) -> Path:
    """docs/bisect.md's study, as the page shows it: the page's example is what runs here."""
    if vm.unavailable_reason():
        pytest.skip(f"no VM here: {vm.unavailable_reason()}")
    text = re.search(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    assert text is not None, "docs/bisect.md shows its study"
    path = tmp_path_factory.mktemp("bisect") / "direct-write.toml"
    path.write_text(text.group(1))
    return path


def test_the_first_package_with_buffered_direct_writes_is_named_in_five_boots_and_confirmed(study_file, tmp_path):
    """The issue's done-when, through the command as docs/bisect.md gives it; every step's runs in
    one study run whose hosts are the kernels."""
    shown = next(
        line for line in DOC.read_text().splitlines() if line.startswith("fslab bisect") and "--kernels" in line
    )
    assert shown.split("--kernels ")[1].split()[0] == ",".join(SIX)
    db = tmp_path / "results.db"
    started = time.monotonic()
    with fresh_workdir() as workdir:
        result = fslab_in_process(
            *shown.split()[1:],
            "--db",
            str(db),
            "--workdir",
            str(workdir.root),
            cwd=study_file.parent,
        )
    seconds = time.monotonic() - started
    print(f"\n{result.stdout}\n{result.stderr}\nwall time {seconds:.0f} s")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"first slower kernel: {FIRST_BAD}, after 6.1.0-56-amd64" in out
    boots = int(re.search(r"\((\d+) boots; the A/B confirms it\)", out).group(1))
    assert boots <= 5, out
    assert re.search(rf"^A/B +{re.escape(FIRST_BAD)} \(6\.12\.100-1~deb12u1\): \d+ boots, .*slower.*CI", out, re.M)
    with sqlite3.connect(db) as conn:
        (study_run,) = conn.execute("select id from study_runs").fetchall()
        hosts = dict(conn.execute("select name, facts from hosts where study_run_id = ?", study_run))
        per_host = dict(conn.execute("select host, count(*) from runs where status = 'ok' group by host"))
    assert {"6.1.0-54-amd64", "6.12.117+deb12-amd64", "6.1.0-56-amd64", FIRST_BAD} <= set(hosts)
    assert all(json.loads(facts)["accelerator"] in ("tcg", "kvm") for facts in hosts.values())
    assert per_host["6.1.0-54-amd64"] >= 5 and per_host[FIRST_BAD] >= 10  # its step's runs and the A/B's
    with sqlite3.connect(db) as conn:
        (settings,) = conn.execute("select settings from study_runs").fetchone()
    assert json.loads(settings)["bisect"]["first_bad"] == FIRST_BAD
    summary = fslab_in_process("summary", str(study_run[0]), "--db", str(db), cwd=tmp_path)
    assert summary.returncode == 0 and FIRST_BAD in summary.stdout, summary.stdout + summary.stderr


def test_a_kernel_made_unbootable_on_purpose_is_skipped_with_its_reason(study_file, tmp_path):
    """Between two real kernels, a third whose prepared vmlinuz is truncated: booted, failed,
    skipped and said; the change is then named as one of it and the next."""
    broken = "6.12.1+deb12-amd64"
    cache = tmp_path / "kernels"
    real = kernels.prepare(FIRST_BAD)
    root = cache / broken / "root"
    (root / "boot").mkdir(parents=True)
    (root / "boot" / f"vmlinuz-{broken}").write_bytes(real.vmlinuz.read_bytes()[:4096])
    (root / "lib" / "modules").mkdir(parents=True)
    (root / "lib" / "modules" / broken).symlink_to(real.modules)
    marker = {"release": broken, "version": "truncated-on-purpose", "config_sha256": real.config_sha256}
    (cache / broken / kernels.READY).write_text(json.dumps(marker))

    releases = ["6.1.0-56-amd64", broken, FIRST_BAD]
    study = one_cell(load_study(str(study_file)), "btrfs", "write")
    rule = Rule.for_metric(METRIC)  # as docs/bisect.md's command: a share, judged on its difference
    said: list[str] = []
    with fresh_workdir() as workdir:
        results = ResultsDB(str(tmp_path / "results.db"))
        measure = LabMeasure(
            study, METRIC, results, workdir, settings_of(study, releases, METRIC, rule), say=said.append,
            prepare=lambda release: kernels.prepare(release, cache=cache if release == broken else kernels.KERNELS),
        )  # fmt: skip
        outcome = bisect(releases, measure, rule=rule, metric=METRIC, say=said.append)
        measure.finish("finished", {})
    print("\n".join(said))
    (skipped,) = [s for s in outcome.steps if s.call == SKIPPED]
    assert skipped.release == broken and skipped.boots == 0
    assert "did not boot" in skipped.reason, skipped.reason
    assert any(
        line.startswith(f"step     {broken}: 0 boots, 0 runs: skipped — its VM did not boot") for line in said
    ), said
    assert outcome.suspects == (broken, FIRST_BAD) and outcome.confirmed, said
    assert {h.name for h in results.hosts(measure.study_run_id)} == {"6.1.0-56-amd64", FIRST_BAD}
