"""Captures on the kernel data plane, read back by tshark with the Wireshark dissector.

A short MRC transfer h0 -> h3 on 2tier-2plane runs while tcpdump captures every port of
h0, of h3 and of h0's plane-0 T0; the pcaps must decode with tools/wireshark/mrc.lua:
PSN, EV, offset, flags, and the uSID list named by node, shifted hop by hop.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from experiments.dataplanes.targets import apply_fault
from experiments.run.capture import Capture, parse_spec
from experiments.run.workload_run import run_transport
from experiments.scenarios.workloads import phases
from hosts import protocol
from topologies.resolved import write_resolved_topology

REPO = Path(__file__).resolve().parents[2]
DISSECTOR = REPO / "tools" / "wireshark" / "mrc.lua"
MESSAGE = 300_000
FIELDS = ["mrc.type", "mrc.psn", "mrc.ev.plane", "mrc.offset", "mrc.payload_len",
          "mrc.payload_present", "mrc.flags.last", "mrc.conn_id.sender",
          "mrc.conn_id.receiver", "usid.node", "usid.src_node"]

pytestmark = [
    pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed"),
    pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed"),
]


@pytest.fixture(scope="module")
def captured(kernel_network, tmp_path_factory):
    """The results folder of one transfer under capture, and the capture's results."""
    net, fabric = kernel_network.net, kernel_network.fabric
    folder = tmp_path_factory.mktemp("capture-run")
    write_resolved_topology(folder / "topology.json", fabric, "kernel")
    plan = phases("transfer", {"src": 0, "dst": 3, "message_bytes": MESSAGE},
                  fabric)
    capture = Capture(net, parse_spec("default,h3", fabric), folder)
    with capture:
        run = run_transport(kernel_network, "mrc", plan, [],
                            lambda a: apply_fault(kernel_network, a), folder, 30.0, {}, print)
    (transfer,) = run.transfers
    assert transfer.done and transfer.verified, transfer
    return folder, capture


def rows(folder: Path, intf: str, display_filter: str) -> list[dict[str, str]]:
    argv = ["tshark", "-r", str(folder / "pcap" / f"{intf}.pcap"),
            "-X", f"lua_script:{DISSECTOR}",
            "-o", f"usid.topology:{folder / 'topology.json'}", "-Y", display_filter,
            "-T", "fields", "-E", "separator=\t", "-E", "aggregator=|"]
    for field in FIELDS:
        argv += ["-e", field]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Lua: Error" not in done.stderr, done.stderr
    return [dict(zip(FIELDS, line.split("\t"))) for line in done.stdout.splitlines()]


def test_every_port_was_captured_and_every_tcpdump_stopped(captured):
    folder, capture = captured
    assert not capture.procs
    files = {Path(r.file).name: r for r in capture.results}
    assert set(files) == {"h0-eth0.pcap", "h0-eth1.pcap", "h3-eth0.pcap", "h3-eth1.pcap",
                          "p0t0r0-eth0.pcap", "p0t0r0-eth1.pcap", "p0t0r0-eth2.pcap",
                          "p0t0r0-eth3.pcap"}
    for name in ("h0-eth0.pcap", "h0-eth1.pcap", "h3-eth0.pcap", "p0t0r0-eth0.pcap"):
        assert files[name].captured and files[name].dropped == 0, files[name]


def test_data_leaving_h0_shows_psn_ev_offset_flags_and_the_named_path(captured):
    folder, _ = captured
    data = []
    for plane in (0, 1):
        sent = rows(folder, f"h0-eth{plane}", "mrc.type == 1 && ipv6.src == fcbb:bb00:8000::")
        assert sent, f"no DATA on h0's plane {plane}"
        for row in sent:
            assert int(row["mrc.ev.plane"]) == plane
            nodes = row["usid.node"].split("|")
            assert nodes[0] == f"p{plane}t0r0" and nodes[1].startswith(f"p{plane}t1s")
            assert nodes[2:] == [f"p{plane}t0r1", "h3"] and row["usid.src_node"] == "h0"
            assert (row["mrc.conn_id.sender"], row["mrc.conn_id.receiver"]) == ("0", "3")
        data += sent
    # The snap length cut the payloads, yet the dissector reads their real length.
    assert all(r["mrc.payload_present"] == r["mrc.payload_len"] for r in data)
    covered = sorted({(int(r["mrc.offset"]), int(r["mrc.payload_len"])) for r in data})
    assert covered[0][0] == 0 and sum(n for _, n in covered) >= MESSAGE
    assert any(r["mrc.flags.last"] in ("1", "True") for r in data)
    assert len({int(r["mrc.psn"]) for r in data}) == len(covered)


def test_each_hop_shifts_its_usid_out(captured):
    folder, _ = captured
    for spine in (0, 1):
        up = rows(folder, f"p0t0r0-eth{2 + spine}", "mrc.type == 1")
        assert up, f"no DATA toward spine {spine}"
        assert {r["usid.node"] for r in up} == {f"p0t1s{spine}|p0t0r1|h3"}
    arrived = rows(folder, "h3-eth0", "mrc.type == 1")
    assert arrived and {r["usid.node"] for r in arrived} == {"h3"}


def test_acknowledgements_come_back_to_h0_named(captured):
    folder, _ = captured
    sacks = rows(folder, "h0-eth0", f"mrc.type == {protocol.SACK}")
    assert sacks
    assert {(r["usid.node"], r["usid.src_node"]) for r in sacks} == {("h0", "h3")}
