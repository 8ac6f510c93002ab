"""The fleet's processes as a user and a service manager meet them (issue 33, items 4–6): the
waiting `fslab run --on` through a server stopped a while, a password given in the URL hidden
from `ps`, a worker stopped by SIGTERM, and the systemd unit docs/fleet.md gives. Real workers in
network namespaces on a real PostgreSQL (tests/fleet.py); every wait is for a state."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import postgres
import pytest
from conftest import wait_for
from fleet import DATABASE, fleet
from test_fleet import registered, runs_of, stored, study_file, under_way

ROOT = Path(__file__).parent.parent
DOCUMENTED_WAYS = ("PGPASSWORD", "~/.pgpass", "service file")


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def unit_in_docs() -> str:
    """The systemd unit docs/fleet.md shows, as a file would hold it."""
    page = (ROOT / "docs" / "fleet.md").read_text()
    return page.split("```ini\n", 1)[1].split("```", 1)[0]


def test_the_docs_give_the_systemd_unit_contrib_ships_and_a_stop_is_no_failure(tmp_path):
    shipped = (ROOT / "contrib" / "fslab-worker.service").read_text()
    assert unit_in_docs() == shipped, "docs/fleet.md shows contrib/fslab-worker.service as it is"
    assert "SuccessExitStatus" not in shipped and "KillSignal=SIGTERM" in shipped, "a stopped worker exits 0: nothing to excuse"
    assert "FSLAB_DB=postgresql://fslab@" in shipped and "PGPASSWORD" in shipped, "the password beside the URL, never in it"
    # systemd's own reading of it (with an fslab that is there: the unit's is where pip puts it)
    unit = tmp_path / "fslab-worker.service"
    unit.write_text(shipped.replace("/usr/local/bin/fslab", str(Path(sys.executable).with_name("fslab"))))
    verified = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert verified.returncode == 0 and verified.stdout + verified.stderr == "", verified.stdout + verified.stderr
