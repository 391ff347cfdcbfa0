"""The agent's I/O with the kernel: one UDP socket per plane, and carrier watching.

`PlaneSockets` opens one IPv6 UDP socket per plane interface, bound to the host's own
address and the MRC port and pinned to the interface (SO_BINDTODEVICE), so a datagram
leaves through the plane its path starts in and the agent knows which plane a received
datagram came in on. Checksums are zero both ways (docs/protocol.md). The traffic class
says what a switch may do with a packet (hosts/protocol.py): each socket sends with its
transport's DATA class, trimmable or not, and control packets go out with theirs in
the ancillary data of sendmsg (`control_cmsg`) when it differs; every packet is ECT(0).
The traffic class of every received datagram is read to see CE marks.

`CarrierWatcher` listens to rtnetlink link events, so the agent learns within
milliseconds that a plane's port lost or regained carrier.
"""

from __future__ import annotations

import os
import socket
import struct

from hosts.protocol import (
    CONTROL_TRAFFIC_CLASS,
    ECN_CE,
    ECN_MASK,
    MRC_UDP_PORT,
    UDP_NO_CHECK6_RX,
    UDP_NO_CHECK6_TX,
    data_traffic_class,
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


def set_traffic_classes(sock: socket.socket, transport: str) -> Cmsg | None:
    """Make `sock` send with the DATA traffic class of `transport` and report the
    traffic class of what it receives. Returns the ancillary data a control packet
    needs, or None when the socket's own class is the control class already."""
    data = data_traffic_class(transport)
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_TCLASS, data)
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVTCLASS, 1)
    return None if data == CONTROL_TRAFFIC_CLASS else traffic_class_cmsg(CONTROL_TRAFFIC_CLASS)


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
    """One UDP socket per plane interface, sending with `transport`'s traffic classes.
    DATA is sent with `sendto`, a control packet with `sendmsg` and `control_cmsg` when
    that is not None."""

    def __init__(self, address: str, interfaces: list[str], transport: str,
                 rcvbuf: int = 1 << 23):
        self.address = address
        self.interfaces = interfaces
        self.socks: list[socket.socket] = []
        self.control_cmsg: Cmsg | None = None
        for intf in interfaces:
            sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, intf.encode())
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_TX, 1)
            sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)
            self.control_cmsg = set_traffic_classes(sock, transport)
            _set_buffers(sock, rcvbuf)
            sock.bind((address, MRC_UDP_PORT))
            sock.setblocking(False)
            self.socks.append(sock)

    def receive(self, plane: int, limit: int = 64):
        """Yield (data, source address, CE seen) for up to `limit` queued datagrams."""
        sock = self.socks[plane]
        for _ in range(limit):
            try:
                data, ancdata, _, addr = sock.recvmsg(65535, _CMSG_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            tclass = received_traffic_class(ancdata)
            yield data, addr[0], tclass is not None and tclass & ECN_MASK == ECN_CE

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
