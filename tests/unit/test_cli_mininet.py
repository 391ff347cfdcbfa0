"""Mininet's own commands in the CLI without a network (experiments/interactive/
mininet_commands.py): each host's addresses, the path and the routes to its peers'
(controller/kernel.py `host_ip_commands`), a host's name read as its address, and
iperf's reports read. tests/integration/test_cli.py runs them on a fabric."""

from __future__ import annotations

from controller.kernel import SEG6_ENCAP_BYTES, by_interface, host_ip_commands
from experiments.interactive.mininet_commands import (
    bits_per_second,
    datagram_bytes,
    host_commands,
    iperf_rate,
    iperf_reports,
    mininet_path,
    substitute,
)
from topologies.addressing import host_ipv4, host_ipv6


def test_each_host_has_mininets_ipv4_and_an_ipv6_of_its_usid():
    assert [host_ipv4(i) for i in (0, 3, 254, 255)] == [
        "10.0.0.1", "10.0.0.4", "10.0.0.255", "10.0.1.0"]
    assert [host_ipv6(i) for i in (0, 3, 300)] == ["fd00::8000", "fd00::8003", "fd00::812c"]


def test_the_path_is_plane_0s_first(fabric):
    other_rack = mininet_path(fabric, 0, 3)
    assert (other_rack.plane, other_rack.spine) == (0, 0)
    assert other_rack.address == "fcbb:bb00:1000:2000:1001:8003::"
    same_rack = mininet_path(fabric, 0, 1)
    assert (same_rack.plane, same_rack.spine) == (0, None)
    assert same_rack.address == "fcbb:bb00:1000:8001::"


def test_host_ip_commands_encapsulate_towards_the_path():
    cmds = host_ip_commands("fcbb:bb00:8000::", "10.0.0.1", "fd00::8000",
                            ["h0-eth0", "h0-eth1"],
                            [("10.0.0.4", "fd00::8003", "fcbb:bb00:1000:2000:1001:8003::",
                              "h0-eth0")])
    assert cmds == [
        "ip addr replace 10.0.0.1/32 dev lo",
        "ip -6 addr replace fd00::8000/128 dev lo",
        "ip sr tunsrc set fcbb:bb00:8000::",
        "sysctl -qw net.ipv6.conf.all.seg6_enabled=1 net.ipv6.conf.h0-eth0.seg6_enabled=1 "
        "net.ipv6.conf.h0-eth1.seg6_enabled=1",
        "ip route replace 10.0.0.4/32 encap seg6 mode encap segs "
        "fcbb:bb00:1000:2000:1001:8003:: dev h0-eth0 src 10.0.0.1",
        "ip -6 route replace fd00::8003/128 encap seg6 mode encap segs "
        "fcbb:bb00:1000:2000:1001:8003:: dev h0-eth0 src fd00::8000",
    ]
    assert SEG6_ENCAP_BYTES == 64


def test_a_host_routes_every_peer_out_of_plane_0_and_gets_them_back_after_a_flap(fabric):
    cmds = host_commands(fabric, 2)
    assert cmds[:2] == ["ethtool -K h2-eth0 tso off gso off",
                        "ethtool -K h2-eth1 tso off gso off"]
    routes = [c for c in cmds if " encap seg6 " in c]
    assert len(routes) == 2 * 3 and all(" dev h2-eth0 " in c for c in routes)
    assert ("ip route replace 10.0.0.1/32 encap seg6 mode encap segs "
            "fcbb:bb00:1001:2000:1000:8000:: dev h2-eth0 src 10.0.0.3") in routes
    assert "ip -6 route replace fd00::8003/128 encap seg6 mode encap segs " \
           "fcbb:bb00:1001:8003:: dev h2-eth0 src fd00::8002" in routes
    # What Linux flushes with port 0 is put back when it comes up; port 1 has none.
    assert by_interface(cmds, ["h2-eth0", "h2-eth1"]) == {"h2-eth0": routes}


def test_a_hosts_name_is_its_address_ipv6_for_an_ipv6_command(fabric):
    assert substitute(["ping", "-c", "2", "h1"], fabric) == ["ping", "-c", "2", "10.0.0.2"]
    assert substitute(["ping6", "h3"], fabric) == ["ping6", "fd00::8003"]
    assert substitute(["ping", "-6", "h3"], fabric) == ["ping", "-6", "fd00::8003"]
    assert substitute(["traceroute6", "h2"], fabric) == ["traceroute6", "fd00::8002"]
    # Switches and other words stay as they are.
    assert substitute(["ping", "p0t0r0", "h9", ""], fabric) == ["ping", "p0t0r0", "h9", ""]


def test_datagrams_fit_the_mtu_less_the_encapsulation(fabric):
    assert fabric.spec.interface_mtu == 1500
    assert datagram_bytes(fabric) == 1500 - 64 - 28


# iperf 2.1's CSV reports: the client's, then the server's of the probe connection
# Mininet opens (no rate) and of the client's connection, whose port it names.
CLIENT = "19700101000000,10.0.0.1,38038,10.0.0.2,5001,1,0.0-5.0,7864320,12582912\n"
SERVER = ("read tcp flags (peer close) failed\n"
          "19700101000000,10.0.0.2,5001,10.0.0.1,38022,1,0.0-0.0,0,0\n"
          "19700101000000,10.0.0.1,38038,10.0.0.2,5001,1,0.0-5.1,7864320,12336000\n")
UDP_SERVER = "19700101000000,10.0.0.3,48864,10.0.0.1,5001,1,0.0-3.0,1971270,5250489," \
             "0.000,0,-1,-0.000,0\n"


def test_iperfs_reports_are_read_by_the_clients_port():
    (report,) = iperf_reports(CLIENT)
    assert report[2] == "38038" and report[8] == "12582912"
    assert iperf_rate(SERVER, "38038") == 12336000
    assert iperf_rate(SERVER, "38022") is None  # the probe carried nothing
    assert iperf_rate(SERVER.splitlines()[0], "38038") is None  # not written yet
    assert iperf_rate(UDP_SERVER, "48864") == 5250489


def test_a_rate_is_written_as_iperf_writes_it():
    assert bits_per_second(12582912) == "12.6 Mbits/sec"
    assert bits_per_second(2_500) == "2.5 Kbits/sec"
    assert bits_per_second(1.5e9) == "1.5 Gbits/sec"
    assert bits_per_second(12) == "12.0 bits/sec"
