"""The Wireshark dissector (tools/wireshark/mrc.lua) read by tshark, field by field.

Packets are built with the project's scapy layer (hosts/mrc_scapy.py) on real paths of
2tier-2plane (topologies/paths.py), written to a pcap, and decoded by `tshark -X
lua_script:...`: every header field, the control body, the traffic class of the IPv6
DSCP, packets trimmed as a switch trims them (DSCP rewritten, cut, lengths fixed), and
the uSID list of the destination named by node from the run's topology.json. Skipped,
with the reason, where tshark is not installed. The facts the Lua script repeats (it cannot
import Python) are also compared with their Python home, with or without tshark.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hosts import protocol
from topologies import addressing
from topologies.addressing import host_address, usid_address
from topologies.model import load_topology
from topologies.paths import catalogue
from topologies.resolved import resolved_topology

REPO = Path(__file__).resolve().parents[2]
DISSECTOR = REPO / "tools" / "wireshark" / "mrc.lua"
TSHARK = shutil.which("tshark")
LUA_TEXT = DISSECTOR.read_text()

FIELDS = ["mrc.version", "mrc.type", "mrc.flags", "mrc.plane", "mrc.reason",
          "mrc.conn_id.sender", "mrc.conn_id.receiver", "mrc.ev", "mrc.ev.plane",
          "mrc.msg_id", "mrc.psn", "mrc.offset", "mrc.msg_len", "mrc.payload_len",
          "mrc.payload_present", "mrc.trimmed_bytes", "mrc.trimmed", "mrc.trimmed_kept",
          "mrc.payload", "mrc.dscp", "mrc.class", "mrc.class.from",
          "mrc.flags.always_skip", "mrc.path_seq",
          "mrc.path_seq.path", "mrc.path_seq.seq", "mrc.cum_psn", "mrc.sack_base", "mrc.bitmap",
          "mrc.bitmap_count", "mrc.echo_ev", "mrc.ecn_marks", "mrc.port_state",
          "mrc.planes_up", "usid.block", "usid.sid", "usid.node", "usid.active",
          "usid.path", "usid.src_node", "usid.names", "_ws.col.Info", "_ws.expert.message"]
# Payload bytes of the trimmed DATA packets, and what a bigger trim size keeps of them.
TRIMMED_PAYLOAD = 1200
KEPT = 64


@pytest.fixture(scope="module")
def dissector_loads():
    """tshark loads the script; fails on a Lua error, skips where root may not run Lua."""
    if TSHARK is None:
        pytest.skip("tshark not installed (make deps installs it)")
    done = subprocess.run([TSHARK, "-G", "protocols", "-X", f"lua_script:{DISSECTOR}"],
                          capture_output=True, text=True, timeout=60)
    assert "Lua: Error" not in done.stderr + done.stdout, done.stderr
    filters = {line.split("\t")[-1] for line in done.stdout.splitlines()}
    if {"mrc", "usid"} <= filters:
        return
    # Older Wireshark builds' init.lua refuse user scripts to root
    # (run_user_scripts_when_superuser = false): an environment limit, not a bug.
    if "superuser" in done.stderr or "disabled" in done.stderr:
        pytest.skip(f"this tshark runs no Lua scripts as root: {done.stderr.strip()[:200]}")
    pytest.fail(f"tshark did not register mrc and usid: {done.stderr.strip()[:300]}")


def frame(src: str, dst: str, mrc, body=None, cls: int | None = None):
    """A frame as an agent sends it, in traffic class `cls` (by default DATA's trimmable
    class, the control class for the rest) at its default DSCP, ECT(0)."""
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    if cls is None:
        cls = protocol.TRIMMABLE if mrc.type == protocol.DATA else protocol.CONTROL
    tc = protocol.traffic_class(protocol.DEFAULT_DSCP[cls], protocol.ECN_ECT0)
    # Zero UDP checksum and port 4793 both ways, as the agents send (docs/protocol.md).
    packet = (Ether(src="02:00:80:00:00:00", dst="02:00:10:00:00:00")
              / IPv6(src=src, dst=dst, tc=tc)
              / UDP(sport=protocol.MRC_UDP_PORT, dport=protocol.MRC_UDP_PORT, chksum=0) / mrc)
    if body is not None:
        packet = packet / (body if not isinstance(body, bytes) else Raw(body))
    return packet


def pattern(size: int) -> bytes:
    return bytes(i % 256 for i in range(size))


def packets(fabric):
    """(description, scapy packet) of every kind the dissector must read."""
    from hosts.mrc_scapy import MRC, MRCControl, trim

    forward = catalogue(fabric, 0, 3)   # h0 -> h3: different racks, 4 uSIDs
    back = catalogue(fabric, 3, 0)
    p0s1, p1s0 = forward[1], forward[2]  # plane 0 spine 1, plane 1 spine 0
    h0, h3 = host_address(0), host_address(3)
    conn = 0 << 16 | 3
    ev = protocol.make_ev(0, 1 + 2 * 7)  # plane 0, a choice that maps to spine 1
    return [
        ("data", frame(h0, p0s1.address, MRC(
            type=protocol.DATA, flags=protocol.F_LAST | protocol.F_RETRANSMIT, plane=0,
            conn_id=conn, ev=ev, msg_id=4, psn=41, offset=48000, msg_len=49200,
            path_seq=protocol.make_path_seq(1, 7)),
            bytes(range(256)) * 4 + bytes(176), cls=protocol.TRIMMABLE_RETX)),
        # After the first T0 shifted its uSID out: p0t1s1 is now the active one.
        ("shifted", frame(h0, usid_address(p0s1.usids[1:]), MRC(
            type=protocol.DATA, plane=0, conn_id=conn, ev=ev, psn=42, offset=49200 - 100,
            msg_len=49200), bytes(100))),
        # Trimmed on the last hop (h3's T0), to the default size: the headers alone, on
        # the receiver's own address (every uSID before it shifted out).
        ("trimmed", trim(frame(h0, h3, MRC(
            type=protocol.DATA, plane=1, conn_id=conn, ev=p1s0.ev, msg_id=4, psn=43,
            offset=1200, msg_len=49200), bytes(TRIMMED_PAYLOAD)),
            protocol.DEFAULT_DSCP[protocol.TRIMMED_LASTHOP])),
        # A retransmission trimmed in the fabric (a T1) by a switch that keeps KEPT bytes
        # of payload more than the default size.
        ("trimmed_fabric", trim(frame(h0, usid_address(p0s1.usids[2:]), MRC(
            type=protocol.DATA, flags=protocol.F_RETRANSMIT, plane=0, conn_id=conn, ev=ev,
            msg_id=4, psn=45, offset=2400, msg_len=49200), pattern(TRIMMED_PAYLOAD),
            cls=protocol.TRIMMABLE_RETX),
            protocol.DEFAULT_DSCP[protocol.TRIMMED], protocol.TRIMMED_FRAME_BYTES + KEPT)),
        # Cut to the trim size, lengths fixed, but still in its trimmable class: a short
        # packet, not a trimmed one.
        ("short", trim(frame(h0, h3, MRC(
            type=protocol.DATA, plane=1, conn_id=conn, ev=p1s0.ev, msg_id=4, psn=46,
            offset=3600, msg_len=49200), bytes(TRIMMED_PAYLOAD)),
            protocol.DEFAULT_DSCP[protocol.TRIMMABLE])),
        ("sack", frame(h3, back[1].address, MRC(
            type=protocol.SACK, flags=protocol.F_ECN_ECHO | protocol.F_ALWAYS_SKIP, plane=0,
            conn_id=conn, ev=ev,
            msg_id=4, psn=41), MRCControl(
            cum_psn=40, sack_base=40, bitmap=0x8000_0000_0000_0003, echo_ev=ev, ecn_marks=2,
            port_state=0b11))),
        ("nack", frame(h3, back[2].address, MRC(
            type=protocol.NACK, plane=1, reason=protocol.R_TRIMMED_LASTHOP, conn_id=conn,
            ev=p1s0.ev, psn=43), MRCControl(cum_psn=41, sack_base=41, echo_ev=p1s0.ev,
                                            port_state=0b11))),
        ("probe", frame(h0, forward[3].address, MRC(
            type=protocol.PROBE, plane=1, conn_id=conn, ev=forward[3].ev, psn=44),
            MRCControl(port_state=0b11))),
        ("probe_reply", frame(h3, back[3].address, MRC(
            type=protocol.PROBE_REPLY, plane=1, conn_id=conn, ev=forward[3].ev, psn=44),
            MRCControl(echo_ev=forward[3].ev, port_state=0b11))),
        # h3's plane-1 port lost carrier: it tells h0 on plane 0 only.
        ("plane_status", frame(h3, back[0].address, MRC(
            type=protocol.PLANE_STATUS, plane=0, conn_id=3 << 16 | 0, ev=back[0].ev),
            MRCControl(port_state=0b01))),
    ]


def decode(pcap: Path, *options: str, env: dict | None = None,
           names: list[str] | None = None) -> dict[str, dict]:
    """tshark's reading of each packet: {description: {field: value}}; `names` describe
    the packets of the pcap, by default those of packets()."""
    argv = [TSHARK, "-r", str(pcap), "-X", f"lua_script:{DISSECTOR}", *options, "-T", "fields",
            "-E", "separator=\t", "-E", "aggregator=|", "-E", "occurrence=a"]
    for field in FIELDS:
        argv += ["-e", field]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert "Lua: Error" not in done.stderr, done.stderr
    rows = [dict(zip(FIELDS, line.split("\t"))) for line in done.stdout.splitlines()]
    if names is None:
        names = [name for name, _ in packets(load_topology("2tier-2plane"))]
    assert len(rows) == len(names)
    return dict(zip(names, rows))


def number(text: str) -> int:
    return int(text, 0)


def flag(text: str) -> bool:
    return text in ("1", "True")


@pytest.fixture(scope="module")
def capture(tmp_path_factory, fabric):
    from scapy.utils import wrpcap

    folder = tmp_path_factory.mktemp("run")
    wrpcap(str(folder / "h0-eth0.pcap"), [p for _, p in packets(fabric)])
    doc = resolved_topology(fabric, "kernel")
    (folder / "topology.json").write_text(json.dumps(doc, indent=1))
    return folder


@pytest.fixture(scope="module")
def decoded(capture, dissector_loads):
    return decode(capture / "h0-eth0.pcap", "-o", f"usid.topology:{capture / 'topology.json'}")


def test_every_header_field_of_a_data_packet(decoded):
    d = decoded["data"]
    assert number(d["mrc.version"]) == protocol.VERSION
    assert number(d["mrc.type"]) == protocol.DATA
    assert number(d["mrc.flags"]) == protocol.F_LAST | protocol.F_RETRANSMIT
    assert (number(d["mrc.conn_id.sender"]), number(d["mrc.conn_id.receiver"])) == (0, 3)
    assert number(d["mrc.ev"]) == protocol.make_ev(0, 15) and number(d["mrc.ev.plane"]) == 0
    assert number(d["mrc.msg_id"]) == 4 and number(d["mrc.psn"]) == 41
    assert number(d["mrc.offset"]) == 48000 and number(d["mrc.msg_len"]) == 49200
    assert number(d["mrc.payload_len"]) == number(d["mrc.payload_present"]) == 1200
    assert d["mrc.trimmed_bytes"] == d["mrc.trimmed"] == d["mrc.trimmed_kept"] == ""
    assert d["mrc.payload"] != ""
    assert d["mrc.class"] == protocol.CLASS_NAMES[protocol.TRIMMABLE_RETX]
    assert number(d["mrc.dscp"]) == protocol.DEFAULT_DSCP[protocol.TRIMMABLE_RETX]
    assert d["mrc.class.from"].startswith("topology.json of 2tier-2plane")
    assert number(d["mrc.path_seq"]) == 0x0107 and not flag(d["mrc.flags.always_skip"])
    assert number(d["mrc.path_seq.path"]) == 1 and number(d["mrc.path_seq.seq"]) == 7
    assert d["_ws.col.Info"] == ("DATA psn=41 ev=0x0000000f off=48000 len=1200 "
                                 "[LAST,RETRANSMIT]")


@pytest.mark.parametrize("name, cls, where, kept", [
    ("trimmed", protocol.TRIMMED_LASTHOP, "last hop", 0),
    ("trimmed_fabric", protocol.TRIMMED, "fabric", KEPT),
])
def test_a_trimmed_header_is_shown_as_trimmed(decoded, name, cls, where, kept):
    # Told by the DSCP the switch wrote, TRIMMED in the fabric or TRIMMED_LASTHOP on the
    # port facing the receiver; what the trim kept of the payload is no payload.
    d = decoded[name]
    assert number(d["mrc.dscp"]) == protocol.DEFAULT_DSCP[cls]
    assert d["mrc.class"] == protocol.CLASS_NAMES[cls] and d["mrc.trimmed"] == where
    assert number(d["mrc.payload_len"]) == TRIMMED_PAYLOAD
    assert number(d["mrc.payload_present"]) == kept
    assert number(d["mrc.trimmed_bytes"]) == TRIMMED_PAYLOAD - kept
    assert d["mrc.payload"] == ""
    assert d["mrc.trimmed_kept"].replace(":", "") == pattern(kept).hex()
    # The note on a trimmed header, and no warning about its length.
    assert [m for m in d["_ws.expert.message"].split("|") if "payload" in m] == [
        f"Trimmed DATA ({where}): payload_len {TRIMMED_PAYLOAD}, {kept} bytes present, "
        f"{TRIMMED_PAYLOAD - kept} cut by a switch"]
    assert f"(trimmed, {where})" in d["_ws.col.Info"]
    assert number(d["mrc.type"]) == protocol.DATA and number(d["mrc.flags"]) & 0x03 == 0


def test_a_short_packet_in_a_trimmable_class_is_not_trimmed(decoded):
    # Cut as a trim cuts, lengths fixed, but its DSCP is still the sender's: a packet
    # that lost its tail, which the dissector says is wrong.
    d = decoded["short"]
    assert d["mrc.class"] == protocol.CLASS_NAMES[protocol.TRIMMABLE]
    assert d["mrc.trimmed"] == d["mrc.trimmed_bytes"] == ""
    assert number(d["mrc.payload_present"]) == 0
    assert f"payload_len {TRIMMED_PAYLOAD} but 0 bytes present" in d["_ws.expert.message"]
    assert "Trimmed" not in d["_ws.expert.message"] and "trimmed" not in d["_ws.col.Info"]


def test_the_trim_helper_cuts_as_a_switch_does(fabric):
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6

    from hosts.mrc_scapy import trim

    whole = dict(packets(fabric))["data"]
    for size in (protocol.TRIMMED_FRAME_BYTES, protocol.TRIMMED_FRAME_BYTES + KEPT):
        cut = trim(whole, protocol.DEFAULT_DSCP[protocol.TRIMMED_LASTHOP], size)
        raw, before = bytes(cut), bytes(whole)
        assert len(raw) == size
        assert cut[IPv6].tc == protocol.traffic_class(
            protocol.DEFAULT_DSCP[protocol.TRIMMED_LASTHOP], protocol.ECN_ECT0)
        assert cut[IPv6].plen == cut[UDP].len == size - (len(before) - len(whole[UDP]))
        assert cut[UDP].chksum == 0
        behind_udp = len(before) - len(whole[UDP]) + protocol.UDP_HEADER_BYTES
        assert raw[behind_udp:] == before[behind_udp:size]
    with pytest.raises(ValueError, match="trims"):
        trim(whole, size_bytes=protocol.TRIMMED_FRAME_BYTES - 1)


def test_the_control_body_of_a_sack(decoded):
    d = decoded["sack"]
    assert number(d["mrc.type"]) == protocol.SACK
    assert number(d["mrc.flags"]) == protocol.F_ECN_ECHO | protocol.F_ALWAYS_SKIP
    assert flag(d["mrc.flags.always_skip"])
    assert number(d["mrc.cum_psn"]) == 40 and number(d["mrc.sack_base"]) == 40
    assert number(d["mrc.bitmap"]) == 0x8000_0000_0000_0003
    assert number(d["mrc.bitmap_count"]) == 3
    assert number(d["mrc.echo_ev"]) == protocol.make_ev(0, 15)
    assert number(d["mrc.ecn_marks"]) == 2
    assert number(d["mrc.port_state"]) == 0b11 and d["mrc.planes_up"] == "0,1"


def test_every_packet_type_reason_and_flag_has_the_protocols_name(decoded):
    for name, kind in [("data", protocol.DATA), ("sack", protocol.SACK),
                       ("nack", protocol.NACK), ("probe", protocol.PROBE),
                       ("probe_reply", protocol.PROBE_REPLY),
                       ("plane_status", protocol.PLANE_STATUS)]:
        assert number(decoded[name]["mrc.type"]) == kind
        assert decoded[name]["_ws.col.Info"].startswith(protocol.TYPE_NAMES[kind] + " ")
    nack = decoded["nack"]
    assert number(nack["mrc.reason"]) == protocol.R_TRIMMED_LASTHOP
    assert ("reason=" + protocol.REASON_NAMES[protocol.R_TRIMMED_LASTHOP]) in nack["_ws.col.Info"]
    shown = decoded["data"]["_ws.col.Info"] + decoded["sack"]["_ws.col.Info"]
    for flag_name in protocol.FLAG_NAMES.values():
        assert flag_name in shown
    for name in ("sack", "nack", "probe", "probe_reply", "plane_status"):
        assert decoded[name]["mrc.class"] == protocol.CLASS_NAMES[protocol.CONTROL]
    status = decoded["plane_status"]
    assert number(status["mrc.port_state"]) == 0b01 and status["mrc.planes_up"] == "0"
    assert "MRC" not in status["_ws.expert.message"]  # well formed: no malformed warning


def test_the_usid_list_is_named_by_node(decoded):
    d = decoded["data"]
    assert number(d["usid.block"]) == 0xFCBB_BB00
    assert [number(s) for s in d["usid.sid"].split("|")] == [0x1000, 0x2001, 0x1001, 0x8003]
    assert d["usid.node"].split("|") == ["p0t0r0", "p0t1s1", "p0t0r1", "h3"]
    assert d["usid.active"] == "p0t0r0"
    assert d["usid.path"] == "p0t0r0 > p0t1s1 > p0t0r1 > h3"
    assert d["usid.src_node"] == "h0"
    assert d["usid.names"].startswith("topology.json of 2tier-2plane")
    assert decoded["shifted"]["usid.node"].split("|") == ["p0t1s1", "p0t0r1", "h3"]
    assert decoded["shifted"]["usid.active"] == "p0t1s1"
    assert decoded["trimmed"]["usid.node"] == "h3"  # the receiver's own address
    assert decoded["sack"]["usid.path"] == "p0t0r1 > p0t1s1 > p0t0r0 > h0"
    assert decoded["nack"]["usid.path"] == "p1t0r1 > p1t1s0 > p1t0r0 > h0"


def lua_constant(name: str) -> str:
    match = re.search(rf"^local {name} = (.+?)(?:\s+--.*)?$", LUA_TEXT, re.MULTILINE)
    assert match, f"{name} not found in {DISSECTOR}"
    return match.group(1)


def lua_table(name: str) -> dict[int, str | int]:
    start = LUA_TEXT.index(f"local {name} = {{")
    body = LUA_TEXT[start:LUA_TEXT.index("}\n", start)]
    pairs = re.findall(r"\[(\d+)\] = \"(\w+)\"", body)
    pairs += re.findall(r"\{ (0x[0-9A-Fa-f]+), \"(\w+)\" \}", body)
    pairs += [(k, int(v)) for k, v in re.findall(r"\[(\d+)\] = (\d+)", body)]
    return {int(k, 0): v for k, v in pairs}


def test_the_scripts_facts_match_their_python_home():
    assert int(lua_constant("MRC_UDP_PORT")) == protocol.MRC_UDP_PORT
    assert int(lua_constant("HEADER_BYTES")) == protocol.MRC_HEADER_BYTES
    assert int(lua_constant("CONTROL_BODY_BYTES")) == protocol.CONTROL_BODY_BYTES
    assert int(lua_constant("DATA")) == protocol.DATA
    assert int(lua_constant("NACK")) == protocol.NACK
    assert lua_table("TYPE_NAMES") == protocol.TYPE_NAMES
    assert lua_table("FLAG_BITS") == protocol.FLAG_NAMES
    assert lua_table("CLASS_NAMES") == dict(enumerate(protocol.CLASS_NAMES))
    assert lua_table("DEFAULT_DSCP") == dict(enumerate(protocol.DEFAULT_DSCP))
    assert int(lua_constant("TRIMMED")) == protocol.TRIMMED
    assert int(lua_constant("TRIMMED_LASTHOP")) == protocol.TRIMMED_LASTHOP
    # The largest DSCP fills the traffic class byte beside the two ECN bits.
    max_dscp = int(lua_constant("MAX_DSCP"))
    assert protocol.traffic_class(max_dscp, protocol.ECN_MASK) == 0xFF
    assert lua_table("REASON_NAMES") == {0: "none", **protocol.REASON_NAMES}
    assert int(lua_constant("LOCATOR_BLOCK"), 0) == addressing.LOCATOR_BLOCK
    assert int(lua_constant("MAX_USIDS")) == addressing.MAX_USIDS
    assert int(lua_constant("HOST_BASE"), 0) == addressing.HOST_BASE


def test_names_come_from_the_topology_file(capture, dissector_loads, fabric):
    """A file whose names differ from the rule proves the file is read (via the env)."""
    doc = resolved_topology(fabric)
    doc["nodes"]["spine-A"] = doc["nodes"].pop("p0t1s1")
    del doc["nodes"]["h3"]
    renamed = capture / "renamed.json"
    renamed.write_text(json.dumps(doc))
    env = dict(os.environ, MRC_TOPOLOGY_JSON=str(renamed))
    d = decode(capture / "h0-eth0.pcap", env=env)["data"]
    assert d["usid.node"].split("|") == ["p0t0r0", "spine-A", "p0t0r1", "h3"]
    assert "uSID 0x8003 is not a node of 2tier-2plane" in d["_ws.expert.message"]


def test_an_operators_code_points_come_from_the_topology_file(capture, dissector_loads,
                                                              fabric):
    """A topology that gives TRIMMED its own DSCP: that one is trimmed, the default not."""
    from scapy.utils import wrpcap

    from hosts.mrc_scapy import MRC, trim

    operators = 40
    assert operators not in protocol.DEFAULT_DSCP
    whole = frame(host_address(0), host_address(3), MRC(
        type=protocol.DATA, conn_id=3, psn=1, msg_len=TRIMMED_PAYLOAD), bytes(TRIMMED_PAYLOAD))
    pcap = capture / "code-points.pcap"
    wrpcap(str(pcap), [trim(whole, operators),
                       trim(whole, protocol.DEFAULT_DSCP[protocol.TRIMMED])])
    doc = resolved_topology(fabric)
    path = capture / "code-points.json"

    def read() -> tuple[dict, dict]:
        path.write_text(json.dumps(doc))
        rows = decode(pcap, "-o", f"usid.topology:{path}", names=["operators", "default"])
        return rows["operators"], rows["default"]

    doc["spec"]["traffic_classes"][protocol.CLASS_NAMES[protocol.TRIMMED]] = operators
    theirs, default = read()
    assert theirs["mrc.class"] == protocol.CLASS_NAMES[protocol.TRIMMED]
    assert theirs["mrc.trimmed"] == "fabric" and number(theirs["mrc.dscp"]) == operators
    assert theirs["mrc.class.from"] == f"topology.json of 2tier-2plane ({path})"
    assert default["mrc.class"] == "unnamed" and default["mrc.trimmed"] == ""
    assert f"payload_len {TRIMMED_PAYLOAD} but 0 bytes present" in default["_ws.expert.message"]

    # A topology.json written before it carried the classes: the defaults hold.
    del doc["spec"]["traffic_classes"]
    theirs, default = read()
    assert theirs["mrc.class"] == "unnamed" and default["mrc.trimmed"] == "fabric"
    assert default["mrc.class.from"] == "the defaults (topology.json of 2tier-2plane names none)"

    # A code point that is no DSCP: the file is not used, and that is said.
    doc["spec"]["traffic_classes"] = {protocol.CLASS_NAMES[protocol.TRIMMED]: 99}
    theirs, default = read()
    assert default["mrc.trimmed"] == "fabric"
    assert "spec.traffic_classes.trimmed: 99 is not a DSCP (0 to 63)" in default["mrc.class.from"]
    assert "spec.traffic_classes.trimmed: 99" in default["_ws.expert.message"]


def test_without_a_file_the_addressing_rule_names_the_nodes(capture, dissector_loads):
    env = {k: v for k, v in os.environ.items() if k != "MRC_TOPOLOGY_JSON"}
    decoded = decode(capture / "h0-eth0.pcap", env=env)
    d = decoded["data"]
    assert d["usid.path"] == "p0t0r0 > p0t1s1 > p0t0r1 > h3"
    assert d["usid.names"] == "the addressing rule"
    assert "topology.json" not in d["_ws.expert.message"]
    # The default code points name the classes.
    assert d["mrc.class.from"] == "the defaults (no topology.json names them)"
    assert decoded["trimmed"]["mrc.trimmed"] == "last hop"


def test_a_broken_topology_file_is_said_and_the_rule_takes_over(capture, dissector_loads):
    broken = capture / "broken.json"
    broken.write_text('{"topology": "x", "nodes": [1, 2')
    d = decode(capture / "h0-eth0.pcap", "-o", f"usid.topology:{broken}")["data"]
    assert d["usid.path"] == "p0t0r0 > p0t1s1 > p0t0r1 > h3"
    assert f"{broken}: not JSON: expected ',' or ']'" in d["_ws.expert.message"]
    assert "names follow the addressing rule" in d["_ws.expert.message"]
