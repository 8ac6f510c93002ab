"""fio's own examples (tests/fixtures/fio-examples: fio 3.33's, as users arrive with them) through
fslab's guard, against the table of how each fares by hand (by-hand.toml, by its by_hand.py):
every example that runs by hand on ext4 is accepted, and every one refused is refused for the
harm the table names — a path, a device, a network, a command, a library, machine-wide state or
the output fslab reads — or because fio itself has no such option or refuses it."""

import tomllib
from pathlib import Path

import pytest

from conftest import FIXTURES
from fslab.core.errors import Refused
from fslab.core.workdir import Workdir
from fslab.fio.jobs import parse_job_file
from fslab.fio.options import BROKEN, DANGERS, OUTPUT, FioRefused
from fslab.fio.section import FioSection
from fslab.fio.workload import job_file_workload, job_problems
from fslab.workloads.data import DataPattern
from fslab.workloads.tables import Building

EXAMPLES = FIXTURES / "fio-examples"
TABLE = tomllib.loads((EXAMPLES / "by-hand.toml").read_text())
BY_HAND = ("runs", "engine", "outside", "nosize", "other")
# What fslab's guard may say of an example: accepted, refused for one of the harms, or refused
# because fio has no such option ("unknown") or refuses the job itself ("fio": its --parse-only).
OUTCOMES = ("accepted", *(f"refused: {kind}" for kind in (*DANGERS, "unknown", "fio", BROKEN)))


def guarded(name: str) -> str:
    """What fslab's own guard says of an example (fio not asked)."""
    try:
        parse_job_file((EXAMPLES / name).read_text(), name)
    except FioRefused as refused:
        return f"refused: {refused.kind}"
    return "accepted"


def test_the_table_says_how_every_example_fares():
    assert set(TABLE) == {path.name for path in EXAMPLES.glob("*.fio")} and len(TABLE) == 86
    for name, entry in TABLE.items():
        assert entry["by_hand"] in BY_HAND and entry["why"] and entry["guard"] in OUTCOMES, name


@pytest.mark.parametrize("name", sorted(TABLE))
def test_an_example_is_accepted_or_refused_for_the_harm_the_table_names(name):
    entry = TABLE[name]
    said = guarded(name)
    assert said == ("accepted" if entry["guard"] == "refused: fio" else entry["guard"]), (
        f"{name}: {entry['by_hand']} by hand ({entry['why']})"
    )
    if entry["by_hand"] == "runs":  # accepted, unless it changes the output fslab reads: no run by hand shows that
        assert said in ("accepted", f"refused: {OUTPUT}"), f"{name} runs by hand on ext4"
    if said in ("refused: unknown",):
        assert entry["by_hand"] != "runs", f"{name}: refused as unknown, yet fio runs it"


@pytest.mark.slow
def test_fio_itself_accepts_every_example_the_guard_accepts_but_those_the_table_says(tmp_path):
    """Through fslab as `fslab run` asks fio (job_problems: fio --parse-only on the rendered jobs)."""
    refused_by_fio = []
    for name, entry in sorted(TABLE.items()):
        if guarded(name) != "accepted":
            continue

        def refuse(at: tuple, why: str) -> None:
            raise Refused(why)

        building = Building(
            index=0,
            scale=1.0,
            time_scale=1.0,
            base_dir=EXAMPLES,
            fio=FioSection(),
            data=DataPattern(),
            where=str,
            refuse=refuse,
        )
        workload = job_file_workload(Path(name).stem, name, building, {}, None)
        if job_problems([workload], Workdir(tmp_path)):
            refused_by_fio.append(name)
            assert entry["by_hand"] != "runs", f"{name} runs by hand, but fio refuses fslab's rendering of it"
    assert refused_by_fio == sorted(name for name, entry in TABLE.items() if entry["guard"] == "refused: fio")
