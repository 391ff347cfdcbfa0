"""The agent's I/O with the kernel: one UDP socket per plane, and carrier watching.

`PlaneSockets` opens one IPv6 UDP socket per plane interface, bound to the host's own
address and the MRC port and pinned to the interface (SO_BINDTODEVICE), so a datagram
leaves through the plane its path starts in and the agent knows which plane a received
datagram came in on. Checksums are zero both ways (docs/protocol.md). The traffic class
is all a switch sees of a packet (hosts/protocol.py): each socket sends with its
transport's DATA class, and any other class (a retransmission, a control packet, a
CNP) goes out with its DSCP in the ancillary data of sendmsg (`cmsg(cls)`); every
packet is ECT(0). The traffic class of every received datagram is read: its ECN bits
for CE marks, its DSCP for the class (a trimmed packet is told by its DSCP).

`CarrierWatcher` listens to rtnetlink link events, so the agent learns within
milliseconds that a plane's port lost or regained carrier.
"""

from __future__ import annotations

import os
import socket
import struct

from hosts.protocol import (
    ECN_ECT0,
    MRC_UDP_PORT,
    UDP_NO_CHECK6_RX,
    UDP_NO_CHECK6_TX,
    traffic_class,
)

IPV6_RECVTCLASS = getattr(socket, "IPV6_RECVTCLASS", 66)
IPV6_TCLASS = getattr(socket, "IPV6_TCLASS", 67)
_CMSG_SPACE = socket.CMSG_SPACE(4)
_INT = struct.Struct("i")

Cmsg = list[tuple[int, int, bytes]]  # ancillary data for socket.sendmsg


def traffic_class_cmsg(tclass: int) -> Cmsg:
    """Ancillary data that sends one datagram with this IPv6 traffic class."""
    return [(socket.IPPROTO_IPV6, IPV6_TCLASS, _INT.pack(tclass))]


def received_traffic_class(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    """The traffic class in the ancillary data of a datagram received on a socket with
    IPV6_RECVTCLASS set (None if it is not there)."""
    for level, kind, value in ancdata:
        if level == socket.IPPROTO_IPV6 and kind == IPV6_TCLASS and len(value) >= _INT.size:
            return _INT.unpack_from(value)[0]
    return None


def set_traffic_class(sock: socket.socket, dscp: int) -> None:
    """Make `sock` send with this DSCP (and ECT(0)) and report the traffic class of
    what it receives."""
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_TCLASS, traffic_class(dscp, ECN_ECT0))
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVTCLASS, 1)


def _set_buffers(sock: socket.socket, size: int) -> None:
    """Large socket buffers: a busy agent must not drop datagrams that the network
    delivered (that would look like a broken path). The FORCE options pass the
    net.core.rmem_max cap, which they may as root; plain ones are the fallback."""
    for force, plain in ((getattr(socket, "SO_RCVBUFFORCE", 33), socket.SO_RCVBUF),
                         (getattr(socket, "SO_SNDBUFFORCE", 32), socket.SO_SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, size)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, plain, size)


class PlaneSockets:
    """One UDP socket per plane interface. `dscp` is the DSCP of each traffic class (by
    class id, the topology's), `default` the class the sockets send with: a packet of
    that class goes out with `sendto`, one of another with `sendmsg` and `cmsg(cls)`."""

    def __init__(self, address: str, interfaces: list[str], dscp: tuple[int, ...],
                 default: int, rcvbuf: int = 1 << 23):
        self.address = address
        self.interfaces = interfaces
        self.socks: list[socket.socket] = []
        self.default = default
        self.cmsgs = [traffic_class_cmsg(traffic_class(code, ECN_ECT0)) for code in dscp]
        for intf in interfaces:
            sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, intf.encode())
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_TX, 1)
            sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)
            set_traffic_class(sock, dscp[default])
            _set_buffers(sock, rcvbuf)
            sock.bind((address, MRC_UDP_PORT))
            sock.setblocking(False)
            self.socks.append(sock)

    def receive(self, plane: int, limit: int = 64):
        """Yield (data, source address, traffic class or None) for up to `limit` queued
        datagrams."""
        sock = self.socks[plane]
        for _ in range(limit):
            try:
                data, ancdata, _, addr = sock.recvmsg(65535, _CMSG_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            yield data, addr[0], received_traffic_class(ancdata)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


def carrier(intf: str) -> bool:
    try:
        with open(f"/sys/class/net/{intf}/carrier") as f:
            return f.read().strip() == "1"
    except OSError:  # reading carrier of an interface that is admin down fails
        return False


class CarrierWatcher:
    """rtnetlink link events -> (interface name, has carrier) for the watched interfaces."""

    RTMGRP_LINK = 1
    RTM_NEWLINK = 16
    RTM_DELLINK = 17
    IFF_LOWER_UP = 0x10000
    IFF_UP = 0x1

    def __init__(self, interfaces: list[str]):
        self.by_index = {socket.if_nametoindex(i): i for i in interfaces}
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.sock.bind((os.getpid(), self.RTMGRP_LINK))
        self.sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def events(self) -> list[tuple[str, bool]]:
        out = []
        while True:
            try:
                data = self.sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                return out
            offset = 0
            while offset + 32 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if length < 16:
                    break
                if kind in (self.RTM_NEWLINK, self.RTM_DELLINK):
                    _, _, _, index, flags, _ = struct.unpack_from("=BBHiII", data, offset + 16)
                    if index in self.by_index:
                        up = kind == self.RTM_NEWLINK and bool(flags & self.IFF_LOWER_UP) \
                            and bool(flags & self.IFF_UP)
                        out.append((self.by_index[index], up))
                offset += (length + 3) & ~3

    def close(self) -> None:
        self.sock.close()
