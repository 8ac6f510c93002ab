"""The fleet's processes as a user and a service manager meet them (issue 33, items 4–6): the
waiting `fslab run --on` through a server stopped a while, a password given in the URL hidden
from `ps`, a worker stopped by SIGTERM even when its release fails, and the systemd unit
docs/fleet.md gives. Real workers in
network namespaces on a real PostgreSQL (tests/fleet.py); every wait is for a state."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import postgres
from conftest import wait_for
from fleet import DATABASE, fleet
from short_studies import short_study
from test_fleet import EXT4, registered, runs_of, stored, study_file, under_way

ROOT = Path(__file__).parent.parent
DOCUMENTED_WAYS = ("PGPASSWORD", "~/.pgpass", "service file")


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


@pytest.mark.root
def test_the_waiting_run_on_survives_the_server_stopped_a_while_and_reports_as_usual(fleet_lab, tmp_path):
    """The server stopped for a few seconds while `fslab run --on` waits: it says so once, waits
    as the workers do, and ends with the summary (exit 0); `fslab status` and `fslab summary`
    asked meanwhile say in one line that the database cannot be reached; the worker's output has
    no traceback either (procrastinate's and psycopg's logs: one line each). The follower was
    given the password in its URL: `ps` never shows it there either."""
    with fleet(fleet_lab, tmp_path) as f:
        worker = f.start(0, "h")
        f.wait("the worker", registered(f, 1))
        log = tmp_path / "run-on.log"
        with log.open("w") as out:
            argv = [
                sys.executable,
                "-m",
                "fslab",
                "run",
                study_file(tmp_path, 4),
                "--no-ceiling",
                "--on",
                "h",
                "--db",
                f.pg.url(DATABASE),
            ]
            following = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=f.env(), cwd=tmp_path)
        try:
            f.wait(
                "the study run's first run stored, the next under way",
                lambda: runs_of(f, 1) == 1 and under_way(f, 1, "run 2")(),
            )
            assert following.poll() is None, log.read_text()
            hidden = postgres.PASSWORD.encode() not in cmdline(following.pid)
            with f.pg.away():
                f.wait(
                    "the follower to find the database away",
                    lambda: "database unreachable" in log.read_text() or following.poll() is not None,
                )
                asked = {command: f.fslab(command, "1", timeout=120) for command in ("status", "summary")}
            following.wait(timeout=600)
        finally:
            if following.poll() is None:
                following.kill()
                following.wait(timeout=60)
        said = log.read_text()
        assert following.returncode == 0 and "Traceback" not in said, said
        assert said.count("database unreachable, retrying") == 1, said
        assert "seq_write" in said and "ext4" in said and "Results in" in said, "the summary, as usual"
        assert stored(f, 1) == [("h", "ext4", "seq_write", str(r), "1") for r in (1, 2, 3, 4)], "every run stored once"
        for command, answer in asked.items():
            assert answer.returncode == 2 and "Traceback" not in answer.stderr, f"fslab {command}:\n{answer.stderr}"
            lines = answer.stderr.strip().splitlines()
            assert len(lines) == 1 and f"cannot use {f.url} as the results database" in lines[0], (
                f"fslab {command}: {answer.stderr}"
            )
            assert "Connection refused" in lines[0] and "check that its server is up and reachable" in lines[0], lines[
                0
            ]
        assert hidden and postgres.PASSWORD not in said, "the password neither in ps nor said"
        assert "database connection lost" in worker.output() and "Traceback" not in worker.output(), (
            "the worker, too, says what it does in lines of its own"
        )
        assert f.stop(worker) == 0


@pytest.mark.root
def test_a_password_in_the_workers_url_is_hidden_from_ps_as_it_starts_and_the_documented_ways_advised(
    fleet_lab, tmp_path
):
    """/proc/PID/cmdline (what `ps` shows every user) read from the moment the worker is started:
    the password is gone before the worker says a word, and stays gone; the argument keeps its
    place and length (stars), the worker says once how to give the password instead, and works."""
    with fleet(fleet_lab, tmp_path) as f:
        started = time.monotonic()
        worker = f.start(0, "h", url=f.pg.url(DATABASE))
        secret = postgres.PASSWORD.encode()
        ours = b"-m\0fslab\0worker\0"  # fslab's own arguments (nsenter's before its exec carry the password too)

        def hidden_yet() -> bytes | None:
            said_by_then = worker.output()  # read first: had it spoken, the password read next must be gone
            seen = cmdline(worker.process.pid)
            assert not (said_by_then and secret in seen), (
                f"the worker spoke before its password was hidden: {said_by_then}"
            )
            return seen if ours in seen and secret not in seen else None

        first_clean = wait_for("the password hidden from ps", hidden_yet, every=0.005)
        print(f"the password hidden {time.monotonic() - started:.3f} s after the worker was started")
        f.wait("the worker", registered(f, 1))
        now = cmdline(worker.process.pid)
        assert secret not in now and now == first_clean, "hidden for good"
        assert f"postgresql://{postgres.USER}:{'*' * len(postgres.PASSWORD)}@".encode() in now
        assert now.count(b"\0") == len(worker.process.args) - 2, (
            "each argument in its place (nsenter's two gone with its exec)"
        )
        said = worker.output()
        assert said.count("a password given in a database URL") == 1 and all(way in said for way in DOCUMENTED_WAYS), (
            said
        )
        assert postgres.PASSWORD not in said
        assert f.stop(worker) == 0


def loop_devices_of(worker) -> list[Path]:  # noqa: ANN001
    """The loop devices attached to images under the worker's work directory."""
    root = bytes(worker.workdir.root)
    return [
        Path("/dev") / f.parent.parent.name
        for f in Path("/sys/block").glob("loop*/loop/backing_file")
        if root in f.read_bytes()
    ]


@pytest.mark.root
def test_a_worker_stopped_while_another_process_holds_its_loop_device_still_stops(fleet_lab, tmp_path):
    """SIGTERM mid-run while another process holds the run's loop device open (a shell, udev, a
    copy of the mounts in another namespace): releasing it fails after its wait (30 s; 3 s here), and
    the stop still ends the worker — exit 0, the unit given back, why said — instead of failing the unit and
    serving on, deaf to the stop."""
    path = tmp_path / "long.toml"
    path.write_text(short_study("long", EXT4, 1).replace('runtime = "1s"', 'runtime = "20s"'))
    with fleet(fleet_lab, tmp_path) as f:
        worker = f.start(0, "h", detach_seconds=3)
        f.wait("the worker", registered(f, 1))
        queued = f.fslab_in_process("run", str(path), "--no-ceiling", "--on", "h", "--detach")
        assert queued.returncode == 0, queued.stderr
        journal = worker.workdir.root / "journal.jsonl"
        fio_proven = '"event": "proof", "kind": "process", "id": "fio"'
        f.wait(
            "fio under way on the run's loop device",
            lambda: journal.exists() and fio_proven in journal.read_text() and loop_devices_of(worker),
        )
        with loop_devices_of(worker)[0].open("rb"):  # held as another process would hold it
            worker.stopped = True
            worker.process.send_signal(signal.SIGTERM)
            status = worker.process.wait(timeout=180)  # its release waits 3 s for the device
        said = worker.output()
        assert status == 0, said
        assert "while stopping" in said and "still attached" in said and "unit failed" not in said, said
        assert f.sql("SELECT state FROM fleet_units WHERE study_run_id = 1") == "released"
        assert f.sql("SELECT status FROM procrastinate_jobs") == "todo", "given back to the queue"


def test_every_password_of_fslabs_arguments_is_hidden_in_place(tmp_path):
    """A real process's own /proc/PID/cmdline, after fslab hides what it was given: each URL's
    password (after the user, or as a query's password=) is stars of its length; the rest, each
    argument's bounds among them, as it was."""
    given = [
        "--db",
        "postgresql://u:s3cr3t@db:5432/x",
        "--db=postgresql+psycopg://u:p%40ss@db/x",
        "postgresql:///x?service=team&password=q&sslmode=require",
        "fslab.db",
        "postgresql://u@db/x",
    ]
    expected = [
        "--db",
        "postgresql://u:******@db:5432/x",
        "--db=postgresql+psycopg://u:******@db/x",
        "postgresql:///x?service=team&password=*&sslmode=require",
        "fslab.db",
        "postgresql://u@db/x",
    ]
    script = (
        "import sys; from fslab.core.argv_passwords import hide; said = hide(); "
        "sys.stdout.buffer.write(open('/proc/self/cmdline', 'rb').read() + str(said).encode())"
    )
    done = subprocess.run([sys.executable, "-c", script, *given], capture_output=True, check=True)
    assert done.stdout.split(b"\0")[3:] == [a.encode() for a in expected] + [b"True"], (
        "python, -c, its script: then the arguments"
    )
    untouched = subprocess.run(
        [sys.executable, "-c", script, "--db", "postgresql://u@db/x"], capture_output=True, check=True
    )
    assert untouched.stdout.endswith(b"postgresql://u@db/x\0None"), "no password given: nothing to say"


def unit_in_docs() -> str:
    """The systemd unit docs/fleet.md shows, as a file would hold it."""
    page = (ROOT / "docs" / "fleet.md").read_text()
    return page.split("```ini\n", 1)[1].split("```", 1)[0]


def test_the_docs_give_the_systemd_unit_contrib_ships_and_a_stop_is_no_failure(tmp_path):
    shipped = (ROOT / "contrib" / "fslab-worker.service").read_text()
    assert unit_in_docs() == shipped, "docs/fleet.md shows contrib/fslab-worker.service as it is"
    assert "SuccessExitStatus" not in shipped and "KillSignal=SIGTERM" in shipped, (
        "a stopped worker exits 0: nothing to excuse"
    )
    assert "FSLAB_DB=postgresql://fslab@" in shipped and "PGPASSWORD" in shipped, (
        "the password beside the URL, never in it"
    )
    # systemd's own reading of it (with an fslab that is there: the unit's is where pip puts it)
    unit = tmp_path / "fslab-worker.service"
    unit.write_text(shipped.replace("/usr/local/bin/fslab", str(Path(sys.executable).with_name("fslab"))))
    verified = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert verified.returncode == 0 and verified.stdout + verified.stderr == "", verified.stdout + verified.stderr
