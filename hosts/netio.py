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

import ctypes
import ctypes.util
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
IPV6_TCLASS = int(getattr(socket, "IPV6_TCLASS", 67))
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


# ----------------------------------------------------------------- batched I/O
# sendmmsg(2) and recvmmsg(2) of the C library, through ctypes: one system call, and one
# call out of Python, for a whole batch of datagrams. The structures are the kernel's
# (linux/socket.h); their layout is taken from ctypes, and a platform whose layout the
# packing below does not reproduce falls back to one sendmsg/recvmsg per datagram.


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.c_void_p), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _Msghdr), ("msg_len", ctypes.c_uint)]


class _SockaddrIn6(ctypes.Structure):
    _fields_ = [("family", ctypes.c_uint16), ("port", ctypes.c_uint16),
                ("flowinfo", ctypes.c_uint32), ("addr", ctypes.c_ubyte * 16),
                ("scope_id", ctypes.c_uint32)]


_CODES = {ctypes.c_void_p: "P", ctypes.c_size_t: "N", ctypes.c_uint32: "I",
          ctypes.c_uint: "I", ctypes.c_int: "i"}


def _layout(fields, start: int = 0, size: int | None = None) -> struct.Struct:
    """A native struct format for `fields` (name, offset, ctypes type) of a C structure,
    read or written from offset `start` (padding between them, and up to `size`, as
    bytes to skip); OSError if the platform would pad it otherwise."""
    fmt, pos = "@", start
    for _, offset, kind in fields:
        fmt += "x" * (offset - pos) + _CODES[kind]
        pos = offset + ctypes.sizeof(kind)
    packer = struct.Struct(fmt + "x" * ((size or pos) - pos))
    if packer.size != (size or pos) - start:
        raise OSError("unexpected padding")
    return packer


def _load_batch_calls():
    """(sendmmsg, recvmmsg, mmsghdr packer, reader of what recvmmsg reports) or None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        send, recv = libc.sendmmsg, libc.recvmmsg
        hdr = _Msghdr
        whole = _layout([(f, getattr(hdr, f).offset, t) for f, t in hdr._fields_]
                        + [("msg_len", _Mmsghdr.msg_len.offset, ctypes.c_uint)],
                        size=ctypes.sizeof(_Mmsghdr))
        # Per received datagram: control length, flags, datagram length (read from
        # the control length's offset on).
        reader = _layout([("c", hdr.msg_controllen.offset, ctypes.c_size_t),
                          ("f", hdr.msg_flags.offset, ctypes.c_int),
                          ("n", _Mmsghdr.msg_len.offset, ctypes.c_uint)],
                         start=hdr.msg_controllen.offset)
    except (OSError, AttributeError):
        return None
    send.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                     ctypes.c_void_p]
    send.restype = recv.restype = ctypes.c_int
    return send, recv, whole, reader


_BATCH = _load_batch_calls() if hasattr(socket, "AF_INET6") else None
BATCHED = _BATCH is not None  # sendmmsg/recvmmsg available here
# Plain ints: the socket module's are enums, slow in the per-datagram code.
MSG_TRUNC = int(getattr(socket, "MSG_TRUNC", 0x20))
_MSG_DONTWAIT = int(getattr(socket, "MSG_DONTWAIT", 0x40))
_IPPROTO_IPV6 = int(socket.IPPROTO_IPV6)
# Datagrams one call moves at most, each way.
BATCH = 64
# Room for the ancillary data of one received datagram (its traffic class, and any
# other the kernel adds).
_CONTROL_ROOM = 64
_SOCKADDR_BYTES = ctypes.sizeof(_SockaddrIn6)
_NAME_STRIDE = 32
# A received datagram's source, as a dict key: the port, flow label and address bytes
# of its sockaddr_in6 (one slice of the kernel's structure, no parsing).
_KEY_START, _KEY_END = _SockaddrIn6.port.offset, _SockaddrIn6.addr.offset + 16
_CMSG_HEAD = struct.Struct("@Nii")  # cmsg_len, cmsg_level, cmsg_type


def _sockaddr_in6(address: str, port: int, flowinfo: int = 0) -> bytes:
    name = _SockaddrIn6(socket.AF_INET6, socket.htons(port), socket.htonl(flowinfo))
    name.addr[:] = socket.inet_pton(socket.AF_INET6, address)
    return bytes(name)


def source_key(address: str, port: int, flowinfo: int = 0) -> bytes:
    """The key `PlaneSockets.receive` gives a datagram from (address, port)."""
    return _sockaddr_in6(address, port, flowinfo)[_KEY_START:_KEY_END]


def parse_source_key(key: bytes) -> tuple[str, int]:
    """(address, port) of a source key."""
    port = int.from_bytes(key[:2], "big")
    return socket.inet_ntop(socket.AF_INET6, key[-16:]), port


class PlaneSockets:
    """One UDP socket per plane. `dscp` is the DSCP of each traffic class (by class id,
    the topology's), `default` the class the sockets send with: a packet of another
    class carries its traffic class in its ancillary data (IPV6_TCLASS).

    `send(plane, packets)` and `receive(plane)` move a batch of datagrams per system
    call (sendmmsg/recvmmsg): outgoing datagrams are copied into a ring of slots whose
    message headers are prepared once, incoming ones land in another, and each
    received datagram is handed out as a memoryview into its slot, valid until the next
    `receive` (the caller copies what it keeps). Datagrams longer than `max_datagram`
    are dropped on receipt and counted (`truncated`); the agent never sends one.
    """

    def __init__(self, socks: list[socket.socket], dscp: tuple[int, ...], default: int,
                 max_datagram: int = 9216, batched: bool = BATCHED):
        self.socks = socks
        self.fds = [s.fileno() for s in socks]
        self.default = default
        self.cmsgs = [traffic_class_cmsg(traffic_class(code, ECN_ECT0)) for code in dscp]
        self.slot = max_datagram
        self.truncated = 0
        self.batched = batched and _BATCH is not None
        self._names: dict[tuple[str, int], int] = {}
        # ctypes views of the buffers the kernel reads and writes: they hold the
        # addresses, and keep the bytearrays from ever being resized (moved).
        self._pinned: list = []
        if self.batched:
            self._setup_batches(dscp)

    @classmethod
    def on_interfaces(cls, address: str, interfaces: list[str], dscp: tuple[int, ...],
                      default: int, rcvbuf: int = 1 << 23, **kwargs) -> PlaneSockets:
        """The agent's sockets: one per plane interface, bound to the host's address and
        the MRC port and pinned to the interface (SO_BINDTODEVICE)."""
        socks = []
        try:
            for intf in interfaces:
                sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, intf.encode())
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_TX, 1)
                sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)
                set_traffic_class(sock, dscp[default])
                _set_buffers(sock, rcvbuf)
                sock.bind((address, MRC_UDP_PORT))
                sock.setblocking(False)
        except OSError:
            for sock in socks:
                sock.close()
            raise
        return cls(socks, dscp, default, **kwargs)

    # ------------------------------------------------------------------ set-up
    def _address_of(self, buffer: bytearray) -> int:
        view = (ctypes.c_char * len(buffer)).from_buffer(buffer)
        self._pinned.append(view)
        return ctypes.addressof(view)

    def _setup_batches(self, dscp: tuple[int, ...]) -> None:
        _, _, whole, _ = _BATCH
        hsize, slot = whole.size, self.slot
        iov = ctypes.sizeof(_Iovec)
        # Sending: BATCH slots, each with its iovec; the message headers are written
        # per datagram (destination, ancillary data), the iovec length too.
        self._tx = bytearray(BATCH * slot)
        self._tx_view = memoryview(self._tx)
        self._tx_hdrs = bytearray(BATCH * hsize)
        self._tx_iovs = (_Iovec * BATCH)()
        base = self._address_of(self._tx)
        for i in range(BATCH):
            self._tx_iovs[i].iov_base = base + i * slot
        iov_base = ctypes.addressof(self._tx_iovs)
        self._tx_iov_at = [iov_base + i * iov for i in range(BATCH)]
        self._tx_hdrs_at = self._address_of(self._tx_hdrs)
        self._iov_len = struct.Struct("@N")
        self._iov_len_at = [i * iov + _Iovec.iov_len.offset for i in range(BATCH)]
        # Ancillary data per traffic class: none for the sockets' own class.
        self._cmsg_buffers = []
        self._control = []
        for cls, code in enumerate(dscp):
            if cls == self.default:
                self._control.append((0, 0))
                continue
            level, kind, value = traffic_class_cmsg(traffic_class(code, ECN_ECT0))[0]
            room = socket.CMSG_SPACE(len(value))
            buffer = bytearray(room)
            _CMSG_HEAD.pack_into(buffer, 0, socket.CMSG_LEN(len(value)), level, kind)
            buffer[_CMSG_HEAD.size:_CMSG_HEAD.size + len(value)] = value
            self._cmsg_buffers.append(buffer)
            self._control.append((self._address_of(buffer), room))
        # Receiving: BATCH slots, source names and control room; the headers are
        # restored from a template after each call (the kernel writes lengths back).
        self._rx = bytearray(BATCH * slot)
        self._rx_view = memoryview(self._rx)
        # A ctypes array: its slices are bytes (hashable keys) in one step.
        self._rx_names = (ctypes.c_char * (BATCH * _NAME_STRIDE))()
        self._rx_control = bytearray(BATCH * _CONTROL_ROOM)
        self._rx_iovs = (_Iovec * BATCH)()
        rx_base = self._address_of(self._rx)
        for i in range(BATCH):
            self._rx_iovs[i].iov_base = rx_base + i * slot
            self._rx_iovs[i].iov_len = slot
        names, control = ctypes.addressof(self._rx_names), self._address_of(self._rx_control)
        rx_iov = ctypes.addressof(self._rx_iovs)
        self._rx_template = bytearray(BATCH * hsize)
        for i in range(BATCH):
            whole.pack_into(self._rx_template, i * hsize, names + i * _NAME_STRIDE,
                            _SOCKADDR_BYTES, rx_iov + i * iov, 1,
                            control + i * _CONTROL_ROOM, _CONTROL_ROOM, 0, 0)
        self._rx_hdrs = bytearray(self._rx_template)
        self._rx_hdrs_at = self._address_of(self._rx_hdrs)
        self._rx_template_at = self._address_of(self._rx_template)
        self._rx_fields_at = [i * hsize + _Msghdr.msg_controllen.offset
                              for i in range(BATCH)]

    def sockaddr(self, address: str, port: int = MRC_UDP_PORT):
        """A destination for `send`: (address, port), prepared once (the batched path
        keeps a sockaddr_in6 and sends with its address)."""
        key = (address, port)
        if not self.batched:
            return key
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = self._address_of(bytearray(_sockaddr_in6(address, port)))
        return name

    # ------------------------------------------------------------------ sending
    def send(self, plane: int, packets: list) -> tuple[int, int]:
        """Send (destination, datagram, traffic class) triples on `plane`'s socket, the
        destinations from `sockaddr()`; returns (sent, failed). A datagram the kernel
        refuses (port down, buffer full) is counted and the rest still go."""
        if not self.batched:
            return self._send_each(plane, packets)
        _, _, whole, _ = _BATCH
        slot, view, hdrs, hsize = self.slot, self._tx_view, self._tx_hdrs, whole.size
        control, iov_at, iov_len_at, iovs = (self._control, self._tx_iov_at,
                                             self._iov_len_at, self._tx_iovs)
        set_len, pack = self._iov_len.pack_into, whole.pack_into
        sent = failed = i = 0
        large = []
        for packet in packets:
            name, data, cls = packet
            size = len(data)
            if size > slot:  # never the agent's own: sent on its own below
                large.append(packet)
                continue
            offset = i * slot
            view[offset:offset + size] = data
            set_len(iovs, iov_len_at[i], size)
            ctl, ctl_len = control[cls]
            pack(hdrs, i * hsize, name, _SOCKADDR_BYTES, iov_at[i], 1, ctl, ctl_len, 0, 0)
            i += 1
            if i == BATCH:
                ok, bad = self._sendmmsg(plane, i)
                sent, failed, i = sent + ok, failed + bad, 0
        if i:
            ok, bad = self._sendmmsg(plane, i)
            sent, failed = sent + ok, failed + bad
        if large:
            ok, bad = self._send_each(plane, large, named=True)
            sent, failed = sent + ok, failed + bad
        return sent, failed

    def _sendmmsg(self, plane: int, count: int) -> tuple[int, int]:
        """The first `count` prepared slots, in as few calls as the kernel allows."""
        sendmmsg, hsize = _BATCH[0], _BATCH[2].size
        fd, at = self.fds[plane], self._tx_hdrs_at
        sent = failed = done = 0
        while done < count:
            n = sendmmsg(fd, at + done * hsize, count - done, 0)
            if n < 0:
                # The datagram at `done` failed (the error is its own): count it, and
                # go on with the next.
                failed += 1
                done += 1
            else:
                sent += n
                done += n
        return sent, failed

    def _send_each(self, plane: int, packets: list, named: bool = False) -> tuple[int, int]:
        sock, default, cmsgs = self.socks[plane], self.default, self.cmsgs
        if named:  # destinations prepared for the batched path: back to (address, port)
            addresses = {v: k for k, v in self._names.items()}
            packets = [(addresses[name], data, cls) for name, data, cls in packets]
        sent = failed = 0
        for name, data, cls in packets:
            try:
                if cls == default:
                    sock.sendto(data, name)
                else:
                    sock.sendmsg([data], cmsgs[cls], 0, name)
                sent += 1
            except OSError:
                failed += 1
        return sent, failed

    # ------------------------------------------------------------------ receiving
    def receive(self, plane: int) -> list[tuple[memoryview, bytes, int | None]]:
        """Up to BATCH queued datagrams of `plane`'s socket: (data, source key,
        traffic class or None). The data are views into a buffer that the next call
        reuses; the source key is `source_key(address, port)` of the sender."""
        if not self.batched:
            return self._receive_each(plane)
        _, recvmmsg, whole, reader = _BATCH
        n = recvmmsg(self.fds[plane], self._rx_hdrs_at, BATCH, _MSG_DONTWAIT, None)
        if n <= 0:
            return []
        out = []
        hdrs, names, control, view = self._rx_hdrs, self._rx_names, self._rx_control, \
            self._rx_view
        fields_at, read, slot = self._rx_fields_at, reader.unpack_from, self.slot
        head = _CMSG_HEAD.unpack_from
        for i in range(n):
            ctl_len, flags, size = read(hdrs, fields_at[i])
            if flags & MSG_TRUNC:
                self.truncated += 1
                continue
            tclass = None
            if ctl_len >= _CMSG_HEAD.size + 4:
                at = i * _CONTROL_ROOM
                _, level, kind = head(control, at)
                if level == _IPPROTO_IPV6 and kind == IPV6_TCLASS:
                    tclass = _INT.unpack_from(control, at + _CMSG_HEAD.size)[0]
            at = i * _NAME_STRIDE
            offset = i * slot
            out.append((view[offset:offset + size], names[at + _KEY_START:at + _KEY_END],
                        tclass))
        ctypes.memmove(self._rx_hdrs_at, self._rx_template_at, n * whole.size)
        return out

    def _receive_each(self, plane: int) -> list[tuple[bytes, bytes, int | None]]:
        sock, out = self.socks[plane], []
        for _ in range(BATCH):
            try:
                data, ancdata, flags, addr = sock.recvmsg(self.slot, _CMSG_SPACE)
            except OSError:  # nothing queued (BlockingIOError) or the port went away
                break
            if flags & MSG_TRUNC:
                self.truncated += 1
                continue
            out.append((data, source_key(addr[0], addr[1], addr[2]),
                        received_traffic_class(ancdata)))
        return out

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


SIOCGIFFLAGS = 0x8913
IFF_RUNNING = 0x40
_IFREQ_FLAGS = struct.Struct("16sH22x")  # struct ifreq: the name, then ifr_flags


class CarrierWatcher:
    """rtnetlink link events -> (interface name, has carrier) for the watched interfaces,
    in the network namespace it was made in (its sockets stay there, whichever
    namespace the thread that uses them is in later: one agent process may serve
    several hosts)."""

    RTMGRP_LINK = 1
    RTM_NEWLINK = 16
    RTM_DELLINK = 17
    IFF_LOWER_UP = 0x10000
    IFF_UP = 0x1

    def __init__(self, interfaces: list[str]):
        self.by_index = {socket.if_nametoindex(i): i for i in interfaces}
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.sock.bind((0, self.RTMGRP_LINK))  # the kernel picks the port id
        self.sock.setblocking(False)
        # For the interfaces' flags now (SIOCGIFFLAGS answers for the socket's namespace).
        self.flags_sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)

    def fileno(self) -> int:
        return self.sock.fileno()

    def has_carrier(self, intf: str) -> bool:
        """Whether the interface is up and has carrier now (before any event says so)."""
        import fcntl

        ifreq = fcntl.ioctl(self.flags_sock, SIOCGIFFLAGS, _IFREQ_FLAGS.pack(intf.encode(), 0))
        flags = _IFREQ_FLAGS.unpack(ifreq)[1]
        return bool(flags & self.IFF_UP) and bool(flags & IFF_RUNNING)

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
        self.flags_sock.close()
