"""`make cli` driven from a pty, as a student types: start a session with the CLI's
own arguments, type a command and read what it printed, leave and check that nothing
is left behind. Used by the CLI tests of tests/integration and tests/p4."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from experiments.run.cleanup import find_leftovers

pexpect = pytest.importorskip("pexpect", reason="pexpect drives the CLI (requirements-dev)")

REPO = Path(__file__).resolve().parents[1]
PROMPT = "mininet> "
UP_S, SEND_S, DOWN_S = 180, 60, 120


def start_cli(tmp_path: Path, *args: str, timeout: float = SEND_S):
    """A CLI session on 2tier-2plane (unless `args` name another) writing its session
    folder under `tmp_path`, at its first prompt."""
    child = pexpect.spawn(sys.executable, ["-m", "experiments.interactive.cli",
                                           "--topo", "2tier-2plane", *args,
                                           "--results", str(tmp_path)],
                          cwd=str(REPO), encoding="utf-8", timeout=timeout,
                          dimensions=(50, 200))
    child.logfile_read = open(tmp_path / "cli-session.log", "w")
    child.expect("an mrc agent on every host", timeout=UP_S)
    child.expect_exact(PROMPT)
    return child


def command(child, line: str) -> str:
    """Type one command; return what it printed before the next prompt."""
    child.sendline(line)
    child.expect_exact(PROMPT)
    return child.before.replace("\r\n", "\n")


def finish(child, tmp_path: Path, how: str) -> Path:
    """Leave with `exit` or end of input; the CLI must tear down cleanly. Returns the
    session folder it named."""
    if how == "exit":
        child.sendline("exit")
    else:
        child.sendeof()
    child.expect(r"torn down; session folder (\S+)", timeout=DOWN_S)
    folder = Path(child.match.group(1))
    child.expect(pexpect.EOF, timeout=DOWN_S)
    child.close()
    assert child.exitstatus == 0, (tmp_path / "cli-session.log").read_text()[-2000:]
    assert not find_leftovers()
    return folder if folder.is_absolute() else REPO / folder
