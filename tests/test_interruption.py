"""Ctrl-C or `kill` while fslab releases what it holds: the release is finished and recorded in
the journal, and then fslab is interrupted (so the next fslab finds nothing "left by an
interrupted fslab")."""

import os
import signal
import sys

import pytest

from conftest import wait_for
from fslab.core import interruption
from fslab.core.journal import RELEASERS, Releasing
from fslab.core.workdir import Workdir

KIND = "test-released-under-a-signal"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_release_is_acted_on_once_the_release_is_recorded(tmp_path, signals_interrupt, signum):
    workdir = Workdir(tmp_path / "wd")
    workdir.prepare()
    released = []

    def release_under_a_signal(entry, home):  # noqa: ANN001
        os.kill(os.getpid(), signum)  # it comes while the release is under way
        # Python runs the handler between two instructions of this thread: it is held back
        wait_for("the signal's handler", lambda: signum in interruption._held_back, deadline=30, every=0.001)
        released.append(entry.ident)

    RELEASERS.add(Releasing(KIND, release_under_a_signal))
    try:
        with pytest.raises(KeyboardInterrupt, match=f"signal {signum}"):
            with workdir.journal.holding(KIND, "made") as held:
                held.prove(made=1)
        assert released == ["made"], "the release finished"
        assert workdir.journal.read() == ([], []), "and was recorded before the interruption"
        received = len(interruption._received)
        with pytest.raises(KeyboardInterrupt):  # outside a release a signal interrupts at once: its handler raises
            os.kill(os.getpid(), signum)
            wait_for("the signal's handler", lambda: len(interruption._received) > received, deadline=30, every=0.001)
    finally:
        del RELEASERS.registered[KIND]


def test_a_signal_as_a_resource_is_recorded_leaves_its_entry_closed(tmp_path, signals_interrupt, monkeypatch):
    """A signal the moment the journal's "acquire" line is written (a worker stopped as its run
    prepares): the block is interrupted, and its entry closed — the next fslab finds nothing left."""
    workdir = Workdir(tmp_path / "wd")
    workdir.prepare()
    append = type(workdir.journal)._append

    def append_then_signal(journal, event, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        append(journal, event, *args, **kwargs)
        if event == "acquire":
            received = len(interruption._received)
            os.kill(os.getpid(), signal.SIGINT)
            wait_for("the signal's handler", lambda: len(interruption._received) > received, deadline=30, every=0.001)

    monkeypatch.setattr(type(workdir.journal), "_append", append_then_signal)
    RELEASERS.add(Releasing(KIND, lambda entry, home: None))
    try:
        with pytest.raises(KeyboardInterrupt), workdir.journal.holding(KIND, "made"):
            raise AssertionError("the block never starts: the signal came first")
        assert workdir.journal.read() == ([], []), "its entry closed"
    finally:
        del RELEASERS.registered[KIND]


@pytest.mark.root
def test_a_signal_as_a_filesystem_is_mounted_leaves_nothing_mounted(workdir, signals_interrupt):
    """Ctrl-C (or a worker's stop) at any moment of mounting — in `mount` itself, or once it has
    mounted and before fslab has recorded its proof: the mount point is released with whatever is
    mounted there (its releaser asks the kernel whether it rests on fslab's image). It was taken
    for "nothing proven, nothing made", and a mount made by then stayed, holding its loop device
    (seen: a worker stopped as it mounted, its loop device then "still attached after 30 s")."""
    import random
    import threading

    from fslab.core.identity import mounts_at
    from fslab.core.mounting import mount_point, proven
    from fslab.core.system import run
    from fslab.devices.loop import attached, image_file

    journal, where = workdir.journal, workdir.mounts / "ext4"
    left = []
    with image_file(journal, workdir.images, "ext4", 64 << 20, fill=None) as image, attached(journal, image) as loop:
        run(["mkfs.ext4", "-q", loop.device])
        for _ in range(40):
            ctrl_c = threading.Timer(random.uniform(0, 0.03), os.kill, (os.getpid(), signal.SIGINT))
            try:
                ctrl_c.start()
                with mount_point(journal, where) as held:
                    run(["mount", "-t", "ext4", loop.device, str(where)])
                    proven(held)
                ctrl_c.join()
            except KeyboardInterrupt:
                ctrl_c.join()
            interruption._received.clear()
            if mounts_at(where):
                left.append(mounts_at(where))
                run(["umount", str(where)])  # for the next try, and for the loop device's release
    assert left == [], f"{len(left)} of 40 mounts left after a signal"


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "kill"])
def test_an_interrupted_study_run_exits_with_its_signals_status(signals_interrupt, capsys, signum, status):
    """Ctrl-C and `kill` end a study run alike (released, said "interrupted"), each with its own
    status, 128 + the signal's number: a `kill` taken for a Ctrl-C (130) misleads a script or a
    service manager that asks how fslab ended."""
    import typer

    from fslab import cli

    def start(observer: object) -> int:
        os.kill(os.getpid(), signum)  # as it comes in the middle of a run
        wait_for("the signal's handler", lambda: False, deadline=30, every=0.001)
        raise AssertionError("not reached: the handler raises KeyboardInterrupt")

    with pytest.raises(typer.Exit) as ended:
        cli._with_progress(start)
    assert ended.value.exit_code == status
    assert "interrupted" in capsys.readouterr().err


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "kill"])
def test_any_command_a_signal_stops_exits_with_its_signals_status(signals_interrupt, monkeypatch, signum, status):
    """Not `fslab run` alone: typer ends every command a signal stopped with 130; a `kill` is 143."""
    from fslab import cli
    from fslab.cli import catalogue

    def signalled() -> None:
        os.kill(os.getpid(), signum)
        wait_for("the signal's handler", lambda: False, deadline=30, every=0.001)

    monkeypatch.setattr(catalogue, "catalogue", signalled)
    monkeypatch.setattr(sys, "argv", ["fslab", "list"])
    with pytest.raises(SystemExit) as ended:
        cli.main()
    assert ended.value.code == status
