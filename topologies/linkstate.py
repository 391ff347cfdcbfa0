"""Set interfaces of Mininet nodes up or down, change a tbf qdisc, and read their
interfaces and root queues' drops, over rtnetlink, without a shell command.

Faults are timed to the millisecond, on a machine whose agents keep both cores busy.
`ifconfig` run in a node's shell costs a fork and an exec per interface: the two ends
of a link went down milliseconds apart, and the CPU it took stalled the very agents
whose reaction is being measured. Here each namespace gets one netlink socket, made
once, and a state change is one RTM_NEWLINK message, answered in microseconds; reading
every port's queue drops is one RTM_GETQDISC dump per node, where `tc -s qdisc show`
would cost a process per node on every reading of a run's counters.

A socket belongs to the network namespace it was created in, so the socket of a node
is created by a short-lived thread that first joins the node's namespace (setns acts on
the calling thread only; the runner's own threads stay where they are).
"""

from __future__ import annotations

import os
import socket
import struct

from topologies import netns

RTM_NEWLINK, RTM_GETLINK = 16, 18
RTM_NEWQDISC, RTM_GETQDISC = 36, 38
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
IFLA_IFNAME = 3
IFF_UP = 0x1
_NLMSGHDR = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
_IFINFOMSG = struct.Struct("=BxHiII")  # family, type, index, flags, change
_TCMSG = struct.Struct("=BxxxiIII")  # family, index, handle, parent, info
TC_H_ROOT = 0xFFFFFFFF
TCA_KIND, TCA_OPTIONS, TCA_STATS2, TCA_STATS_QUEUE = 1, 2, 7, 3
TCA_TBF_PARMS, TCA_TBF_BURST = 1, 6
TC_LINKLAYER_ETHERNET = 1  # a rate without a rate table (the kernel computes it)
# struct tc_ratespec: cell log, link layer, overhead, cell align, mpu, rate (bytes/s).
_RATESPEC = struct.Struct("=BBHhHI")
_TBF_LIMITS = struct.Struct("=III")  # limit (bytes), buffer, mtu: after rate and peak rate
_QUEUE_STATS = struct.Struct("=IIIII")  # qlen, backlog, drops, requeues, overlimits


class LinkStateError(OSError):
    """The kernel refused a link state change, or the namespace could not be joined."""


def _socket_in(pid: int) -> socket.socket:
    """A NETLINK_ROUTE socket inside the network namespace of process `pid`."""
    try:
        sock = netns.socket_in(pid, socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    except OSError as err:
        raise LinkStateError(err.errno, f"the namespace of pid {pid}: {err.strerror}") from err
    sock.bind((0, 0))
    return sock


def _attribute(kind: int, value: bytes) -> bytes:
    length = 4 + len(value)
    return struct.pack("=HH", length, kind) + value + b"\0" * (-length % 4)


class LinkState:
    """Admin state of interfaces in Mininet nodes' namespaces (one socket per node)."""

    def __init__(self):
        self.sockets: dict[int, socket.socket] = {}
        self.sequence = 0

    def open(self, pid: int) -> socket.socket:
        """The socket of the namespace of process `pid`, made on first use (a
        millisecond: worth doing before the first fault, not during it)."""
        sock = self.sockets.get(pid)
        if sock is None:
            sock = self.sockets[pid] = _socket_in(pid)
        return sock

    def set(self, pid: int, intf: str, up: bool) -> None:
        """Set interface `intf` of the namespace of process `pid` up or down."""
        body = _IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, IFF_UP if up else 0, IFF_UP)
        body += _attribute(IFLA_IFNAME, intf.encode() + b"\0")
        self._request(pid, RTM_NEWLINK, body, f"set {intf} {'up' if up else 'down'}")

    def change_tbf(self, pid: int, ifindex: int, handle: int, parent: int,
                   rate_bytes_per_s: int, burst_bytes: int, limit_bytes: int) -> None:
        """Change the tbf qdisc `handle` (under `parent`) of interface `ifindex`, in the
        namespace of process `pid`, in place: its rate, bucket and queue limit, as `tc
        qdisc change ... tbf rate R burst B limit L` would. The kernel refills the bucket
        on every change."""
        rate = _RATESPEC.pack(0, TC_LINKLAYER_ETHERNET, 0, 0, 0, rate_bytes_per_s)
        peak = _RATESPEC.pack(0, TC_LINKLAYER_ETHERNET, 0, 0, 0, 0)
        options = (_attribute(TCA_TBF_PARMS, rate + peak + _TBF_LIMITS.pack(limit_bytes, 0, 0))
                   + _attribute(TCA_TBF_BURST, struct.pack("=I", burst_bytes)))
        body = (_TCMSG.pack(socket.AF_UNSPEC, ifindex, handle, parent, 0)
                + _attribute(TCA_KIND, b"tbf\0") + _attribute(TCA_OPTIONS, options))
        self._request(pid, RTM_NEWQDISC, body, f"change tbf {handle >> 16:x}: of {ifindex}")

    def _request(self, pid: int, kind: int, body: bytes, what: str) -> None:
        """Send one request to the namespace of process `pid` and wait for its ack;
        LinkStateError naming `what` if the kernel refuses."""
        sock = self.open(pid)
        self.sequence += 1
        header = _NLMSGHDR.pack(_NLMSGHDR.size + len(body), kind,
                                NLM_F_REQUEST | NLM_F_ACK, self.sequence, 0)
        sock.send(header + body)
        while True:  # the ack of this request (earlier answers were all read)
            reply = sock.recv(65536)
            _, answer, _, sequence, _ = _NLMSGHDR.unpack_from(reply)
            if answer == NLMSG_ERROR and sequence == self.sequence:
                (error,) = struct.unpack_from("=i", reply, _NLMSGHDR.size)
                if error:
                    raise LinkStateError(-error, f"{what}: {os.strerror(-error)}")
                return

    def indexes(self, pid: int) -> dict[str, int]:
        """Interface name -> index, in the namespace of process `pid` (one dump)."""
        found: dict[str, int] = {}
        for message in self._dump(pid, RTM_GETLINK, RTM_NEWLINK,
                                  _IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)):
            _, _, index, _, _ = _IFINFOMSG.unpack_from(message)
            name = _attributes(message, _IFINFOMSG.size).get(IFLA_IFNAME)
            if name:
                found[name.rstrip(b"\0").decode()] = index
        return found

    def root_queue_drops(self, pid: int) -> dict[int, int]:
        """Interface index -> packets its root qdisc has dropped, in the namespace of
        process `pid` (one dump; a qdisc's drops include those of the qdiscs below it)."""
        found: dict[int, int] = {}
        for message in self._dump(pid, RTM_GETQDISC, RTM_NEWQDISC,
                                  _TCMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)):
            _, index, _, parent, _ = _TCMSG.unpack_from(message)
            stats = _attributes(message, _TCMSG.size).get(TCA_STATS2)
            queue = _attributes(stats, 0).get(TCA_STATS_QUEUE) if stats else None
            if parent == TC_H_ROOT and queue and len(queue) >= _QUEUE_STATS.size:
                found[index] = _QUEUE_STATS.unpack_from(queue)[2]
        return found

    def _dump(self, pid: int, request: int, answer: int, body: bytes) -> list[bytes]:
        """The bodies of the `answer` messages of one dump request."""
        sock = self.open(pid)
        self.sequence += 1
        sock.send(_NLMSGHDR.pack(_NLMSGHDR.size + len(body), request,
                                 NLM_F_REQUEST | NLM_F_DUMP, self.sequence, 0) + body)
        found: list[bytes] = []
        while True:
            reply = sock.recv(1 << 16)
            offset = 0
            while offset + _NLMSGHDR.size <= len(reply):
                length, kind, _, sequence, _ = _NLMSGHDR.unpack_from(reply, offset)
                if length < _NLMSGHDR.size:
                    return found
                if sequence == self.sequence:
                    if kind in (NLMSG_DONE, NLMSG_ERROR):
                        return found
                    if kind == answer:
                        found.append(reply[offset + _NLMSGHDR.size:offset + length])
                offset += (length + 3) & ~3

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()


def _attributes(data: bytes, start: int) -> dict[int, bytes]:
    """A netlink message's attributes from `start` on: type -> payload."""
    found: dict[int, bytes] = {}
    while start + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, start)
        if length < 4:
            break
        found[kind & 0x3FFF] = data[start + 4:start + length]  # without the nested flags
        start += (length + 3) & ~3
    return found
