"""The host as a dimension: a study run whose runs span several hosts is summarised with a cell
per target and host, compared and ranked within each host; --pool-hosts pools them with host as
a block; `fslab compare RUN --hosts A B` compares two hosts. On synthetic stored study runs
(tests/synthetic.py), each host with its own scale and noise."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from conftest import fslab_in_process
from fslab.report.formats.markdown import to_markdown
from fslab.report.formats.summary_json import to_json
from fslab.report.sections import sections
from fslab.report.summary import compare_hosts, compare_runs, summarize_study_run
from fslab.report.view import SectionKind
from fslab.results import ResultsDB
from fslab.statistics.analysis import host_blocks
from synthetic import SyntheticHost, stored_study, study_run_of

STUDY = """\
[study]
name = "fleet"
repetitions = 4
workloads = ["rand_read"]
image_size = "512MiB"

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
filesystem = ["ext4", "xfs"]
"""

FLEET = {"host-a": SyntheticHost(1.0, 0.02), "host-b": SyntheticHost(2.0, 0.02)}


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[ResultsDB, int]:
    db = ResultsDB(str(tmp_path / "fslab.db"))
    return db, stored_study(tmp_path, STUDY, db, scale={"ext4": 1.0, "xfs": 0.8}, hosts=FLEET)


def test_a_cell_per_target_and_host_compared_within_each_host(fleet: tuple[ResultsDB, int]) -> None:
    db, study_run_id = fleet
    s = summarize_study_run(db, study_run_id)
    assert s.hosts.per_host and s.hosts.names == ["host-a", "host-b"]
    assert [(c.target, c.host) for c in s.cells] == [
        ("ext4 @ host-a", "host-a"),
        ("xfs @ host-a", "host-a"),
        ("ext4 @ host-b", "host-b"),
        ("xfs @ host-b", "host-b"),
    ]
    assert all(c.metrics["read_iops"].n == 4 for c in s.cells)
    pairs = {(a, b) for (_, _, a, b) in s.analysis.pairs}
    assert pairs == {("ext4 @ host-a", "xfs @ host-a"), ("ext4 @ host-b", "xfs @ host-b")}, (
        "never a target of one host against one of another"
    )
    rows = [r for r in s.analysis.rows if r.metric == "read_iops"]
    assert {(r.target, r.baseline) for r in rows} == {
        ("xfs @ host-a", "ext4 @ host-a"),
        ("xfs @ host-b", "ext4 @ host-b"),
    }
    assert all(r.comparison.verdict == "slower" and 0.7 < r.comparison.ratio < 0.9 for r in rows), (
        "xfs at 0.8 of ext4 on each host"
    )
    assert {host for (_, _, host) in s.analysis.rankings} == {"host-a", "host-b"}
    assert all(r.order[0].startswith("ext4 @ ") for r in s.analysis.rankings.values())
    walked = sections(s)
    method = walked[0].lines[-1]
    assert "span 2 hosts (host-a, host-b)" in method and "same host only" in method
    ranking = next(x for x in walked if x.kind is SectionKind.RANKING).lines
    assert any("on host-b: ext4 @ host-b > xfs @ host-b" in line for line in ranking), ranking
    markdown = to_markdown(s)
    assert "| ext4 @ host-b |" in markdown and "| xfs @ host-a |" in markdown
    assert '"host": "host-a"' in to_json(s), "the rankings say their host"


def test_a_study_run_of_one_named_host_reads_as_one_stored_with_none(tmp_path: Path) -> None:
    one, none = ResultsDB(str(tmp_path / "one.db")), ResultsDB(str(tmp_path / "none.db"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    named = summarize_study_run(one, stored_study(tmp_path / "a", STUDY, one, hosts={"host-a": SyntheticHost()}))
    plain = summarize_study_run(none, stored_study(tmp_path / "b", STUDY, none))
    assert not named.hosts.per_host and [c.target for c in named.cells] == ["ext4", "xfs"]
    timeless = lambda text: [line for line in text.splitlines() if " UTC" not in line]  # noqa: E731  (when each was stored)
    assert timeless(to_markdown(named)) == timeless(to_markdown(plain))
    assert to_json(named).count('"host"') == 0


def test_host_blocks_take_out_what_sets_one_host_above_another() -> None:
    rng = random.Random(3)
    samples = {
        ("w", target, host): {"iops": [level * share * rng.gauss(1.0, 0.01) for _ in range(5)]}
        for host, level in (("a", 100.0), ("b", 300.0))
        for target, share in (("ext4", 1.0), ("xfs", 0.9))
    }
    pooled = host_blocks(samples)
    assert set(pooled) == {("w", "ext4"), ("w", "xfs")} and all(len(m["iops"]) == 10 for m in pooled.values())
    spread = lambda values: max(values) / min(values)  # noqa: E731
    assert spread(pooled[("w", "ext4")]["iops"]) < 1.1, "host b's level (3×) is divided out"
    naive = samples[("w", "ext4", "a")]["iops"] + samples[("w", "ext4", "b")]["iops"]
    assert spread(naive) > 2.5
    ratio = math.exp(
        sum(map(math.log, pooled[("w", "xfs")]["iops"])) / 10 - sum(map(math.log, pooled[("w", "ext4")]["iops"])) / 10
    )
    assert ratio == pytest.approx(0.9, rel=0.02), "the targets' ratio is kept"


def test_pool_hosts_one_cell_per_target_host_a_block(fleet: tuple[ResultsDB, int]) -> None:
    db, study_run_id = fleet
    s = summarize_study_run(db, study_run_id, pool_hosts=True)
    assert [c.target for c in s.cells] == ["ext4", "xfs"] and all(c.metrics["read_iops"].n == 8 for c in s.cells)
    assert s.hosts.pooling == 2
    method = sections(s)[0].lines[-1]
    assert "2 hosts pooled (host-a, host-b; --pool-hosts), host treated as a block" in method
    row = next(r for r in s.analysis.rows if r.metric == "read_iops")
    assert row.comparison.verdict == "slower", "with host a block, host b's 2× adds no spread that hides xfs's 0.8"
    interval = row.comparison.interval
    assert interval is not None and interval[1] - interval[0] < 0.1


def test_compare_hosts_b_against_a(fleet: tuple[ResultsDB, int]) -> None:
    db, study_run_id = fleet
    compared = compare_hosts(db, study_run_id, "host-a", "host-b")
    iops = [r for r in compared.rows if r.metric == "read_iops"]
    assert {r.target for r in iops} == {"ext4", "xfs"} and not compared.left_out
    assert all(r.comparison.verdict == "faster" and 1.8 < r.comparison.ratio < 2.2 for r in iops), (
        "host b at twice host a"
    )
    reverse = compare_hosts(db, study_run_id, "host-b", "host-a")
    assert all(r.comparison.verdict == "slower" for r in reverse.rows if r.metric == "read_iops")


def test_compare_hosts_refuses_a_host_it_has_not(fleet: tuple[ResultsDB, int]) -> None:
    db, study_run_id = fleet
    with pytest.raises(Exception, match="no measured run of study run .* on host 'host-z'; its hosts: host-a, host-b"):
        compare_hosts(db, study_run_id, "host-a", "host-z")


def test_compare_two_fleet_study_runs_per_host(tmp_path: Path) -> None:
    db = ResultsDB(str(tmp_path / "fslab.db"))
    older = stored_study(tmp_path, STUDY, db, hosts=FLEET)
    newer = stored_study(
        tmp_path, STUDY, db, seed=2, hosts={"host-a": SyntheticHost(1.0, 0.02), "host-b": SyntheticHost(1.4, 0.02)}
    )
    rows = [r for r in compare_runs(db, older, newer).rows if r.metric == "read_iops"]
    verdicts = {r.target: r.comparison.verdict for r in rows}
    assert verdicts == {
        "ext4 @ host-a": "undecided",
        "xfs @ host-a": "undecided",
        "ext4 @ host-b": "slower",
        "xfs @ host-b": "slower",
    }


def test_cli_compare_hosts_and_pooled_summary(fleet: tuple[ResultsDB, int], tmp_path: Path) -> None:
    """The commands in this process: what they print and how they end."""
    db, study_run_id = fleet
    shown = fslab_in_process(
        "compare", str(study_run_id), "--hosts", "host-a", "host-b", "--db", str(tmp_path / "fslab.db")
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert (
        "host host-b against host host-a" in shown.stdout
        and "host-b / host-a" in shown.stdout
        and "faster" in shown.stdout
    )
    assert "machine_id" in shown.stdout, "what differs between the hosts' facts"
    regressed = fslab_in_process(
        "compare", str(study_run_id), "--hosts", "host-b", "host-a", "--db", str(tmp_path / "fslab.db")
    )
    assert regressed.returncode == 1 and "regression" in regressed.stdout
    refused = fslab_in_process("compare", str(study_run_id), "--db", str(tmp_path / "fslab.db"))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr and "--hosts" in refused.stderr
    pooled = fslab_in_process("summary", str(study_run_id), "--pool-hosts", "--db", str(tmp_path / "fslab.db"))
    assert pooled.returncode == 0 and "2 hosts pooled" in pooled.stdout and "@ host-a" not in pooled.stdout


def test_page_facets_and_hosts_facts(fleet: tuple[ResultsDB, int], tmp_path: Path) -> None:
    from fslab.report.charts import study_charts
    from fslab.report.details import run_details
    from fslab.report.page import write_report

    db, study_run_id = fleet
    s = summarize_study_run(db, study_run_id)
    details = run_details(db, s)
    assert set(details.devices) == {"ext4 @ host-a", "xfs @ host-a", "ext4 @ host-b", "xfs @ host-b"}, (
        "devices (model, serial, firmware) per host"
    )
    assert {h.target for h in details.histograms} == set(details.devices)
    primary = [c for c in study_charts(s, details) if c.name.startswith("rand_read-read_iops")]
    assert [c.name for c in primary] == ["rand_read-read_iops-host-a", "rand_read-read_iops-host-b"]
    drawn = [row["target"] for row in primary[1].spec["datasets"]["rows-0"]]
    assert drawn == ["ext4 @ host-b", "xfs @ host-b"], "a host's facet draws its own cells"
    page = write_report(db, [study_run_of(db, study_run_id)], tmp_path / "page").page.read_text()
    assert "<h3>Hosts</h3>" in page and "machine-host-b" in page and "Test CPU × 4" in page
    single = tmp_path / "single"
    single.mkdir()
    alone = stored_study(single, STUDY, db, hosts={"host-a": SyntheticHost()})
    assert "<h3>Hosts</h3>" not in write_report(db, [study_run_of(db, alone)], tmp_path / "page1").page.read_text()


@pytest.mark.parametrize(("where", "name"), [("device/firmware_rev", "NVMe"), ("device/rev", "SCSI/SATA")])
def test_device_facts_record_the_firmware(tmp_path: Path, where: str, name: str) -> None:
    from dataclasses import dataclass

    from fslab.core.block_devices import BlockDevice, facts

    disk = tmp_path / "sdz"
    for path, text in {
        "size": "2048",
        "device/model": "Disk 9000",
        "device/serial": "S123",
        where: "FW1.2",
        "queue/rotational": "0",
    }.items():
        (disk / path).parent.mkdir(parents=True, exist_ok=True)
        (disk / path).write_text(text + "\n")

    @dataclass(frozen=True)
    class Planted(BlockDevice):
        @property
        def sysfs(self) -> Path:
            return disk

    found = facts(Planted("/dev/sdz", "/dev/sdz", 0))
    assert (found.model, found.serial, found.firmware, found.size) == ("Disk 9000", "S123", "FW1.2", 2048 * 512), name
