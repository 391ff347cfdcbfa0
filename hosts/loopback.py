"""A sender and a receiver wired back to back, with the caller deciding each packet's fate.

The smallest harness around the protocol core, for unit tests: `send()` polls
the sender; `deliver()` hands one DATA packet to the receiver (optionally CE-marked or
trimmed) and its answer, encoded and decoded again, to the sender; dropping a packet is
simply not delivering it. Everything goes through the real codec, so a test exercises
exactly the bytes the agent would put on the wire.
"""

from __future__ import annotations

from hosts import protocol, wire
from hosts.config import ProtocolConfig
from hosts.receiver import Receiver
from hosts.sender import Sender
from hosts.transport import Outgoing


class Loopback:
    def __init__(self, config: ProtocolConfig | None = None, planes: int = 2, paths: int = 2,
                 conn_id: int = 7, seed: int = 0):
        self.config = config or ProtocolConfig()
        self.planes = planes
        self.events: list[dict] = []
        self.completed: list[int] = []
        self.delivered: dict[int, bytes] = {}
        self.port_state = (1 << planes) - 1  # the receiver's, carried in every answer
        self.sender = Sender(0, 1, conn_id, planes, paths, self.config, self.events.append,
                             lambda msg_id, size, took: self.completed.append(msg_id), seed)
        self.receiver = Receiver(0, conn_id, lambda msg_id, data: self.delivered.update(
            {msg_id: bytes(data)}))

    def send(self, now: float = 0.0, ready=lambda plane: True,
             budget: int = 1000) -> list[Outgoing]:
        return self.sender.poll(now, ready, budget)

    def answer(self, packet: Outgoing, now: float, ce: bool = False,
               trimmed: bool = False, last_hop: bool = False) -> bytes:
        """What the receiver sends back for one packet (a PROBE gets a PROBE_REPLY)."""
        _, _, data, _ = packet
        cls = None
        if trimmed:  # what a trimming switch does: the header alone, in a trimmed class
            data = data[:protocol.MRC_HEADER_BYTES]
            cls = protocol.TRIMMED_LASTHOP if last_hop else protocol.TRIMMED
        hdr, _, payload = wire.decode(data, trimmed=trimmed)
        if hdr.type == protocol.PROBE:
            ctl = wire.Control(0, 0, 0, hdr.ev, 0, self.port_state)
            return wire.encode_control(protocol.PROBE_REPLY, self.receiver.probe_flags(hdr),
                                       hdr.plane, 0, hdr.conn_id, hdr.ev, 0, hdr.psn, ctl)
        kind, flags, reason = self.receiver.on_data(hdr, payload, ce, now, cls)
        ctl = self.receiver.control(hdr.ev, self.port_state)
        return wire.encode_control(kind, flags, hdr.plane, reason, hdr.conn_id, hdr.ev,
                                   hdr.msg_id, hdr.psn, ctl, hdr.offset, hdr.msg_len)

    def deliver(self, packet: Outgoing, now: float, ce: bool = False, trimmed: bool = False,
                last_hop: bool = False) -> None:
        """The packet arrives; the answer goes straight back to the sender."""
        answer = self.answer(packet, now, ce, trimmed, last_hop)
        hdr, ctl, _ = wire.decode(answer)
        self.sender.on_packet(hdr, ctl, now)

    def kinds(self, name: str) -> list[dict]:
        return [e for e in self.events if e["event"] == name]
