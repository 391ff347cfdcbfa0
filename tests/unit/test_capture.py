"""Packet captures: the spec, tcpdump's command line and size bound, and a real tcpdump
started, fed and stopped on the loopback interface (root only)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time

import pytest

from experiments.run.capture import (
    DEFAULT_SNAPLEN,
    PROCESS_PATTERN,
    Capture,
    CaptureError,
    CaptureTarget,
    packets_per_port,
    parse_spec,
    parse_stats,
    tcpdump_argv,
)
from hosts import protocol, wire


def names(targets):
    return [t.intf for t in targets]


def test_the_default_is_every_port_of_h0_and_of_its_plane0_t0(fabric):
    expected = ["h0-eth0", "h0-eth1"] + [f"p0t0r0-eth{n}" for n in range(4)]
    for spec in (None, "", "1", "default"):
        assert names(parse_spec(spec, fabric)) == expected
    assert names(parse_spec("default,h3:1,h0", fabric)) == expected + ["h3-eth1"]


def test_a_spec_names_nodes_and_ports_in_three_spellings(fabric):
    targets = parse_spec("h3, p0t1s1:eth1,p1t0r1:p1t0r1-eth2,p0t1s1:1", fabric)
    assert targets == [CaptureTarget("h3", "h3-eth0"), CaptureTarget("h3", "h3-eth1"),
                       CaptureTarget("p0t1s1", "p0t1s1-eth1"),
                       CaptureTarget("p1t0r1", "p1t0r1-eth2")]


@pytest.mark.parametrize("spec, message", [
    ("h9", "CAPTURE: h9: no node 'h9' in 2tier-2plane; fix: use a node of the topology, "
           "e.g. h0,p0t0r0"),
    ("h0:eth7", "CAPTURE: h0:eth7: h0 has no port 'eth7'; fix: use one of h0-eth0, h0-eth1"),
    ("h0,,h1", "CAPTURE: 'h0,,h1': empty item in the comma list; fix: name nodes or "
               "node:port separated by single commas"),
])
def test_a_bad_spec_is_one_line_naming_the_item_and_the_fix(fabric, spec, message):
    with pytest.raises(CaptureError) as err:
        parse_spec(spec, fabric)
    assert str(err.value) == message


def test_the_budget_is_shared_among_the_ports():
    assert DEFAULT_SNAPLEN == 128
    count = packets_per_port(6, snaplen=128, budget_mb=200)
    assert count == 200_000_000 // 6 // 144
    assert 6 * count * 144 <= 200_000_000
    assert packets_per_port(1000, budget_mb=0.001) == 1


def test_tcpdump_argv_bounds_the_file_and_is_found_by_the_cleanup_pattern(tmp_path):
    pcap = tmp_path / "results" / "run" / "pcap" / "p0t0r0-eth2.pcap"
    argv = tcpdump_argv("p0t0r0-eth2", pcap, 128, 5000)
    assert argv[:2] == ["tcpdump", "-i"] and argv[2] == "p0t0r0-eth2"
    assert argv[argv.index("-s") + 1] == "128" and argv[argv.index("-c") + 1] == "5000"
    assert argv[argv.index("-w") + 1] == str(pcap)
    assert "-U" in argv and "--immediate-mode" in argv and argv[argv.index("-Z") + 1] == "root"
    assert re.search(PROCESS_PATTERN, " ".join(argv))
    assert not re.search(PROCESS_PATTERN, "tcpdump -i eth0 -w /tmp/mine.pcap")
    mrc_only = f"udp port {protocol.MRC_UDP_PORT}"
    assert tcpdump_argv("lo", pcap, 64, 1, mrc_only)[-1] == mrc_only


def test_tcpdump_counters_are_read():
    text = ("tcpdump: listening on lo, link-type EN10MB\n12 packets captured\n"
            "14 packets received by filter\n0 packets dropped by kernel\n")
    assert parse_stats(text) == {"captured": 12, "received by filter": 14,
                                 "dropped by kernel": 0}


class RootNamespace:
    """The machine's own namespace as a node (where a BMv2 switch's ports live)."""

    name = "root"

    def get(self, name):
        return self

    def popen(self, argv, **kwargs):
        return subprocess.Popen(argv, **kwargs)


@pytest.mark.skipif(os.geteuid() != 0, reason="tcpdump needs root to capture")
@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed (make deps)")
def test_a_real_tcpdump_captures_mrc_packets_and_stops_cleanly(tmp_path):
    from scapy.utils import rdpcap

    from hosts.mrc_scapy import MRC

    capture = Capture(RootNamespace(), [CaptureTarget("root", "lo")], tmp_path,
                      bpf_filter=f"udp port {protocol.MRC_UDP_PORT}")
    with capture:
        (_, proc, _), = capture.procs
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
            for psn in range(5):
                sock.sendto(wire.encode_data(0, 0, 1, 7, 0, psn, psn * 100, 500, bytes(100)),
                            ("::1", protocol.MRC_UDP_PORT))
        time.sleep(0.2)  # the run's last packets are on the wire before it stops
    assert proc.poll() is not None  # stopped, not left running
    (result,) = capture.results
    assert result.file == str(tmp_path / "pcap" / "lo.pcap")
    assert result.captured == 5 and result.dropped == 0
    packets = rdpcap(result.file)
    assert [p[MRC].psn for p in packets] == [0, 1, 2, 3, 4]
    # The snap length keeps the headers, not the payload.
    assert all(len(p) <= 128 for p in packets)
