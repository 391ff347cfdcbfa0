"""ECN load migration and pinned flows.

An EV whose acks keep echoing ECN (`ecn_migrate_marks` of the acks of its latest
`ecn_migrate_acks` packets) moves to the least used path of its plane; nothing is
retired. `pin_path` starts every connection with all its active EVs on one path. On
the simulated network with its output queues modelled, two flows pinned to one path
(h0->h2 and h1->h3, sharing the T0->T1 uplink, whose queue marks CE past the ECN
threshold) separate by ECN alone and each gets its fair share again.
"""

from __future__ import annotations

import random

import pytest

from hosts.config import ConfigError, ProtocolConfig
from hosts.evset import GOOD, EvSet
from hosts.loopback import Loopback
from hosts.sender import Sender
from hosts.simnet import Chaos, SimNet
from tests.fabrics import with_thresholds
from topologies.model import load_topology

FABRIC = with_thresholds(load_topology("2tier-2plane"))


# ---------------------------------------------------------------------- the EV set
def test_a_pinned_set_starts_with_every_active_ev_on_the_path():
    evs = EvSet(2, 2, 4, random.Random(1), pin=(1, 3))  # path index modulo 2 paths
    assert len(evs.rotation) == 4
    assert {ev.key for ev in evs.rotation} == {(1, 1)}
    assert evs.sendable == [1]


def test_a_pin_to_a_plane_that_does_not_exist_is_refused():
    with pytest.raises(ConfigError, match="protocol.pin_path: plane 2, but the topology has 2"):
        Sender(0, 1, 1, 2, 2, ProtocolConfig(pin_path=[2, 0]), lambda e: None,
               lambda *a: None)


@pytest.mark.parametrize("bad", [[0], [0, -1], ["0", 1], [True, 0], 3, [0, 1, 2],
                                 [None, 0], [0, True]])
def test_pin_path_must_be_plane_and_path(bad):
    with pytest.raises(ConfigError, match="protocol.pin_path: must be null, "):
        ProtocolConfig(pin_path=bad)


def test_a_pin_to_a_plane_spreads_the_evs_over_its_paths_and_leaves_the_others_empty():
    assert ProtocolConfig(pin_path=[1, None]).pin_path == (1, None)
    evs = EvSet(2, 4, 8, random.Random(1), pin=(1, None))
    assert len(evs.rotation) == 8 and evs.sendable == [1]
    # Eight EVs on four paths: each path twice, as an unpinned plane spreads them.
    paths = [ev.key[1] for ev in evs.rotation]
    assert sorted(paths) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_migration_settings_are_checked():
    with pytest.raises(ConfigError, match="protocol.ecn_migrate_acks"):
        ProtocolConfig(ecn_migrate_marks=5, ecn_migrate_acks=4)
    with pytest.raises(ConfigError, match="protocol.ecn_migrate_acks"):
        ProtocolConfig(ecn_migrate_acks=65)
    assert ProtocolConfig.with_overrides({"pin_path": [0, 1]}).pin_path == (0, 1)


def test_migrate_moves_a_slot_to_the_least_used_path_and_keeps_the_old_ev_as_a_spare():
    evs = EvSet(1, 3, 4, random.Random(2), pin=(0, 0))
    old = evs.rotation[1]
    old.outstanding.append(object())  # a packet still in flight on it
    new = evs.migrate(old)
    assert new is not None and new.key[1] in (1, 2) and new.active
    assert evs.rotation[1] is new and not old.active and old.state == GOOD
    assert old in evs.backups[0] and old in evs.draining
    # Balanced out: 3 on path 0, 1 elsewhere. Moving on until path 0 is no longer the
    # busiest, then a congested EV on the least used path stays where it is.
    moved = [evs.migrate(ev) for ev in list(evs.rotation) if ev.key[1] == 0]
    counts = [sum(1 for e in evs.rotation if e.key[1] == p) for p in range(3)]
    assert sorted(counts) == [1, 1, 2] and moved.count(None) == 2
    lone = next(e for e in evs.rotation if counts[e.key[1]] == 1)
    assert evs.migrate(lone) is None


def test_migrate_reuses_a_spare_of_the_target_path():
    evs = EvSet(1, 2, 2, random.Random(3), pin=(0, 0))
    spare = evs._new_ev(0, 1)
    evs.backups[0].append(spare)
    known = len(evs.by_ev)
    new = evs.migrate(evs.rotation[0])
    assert new is spare and len(evs.by_ev) == known  # no EV made
    assert [e.key[1] for e in evs.backups[0]] == [0]


# ---------------------------------------------------------------------- the sender's rule
CFG = ProtocolConfig(window=64, ev_count=4, mtu_payload=100, cc="off", tick_s=0.001,
                     ecn_migrate_marks=2, ecn_migrate_acks=4, pin_path=[0, 0])


def packets_on(out, ev):
    return [p for p in out if p[1] == ev]


def test_an_ev_whose_acks_keep_echoing_ecn_migrates_and_nothing_is_retired():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(3000), 0.0)
    out = conn.send()
    target = conn.sender.evs.rotation[0]
    mine = packets_on(out, target.ev)
    conn.deliver(mine[0], 0.01, ce=True)
    conn.deliver(mine[1], 0.01)
    assert not conn.kinds("migrate")  # one mark among the latest acks: a burst
    conn.deliver(mine[2], 0.01, ce=True)  # two of the latest four: congested
    (move,) = conn.kinds("migrate")
    assert move["ev"] == target.ev and move["path"] == 0 and move["new_path"] == 1
    assert move["reason"] == "ecn" and move["plane"] == 0
    assert not target.active and conn.sender.evs.rotation[0].ev == move["new_ev"]
    assert not conn.kinds("retire") and conn.sender.stats["migrations"] == 1
    # Its packets still in flight are acknowledged normally.
    conn.deliver(mine[3], 0.02)
    assert conn.sender.stats["acked"] == 4


def test_marks_spread_beyond_the_window_do_not_migrate():
    conn = Loopback(CFG)
    conn.sender.send_message(0, bytes(3000), 0.0)
    target = conn.sender.evs.rotation[0]
    mine = packets_on(conn.send(), target.ev)
    for i, pkt in enumerate(mine[:12]):
        conn.deliver(pkt, 0.01, ce=i % 4 == 0)  # one mark in every four acks
    assert not conn.kinds("migrate") and target.active


def test_migration_off_with_zero_marks():
    conn = Loopback(ProtocolConfig(**{**CFG.__dict__, "ecn_migrate_marks": 0}))
    conn.sender.send_message(0, bytes(3000), 0.0)
    target = conn.sender.evs.rotation[0]
    for pkt in packets_on(conn.send(), target.ev)[:6]:
        conn.deliver(pkt, 0.01, ce=True)
    assert not conn.kinds("migrate") and conn.sender.stats["ecn_echoes"] == 6


# ---------------------------------------------------------------------- simulated network
SIZE = 1_500_000
STEP = 0.01  # throughput windows of 10 ms (about three round trips)


def throughput(flows, protocol, until=2.0):
    """Run the flows on the queue model; per flow, Mbit/s in each STEP window."""
    sim = SimNet(FABRIC, protocol=protocol, queues=True, chaos=Chaos(delay_s=0.001))
    for src, dst in flows:
        sim.send(src, dst, 0, SIZE)
    series = {flow: [] for flow in flows}
    seen = dict.fromkeys(flows, 0)
    t = 0.0
    while t < until and not sim.all_done([(s, d, 0) for s, d in flows]):
        t += STEP
        sim.run(t)
        for flow in flows:
            rx = sim.hosts[flow[1]].stats()["rx_bytes"]
            series[flow].append((rx - seen[flow]) * 8 / STEP / 1e6)
            seen[flow] = rx
    return sim, series


def test_the_queue_model_marks_ecn_past_the_threshold_and_never_on_the_last_hop():
    sim, _ = throughput([(0, 2), (1, 3)], {"pin_path": [0, 0], "ecn_migrate_marks": 0},
                        until=0.3)
    shared = sim.link_queues[("up", 0, 0, 0)]
    assert shared.marked > 0 and shared.max_depth >= FABRIC.spec.ecn_threshold_pkts
    assert all(q.marked == 0 for key, q in sim.link_queues.items() if key[0] == "host")


def test_two_flows_pinned_to_one_path_separate_by_ecn_alone():
    pinned = {"pin_path": [0, 0]}
    solo_sim, solo = throughput([(0, 2)], pinned)
    fair = sorted(solo[(0, 2)])[len(solo[(0, 2)]) // 2]  # the flow alone: its fair share
    rtt = solo_sim.hosts[0].senders[2].srtt
    sim, both = throughput([(0, 2), (1, 3)], pinned)
    a, b = both[(0, 2)], both[(1, 3)]
    # Separated: from this window on, both flows get at least 80% of their fair share
    # (the final, partly filled window aside).
    windows = min(len(a), len(b)) - 1
    apart = next(i for i in range(windows)
                 if all(min(a[j], b[j]) >= 0.8 * fair for j in range(i, windows)))
    rtts = (apart + 1) * STEP / rtt
    print(f"separated after {rtts:.1f} RTT (srtt {rtt * 1e3:.2f} ms), fair {fair:.1f} Mbit/s")
    assert rtts <= 40, f"separated after {rtts:.0f} RTT"
    moves = [e for e in sim.events if e["event"] == "migrate"]
    assert {e["host"] for e in moves} == {0, 1}  # both flows moved
    assert all(e["path"] == 0 and e["new_path"] == 1 for e in moves)
    assert not [e for e in sim.events if e["event"] == "retire"]
    # Without migration the two flows keep sharing the path: each gets about half.
    _, stuck = throughput([(0, 2), (1, 3)], {**pinned, "ecn_migrate_marks": 0}, until=0.4)
    assert max(sum(stuck[f][5:30]) / 25 for f in stuck) < 0.7 * fair
