"""The README and docs/ stay true: the README a short front door whose command list is the CLI's,
every relative link in them leading to a file (and heading) that is there, and every `fslab`
command they show one the CLI takes, with options it has; the commands that need nothing (what
`fslab list` shows, what `fslab run --plan` would do) are run as written. The README's picture
of the report page: tests/test_report_html.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main

from conftest import fslab_in_process
from fslab import cli

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def prose(text: str) -> str:
    """A Markdown text without its fenced blocks and code spans, where nothing is a link or heading."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without markup, lower-cased, punctuation
    dropped, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    """Every heading's anchor in a document; a repeated one numbered as GitHub numbers it."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", document.read_text()), re.M):
        name = anchor(heading)
        found.add(f"{name}-{seen[name]}" if name in seen else name)
        seen[name] = seen.get(name, 0) + 1
    return found


def links(document: Path) -> list[str]:
    """The relative links (and images) of a document's prose: neither a web address nor mail."""
    found = re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", prose(document.read_text()))
    return [link for link in found if not re.match(r"[a-z]+:", link)]


def sh_commands(document: Path) -> list[list[str]]:
    """The `fslab` command lines of a document's ```sh blocks, split as a shell would (variables
    set before the command dropped), placeholders' brackets and all."""
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", document.read_text(), re.M | re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            while words and re.match(r"[A-Z_]+=", words[0]):
                words = words[1:]
            if words[:1] == ["fslab"]:
                commands.append(words)
    return commands


MERGE_MARK = re.compile(r"^(<{7} |={7}$|>{7} )", re.M)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_no_document_keeps_a_merge_conflicts_marks(document):
    """A conflict resolved by hand once left git's marks in docs/statistics.md, read by no test."""
    assert not MERGE_MARK.search(document.read_text()), f"{document.name}: a merge conflict's marks"


def test_the_readme_is_a_front_door_of_at_most_150_lines():
    assert len(README.read_text().splitlines()) <= 150


def test_the_readmes_commands_are_the_clis_own_in_its_order():
    group = typer.main.get_command(cli.app)
    clis = [name for name, command in group.commands.items() if not command.hidden]
    table = README.read_text().split("## Commands", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `fslab ([a-z-]+)` \|", table, re.M)
    assert listed == clis, "README.md's table of commands: one line for each command `fslab --help` lists"


def test_the_readme_leads_to_every_page_of_the_docs():
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in links(README)}
    assert [page.name for page in DOCUMENTS[1:] if page not in linked] == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_are_there(document):
    for link in links(document):
        path, _, fragment = link.partition("#")
        target = (document.parent / path).resolve() if path else document
        assert target.exists(), f"{document.relative_to(ROOT)}: {link} leads to no file"
        if fragment and target.suffix == ".md":
            assert fragment in anchors(target), f"{document.relative_to(ROOT)}: {link}: no such heading"


def test_the_anchors_are_githubs():
    """As GitHub makes them (the docs' own headings)."""
    assert anchor("Options: allow-lists") == "options-allow-lists"
    assert anchor("Running fio's own examples") == "running-fios-own-examples"
    assert anchor("[[target]]") == "target"
    assert anchor("1. A PostgreSQL database") == "1-a-postgresql-database"
    assert anchor("A filesystem — `src/fslab/filesystems/<name>.py`") == "a-filesystem--srcfslabfilesystemsnamepy"


def option_names(command) -> set[str]:
    return {name for parameter in command.params for name in (*parameter.opts, *parameter.secondary_opts)} | {"--help"}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fslab_command_shown_is_one_the_cli_takes_with_options_it_has(document):
    for words in sh_commands(document):
        command = typer.main.get_command(cli.app)
        path = ["fslab"]
        for word in words[1:]:
            if not hasattr(command, "commands"):
                break
            assert word in command.commands, f"{document.relative_to(ROOT)}: {' '.join(words)}: no `{word}`"
            command, path = command.commands[word], [*path, word]
        for word in words[len(path) :]:
            option = word.strip("[]").split("=", 1)[0]
            if option.startswith("-"):
                assert option in option_names(command), (
                    f"{document.relative_to(ROOT)}: {' '.join(words)}: `{' '.join(path)}` has no {option}"
                )


def runnable(words: list[str]) -> bool:
    """A command shown that needs no root, device, database or network: it reads or plans only."""
    placeholder = any("[" in word or word.isupper() for word in words)
    return not placeholder and (words[1] == "list" or (words[1] == "run" and "--plan" in words))


def test_the_commands_that_need_nothing_run_as_written(tmp_path):
    shown = [words for document in DOCUMENTS for words in sh_commands(document) if runnable(words)]
    assert any(w[1] == "list" for w in shown) and any("--plan" in w for w in shown)
    for words in shown:
        result = fslab_in_process(*words[1:], cwd=tmp_path, env={"FSLAB_DB": str(tmp_path / "fslab.db")})
        assert result.returncode == 0, f"{' '.join(words)}:\n{result.stdout}{result.stderr}"
