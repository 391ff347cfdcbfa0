"""Mininet's own commands on the fabric: `h0 ping h1`, `pingall`, `iperf h0 h1`.

The fabric's switches forward uSID packets alone (docs/addressing.md), so a host's
IPv4 or IPv6 packet to another host reaches it only inside one. Each host is given,
on its loopback beside its uSID address, the addresses Mininet's commands use:

    IPv4   10.0.0.<N+1>        Mininet's numbering: h0 is 10.0.0.1, h3 10.0.0.4
    IPv6   fd00::<host uSID>   h0 is fd00::8000, h3 fd00::8003

and a route to every other host's two addresses over one uSID path: plane 0, its
first path between the two (through T1 0 between racks, the T0's direct path within a
rack; `mininet_path`). The source encapsulates the packet in SRv6 towards the path's
address and the destination decapsulates it (controller/kernel.py
`host_ip_commands`); the agents' own UDP to the uSID addresses is untouched.
Segmentation offloads are off on the hosts' ports, so that a TCP stream leaves as
frames of one MTU at most, as every testbed frame is (BMv2 reads its ports in MTU-sized
slots: topologies/offloads.py). A packet must fit in the MTU less the encapsulation (64
bytes): TCP sizes its segments so, `iperfudp` its datagrams (`datagram_bytes`); a
larger one is lost (controller/kernel.py says why).

`MininetCommands` is Mininet's CLI with its host commands kept to the fabric's hosts
(on the kernel data plane the switches are Mininet hosts too): `pingall`, `pingpair`,
`iperf` without hosts, and the substitution of a host's name by its address in a
command it runs, IPv6 for `ping6`, `traceroute6`, `tracepath6` and any command given
`-6`. Its `iperf` reads iperf's CSV reports and takes the server's report of the
client's own connection, as Mininet's later releases do: the distribution's Mininet
(2.3.0) waits for a second report from the server, which iperf 2.1 no longer writes for
the probe connection Mininet opens to see that the server listens, and would wait for
ever.
"""

from __future__ import annotations

from mininet.cli import CLI
from mininet.log import error, output
from mininet.util import waitListening

from controller.kernel import SEG6_ENCAP_BYTES, by_interface, host_ip_commands
from topologies.addressing import host_address, host_ipv4, host_ipv6
from topologies.model import Fabric
from topologies.paths import Path, catalogue

IPV6_COMMANDS = ("ping6", "traceroute6", "tracepath6")
# Mininet's iperf: its port, how long the client sends, the UDP rate by default.
IPERF_PORT = 5001
IPERF_S = 5
IPERF_UDP_BW = "10M"
IPV4_UDP_HEADERS = 20 + 8
# iperf's CSV report (-y C): time, one end's address and port, the other's, the
# connection's id, the interval, bytes, bits per second (UDP adds jitter and loss).
IPERF_CELLS = 9


class IperfError(RuntimeError):
    """iperf did not report a bandwidth; the message says where it stopped."""


def mininet_path(fabric: Fabric, src: int, dst: int) -> Path:
    """The path Mininet's commands take from src to dst: plane 0's first."""
    return catalogue(fabric, src, dst)[0]


def datagram_bytes(fabric: Fabric) -> int:
    """The largest UDP payload that reaches another host in one IPv4 packet: the MTU
    less the encapsulation and the IPv4 and UDP headers (1,408 bytes at 1,500)."""
    return fabric.spec.interface_mtu - SEG6_ENCAP_BYTES - IPV4_UDP_HEADERS


def host_commands(fabric: Fabric, index: int) -> list[str]:
    """One host's addresses, its routes to every other host's, its ports' offloads off."""
    ports = {p.number: p.intf for p in fabric.ports(fabric.host(index).name)}
    peers = []
    for other in fabric.hosts:
        if other.index != index:
            path = mininet_path(fabric, index, other.index)
            peers.append((host_ipv4(other.index), host_ipv6(other.index), path.address,
                          ports[path.plane]))
    return ([f"ethtool -K {port} tso off gso off" for port in ports.values()]
            + host_ip_commands(host_address(index), host_ipv4(index), host_ipv6(index),
                               list(ports.values()), peers))


def install(net, fabric: Fabric) -> int:
    """Give every host its addresses and routes (put back after a port flap, as its
    own), and its Mininet node the IPv4 address Mininet's commands ask it for; returns
    the commands run."""
    count = 0
    for host in fabric.hosts:
        node = net.get(host.name)
        commands = host_commands(fabric, host.index)
        count += node.install(commands, by_interface(
            commands, [p.intf for p in fabric.ports(host.name)]))
        intf = node.defaultIntf()
        intf.ip, intf.prefixLen = host_ipv4(host.index), 32
    return count


def substitute(words: list[str], fabric: Fabric) -> list[str]:
    """A command's words with each host name replaced by the host's address: IPv6 for
    an IPv6 command (IPV6_COMMANDS, or `-6` among its words), IPv4 otherwise."""
    six = bool(words) and words[0] in IPV6_COMMANDS or "-6" in words
    address = host_ipv6 if six else host_ipv4
    hosts = {h.name: h.index for h in fabric.hosts}
    return [address(hosts[word]) if word in hosts else word for word in words]


def iperf_reports(text: str) -> list[list[str]]:
    """The CSV reports among iperf's output lines (other lines are its messages)."""
    rows = []
    for line in text.splitlines():
        cells = line.strip().split(",")
        if len(cells) >= IPERF_CELLS and cells[0].isdigit() and cells[8].isdigit():
            rows.append(cells)
    return rows


def iperf_rate(text: str, client_port: str) -> int | None:
    """The rate (bits/s) in the report of the connection from `client_port`, the last
    one with a rate above zero; None if there is none yet."""
    rates = [int(r[8]) for r in iperf_reports(text)
             if client_port in (r[2], r[4]) and int(r[8]) > 0]
    return rates[-1] if rates else None


def bits_per_second(rate: float) -> str:
    """`12.5 Mbits/sec`, as iperf writes a rate."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if rate >= scale:
            return f"{rate / scale:.1f} {unit}bits/sec"
    return f"{rate:.1f} bits/sec"


def iperf(client, server, udp_bw: str | None = None, length: int | None = None,
          seconds: int = IPERF_S, port: int = IPERF_PORT) -> list[str]:
    """Mininet's iperf between two nodes: the server's rate and the client's (UDP:
    after the rate asked for; `length`: the datagrams' payload). An iperf left on the
    server's port in its namespace (a `Ctrl-C`'d one) is ended first, as Mininet
    does."""
    kind = "UDP" if udp_bw else "TCP"
    output(f"*** Iperf: testing {kind} bandwidth between {client} and {server} \n")
    server.cmd(f"pkill -9 -x iperf --ns {server.pid} --nslist net")
    args = f"iperf -y C -p {port} " + ("-u " if udp_bw else "")
    server.sendCmd(args + "-s")
    try:
        address = server.IP()
        if not udp_bw and not waitListening(client, address, port, timeout=seconds + 5):
            raise IperfError(f"{server} did not listen on port {port}")
        said = client.cmd(f"{args}-t {seconds} -c {address}"
                          + (f" -b {udp_bw}" if udp_bw else "")
                          + (f" -l {length}" if length else ""))
        reports = iperf_reports(said)
        if not reports or int(reports[-1][8]) <= 0:
            raise IperfError(f"{client} reported no bandwidth: {said.strip()[-200:]}")
        client_rate, client_port = int(reports[-1][8]), reports[-1][2]
        heard, rate = "", None
        for _ in range(seconds + 5):  # a second each: the server writes when it ends
            heard += server.monitor(timeoutms=1000)
            rate = iperf_rate(heard, client_port)
            if rate is not None:
                break
        if rate is None:
            raise IperfError(f"{server} reported nothing of the connection from {client}")
    finally:
        server.sendInt()
        server.waitOutput()
    result = [bits_per_second(rate), bits_per_second(client_rate)]
    if udp_bw:
        result.insert(0, udp_bw)
    output(f"*** Results: {result}\n")
    return result


class MininetCommands(CLI):
    """Mininet's CLI whose host commands mean the fabric's hosts (`fabric`)."""

    fabric: Fabric

    def _hosts(self) -> list:
        return [self.mn.get(h.name) for h in self.fabric.hosts]

    def _two_hosts(self, names: list[str], command: str) -> list | None:
        """The hosts named (the first and the last if none are), or None and one
        line saying why not."""
        if not names:
            hosts = self._hosts()
            return [hosts[0], hosts[-1]]
        known = {h.name for h in self.fabric.hosts}
        wrong = [name for name in names if name not in known]
        if len(names) != 2 or wrong:
            why = (f"{wrong[0]!r} is not a host of {self.fabric.name}" if wrong
                   else f"expected 2 hosts, got {len(names)}")
            error(f"error: {command}: {why}; fix: use two of "
                  f"{', '.join(sorted(known, key=lambda n: int(n[1:])))}\n")
            return None
        return [self.mn.get(name) for name in names]

    def _iperf(self, hosts: list, udp_bw: str | None = None) -> None:
        try:
            iperf(*hosts, udp_bw=udp_bw,
                  length=datagram_bytes(self.fabric) if udp_bw else None)
        except IperfError as err:
            error(f"error: iperf: {err}\n")

    def default(self, line: str) -> None:
        first, args, line = self.parseline(line)
        if args and first in {h.name for h in self.fabric.hosts}:
            line = " ".join([first, *substitute(args.split(" "), self.fabric)])
        super().default(line)

    def do_pingall(self, line: str) -> None:
        """Ping between all hosts (each to each other over its uSID path).
        Usage: pingall [timeout]"""
        output("*** Ping: testing ping reachability\n")
        self.mn.ping(self._hosts(), timeout=line.strip() or None)

    def do_pingpair(self, _line: str) -> None:
        """Ping between the first two hosts."""
        output("*** Ping: testing ping reachability\n")
        self.mn.ping(self._hosts()[:2])

    def do_pingallfull(self, _line: str) -> None:
        """Ping between all hosts, returns all ping results."""
        self.mn.pingFull(self._hosts())

    def do_pingpairfull(self, _line: str) -> None:
        """Ping between the first two hosts, returns all ping results."""
        self.mn.pingFull(self._hosts()[:2])

    def do_iperf(self, line: str) -> None:
        """Simple iperf TCP test between two hosts (the first and the last if none
        are given).
        Usage: iperf [HOST1 HOST2]"""
        hosts = self._two_hosts(line.split(), "iperf")
        if hosts:
            self._iperf(hosts)

    def do_iperfudp(self, line: str) -> None:
        """Simple iperf UDP test between two hosts (the first and the last if none
        are given), at a rate (10M if none is given).
        Usage: iperfudp [BW [HOST1 HOST2]]"""
        args = line.split()
        hosts = self._two_hosts(args[1:], "iperfudp")
        if hosts:
            self._iperf(hosts, args[0] if args else IPERF_UDP_BW)
