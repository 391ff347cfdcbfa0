"""The MRC receiver of one connection (pure logic): placement by offset, SACK and NACK.

Every DATA payload is copied to its offset in the message buffer as it arrives, in any
order; PSNs already seen are duplicates and are only acknowledged again. A message is
delivered when every byte has arrived. Each DATA packet is answered: a SACK (cumulative
PSN + 64-bit bitmap + the packet's EV echoed + ECN echo) or, for a trimmed packet, a
NACK for exactly that PSN. The endpoint chooses the EV each answer goes back on
(hosts/reverse.py).

The receiver also judges each path. A DATA packet carries the index of its path within
its plane and its sequence number on that path (`path_seq`), so the receiver sees which
packets a path should have brought and did not (the EVs of one path share its fate, and
judging the path gathers evidence several times faster than judging each EV). A path is
persistently bad when, among its latest `M_WINDOW` judged sequence numbers (a number is
judged once `M_REORDER` later ones of the same path have arrived: packets of one path
overtake each other only by a little), at least `M_MIN_JUDGED` are judged and at least
`M_MISSING_FRACTION` of them, and no fewer than `M_MIN_MISSING`, never arrived. Every
SACK answering a packet of such a path carries `ALWAYS_SKIP` (the M field of MRC's
SACK, about the EV it echoes); the sender retires the path at once. A late packet fills
its hole again, and a path silent for `M_IDLE_S` starts afresh (a path retired and later
reinstated by a probe is judged on what it carries after its return), as does a path
that brings a trimmed packet: a congested switch sends trimmed headers ahead of the
data queued before them, so what is missing then is late, not lost.

Arrived PSNs above the cumulative one are kept as one integer bitmap (bit i: PSN
`cum + i`), so recording a packet, advancing `cum` and building the SACK bitmap are a
few integer operations, whatever the reordering.

With `in_order=True` (a queue pair of the RoCE-like baseline, hosts/baseline.py) the
receiver is go-back-N's: a packet other than the next expected one is dropped. The
first such packet of a gap is answered at once with a NACK of reason `GAP` whose body
carries the expected PSN (`cum_psn`), as a RoCE responder answers the first
out-of-sequence packet with a "PSN sequence error" NAK; the packets after it are
dropped without an answer until the expected one arrives, so one loss costs one NACK.
A queue pair's PSNs start at `first_psn` (its number in the PSN's top byte). The
queue pairs of one connection carry slices of the same messages, so their receivers
share one set of message buffers (`messages`, `delivered`): a message is delivered
when every slice has arrived, whichever QP brought the last.
"""

from __future__ import annotations

from collections.abc import Callable

from hosts import protocol, wire
from hosts.payload import MessageData, zeroed

# Farther ahead of the cumulative PSN than any window: garbage (and a bound on the
# bitmap's size, which a forged PSN could otherwise blow up).
MAX_PSN_AHEAD = 1 << 16
_BITMAP_MASK = (1 << protocol.BITMAP_BITS) - 1

# The receiver's verdict on a path (the SACK's M field, ALWAYS_SKIP): see the docstring.
M_WINDOW = 32  # latest judged sequence numbers of a path looked at
M_REORDER = 4  # later arrivals on the same path before a missing number counts
M_MIN_JUDGED = 16  # judged numbers needed before any verdict
M_MISSING_FRACTION = 1 / 8  # missing among the judged ones that makes a path bad
M_MIN_MISSING = 2  # and never fewer than this: a single loss is the sender's to judge
# A path silent this long starts afresh: shorter than the sender's first probe of a
# retired path (probe_initial_s, 50 ms by default), so a reinstated path is not judged
# on the packets it lost when it failed.
M_IDLE_S = 0.04
_M_SPAN = M_WINDOW + M_REORDER
_M_MASK = (1 << _M_SPAN) - 1
_SEQ_SPACE = protocol.PATH_SEQ_MASK + 1
_SEQ_MASK, _PATH_SHIFT = protocol.PATH_SEQ_MASK, protocol.PATH_SEQ_SHIFT

DeliveredCallback = Callable[[int, MessageData], None]  # (msg_id, message bytes)
# The answer type of a packet that gets none (an in-order receiver's drop after its NACK).
NO_ANSWER = 0


def _window_key(hdr: wire.Header) -> tuple[int, int]:
    """The path a packet's `path_seq` names, as `path_windows` keys it: (plane, path)."""
    return hdr.plane, protocol.path_seq_path(hdr.path_seq)


class MessageBuffer:
    __slots__ = ("data", "received", "size")

    def __init__(self, size: int):
        self.data = zeroed(size)  # a page at a time as packets land, not all at once
        self.received = 0
        self.size = size


class PathWindow:
    """What arrived of one path's latest sequence numbers: bit i of `bits` is number
    `top - i`; `span` is how many numbers the window has seen since it started."""

    __slots__ = ("top", "bits", "span", "last_at")

    def __init__(self, seq: int, now: float):
        self.top, self.bits, self.span, self.last_at = seq, 1, 1, now

    def arrive(self, seq: int, now: float) -> bool:
        """Record a sequence number; returns whether the path is now bad (`bad()`)."""
        self.last_at = now
        ahead = (seq - self.top) % _SEQ_SPACE
        if ahead == 0:
            pass  # a duplicate
        elif ahead < _SEQ_SPACE // 2:
            self.top = seq
            self.bits = (self.bits << ahead | 1) & _M_MASK
            self.span = min(_M_SPAN, self.span + ahead)
        else:
            behind = _SEQ_SPACE - ahead
            if behind < self.span:
                self.bits |= 1 << behind  # a late packet fills its hole
        # bad(), inlined: this runs for every DATA packet.
        judged = self.span - M_REORDER
        if judged < M_MIN_JUDGED:
            return False
        missing = judged - (self.bits >> M_REORDER & ((1 << judged) - 1)).bit_count()
        return missing >= M_MIN_MISSING and missing >= M_MISSING_FRACTION * judged

    def lacks(self, seq: int) -> bool:
        """Whether sequence number `seq` is known not to have arrived: past the newest
        one, or a hole the window still covers. A number older than the window (or a
        window started afresh after it) is not known missing."""
        ahead = (seq - self.top) % _SEQ_SPACE
        if ahead == 0:
            return False
        if ahead < _SEQ_SPACE // 2:
            return True
        behind = _SEQ_SPACE - ahead
        return behind < self.span and not self.bits >> behind & 1

    def missing(self) -> tuple[int, int]:
        """(judged numbers, missing among them)."""
        judged = max(0, self.span - M_REORDER)
        if not judged:
            return 0, 0
        arrived = (self.bits >> M_REORDER & ((1 << judged) - 1)).bit_count()
        return judged, judged - arrived

    def bad(self) -> bool:
        judged, missing = self.missing()
        return (judged >= M_MIN_JUDGED and missing >= M_MIN_MISSING
                and missing >= M_MISSING_FRACTION * judged)


class Receiver:
    """Receiving side of one (peer, conn_id) connection.

    `on_data()` takes a decoded DATA packet and returns the answer the endpoint sends
    (type, flags, reason); `control()` builds the SACK/NACK body. Completed messages go
    to `on_delivered(msg_id, bytes)`.
    """

    def __init__(self, peer: int, conn_id: int, on_delivered: DeliveredCallback,
                 in_order: bool = False, first_psn: int = 0,
                 messages: dict[int, MessageBuffer] | None = None,
                 delivered: set[int] | None = None):
        self.peer, self.conn_id = peer, conn_id
        self.on_delivered = on_delivered
        self.in_order = in_order
        self.cum = first_psn  # every PSN below has arrived
        self.nak_for: int | None = None  # the expected PSN last NACKed (in_order)
        self.bits = 0  # bit i set: PSN cum + i has arrived (bit 0 is always clear)
        self.messages: dict[int, MessageBuffer] = {} if messages is None else messages
        self.delivered: set[int] = set() if delivered is None else delivered
        self.ecn_marks = 0  # CE-marked data packets since the last SACK body
        # By (plane, path): what the M verdict looks at.
        self.path_windows: dict[tuple[int, int], PathWindow] = {}
        self.stats = {"data_rx": 0, "duplicates": 0, "trimmed_rx": 0, "out_of_order_drops": 0,
                      "messages_delivered": 0, "rx_bytes": 0, "ce_rx": 0, "inconsistent": 0,
                      "out_of_window": 0, "naks": 0, "always_skip_tx": 0}

    @property
    def above(self) -> set[int]:
        """Arrived PSNs above the cumulative one (for tests and tools; not the hot path)."""
        bits, base, out = self.bits, self.cum, set()
        while bits:
            low = bits & -bits
            out.add(base + low.bit_length() - 1)
            bits ^= low
        return out

    def on_data(self, hdr: wire.Header, payload, ce: bool, now: float,
                trimmed: int | None = None) -> tuple[int, int, int]:
        """Take one DATA packet; returns (answer type, flags, reason) for the endpoint
        (answer type NO_ANSWER: send nothing). `trimmed` is the traffic class it came
        in (its DSCP) if a switch trimmed it: TRIMMED in the fabric, TRIMMED_LASTHOP on
        the port facing this host; the NACK's reason says which, as UEC's receiver does
        (`lastHopTrim = (pkt.ip.dscp == DSCP_TRIMMED_LASTHOP)`)."""
        if trimmed is not None:
            # Its path carried it, congested: a switch there is sending trimmed headers
            # ahead of the data queued before them, so the numbers now missing are
            # still on their way. The path's judgement starts afresh from this packet.
            if not self.in_order:
                self._restart(hdr, now)
            self.stats["trimmed_rx"] += 1
            if trimmed == protocol.TRIMMED_LASTHOP:
                return protocol.NACK, 0, protocol.R_TRIMMED_LASTHOP
            return protocol.NACK, 0, protocol.R_TRIMMED
        stats = self.stats
        echo = 0
        if not self.in_order:
            # _judge, inlined (every packet goes through it): the path's window.
            path_seq = hdr.path_seq
            key = (hdr.plane, path_seq >> _PATH_SHIFT & _SEQ_MASK)
            window = self.path_windows.get(key)
            if window is None or now - window.last_at > M_IDLE_S:
                self.path_windows[key] = PathWindow(path_seq & _SEQ_MASK, now)
            elif window.arrive(path_seq & _SEQ_MASK, now):
                echo = protocol.F_ALWAYS_SKIP
                stats["always_skip_tx"] += 1
        if ce:
            echo |= protocol.F_ECN_ECHO
            self.ecn_marks += 1
            stats["ce_rx"] += 1
        distance = hdr.psn - self.cum
        bits = self.bits
        if distance < 0 or bits >> distance & 1:
            stats["duplicates"] += 1
            return protocol.SACK, echo, 0
        if distance > MAX_PSN_AHEAD:
            stats["out_of_window"] += 1  # acknowledging it again is harmless
            return protocol.SACK, echo, 0
        if self.in_order and distance:
            stats["out_of_order_drops"] += 1
            if self.nak_for == self.cum:
                return NO_ANSWER, 0, 0  # this gap was NACKed already
            self.nak_for = self.cum
            stats["naks"] += 1
            return protocol.NACK, echo, protocol.R_GAP
        if not self._place(hdr, payload):
            stats["inconsistent"] += 1
            return protocol.SACK, echo, 0
        stats["data_rx"] += 1
        if distance:
            self.bits = bits | 1 << distance
        else:
            # PSN cum arrived: advance over it and every arrived PSN right behind it.
            bits |= 1
            run = (~bits & (bits + 1)).bit_length() - 1  # trailing ones
            self.bits = bits >> run
            self.cum += run
        return protocol.SACK, echo, 0

    def _judge(self, hdr: wire.Header, now: float) -> bool:
        """Record the packet's sequence number on its path; True if the path is now
        judged persistently bad."""
        windows = self.path_windows
        key = _window_key(hdr)
        seq = protocol.path_seq_seq(hdr.path_seq)
        window = windows.get(key)
        if window is None or now - window.last_at > M_IDLE_S:
            windows[key] = PathWindow(seq, now)
            return False
        return window.arrive(seq, now)

    def probe_flags(self, hdr: wire.Header) -> int:
        """The flags of the reply to a PROBE of this connection: ALWAYS_SKIP if it asks
        about a late packet (its PSN has hosts/protocol.py SUSPECT_SEQ set) whose
        `path_seq` is known not to have arrived on its path. Such a probe came through
        the data queue behind the packet, so the packet was lost. A path never heard
        from is not judged: nothing is known of it."""
        if not hdr.psn & protocol.SUSPECT_SEQ:
            return 0
        window = self.path_windows.get(_window_key(hdr))
        if window is not None and window.lacks(protocol.path_seq_seq(hdr.path_seq)):
            return protocol.F_ALWAYS_SKIP
        return 0

    def _restart(self, hdr: wire.Header, now: float) -> None:
        """Judge the packet's path afresh from its sequence number on (congestion)."""
        key = _window_key(hdr)
        self.path_windows[key] = PathWindow(protocol.path_seq_seq(hdr.path_seq), now)

    def _place(self, hdr: wire.Header, payload) -> bool:
        """Copy the payload into its message; False if it contradicts the message."""
        msg_id = hdr.msg_id
        buf = self.messages.get(msg_id)
        if buf is None:
            if msg_id in self.delivered:
                return True  # a packet of a complete message under a new PSN: nothing to do
            buf = self.messages[msg_id] = MessageBuffer(hdr.msg_len)
        elif buf.size != hdr.msg_len:
            return False  # not the message its first packet announced: not ours
        length = hdr.payload_len
        buf.data[hdr.offset:hdr.offset + length] = payload
        buf.received += length
        self.stats["rx_bytes"] += length
        if buf.received >= buf.size:
            del self.messages[msg_id]
            self.delivered.add(msg_id)
            self.stats["messages_delivered"] += 1
            self.on_delivered(msg_id, buf.data)
        return True

    def control(self, echo_ev: int, port_state: int, base: int | None = None) -> wire.Control:
        """The body of the next SACK/NACK: cumulative PSN, the bitmap of arrived PSNs
        from `base` (default: the cumulative PSN), echoed EV, CE marks since the
        previous body, and this host's port state."""
        marks, self.ecn_marks = self.ecn_marks, 0
        if base is None or base <= self.cum:
            base, bits = self.cum, self.bits
        else:
            bits = self.bits >> (base - self.cum)
        return wire.Control(self.cum, base, bits & _BITMAP_MASK, echo_ev, min(marks, 0xFFFF),
                            port_state)

