"""The P4 switch on BMv2: shift-and-forward, drops, hop limit, ECN and trimming.

Packets are built with scapy (and the MRC layer from hosts/mrc_scapy.py), sent into one
test-side veth and captured on all the others. The switch is T0 p0t0r0 of 2tier-2plane:
port 0 -> h0, port 1 -> h1, port 2 -> T1 p0t1s0, port 3 -> T1 p0t1s1.
"""

from __future__ import annotations

import subprocess
import time

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.sendrecv import AsyncSniffer, sendp

from controller.program import read_counters
from hosts import wire
from hosts.mrc_scapy import MRC
from topologies.addressing import mac_address

SWITCH_MAC = [mac_address("p0t0r0", p) for p in range(4)]
PEER_MAC = [mac_address("h0", 0), mac_address("h1", 0), mac_address("p0t1s0", 0),
            mac_address("p0t1s1", 0)]


def frame(dst: str, hop_limit: int = 64, payload: bytes = b"x" * 100, tc: int = 0,
          in_port: int = 0):
    return (Ether(src=PEER_MAC[in_port], dst=SWITCH_MAC[in_port])
            / IPv6(src="fcbb:bb00:8000::", dst=dst, hlim=hop_limit, tc=tc)
            / UDP(sport=4793, dport=4793, chksum=0)
            / MRC(type=wire.DATA, msg_len=len(payload)) / payload)


def exchange(frames, in_port: int, wait: float = 1.0) -> dict[int, list]:
    """Send frames into `in_port`; return what came out of every other port."""
    sniffers = {p: AsyncSniffer(iface=f"mrcp4-t{p}", store=True) for p in range(4)
                if p != in_port}
    for sniffer in sniffers.values():
        sniffer.start()
    time.sleep(0.3)  # let the capture sockets attach before the first frame leaves
    sendp(frames, iface=f"mrcp4-t{in_port}", verbose=False)
    time.sleep(wait)
    out = {}
    for port, sniffer in sniffers.items():
        out[port] = [p for p in sniffer.stop() if IPv6 in p]
    return out


def test_shift_and_forward_up_to_a_t1(switch):
    out = exchange([frame("fcbb:bb00:1000:2001:1001:8003::")], in_port=0)
    assert [len(out[p]) for p in (1, 2, 3)] == [0, 0, 1]
    pkt = out[3][0]
    assert pkt[IPv6].dst == "fcbb:bb00:2001:1001:8003::"
    assert pkt[IPv6].hlim == 63
    assert (pkt[Ether].src, pkt[Ether].dst) == (SWITCH_MAC[3], PEER_MAC[3])


def test_last_hop_to_a_host(switch):
    out = exchange([frame("fcbb:bb00:1000:8001::", in_port=2)], in_port=2)
    assert [len(out[p]) for p in (0, 1, 3)] == [0, 1, 0]
    assert out[1][0][IPv6].dst == "fcbb:bb00:8001::"


def test_not_mine_and_no_route_are_dropped_and_counted(switch):
    before = read_counters(switch["grpc"], 1, switch["p4info"])["MrcIngress.dropped_packets"]
    out = exchange([frame("fcbb:bb00:1001:8001::"), frame("fcbb:bb00:1000:9999::")], 0)
    assert all(not pkts for pkts in out.values())
    after = read_counters(switch["grpc"], 1, switch["p4info"])["MrcIngress.dropped_packets"]
    assert after.get(0, 0) - before.get(0, 0) == 2


def test_hop_limit(switch):
    out = exchange([frame("fcbb:bb00:1000:8001::", hop_limit=1)], 0)
    assert all(not pkts for pkts in out.values())
    out = exchange([frame("fcbb:bb00:1000:8001::", hop_limit=2)], 0)
    assert out[1][0][IPv6].hlim == 1


def _slow_port(switch, port: int, pps: int) -> None:
    commands = f"set_queue_rate {pps} {port}\nset_queue_depth 64 {port}\n"
    subprocess.run(["simple_switch_CLI", "--thrift-port", str(switch["thrift_port"])],
                   input=commands, text=True, capture_output=True, check=True)


def test_ecn_marked_on_a_busy_uplink_but_never_on_the_last_hop(switch):
    _slow_port(switch, 3, 50)
    _slow_port(switch, 1, 50)
    burst = [frame("fcbb:bb00:1000:2001:1001:8003::", tc=0x02) for _ in range(40)]
    out = exchange(burst, 0, wait=2.5)
    marks = [p[IPv6].tc & 0x3 for p in out[3]]
    assert marks and marks.count(3) > 0  # CE once the queue passed the threshold (16)
    burst = [frame("fcbb:bb00:1000:8001::", tc=0x02, in_port=2) for _ in range(40)]
    out = exchange(burst, 2, wait=2.5)
    assert out[1] and all(p[IPv6].tc & 0x3 == 2 for p in out[1])
    _slow_port(switch, 3, 100000)
    _slow_port(switch, 1, 100000)


def test_trimming_with_a_saturated_queue(switch):
    _slow_port(switch, 3, 20)
    burst = [frame("fcbb:bb00:1000:2001:1001:8003::", payload=b"y" * 1000) for _ in range(120)]
    out = exchange(burst, 0, wait=4.0)
    trimmed = [p for p in out[3] if p[MRC].flags.TRIMMED]
    whole = [p for p in out[3] if not p[MRC].flags.TRIMMED]
    assert trimmed and whole  # the first packets went whole, later ones were trimmed
    cut = trimmed[0]
    assert len(bytes(cut)) == 94 and cut[IPv6].plen == 40
    assert cut[UDP].len == 40 and cut[UDP].chksum == 0
    assert cut[MRC].payload_len == 1000 and not cut[MRC].flags.TRIMMED_LASTHOP
    counters = read_counters(switch["grpc"], 1, switch["p4info"])
    assert counters["MrcEgress.trimmed_packets"].get(3, 0) >= len(trimmed)
    _slow_port(switch, 3, 100000)
