"""A tool's version is asked of the tool once a process for each executable, and asked anew when
the executable is replaced (an upgrade under a long-lived worker)."""

import os

from fslab.core.system import tool_version

FAKE = """#!/bin/sh
echo asked >> "{calls}"
echo "faketool {version}"
"""


def _install(bin_dir, calls, version: str) -> None:
    tool = bin_dir / "faketool"
    new = bin_dir / "faketool.new"
    new.write_text(FAKE.format(calls=calls, version=version))
    new.chmod(0o755)
    new.replace(tool)  # a new file, as a package upgrade installs one


def test_a_tool_is_asked_once_until_its_executable_is_replaced(tmp_path, monkeypatch):
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    _install(bin_dir, calls, "1.0")
    assert [tool_version(["faketool", "--version"]) for _ in range(3)] == ["faketool 1.0"] * 3
    assert calls.read_text().count("asked") == 1, "asked once"
    _install(bin_dir, calls, "2.0")
    assert tool_version(["faketool", "--version"]) == "faketool 2.0", "the replaced executable asked anew"
    assert calls.read_text().count("asked") == 2
    assert tool_version(["no-such-tool-of-fslabs", "--version"]) is None
