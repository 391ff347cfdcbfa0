"""State transitions of the MRC sender and receiver, driven packet by packet."""

from __future__ import annotations

import pytest

from hosts import wire
from hosts.baseline import SinglePathSender
from hosts.config import ProtocolConfig
from hosts.evset import ASSUMED_BAD, DENIED, GOOD, SKIP
from hosts.receiver import Receiver
from hosts.sender import Sender

ALL_PLANES = 0b11
CFG = ProtocolConfig(window=32, evs_per_plane=4, mtu_payload=100, cc=False, ev_min_active=2,
                     tick_s=0.001)


class Conn:
    """A sender and a receiver wired back to back; the test decides each packet's fate."""

    def __init__(self, config=CFG, planes=2, paths=2):
        self.events: list[dict] = []
        self.completed: list[int] = []
        self.delivered: dict[int, bytes] = {}
        self.sender = Sender(0, 1, 7, planes, paths, config, self.events.append,
                             lambda msg_id, size, took: self.completed.append(msg_id))
        self.receiver = Receiver(0, 7, lambda msg_id, data: self.delivered.update(
            {msg_id: bytes(data)}))

    def send(self, now=0.0, ready=lambda p: True):
        return self.sender.poll(now, ready, budget=1000)

    def deliver(self, packet, now, ce=False):
        """Receiver takes a DATA packet; its answer goes straight back to the sender."""
        _, _, data, _ = packet
        hdr, _, payload = wire.decode(data)
        kind, flags, reason = self.receiver.on_data(hdr, payload, ce, now)
        ctl = self.receiver.control(hdr.ev, ALL_PLANES)
        answer = wire.decode(wire.encode_control(kind, flags, hdr.plane, reason, hdr.conn_id,
                                                 hdr.ev, hdr.msg_id, hdr.psn, ctl))
        (self.sender.on_sack if kind == wire.SACK else self.sender.on_nack)(
            answer[0], answer[1], now)

    def kinds(self, name):
        return [e for e in self.events if e["event"] == name]


def test_spraying_alternates_planes_and_covers_all_evs():
    conn = Conn()
    conn.sender.send_message(0, bytes(1600), 0.0)
    out = conn.send()
    assert len(out) == 16
    assert [p for p, _, _, _ in out[:4]] == [0, 1, 0, 1]
    assert len({ev for _, ev, _, _ in out[:8]}) == 8  # one rotation: every active EV


def test_clean_transfer_places_by_offset_in_any_order():
    conn = Conn()
    data = bytes(range(256)) * 4
    conn.sender.send_message(3, data, 0.0)
    packets = conn.send()
    for pkt in reversed(packets):
        conn.deliver(pkt, 0.01)
    assert conn.delivered[3] == data and conn.completed == [3]
    assert conn.receiver.stats["duplicates"] == 0


def test_duplicates_are_ignored():
    conn = Conn()
    conn.sender.send_message(0, bytes(300), 0.0)
    packets = conn.send()
    for pkt in packets + packets:
        conn.deliver(pkt, 0.01)
    assert conn.receiver.stats["duplicates"] == 3 and conn.completed == [0]


def test_ecn_echo_skips_the_ev_once_and_never_retires():
    conn = Conn()
    conn.sender.send_message(0, bytes(200), 0.0)
    first, second = conn.send()
    conn.deliver(first, 0.01, ce=True)
    ev = conn.sender.evs.by_ev[first[1]]
    assert ev.state == SKIP and conn.kinds("skip")[0]["reason"] == "ecn"
    conn.sender.send_message(1, bytes(800), 0.02)
    evs = [e for _, e, _, _ in conn.send(0.02)]
    assert first[1] not in evs[:7]  # passed over for one rotation
    assert ev.state == GOOD and not conn.kinds("retire")


def test_trimmed_packet_is_nacked_and_resent_at_once_on_another_ev():
    conn = Conn()
    conn.sender.send_message(0, bytes(300), 0.0)
    packets = conn.send()
    trimmed = (packets[1][0], packets[1][1], wire.trim(packets[1][2]), True)
    conn.deliver(trimmed, 0.01)
    assert conn.receiver.stats["trimmed_rx"] == 1
    assert conn.kinds("nack")[0]["psn"] == 1
    assert conn.sender.evs.by_ev[packets[1][1]].state == SKIP
    again = conn.send(0.011)
    assert len(again) == 1 and again[0][1] != packets[1][1]
    assert wire.decode(again[0][2])[0].psn == 1
    conn.deliver(packets[0], 0.012)
    conn.deliver(packets[2], 0.012)
    conn.deliver(again[0], 0.013)
    assert conn.completed == [0] and not conn.kinds("retire")


def test_timeout_retires_the_path_and_resends_elsewhere_then_probe_reinstates():
    conn = Conn()
    conn.sender.send_message(0, bytes(100), 0.0)
    (lost,) = conn.send()
    ev = conn.sender.evs.by_ev[lost[1]]
    resent = [p for p in conn.send(0.3) if p[3]]  # the timer (initial RTO 0.25 s) fires in poll
    assert ev.state == ASSUMED_BAD and conn.kinds("retire")[0]["reason"] == "timeout"
    assert ev.key in conn.sender.evs.bad
    assert all(e.key != ev.key for e in conn.sender.evs.rotation)  # same-plane replacement
    assert sum(e.plane == ev.plane for e in conn.sender.evs.rotation) == CFG.evs_per_plane
    assert len(resent) == 1 and resent[0][1] != lost[1]
    assert wire.decode(resent[0][2])[0].flags & wire.F_RETRANSMIT
    conn.deliver(resent[0], 0.35)
    assert conn.completed == [0]
    probes = [p for p in conn.sender.poll(0.6, lambda p: True) if not p[3]]
    assert probes and wire.decode(probes[0][2])[0].type == wire.PROBE
    hdr, ctl, _ = wire.decode(probes[0][2])
    reply = wire.encode_control(wire.PROBE_REPLY, 0, hdr.plane, 0, hdr.conn_id, hdr.ev, 0, 0,
                                wire.Control(0, 0, 0, hdr.ev, 0, ALL_PLANES))
    conn.sender.on_probe_reply(*wire.decode(reply)[:2], 0.61)
    assert ev.state == GOOD and conn.kinds("reinstate")
    assert not conn.sender.evs.bad


def test_gap_beyond_reorder_tolerance_is_a_loss():
    conn = Conn(ProtocolConfig(window=64, evs_per_plane=1, mtu_payload=100, cc=False,
                               ev_min_active=1), planes=2, paths=1)
    conn.sender.send_message(0, bytes(1000), 0.0)
    packets = conn.send()
    plane0 = [p for p in packets if p[0] == 0]
    conn.deliver(plane0[1], 0.01)
    conn.deliver(plane0[2], 0.01)
    assert not conn.kinds("retire")  # within the reordering tolerance
    conn.deliver(plane0[3], 0.01)
    assert conn.kinds("retire")[0]["reason"] == "gap"


def test_min_active_floor_stops_retiring_everything():
    conn = Conn(ProtocolConfig(window=64, evs_per_plane=1, mtu_payload=100, cc=False,
                               ev_min_active=2), planes=2, paths=1)
    conn.sender.send_message(0, bytes(200), 0.0)
    conn.send()
    conn.sender.poll(0.3, lambda p: True)
    assert not conn.kinds("retire") and conn.kinds("retire-suppressed")


def test_denied_ev_is_never_used():
    conn = Conn()
    denied = conn.sender.evs.rotation[0]
    denied.state = DENIED
    conn.sender.send_message(0, bytes(3200), 0.0)
    assert denied.ev not in {ev for _, ev, _, _ in conn.send()}


def test_plane_down_locally_and_remotely_and_back():
    conn = Conn()
    conn.sender.set_local_plane(1, False, 0.0)
    conn.sender.send_message(0, bytes(800), 0.0)
    assert {p for p, _, _, _ in conn.send()} == {0}
    assert conn.kinds("plane-down")[0]["plane"] == 1
    conn.sender.set_local_plane(1, True, 0.1)
    conn.sender.remote_ports(0b10, 0.1)  # the peer lost its plane-0 port
    conn.sender.send_message(1, bytes(800), 0.1)
    assert {p for p, _, _, _ in conn.send(0.1)} == {1}
    conn.sender.remote_ports(0b11, 0.2)
    assert conn.kinds("plane-up")


def test_receiver_sack_bitmap_and_garbage():
    rx = Receiver(0, 1, lambda *a: None)
    for psn in (0, 2, 5):
        hdr = wire.Header(wire.DATA, 0, 0, 0, 1, 0, 0, psn, psn * 10, 100, 10)
        rx.on_data(hdr, bytes(10), False, 0.0)
    ctl = rx.control(0, 1)
    assert ctl.cum_psn == 1 and ctl.bitmap == 0b10010
    far = wire.Header(wire.DATA, 0, 0, 0, 1, 0, 0, 1 << 30, 0, 100, 10)
    assert rx.on_data(far, bytes(10), False, 0.0)[0] == wire.SACK
    assert rx.stats["duplicates"] == 1  # treated as garbage, nothing placed


def test_baseline_waits_for_reconvergence_before_moving():
    events = []
    cfg = ProtocolConfig(window=8, mtu_payload=100, cc=False, reconvergence_s=1.0,
                         rto_min_s=0.05, rto_max_s=0.1)
    sender = SinglePathSender(0, 1, 9, 2, 2, cfg, events.append, lambda *a: None)
    first_ev = sender.ev
    sender.send_message(0, bytes(500), 0.0)
    assert len(sender.poll(0.0, lambda p: True)) == 5
    t = 0.0
    while t < 0.9:
        t += 0.11
        sender.poll(t, lambda p: True)
        assert sender.ev == first_ev  # still on the dead path
    while sender.ev == first_ev and t < 2:
        t += 0.11
        sender.poll(t, lambda p: True)
    assert sender.ev != first_ev and 1.0 <= t <= 1.5
    assert [e["event"] for e in events].count("reroute") == 1


@pytest.mark.parametrize("value", [{"window": 8}, {}])
def test_config_overrides(value):
    assert ProtocolConfig.with_overrides(value).window == value.get("window", 64)


def test_config_rejects_unknown_settings():
    with pytest.raises(ValueError, match="protocol.windw: unknown setting"):
        ProtocolConfig.with_overrides({"windw": 3})
