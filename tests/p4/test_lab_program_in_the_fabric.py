"""`make cli LAB=03 SOLUTION=1`, as a student runs it: the lab's program (p4src/ with
Lab 03's solution spliced in, `python -m labs program`) in every BMv2 switch of
2tier-2plane, an incast on h0, and the trimming seen in the program's own counters
(`counters p0t0r0 trim`, and plane 1's p1t0r0) and in h0's capture decoded by the
Wireshark dissector.
Skipped, with the reason, where BMv2, p4c or root is missing (conftest.py), or tshark.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.cli_session import REPO, command, finish, start_cli

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")

DISSECTOR = REPO / "tools" / "wireshark" / "mrc.lua"
SEND_S = 120


def test_an_incast_trims_in_the_lab03_program_and_the_capture_shows_it(tmp_path):
    out = tmp_path / "lab03"
    subprocess.run([sys.executable, "-m", "labs", "program", "03", str(out), "--solution"],
                   cwd=REPO, check=True, capture_output=True)
    child = start_cli(tmp_path, "--dataplane", "bmv2", "--p4",
                      str(out / "p4src" / "mrc_switch.p4"), "--capture", "h0", timeout=SEND_S)
    try:
        # Three senders start together into h0's ports: their first windows meet in h0's
        # last hops' queues, before any sender hears of them, and trim.
        said = command(child, "send h1,h2,h3 h0 2M")
        for src in ("h1", "h2", "h3"):
            assert re.search(rf"{src} -> h0 over mrc: 2000000 bytes delivered .*verified",
                             said), said
        trimmed = sent_on = 0
        shown = []
        for last_hop in ("p0t0r0", "p1t0r0"):  # h0's last hop in each plane
            shown.append(command(child, f"counters {last_hop} trim"))
            row = next(line for line in shown[-1].splitlines()
                       if line.strip().startswith(f"{last_hop}-eth0"))
            # IFACE PEER TRIM_PKTS TX_TRIM_PKTS DROPPED_TRIM_PKTS of h0's port.
            trims, sent = (int(v) for v in row.split()[2:4])
            trimmed, sent_on = trimmed + trims, sent_on + sent
        assert trimmed > 0 and sent_on > 0, "".join(shown)
    except BaseException:
        child.terminate(force=True)
        raise
    folder = finish(child, tmp_path, "exit")
    headers = 0
    for pcap in sorted((folder / "pcap").glob("h0-eth*.pcap")):
        shown = subprocess.run(["tshark", "-r", str(pcap), "-X", f"lua_script:{DISSECTOR}",
                                "-Y", "mrc.trimmed", "-T", "fields", "-e", "mrc.psn"],
                               capture_output=True, text=True, check=True).stdout
        headers += len(shown.split())
    # The trimmed headers the program sent on to h0 arrived there, decoded as such.
    assert headers > 0
