"""The reverse EV set (hosts/reverse.py): which EV an answer or a probe reply takes."""

from __future__ import annotations

import random

from hosts import protocol, wire
from hosts.config import ProtocolConfig
from hosts.endpoint import Endpoint
from hosts.protocol import ev_plane, make_ev
from hosts.reverse import ReverseEvs
from topologies.model import load_topology


def reverse_set() -> ReverseEvs:
    return ReverseEvs(planes=2, paths=2, interval=0.005, rng=random.Random(1))


def test_answers_take_the_mirror_until_its_path_is_suspect():
    rev = reverse_set()
    mirror, other = make_ev(0, 4), make_ev(0, 7)  # paths 0 and 1 of plane 0
    assert rev.answer_ev(0, mirror) == mirror  # nothing known: the mirror
    rev.confirm(0, other, 0.0)
    assert rev.answer_ev(0, mirror) == mirror  # the mirror is not suspect
    rev.suspect(0, mirror, 0.1)  # the peer probed path 0: its reverse may be dead
    assert rev.answer_ev(0, mirror) == other
    assert rev.reply_evs(0, mirror) == [mirror, other]  # a probe reply goes both ways
    rev.confirm(0, make_ev(0, 2), 0.2)  # path 0 works towards the peer again
    assert rev.answer_ev(0, mirror) == mirror and not rev.suspect_paths[0]


def test_probes_while_data_arrives_one_per_plane_and_interval():
    rev = reverse_set()
    assert rev.due_probes(0.0) == []  # no data from the peer: no probes
    assert rev.next_due(0.0) is None
    rev.inbound(0.001)
    assert rev.due_probes(0.001) == []  # a connection shorter than an interval: none
    assert rev.next_due(0.001) == 0.005
    rev.inbound(0.0045)
    probes = rev.due_probes(0.005)
    assert sorted(ev_plane(ev) for ev in probes) == [0, 1]
    assert rev.due_probes(0.006) == []  # within the interval
    assert rev.on_probe_reply(0, probes[0], 0.007) and rev.evs[0] == probes[0]
    assert not rev.on_probe_reply(0, make_ev(0, 99), 0.007)  # not a probe of this set
    rev.inbound(0.009)
    assert rev.next_due(0.009) == 0.01
    assert [ev_plane(ev) for ev in rev.due_probes(0.01)] == [1]  # plane 0 is confirmed
    assert rev.next_due(0.2) is None  # the data stopped: no more probes


def test_a_connection_that_sends_probes_only_planes_with_a_suspect_path():
    # At a low rate shared by many peers, a plane carries a pair's packet only every
    # few round trips: its confirmations come further apart than the interval. While
    # SACKs answer our data (the connection sends), that is no reason to probe; the
    # paper probes only a QP that receives and sends nothing.
    rev = reverse_set()
    rev.inbound(0.0)
    rev.confirm(0, make_ev(0, 1), 0.0049)  # a SACK for our data, on plane 0
    rev.inbound(0.0049)
    assert rev.due_probes(0.005) == []  # plane 1 is unconfirmed, but the connection sends
    assert rev.next_due(0.005) > 0.009  # not due again at every poll
    rev.suspect(1, make_ev(1, 3), 0.006)  # the peer probed a path of plane 1
    assert [ev_plane(ev) for ev in rev.due_probes(0.006)] == [1]
    # The SACKs stop (nothing more to send): each unconfirmed plane is probed again.
    rev.inbound(0.019)
    assert sorted(ev_plane(ev) for ev in rev.due_probes(0.02)) == [0, 1]


def test_only_a_probe_of_a_retired_path_makes_its_reverse_suspect():
    # A probe about a late packet (SUSPECT_SEQ) says the path was slow, not dead: its
    # answers keep to the mirror. Taken as a suspect reverse, every late packet sent the
    # plane's answers onto one EV, whose queue made the next packets late in turn.
    me, peer = 2, 0
    endpoint = Endpoint(me, load_topology("2tier-2plane"), "mrc", ProtocolConfig(),
                        lambda e: None, lambda *a: None, lambda *a: None)
    ev = make_ev(0, 1)
    conn_id = (peer << 16) | me  # the peer's connection to this host

    def probe(psn):
        ctl = wire.Control(0, 0, 0, ev, 0, 0b11)
        endpoint.on_datagram(0, peer, wire.encode_control(protocol.PROBE, 0, 0, 0, conn_id,
                                                          ev, 0, psn, ctl),
                             False, 0.0, protocol.CONTROL)
        endpoint.poll(0.0)
        return endpoint.reverse[peer].suspect_paths[0] if peer in endpoint.reverse else set()

    assert probe(protocol.SUSPECT_SEQ | 1) == set()
    assert probe(1) == {endpoint.reverse[peer].path(ev)}
