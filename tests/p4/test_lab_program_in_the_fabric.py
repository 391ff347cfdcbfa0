"""`make cli LAB=03 SOLUTION=1`, as a student runs it: the lab's program (p4src/ with
Lab 03's solution spliced in, `python -m labs program`) in every BMv2 switch of
2tier-2plane, an incast on h0, and the trimming seen in the program's own counters
(`counters p0t0r0 trim`) and in h0's capture decoded by the Wireshark dissector.
Skipped, with the reason, where BMv2, p4c or root is missing (conftest.py), or tshark.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.run.cleanup import find_leftovers

pexpect = pytest.importorskip("pexpect", reason="pexpect drives the CLI (requirements-dev)")
pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")

REPO = Path(__file__).resolve().parents[2]
DISSECTOR = REPO / "tools" / "wireshark" / "mrc.lua"
PROMPT = "mininet> "
UP_S, SEND_S, DOWN_S = 180, 120, 120


def command(child, line: str) -> str:
    child.sendline(line)
    child.expect_exact(PROMPT)
    return child.before.replace("\r\n", "\n")


def test_an_incast_trims_in_the_lab03_program_and_the_capture_shows_it(tmp_path):
    out = tmp_path / "lab03"
    subprocess.run([sys.executable, "-m", "labs", "program", "03", str(out), "--solution"],
                   cwd=REPO, check=True, capture_output=True)
    child = pexpect.spawn(sys.executable, [
        "-m", "experiments.interactive.cli", "--topo", "2tier-2plane", "--dataplane", "bmv2",
        "--p4", str(out / "p4src" / "mrc_switch.p4"), "--capture", "h0",
        "--results", str(tmp_path)], cwd=str(REPO), encoding="utf-8", timeout=SEND_S,
        dimensions=(50, 200))
    child.logfile_read = open(tmp_path / "cli-session.log", "w")
    try:
        child.expect("an mrc agent on every host", timeout=UP_S)
        child.expect_exact(PROMPT)
        # Two senders into h0's ports: its last hops' queues fill and trim.
        assert "in the background" in command(child, "send h1 h0 20M &")
        said = command(child, "send h2 h0 5M")
        assert re.search(r"h2 -> h0 over mrc: 5000000 bytes delivered .*verified", said), said
        said = command(child, "counters p0t0r0 trim")
        row = next(line for line in said.splitlines() if line.strip().startswith("p0t0r0-eth0"))
        # IFACE PEER TRIM_PKTS TX_TRIM_PKTS DROPPED_TRIM_PKTS: h0's port trimmed and sent on.
        trimmed, sent_on = (int(v) for v in row.split()[2:4])
        assert trimmed > 0 and sent_on > 0, said
        child.sendline("exit")
        child.expect("torn down; session folder (\\S+)", timeout=DOWN_S)
        session = Path(child.match.group(1))
        child.expect(pexpect.EOF, timeout=DOWN_S)
    except BaseException:
        child.terminate(force=True)
        raise
    child.close()
    assert child.exitstatus == 0 and not find_leftovers()
    folder = session if session.is_absolute() else REPO / session
    headers = 0
    for pcap in sorted((folder / "pcap").glob("h0-eth*.pcap")):
        shown = subprocess.run(["tshark", "-r", str(pcap), "-X", f"lua_script:{DISSECTOR}",
                                "-Y", "mrc.trimmed", "-T", "fields", "-e", "mrc.psn"],
                               capture_output=True, text=True, check=True).stdout
        headers += len(shown.split())
    # The trimmed headers the program sent on to h0 arrived there, decoded as such.
    assert headers > 0
