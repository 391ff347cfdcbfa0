"""Per-plane pacing: one poll of a sender with much to send spreads it over the planes."""

from __future__ import annotations

from collections import Counter

from hosts import protocol
from hosts.config import ProtocolConfig
from hosts.endpoint import CONNECTION_PACKETS_MIN, TURN_PACKETS, Endpoint
from hosts.pacing import BURST_PACKETS, Pacer
from topologies.model import load_topology


def endpoint(pace: bool = True) -> Endpoint:
    # No answer ever comes here: timeouts (and what they retire) are kept out of the way.
    config = ProtocolConfig(window=1000, cc=False, pace=pace, rto_min_s=1.0, rto_initial_s=1.0)
    return Endpoint(0, load_topology("2tier-2plane"), "mrc", config, lambda e: None,
                    lambda *a: None, lambda *a: None)


def test_one_poll_sends_at_most_a_burst_per_plane_and_uses_every_plane():
    host = endpoint()
    host.send_message(3, 0, bytes(1_000_000), 0.0)
    out = host.poll(0.0)
    per_plane = Counter(plane for plane, _, _, _, _ in out)
    assert set(per_plane) == {0, 1}
    assert all(n <= BURST_PACKETS + 1 for n in per_plane.values())
    # Nothing more until a plane's link has room; then it is the plane that woke up.
    assert host.poll(0.0) == []
    wake = host.next_wakeup(0.0)
    assert 0.0 < wake < 0.002
    assert host.poll(wake)


def test_the_pace_is_the_link_rate_less_a_little():
    host = endpoint()
    host.send_message(3, 0, bytes(2_000_000), 0.0)
    sent, t = 0, 0.0
    while t < 0.2:  # the window (1000 packets) is never the limit
        sent += sum(len(d) for _, _, _, d, _ in host.poll(t))
        t = host.next_wakeup(t)
    datagram = host.config.mtu_payload + protocol.MRC_HEADER_BYTES
    mbit = protocol.link_mbit(sent / datagram / 0.2, protocol.frame_bytes(datagram))
    assert 0.9 * 2 * 20 < mbit <= 2 * 20  # two planes of 20 Mbit/s


def test_a_retransmission_goes_ahead_of_new_data_by_one_packet():
    pacer = Pacer(1, 20, 1232)
    pacer.at(0.0)
    while pacer.ready(0):
        pacer.charge(0, 1232)
    assert pacer.ready_resend(0)  # new data waits for the link; a lost packet does not
    pacer.charge(0, 1232)
    assert not pacer.ready_resend(0)  # only one: the rate stays the link's
    assert pacer.ready_at([0], resend=True) < pacer.ready_at([0])


def test_without_pacing_a_poll_sends_what_the_sender_allows():
    host = endpoint(pace=False)
    host.send_message(3, 0, bytes(1_000_000), 0.0)
    assert len(host.poll(0.0)) == TURN_PACKETS  # a lone sender gets the turn's batch
    # Three connections share a turn: each its part, and never less than the minimum.
    host = endpoint(pace=False)
    for peer in (1, 2, 3):
        host.send_message(peer, 0, bytes(1_000_000), 0.0)
    share = max(CONNECTION_PACKETS_MIN, TURN_PACKETS // 3)
    assert Counter(dst for _, dst, *_ in host.poll(0.0)) == {1: share, 2: share, 3: share}
    assert Pacer(1, 10, 1000, enabled=False).ready(0)
