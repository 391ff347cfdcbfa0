"""The MRC receiver of one connection (pure logic): placement by offset, SACK and NACK.

Every DATA payload is copied to its offset in the message buffer as it arrives, in any
order; PSNs already seen are duplicates and are only acknowledged again. A message is
delivered when every byte has arrived. Each DATA packet is answered at once: a SACK
(cumulative PSN + 64-bit bitmap + the packet's EV echoed + ECN echo) or, for a trimmed
packet, a NACK for exactly that PSN. Answers go back on the mirror of the data path
(same EV from this side), so an answer fails only where the data path itself failed.

With `in_order=True` (the single-path baseline's go-back-N receiver) a packet other
than the next expected one is dropped and the cumulative PSN acknowledged again.
"""

from __future__ import annotations

from hosts import wire

MAX_PSN_AHEAD = 1 << 20  # farther ahead than any window: garbage


class MessageBuffer:
    __slots__ = ("data", "received", "size")

    def __init__(self, size: int):
        self.data = bytearray(size)
        self.received = 0
        self.size = size


class Receiver:
    def __init__(self, peer: int, conn_id: int, on_delivered, in_order: bool = False):
        self.peer, self.conn_id = peer, conn_id
        self.on_delivered = on_delivered
        self.in_order = in_order
        self.cum = 0  # every PSN below has arrived
        self.above: set[int] = set()  # arrived PSNs at or above `cum`
        self.messages: dict[int, MessageBuffer] = {}
        self.delivered: set[int] = set()
        self.ecn_marks = 0
        self.stats = {"data_rx": 0, "duplicates": 0, "trimmed_rx": 0, "out_of_order_drops": 0,
                      "messages_delivered": 0, "rx_bytes": 0}

    def on_data(self, hdr: wire.Header, payload, ce: bool, now: float) -> tuple[int, int, int]:
        """Take one DATA packet; returns (answer type, flags, reason) for the endpoint."""
        psn = hdr.psn
        if hdr.flags & wire.F_TRIMMED:
            self.stats["trimmed_rx"] += 1
            lasthop = hdr.flags & wire.F_TRIMMED_LASTHOP
            return wire.NACK, 0, wire.R_TRIMMED_LASTHOP if lasthop else wire.R_TRIMMED
        flags = wire.F_ECN_ECHO if ce else 0
        if ce:
            self.ecn_marks += 1
        if psn < self.cum or psn in self.above or psn - self.cum > MAX_PSN_AHEAD:
            self.stats["duplicates"] += 1
            return wire.SACK, flags, 0
        if self.in_order and psn != self.cum:
            self.stats["out_of_order_drops"] += 1
            return wire.SACK, flags, 0
        self.stats["data_rx"] += 1
        self._place(hdr, payload)
        if psn == self.cum:
            self.cum += 1
            while self.cum in self.above:
                self.above.discard(self.cum)
                self.cum += 1
        else:
            self.above.add(psn)
        return wire.SACK, flags, 0

    def _place(self, hdr: wire.Header, payload) -> None:
        if hdr.msg_id in self.delivered:
            return
        buf = self.messages.get(hdr.msg_id)
        if buf is None:
            buf = self.messages[hdr.msg_id] = MessageBuffer(hdr.msg_len)
        elif buf.size != hdr.msg_len:
            return  # inconsistent with the message's first packet: not ours
        buf.data[hdr.offset:hdr.offset + hdr.payload_len] = payload
        buf.received += hdr.payload_len
        self.stats["rx_bytes"] += hdr.payload_len
        if buf.received >= buf.size:
            del self.messages[hdr.msg_id]
            self.delivered.add(hdr.msg_id)
            self.stats["messages_delivered"] += 1
            self.on_delivered(hdr.msg_id, buf.data)

    def control(self, echo_ev: int, port_state: int) -> wire.Control:
        bitmap = 0
        for psn in self.above:
            distance = psn - self.cum
            if distance < 64:
                bitmap |= 1 << distance
        marks, self.ecn_marks = self.ecn_marks, 0
        return wire.Control(self.cum, self.cum, bitmap, echo_ev, min(marks, 0xFFFF), port_state)
