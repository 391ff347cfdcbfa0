"""The doc tables that list what the code has cannot drift from it, in either direction.

- docs/running.md's fault-kinds table (first column `kind`) names every kind of the
  registry (experiments/faults `KINDS`), and nothing else;
- docs/cli.md's command table (first column `command`) names every command of the
  interactive fabric (`do_<name>` of experiments/interactive/cli.py `FabricCLI`; its
  `help` is Mininet's, with the testbed's list added), and nothing else; the `ev`
  row names every action of experiments/interactive/cli_ev.py, and the CLI's own
  `help` lists the same commands;
- README.md's target table (first column `target`) names every Makefile target with
  a `## ` help text (those `make help` lists), and nothing else.

The documents and the Makefile are read as text; the registries are imported.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from experiments.faults import KINDS
from experiments.interactive.cli import TESTBED_HELP, FabricCLI
from experiments.interactive.cli_ev import EV_ACTIONS

REPO = Path(__file__).resolve().parents[2]
CELL = re.compile(r"(?<!\\)\|")  # a cell border; `\|` is a bar inside a cell
HELP_TARGET = re.compile(r"^([a-z0-9-]+):.*## ", re.M)  # as the Makefile's help greps


def read(name: str) -> str:
    return (REPO / name).read_text()


def first_column(doc: str, header: str) -> list[str]:
    """The first cells of the rows of the one table of `doc` whose first column is
    headed `header`, without their backticks (`\\|` read as `|`)."""
    tables: list[list[str]] = []
    rows: list[str] | None = None
    for line in read(doc).splitlines():
        if not line.startswith("|"):
            rows = None
            continue
        cell = CELL.split(line)[1].strip().replace("\\|", "|")
        if rows is None:  # a table's header row
            rows = []
            if cell == header:
                tables.append(rows)
        elif not set(cell) <= set("-: "):  # not the line under the header
            rows.append(cell.strip("`"))
    assert len(tables) == 1, (f"{doc}: {len(tables)} tables with a first column headed "
                              f"{header!r}; this test reads exactly one")
    return tables[0]


def differences(doc: str, what: str, listed: list[str], known: set[str],
                once: bool = True) -> str:
    """What to fix in `doc` so that its table lists exactly `known` (each once, unless
    `once` is False: a command with a row per form), one line each; "" if nothing."""
    problems = [f"{doc} lacks a row for {what} {name!r}"
                for name in sorted(known - set(listed))]
    problems += [f"{doc} lists {what} {name!r}, which the code does not have"
                 for name in sorted(set(listed) - known)]
    if once:
        problems += [f"{doc} lists {what} {name!r} twice"
                     for name in sorted({n for n in listed if listed.count(n) > 1})]
    return "\n".join(problems)


# ------------------------------------------------------------------ fault kinds
def test_the_fault_kinds_table_lists_every_kind():
    listed = first_column("docs/running.md", "kind")
    problems = differences("docs/running.md", "fault kind", listed, set(KINDS))
    assert not problems, problems


# ------------------------------------------------------------------ CLI commands
def cli_commands() -> set[str]:
    """The testbed's commands: FabricCLI's own `do_<name>` methods but `help`."""
    return {name.removeprefix("do_") for name in vars(FabricCLI)
            if name.startswith("do_") and name != "do_help"}


def test_the_cli_table_lists_every_command():
    rows = first_column("docs/cli.md", "command")
    listed = [row.split()[0] for row in rows]
    problems = differences("docs/cli.md", "command", listed, cli_commands(), once=False)
    assert not problems, problems
    (ev,) = [row for row in rows if row.split()[0] == "ev"]
    actions = ev.split()[1].split("|")
    problems = differences("docs/cli.md's `ev` row", "action", actions, set(EV_ACTIONS))
    assert not problems, problems


def test_the_clis_help_lists_every_command():
    names = TESTBED_HELP.split(":", 1)[1].split(";", 1)[0]
    listed = [name.strip() for name in names.split(",")]
    problems = differences("experiments/interactive/cli.py TESTBED_HELP", "command",
                           listed, cli_commands())
    assert not problems, problems


# ------------------------------------------------------------------ make targets
def test_the_readmes_target_table_lists_every_target():
    listed = [row.removeprefix("make ") for row in first_column("README.md", "target")]
    targets = set(HELP_TARGET.findall(read("Makefile")))
    assert targets, "no Makefile target with a `## ` help text: the pattern is stale"
    problems = differences("README.md", "make target", listed, targets)
    assert not problems, problems


# ------------------------------------------------------------------ the reader
def test_a_table_is_read_by_its_first_column(tmp_path, monkeypatch):
    (tmp_path / "doc.md").write_text(
        "| kind | what |\n|---|---|\n| `a` | x \\| y |\n| `b\\|c` | z |\n\ntext\n"
        "| other | what |\n| --- | --- |\n| `d` | w |\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert first_column("doc.md", "kind") == ["a", "b|c"]
    assert first_column("doc.md", "other") == ["d"]
    assert differences("doc.md", "kind", ["a", "a", "x"], {"a", "b"}).splitlines() == [
        "doc.md lacks a row for kind 'b'", "doc.md lists kind 'x', which the code does "
        "not have", "doc.md lists kind 'a' twice"]
    assert differences("doc.md", "kind", ["a", "a", "b"], {"a", "b"}, once=False) == ""
