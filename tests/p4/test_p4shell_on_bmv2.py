"""p4runtime-shell on a switch of a running BMv2 fabric (2tier-2plane), read-only.

The shell finds the switch among the running simple_switch_grpc processes, connects and
reads the `my_usid` entry with its own syntax; while it is connected the testbed's
controller is still primary (the shell never arbitrated); it cannot write; and the
switch's tables are exactly the controller's afterwards. The interactive shell
(`python -m experiments.interactive.p4shell --switch p0t0r0`, what `make p4shell` and the CLI's
`p4shell` open) is driven from a pty. Skipped without BMv2 and p4c (tests/p4/conftest.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from controller.bmv2_entries import MY_USID, table_entries
from controller.p4runtime_session import SwitchSession
from controller.tables import switch_tables
from experiments.interactive.p4shell import ReadOnlyError, connect, disconnect, find_switch

REPO = Path(__file__).resolve().parents[2]
SWITCH = "p0t0r0"
# IPython colours the prompt: "P4Runtime sh", an escape sequence, " >>>".
PROMPT = r"P4Runtime sh\S* >>>"


def _key(entry) -> bytes:
    copy = type(entry)()
    copy.CopyFrom(entry)
    copy.ClearField("counter_data")  # read-back carries direct counters
    return copy.SerializeToString(deterministic=True)


def switch_entries(node) -> list[bytes]:
    """The switch's table entries, read by the controller (which must become primary)."""
    with SwitchSession(node.grpc_address, node.device_id, election_id=1) as session:
        return sorted(_key(e) for e in session.read_table_entries())


def test_the_shell_reads_my_usid_and_leaves_the_controllers_tables(bmv2_network):
    network, target = bmv2_network
    fabric, node = network.fabric, network.net.get(SWITCH)
    expected = sorted(_key(e) for e in table_entries(
        target.p4info, switch_tables(fabric, fabric.node(SWITCH))))
    assert switch_entries(node) == expected

    switch = find_switch(SWITCH)
    assert (switch.device_id, switch.grpc_address) == (node.device_id, node.grpc_address)
    shell = connect(switch)
    try:
        entries = list(shell.TableEntry(MY_USID).read())
        assert len(entries) == 1
        active = entries[0].match["hdr.ipv6.dst_active"]
        assert int.from_bytes(active.exact.value, "big") == fabric.node(SWITCH).usid
        # The shell is connected and yet the controller can still become primary.
        assert switch_entries(node) == expected
        entry = shell.TableEntry(MY_USID)(action="usid_shift")
        entry.match["hdr.ipv6.dst_block"] = "0xfcbbbb00"
        entry.match["hdr.ipv6.dst_active"] = "0x1fff"
        with pytest.raises(ReadOnlyError):
            entry.insert()
        with pytest.raises(ReadOnlyError):
            entries[0].delete()
    finally:
        disconnect()
    assert switch_entries(node) == expected


def test_the_interactive_shell_from_a_pty(bmv2_network):
    pexpect = pytest.importorskip("pexpect", reason="pexpect drives the shell")
    network, target = bmv2_network
    child = pexpect.spawn(sys.executable, ["-m", "experiments.interactive.p4shell",
                                           "--switch", SWITCH],
                          cwd=str(REPO), encoding="utf-8", timeout=60)
    try:
        child.expect("read-only")
        child.expect(PROMPT)
        child.sendline(f'table_entry["{MY_USID}"].read(lambda e: print(e))')
        child.expect("usid_shift")
        child.expect(PROMPT)
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
