"""Emulated is never performance (issue 37, item 2): a metric is compared between two hosts only as
its timing class allows (statistics/timing.py) — independent ones always, timing-dependent ones
within one accelerator, speed only between hosts of one VM configuration and never under TCG —
and within an emulated host its targets' speed is neither decided nor ranked, its figures shown
labelled. On synthetic stored study runs (tests/synthetic.py) whose hosts are lab VMs (named by
their kernel release) and this machine."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import fslab_in_process
from fslab.model import Host
from fslab.report.formats.markdown import to_markdown
from fslab.report.formats.summary_json import to_json
from fslab.report.sections import sections
from fslab.report.summary import compare_hosts, compare_runs, kernel_hosts, summarize_study_run
from fslab.results import ResultsDB
from fslab.statistics.analysis import AnalysisError
from fslab.statistics.history_reading import read_history
from fslab.statistics.stats import UNDECIDED
from fslab.statistics.timing import EMULATED, why_not_compared, why_not_within
from synthetic import SyntheticHost, stored_study

FIXTURES = Path(__file__).parent / "fixtures"

STUDY = """\
[study]
name = "kernels"
repetitions = 4
workloads = ["seq_write"]
image_size = "512MiB"

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
filesystem = ["ext4", "btrfs"]
"""

OLD, NEW, HOST = "6.1.0-56-amd64", "6.12.117+deb12-amd64", "fslab-host"
BUFFERED_OLD = {"ext4": 0.02, "btrfs": 0.02}  # Btrfs's direct writes not buffered on 6.1 …
BUFFERED_NEW = {"ext4": 0.02, "btrfs": 0.9}  # … and buffered on 6.12 and the host
LAB = {
    OLD: SyntheticHost(0.05, 0.02, kernel=OLD, accelerator="tcg", qemu_version="7.2.15", buffered=BUFFERED_OLD),
    NEW: SyntheticHost(0.05, 0.02, kernel=NEW, accelerator="tcg", qemu_version="7.2.15", buffered=BUFFERED_NEW),
    HOST: SyntheticHost(1.0, 0.02, kernel="6.18.0-test", buffered=BUFFERED_NEW),
}
SCALE = {"ext4": 1.0, "btrfs": 0.6}  # btrfs writes at 0.6 of ext4 everywhere: a verdict wherever one may be given


@pytest.fixture
def lab(tmp_path: Path) -> tuple[ResultsDB, int]:
    db = ResultsDB(str(tmp_path / "fslab.db"))
    return db, stored_study(tmp_path, STUDY, db, scale=SCALE, hosts=LAB)


def rows_of(rows, metric):  # noqa: ANN001, ANN201
    return [r for r in rows if r.metric == metric]


def test_no_speed_verdict_between_an_emulated_and_a_real_host(lab: tuple[ResultsDB, int]) -> None:
    db, study_run_id = lab
    compared = compare_hosts(db, study_run_id, HOST, OLD).rows
    speed = rows_of(compared, "write_iops")
    assert {r.target for r in speed} == {"ext4", "btrfs"}
    assert all(r.comparison.verdict == UNDECIDED and r.comparison.reason == EMULATED for r in speed), (
        "20× apart, and still no verdict: emulated speed is not performance"
    )
    assert all(r.comparison.p_value is None and r.comparison.interval is None for r in speed), "out of the family"
    shares = {r.target: r.comparison for r in rows_of(compared, "write_buffered_share")}
    assert shares["btrfs"].differs and shares["btrfs"].ratio < 0.1, "independent of timing: decided across them"
    amplification = rows_of(compared, "write_amplification")
    assert amplification and all(r.comparison.reason == "different accelerators: host vs tcg" for r in amplification)


def test_between_two_emulated_kernels_behaviour_is_compared_and_speed_is_not(lab: tuple[ResultsDB, int]) -> None:
    db, study_run_id = lab
    compared = compare_hosts(db, study_run_id, OLD, NEW).rows
    assert all(r.comparison.reason == EMULATED for r in rows_of(compared, "write_iops"))
    amplification = rows_of(compared, "write_amplification")
    assert amplification and all(r.comparison.withheld is None for r in amplification), "one accelerator: compared"
    shares = {r.target: r.comparison for r in rows_of(compared, "write_buffered_share")}
    assert shares["btrfs"].verdict == "slower" and shares["btrfs"].ratio > 10, "6.12 buffers Btrfs's direct writes"
    assert shares["ext4"].withheld is None


def test_within_an_emulated_host_speed_is_neither_decided_nor_ranked(lab: tuple[ResultsDB, int]) -> None:
    db, study_run_id = lab
    s = summarize_study_run(db, study_run_id)
    speed = rows_of(s.analysis.rows, "write_iops")
    on = {r.target.rpartition(" @ ")[2]: r.comparison for r in speed}
    assert set(on) == {OLD, NEW, HOST}
    assert on[HOST].verdict == "slower", "on bare metal, btrfs at 0.6 of ext4 is decided"
    assert on[OLD].verdict == on[NEW].verdict == UNDECIDED and on[OLD].reason == on[NEW].reason == EMULATED
    ranked = {(metric, host) for (_, metric, host) in s.analysis.rankings}
    assert ("write_iops", HOST) in ranked and ("write_iops", OLD) not in ranked and ("write_iops", NEW) not in ranked
    assert s.analysis.unranked[("seq_write", "write_iops", OLD)] == EMULATED
    latency = [r.comparison for r in rows_of(s.analysis.rows, "write_lat_p99_us") if not r.target.endswith(HOST)]
    assert latency and all(c.reason == EMULATED for c in latency), "every figure of speed"
    tested = [c for c in s.analysis.pairs.values() if c.p_value is not None]
    assert s.analysis.family_size == len(tested) and all(c.withheld is None for c in tested)
    emulated = {c.target: c.emulated for c in s.cells}
    assert emulated == {f"{t} @ {h}": h != HOST for t in ("ext4", "btrfs") for h in LAB}
    assert {c.target.rpartition(" @ ")[2]: c.kernel for c in s.cells} == {OLD: OLD, NEW: NEW, HOST: "6.18.0-test"}


def test_the_labels_are_on_the_console_summary_md_and_summary_json(lab: tuple[ResultsDB, int], tmp_path: Path) -> None:
    db, study_run_id = lab
    s = summarize_study_run(db, study_run_id)
    markdown = to_markdown(s)
    assert EMULATED in markdown and f"| ext4 @ {OLD} | write | 4 | TCG " in markdown
    assert f"| ext4 @ {HOST} | write | 4 | TCG" not in markdown, "a real host's figures are not labelled"
    assert any(f"Not ranked by write IOPS on {OLD}: {EMULATED}" in line for x in sections(s) for line in x.lines)
    document = json.loads(to_json(s))
    cells = {c["target"]: c for c in document["cells"]}
    assert cells[f"btrfs @ {OLD}"]["emulated"] is True and cells[f"btrfs @ {OLD}"]["label"] == EMULATED
    assert "emulated" not in cells[f"btrfs @ {HOST}"] and cells[f"btrfs @ {HOST}"]["kernel"] == "6.18.0-test"
    assert cells[f"ext4 @ {NEW}"]["kernel"] == NEW
    withheld = [c for c in document["comparisons"] if c.get("withheld")]
    assert withheld and all(c["verdict"] == UNDECIDED and c["reason"] == EMULATED for c in withheld)
    assert {u["host"] for u in document["unranked"] if u["metric"] == "write_iops"} == {OLD, NEW}
    shown = fslab_in_process("summary", str(study_run_id), "--db", str(tmp_path / "fslab.db"))
    assert shown.returncode == 0, shown.stderr
    assert EMULATED in " ".join(shown.stdout.split()), "the console says it too"


def test_the_page_shows_each_hosts_accelerator(lab: tuple[ResultsDB, int], tmp_path: Path) -> None:
    from fslab.report.page import write_report
    from synthetic import study_run_of

    db, study_run_id = lab
    page = write_report(db, [study_run_of(db, study_run_id)], tmp_path / "page").page.read_text()
    assert "<h3>Hosts</h3>" in page and ">accelerator<" in page
    assert f"tcg ({EMULATED})" in page and "QEMU 7.2.15" in page
    assert "software emulation (TCG)" in page, "the introduction says it"
    from fslab.report.charts import study_charts
    from fslab.report.details import run_details

    s = summarize_study_run(db, study_run_id)
    captions = [c.caption for c in study_charts(s, run_details(db, s))]
    assert captions and all(f"btrfs @ {OLD}" in c and EMULATED in c for c in captions), "every chart says it"


def test_pooled_hosts_with_an_emulated_one_decide_no_speed(lab: tuple[ResultsDB, int]) -> None:
    db, study_run_id = lab
    s = summarize_study_run(db, study_run_id, pool_hosts=True)
    speed = rows_of(s.analysis.rows, "write_iops")
    assert speed and all(r.comparison.reason == EMULATED for r in speed)
    assert all(r.comparison.withheld is None for r in rows_of(s.analysis.rows, "write_buffered_share"))
    assert all(c.emulated for c in s.cells) and not any(metric == "write_iops" for _, metric, _ in s.analysis.rankings)


def test_one_emulated_host_alone_reads_as_one_host_its_speed_labelled(tmp_path: Path) -> None:
    db = ResultsDB(str(tmp_path / "fslab.db"))
    s = summarize_study_run(db, stored_study(tmp_path, STUDY, db, scale=SCALE, hosts={OLD: LAB[OLD]}))
    assert not s.hosts.per_host and [c.target for c in s.cells] == ["ext4", "btrfs"]
    assert all(c.emulated and c.kernel == OLD and c.notes[0] == EMULATED for c in s.cells)
    assert all(r.comparison.reason == EMULATED for r in rows_of(s.analysis.rows, "write_iops"))
    assert not [key for key in s.analysis.rankings if key[1] == "write_iops"]


def test_compare_runs_across_an_emulated_and_a_real_study_run(tmp_path: Path) -> None:
    db = ResultsDB(str(tmp_path / "fslab.db"))
    real = stored_study(tmp_path, STUDY, db, scale=SCALE, hosts={HOST: LAB[HOST]})
    emulated = stored_study(tmp_path, STUDY, db, seed=2, scale=SCALE, hosts={OLD: LAB[OLD]})
    rows = compare_runs(db, real, emulated).rows
    assert rows and all(r.comparison.reason == EMULATED for r in rows), "its compared metrics are all of speed"
    again = stored_study(tmp_path, STUDY, db, seed=3, scale=SCALE, hosts={HOST: LAB[HOST]})
    assert all(r.comparison.withheld is None for r in compare_runs(db, real, again).rows), "bare metal: as before"


def test_kvm_speed_only_within_one_vm_configuration(tmp_path: Path) -> None:
    db = ResultsDB(str(tmp_path / "fslab.db"))
    kvm = SyntheticHost(1.0, 0.02, kernel=NEW, accelerator="kvm", qemu_version="7.2.15")
    study_run_id = stored_study(
        tmp_path, STUDY, db, scale=SCALE,
        hosts={"kvm-a": kvm, "kvm-b": replace(kvm, scale=2.0), "kvm-c": replace(kvm, cpu_model="Other CPU"),
               HOST: LAB[HOST]},
    )  # fmt: skip
    same = compare_hosts(db, study_run_id, "kvm-a", "kvm-b").rows
    assert all(r.comparison.verdict == "faster" for r in rows_of(same, "write_iops")), "one VM configuration"
    other = compare_hosts(db, study_run_id, "kvm-a", "kvm-c").rows
    assert all(r.comparison.reason == "different VM configurations" for r in rows_of(other, "write_iops"))
    assert all(r.comparison.withheld is None for r in rows_of(other, "write_amplification"))
    metal = compare_hosts(db, study_run_id, "kvm-a", HOST).rows
    assert all(r.comparison.reason == "different accelerators: kvm vs host" for r in rows_of(metal, "write_iops"))
    assert all(
        r.comparison.reason == "different accelerators: kvm vs host" for r in rows_of(metal, "write_amplification")
    )
    s = summarize_study_run(db, study_run_id)
    assert ("seq_write", "write_iops", "kvm-a") in s.analysis.rankings, "a KVM guest's speed is a result"


def test_history_of_an_emulated_host_shows_its_accelerator_and_judges_no_speed_step(tmp_path: Path) -> None:
    db = ResultsDB(str(tmp_path / "fslab.db"))
    for seed, host in ((1, LAB[OLD]), (2, SyntheticHost(0.03, 0.02, kernel=OLD, accelerator="tcg"))):
        stored_study(tmp_path, STUDY, db, seed=seed, scale=SCALE, hosts={OLD: host})
    found = read_history(db, "kernels", hosts=[OLD])
    speed = [st for s in found.series if s.key.metric == "write_iops" for st in s.steps]
    assert speed and all(st.comparison.reason == EMULATED and not st.change for st in speed)
    assert all(p.accelerator == "tcg" for s in found.series for p in s.points)
    shown = fslab_in_process("history", "kernels", "--host", OLD, "--db", str(tmp_path / "fslab.db"))
    assert shown.returncode == 0, shown.stderr
    assert "accelerator" in shown.stdout and "tcg" in shown.stdout and "emulated (TCG)" in shown.stdout


def test_compare_kernels_resolves_each_release_to_its_host(lab: tuple[ResultsDB, int], tmp_path: Path) -> None:
    db, study_run_id = lab
    assert kernel_hosts(db, study_run_id, (OLD, "host")) == (OLD, HOST)
    assert kernel_hosts(db, study_run_id, (NEW, "6.18.0-test")) == (NEW, HOST), "a release no host is named by"
    with pytest.raises(AnalysisError, match=rf"no measured run .* ran kernel '5.10.0-1-amd64'; its kernels: .*{OLD}"):
        kernel_hosts(db, study_run_id, ("5.10.0-1-amd64", OLD))
    location = str(tmp_path / "fslab.db")
    shown = fslab_in_process("compare", str(study_run_id), "--kernels", OLD, NEW, "--db", location)
    said = " ".join(shown.stdout.split())
    assert shown.returncode == 1 and "1 regression(s): btrfs · seq_write · write buffered_share: slower" in said, (
        "6.12 buffers Btrfs's direct writes: a regression in what the kernel did, decided under TCG"
    )
    assert f"host {NEW} against host {OLD}" in said and EMULATED in said
    refused = fslab_in_process("compare", str(study_run_id), "--kernels", "5.10.0-1-amd64", OLD, "--db", location)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "5.10.0-1-amd64" in refused.stderr and OLD in refused.stderr and "its kernels" in refused.stderr
    both = fslab_in_process("compare", str(study_run_id), "--kernels", OLD, NEW, "--hosts", OLD, NEW, "--db", location)
    assert both.returncode != 0 and "--kernels" in both.stderr


def test_a_database_from_before_the_lab_reads_its_hosts_as_bare_metal(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v17.db", path)
    db = ResultsDB(str(path))
    (host,) = db.hosts(1)
    assert host.accelerator == "host" and not host.emulated and host.vm == ("host",)
    s = summarize_study_run(db, 1)
    assert not any(c.emulated for c in s.cells) and {c.kernel for c in s.cells} == {"6.18.44-fc-v657"}
    assert all(r.comparison.withheld is None for r in s.analysis.rows)
    assert '"emulated"' not in to_json(s)


def test_the_rule_on_host_facts() -> None:
    metal = Host("a", None, "6.18", "CPU", 4, 2**33)
    tcg = Host("6.1.0-56-amd64", None, "6.1.0-56-amd64", "QEMU", 1, 2**31, accelerator="tcg", qemu_version="7.2")
    kvm = Host("6.1.0-56-amd64", None, "6.1.0-56-amd64", "CPU", 1, 2**31, accelerator="kvm", qemu_version="7.2")
    bigger = Host("6.12", None, "6.12", "CPU", 1, 2**32, accelerator="kvm", qemu_version="7.2")
    assert why_not_compared("read_iops", metal, Host("b", None, "6.1", "other CPU", 2, 2**30)) is None
    assert why_not_compared("read_iops", tcg, tcg) == why_not_compared("read_iops", metal, tcg) == EMULATED
    assert why_not_compared("read_iops", kvm, kvm) is None
    assert why_not_compared("read_iops", kvm, bigger) == "different VM configurations"
    assert why_not_compared("write_amplification", kvm, bigger) is None
    assert why_not_compared("fill.write_amplification", tcg, kvm) == "different accelerators: tcg vs kvm"
    assert why_not_compared("write_buffered_share", tcg, metal) is None
    assert why_not_compared("read_iops", None, tcg) is None, "a host not recorded is not held back"
    assert why_not_within("read_iops", [metal, metal]) is None
    assert why_not_within("read_iops", [metal, tcg]) == why_not_within("read_iops", [tcg]) == EMULATED
    assert why_not_within("space_used_bytes", [tcg, kvm, metal]) is None
