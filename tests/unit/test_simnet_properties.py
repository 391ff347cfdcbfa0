"""Property tests on the simulated network: whatever the chaos, nothing is lost.

Random loss, reordering, duplication, trimming (fabric and last hop), ECN marks, per-path
chaos, black-holed T1s and host ports (silent, or seen as carrier loss), permanent or
flapping: every message is delivered byte for byte and acknowledged. Then a clean wave
of traffic runs over whatever is still broken: it completes, and every EV it used on a
dead path has been retired (no black-holed EV stays GOOD).

Examples are derandomized and the database is off, so CI runs the same cases every time.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hosts.evset import ASSUMED_BAD, GOOD
from hosts.sender import Sender
from hosts.simnet import Chaos, Outage, SimNet
from topologies.model import load_topology
from topologies.paths import path_for_ev

FABRIC = load_topology("2tier-2plane")
HOSTS = len(FABRIC.hosts)
TRANSFERS = [(s, d, 0) for s in range(HOSTS) for d in range(HOSTS) if s != d]
PROFILE = dict(deadline=None, derandomize=True, database=None, print_blob=True)

chaos = st.builds(
    Chaos,
    delay_s=st.floats(0.0002, 0.002),
    jitter_s=st.floats(0, 0.003),
    loss=st.floats(0, 0.05),
    duplicate=st.floats(0, 0.05),
    trim=st.floats(0, 0.1),
    ecn=st.floats(0, 0.2),
    last_hop=st.floats(0, 1),
)
# Permanent outages stay in plane 0, so no host is ever cut off for good; flaps may hit
# any plane and end within a tenth of a second.
permanent = st.one_of(
    st.builds(Outage, plane=st.just(0), spine=st.integers(0, 1), start=st.floats(0, 0.05)),
    st.builds(Outage, plane=st.just(0), host=st.integers(0, HOSTS - 1),
              start=st.floats(0, 0.05), local_carrier=st.booleans()),
)
flap = st.tuples(st.integers(0, 1), st.integers(0, 1), st.floats(0, 0.05),
                 st.floats(0.005, 0.1)).map(
    lambda t: Outage(t[0], spine=t[1], start=t[2], end=t[2] + t[3]))
outages = st.lists(st.one_of(permanent, flap), max_size=2)


FABRIC8 = load_topology("2tier-8plane")
TRANSFERS8 = [(s, d, 0) for s in range(len(FABRIC8.hosts)) for d in range(len(FABRIC8.hosts))
              if s != d]


def run(transport, chaos, outages, seed, size, path_chaos=None, fabric=FABRIC,
        transfers=TRANSFERS, protocol=None):
    net = SimNet(fabric, transport, chaos, outages, seed, path_chaos=path_chaos or {},
                 protocol=protocol or {})
    for src, dst, msg_id in transfers:
        net.send(src, dst, msg_id, size)
    net.run(120.0, lambda: net.all_done(transfers))
    return net


def assert_all_delivered(net, transfers=TRANSFERS):
    assert net.all_done(transfers), (net.now, net.stats())
    assert all(net.delivered[t] for t in transfers)  # byte for byte


def clean_wave(net, transfers=TRANSFERS) -> float:
    """Send another message on every connection through a quiet network (the outages
    stay); returns when the wave started."""
    net.chaos = Chaos(delay_s=net.chaos.delay_s)
    net.path_chaos = {}
    start = net.now
    wave = [(s, d, 1) for s, d, _ in transfers]
    for src, dst, msg_id in wave:
        net.send(src, dst, msg_id, 40 * 1200)  # a few rotations of every EV set
    # Until every held path has its verdict too: one held when the wave ends is out of
    # use, neither cleared nor retired yet.
    net.run(net.now + 120.0, lambda: net.all_done(wave) and not verdicts_pending(net))
    assert_all_delivered(net, wave)
    return start


def verdicts_pending(net) -> bool:
    return any(getattr(sender, "suspects", None)
               for endpoint in net.hosts for sender in endpoint.senders.values())


def assert_no_dead_path_stays_good(net, since: float):
    fabric = net.fabric
    for src, endpoint in enumerate(net.hosts):
        for peer, sender in endpoint.senders.items():
            assert isinstance(sender, Sender)
            for ev in sender.evs.rotation:
                if ev.state != GOOD or not sender.evs.plane_up[ev.plane]:
                    continue  # retired, or on a plane out of use (judged again when it returns)
                path = path_for_ev(fabric, src, peer, ev.ev)
                for outage in net.outages:
                    if ev.last_sent >= max(since, outage.start) and outage.hits(path, net.now):
                        raise AssertionError(f"h{src}->h{peer} EV {ev.ev:#010x} "
                                             f"({path.label}) used while dead, still GOOD")


@settings(max_examples=50, **PROFILE)
@given(chaos=chaos, outages=outages, seed=st.integers(1, 1000), size=st.integers(1, 40_000))
def test_mrc_delivers_everything_and_leaves_no_dead_path_in_use(chaos, outages, seed, size):
    net = run("mrc", chaos, outages, seed, size)
    assert_all_delivered(net)
    since = clean_wave(net)
    assert_no_dead_path_stays_good(net, since)


@settings(max_examples=10, **PROFILE)
@given(chaos=chaos, seed=st.integers(1, 1000), outages=st.lists(st.one_of(
    st.builds(Outage, plane=st.integers(0, 7), spine=st.integers(0, 1),
              start=st.floats(0, 0.05)),
    st.builds(Outage, plane=st.integers(0, 7), host=st.integers(0, 7),
              start=st.floats(0, 0.05), local_carrier=st.booleans())), max_size=3))
def test_eight_planes_survive_lost_spines_and_ports(chaos, seed, outages):
    net = run("mrc", chaos, outages, seed, 12_000, fabric=FABRIC8, transfers=TRANSFERS8)
    assert_all_delivered(net, TRANSFERS8)
    since = clean_wave(net, TRANSFERS8)
    assert_no_dead_path_stays_good(net, since)


@settings(max_examples=15, **PROFILE)
@given(trim=st.floats(0, 0.3), ecn=st.floats(0, 0.5), last_hop=st.floats(0, 1),
       seed=st.integers(1, 1000))
def test_trimming_and_ecn_alone_never_retire_a_path(trim, ecn, last_hop, seed):
    net = run("mrc", Chaos(trim=trim, ecn=ecn, last_hop=last_hop), [], seed, 30_000)
    assert_all_delivered(net)
    assert not [e for e in net.events if e["event"] in ("retire", "timeout")]
    if trim > 0.05:
        assert net.stats()["nacks"] > 0


@settings(max_examples=20, **PROFILE)
@given(plane=st.integers(0, 1), spine=st.integers(0, 1), loss=st.floats(0.2, 1.0),
       seed=st.integers(1, 1000))
def test_one_lossy_path_is_retired_and_no_clean_one_stays_retired(plane, spine, loss, seed):
    net = run("mrc", Chaos(), [], seed, 30_000, {(plane, spine): Chaos(loss=loss)})
    assert_all_delivered(net)
    retired = [path_for_ev(FABRIC, e["host"], e["peer"], e["ev"])
               for e in net.events if e["event"] == "retire"]
    assert any((p.plane, p.spine) == (plane, spine) for p in retired)
    # A clean path may be retired when a SACK answering packets of several paths is lost
    # on the lossy one (the receiver batches in-order acks); its probes bring it back.
    net.run(net.now + 1.0)
    for src, endpoint in enumerate(net.hosts):
        for peer, sender in endpoint.senders.items():
            for key in sender.evs.bad:
                path = path_for_ev(FABRIC, src, peer, sender.evs.bad[key].evs[0].ev)
                assert (path.plane, path.spine) == (plane, spine), path.label


@settings(max_examples=8, **PROFILE)
@given(chaos=chaos.filter(lambda c: c.loss < 0.02), seed=st.integers(1, 1000))
def test_single_path_delivers_everything_too(chaos, seed):
    net = run("single-path", chaos, [], seed, 8_000)
    assert_all_delivered(net)


def outage_that_heals(transport: str) -> tuple[SimNet, Sender]:
    """h0 -> h3 (different racks) while spine 0 of plane 0 is dead for 90 ms, then a
    second of quiet after the transfer: time for probes to find the path back."""
    outage = Outage(plane=0, spine=0, start=0.01, end=0.1)
    net = run(transport, Chaos(), [outage], 7, 300_000, transfers=[(0, 3, 0)])
    assert_all_delivered(net, [(0, 3, 0)])
    net.run(max(net.now, outage.end) + 1.0)
    sender = net.hosts[0].senders[3]
    assert isinstance(sender, Sender)
    return net, sender


def test_after_an_outage_heals_mrc_probes_the_path_back():
    net, sender = outage_that_heals("mrc")
    events = [e["event"] for e in net.events if e["host"] == 0]
    assert "retire" in events and "probe" in events and "reinstate" in events
    assert (0, 0) not in sender.evs.bad
    assert {ev.state for ev in sender.evs.by_ev.values() if ev.key == (0, 0)} == {GOOD}


def test_mrc_no_probe_never_probes_so_a_retired_path_stays_retired():
    net, sender = outage_that_heals("mrc-no-probe")
    events = [e["event"] for e in net.events if e["host"] == 0]
    assert "retire" in events
    assert "probe" not in events and "reinstate" not in events
    assert sender.stats["probes"] == 0
    assert (0, 0) in sender.evs.bad  # healed a second ago, still out of use
    assert {ev.state for ev in sender.evs.by_ev.values() if ev.key == (0, 0)} == {ASSUMED_BAD}


@pytest.mark.parametrize("trim,seed", [(0.05, 1), (0.1, 2), (0.2, 3)])
def test_mrc_no_trim_data_is_dropped_where_mrc_data_is_trimmed(trim, seed):
    # The same congested network: mrc's data is cut to its header and NACKed, never
    # lost; mrc-no-trim's asked not to be cut, so it is dropped and found lost.
    trimmed = run("mrc", Chaos(trim=trim), [], seed, 30_000)
    dropped = run("mrc-no-trim", Chaos(trim=trim), [], seed, 30_000)
    assert_all_delivered(trimmed)
    assert_all_delivered(dropped)
    assert trimmed.trimmed > 0 and trimmed.stats()["nacks"] > 0
    assert trimmed.dropped == 0 and trimmed.stats()["losses"] == 0
    assert dropped.trimmed == 0 and dropped.stats()["nacks"] == 0
    assert dropped.dropped > 0 and dropped.stats()["losses"] + dropped.stats()["timeouts"] > 0


def test_path_states_show_the_outage_path_retired_and_the_rest_good():
    # What the agent's `paths` command (and `make cli`'s `paths h0 h3`) reports: the
    # EVs on the dead spine of plane 0 are ASSUMED_BAD, every other EV GOOD.
    net, _ = outage_that_heals("mrc-no-probe")
    states = net.hosts[0].path_states(3)
    assert set(states) == {3}
    evs = states[3]
    assert evs and all({"ev", "plane", "path", "state", "active"} <= set(e) for e in evs)
    bad = {(e["plane"], e["path"]) for e in evs if e["state"] == ASSUMED_BAD}
    assert bad == {(0, 0)}
    assert all(e["state"] == GOOD for e in evs if (e["plane"], e["path"]) != (0, 0))
    assert net.hosts[0].path_states(2) == {}  # no connection to h2


def test_a_reinstated_path_carries_data_again():
    # After the outage heals and probes reinstate spine 0 of plane 0, the plane's EVs
    # spread over both spines again: a new message uses the healed spine about as much
    # as the other one, instead of never (the refill during the outage would otherwise
    # keep every active EV of the plane on spine 1).
    net, sender = outage_that_heals("mrc")
    assert (0, 0) not in sender.evs.bad
    net.data_on_path.clear()
    net.send(0, 3, 1, 300_000)
    net.run(net.now + 10.0, lambda: net.all_done([(0, 3, 1)]))
    assert_all_delivered(net, [(0, 3, 1)])
    healed, other = net.data_on_path[(0, 0)], net.data_on_path[(0, 1)]
    assert healed > 0.6 * other, net.data_on_path


@pytest.mark.parametrize("chaos", [Chaos(), Chaos(ecn=0.1), Chaos(jitter_s=0.002, ecn=0.05)])
def test_nscc_runs_as_fast_as_the_delay_window(chaos):
    # The simulated network has no queues, so the window decides little here: NSCC as
    # the default must not cost time against the delay window it replaced (5%), and
    # scattered ECN marks without queueing delay (NSCC holds) must not slow it down.
    took = {}
    for cc in ("nscc", "delay"):
        net = run("mrc", chaos, [], 3, 200_000, protocol={"cc": cc})
        assert_all_delivered(net)
        took[cc] = net.now
    assert took["nscc"] <= 1.05 * took["delay"], took


def one_way_outage_run(transport="mrc"):
    """h0 -> h3 while spine 0 of plane 0 is dead from 10 to 100 ms, then heals towards
    h3 only: h0's data crosses it again, h3's answers on the mirror of that path still
    die. Then a second of quiet and a second message."""
    outages = [Outage(plane=0, spine=0, start=0.01, end=0.1),
               Outage(plane=0, spine=0, to_host=0, start=0.1)]
    net = run(transport, Chaos(), outages, 7, 300_000, transfers=[(0, 3, 0)])
    assert_all_delivered(net, [(0, 3, 0)])
    net.run(net.now + 1.0)
    net.data_on_path.clear()
    net.send(0, 3, 1, 300_000)
    net.run(net.now + 10.0, lambda: net.all_done([(0, 3, 1)]))
    assert_all_delivered(net, [(0, 3, 1)])
    return net


def test_a_path_healed_only_forwards_is_reinstated_and_its_answers_go_around():
    # The sender retired the path during the outage. Its probes arrive once the
    # forward direction heals; a reply on the mirror would die, but the reply also
    # takes the receiver's reverse EV (on the other spine), so the path is reinstated,
    # and the answers to its data go around too: the forward path is in use again.
    # (Answering only on the mirror, the path stays retired for good.)
    net = one_way_outage_run()
    sender = net.hosts[0].senders[3]
    assert [e for e in net.events if e["event"] == "reinstate" and e["host"] == 0]
    assert (0, 0) not in sender.evs.bad
    assert net.data_on_path[(0, 0)] > 0.6 * net.data_on_path[(0, 1)], net.data_on_path
    reverse = net.hosts[3].reverse[0]
    assert reverse.evs[0] is not None and reverse.path(reverse.evs[0]) == 1
    assert 0 in reverse.suspect_paths[0]
    assert net.hosts[3].stats()["reverse_probes"] > 0


@settings(max_examples=15, **PROFILE)
@given(chaos=chaos.filter(lambda c: c.loss < 0.02), seed=st.integers(1, 1000),
       outages=st.lists(st.builds(Outage, plane=st.integers(0, 1), spine=st.integers(0, 1),
                                  to_host=st.integers(0, HOSTS - 1),
                                  start=st.floats(0, 0.05)), max_size=2))
def test_one_way_spine_faults_lose_nothing(chaos, seed, outages):
    net = run("mrc", chaos, outages, seed, 20_000)
    assert_all_delivered(net)
    clean_wave(net)
