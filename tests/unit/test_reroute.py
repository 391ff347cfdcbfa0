"""The baseline's reroute model: which paths each host's routing loses, local or remote,
and how long after the fault its queue pairs move (local failover in milliseconds, BGP
reconvergence in a second, a blackhole never until the switch is back)."""

from __future__ import annotations

import pytest

from experiments.dataplanes.reroute import RouteEvent, RoutingState, route_events
from experiments.faults import parse_faults
from experiments.run.workload_run import with_routing
from hosts.baseline import RoceSender, Routes, route_delay
from hosts.config import ProtocolConfig
from hosts.simnet import Outage, SimNet
from tests.steps import step
from topologies.model import load_topology
from topologies.paths import catalogue, path_for_ev

LOCAL_FAILOVER_S = ProtocolConfig().local_failover_s

FABRIC = load_topology("2tier-2plane")  # h0 h1 in rack 0, h2 h3 in rack 1


def by_host(events: list[RouteEvent]) -> dict[tuple[int, str], set]:
    return {(e.host, e.kind): set(e.paths) for e in events}


def test_a_t0_uplink_failing_is_local_to_its_rack_and_remote_to_the_others():
    down = by_host(route_events(step(1.0, False, "link-flap", ("p0t0r0", "p0t1s0")), FABRIC))
    # h0 and h1 lose every path through plane 0 spine 0, the same-rack one too: their T0
    # drops the uplink from its ECMP group.
    assert down[(0, "local-down")] == {(1, 0, 0), (2, 0, 0), (3, 0, 0)}
    assert down[(1, "local-down")] == {(0, 0, 0), (2, 0, 0), (3, 0, 0)}
    # h2 and h3 lose only their way into rack 0 through that spine, by BGP.
    assert down[(2, "remote-down")] == {(0, 0, 0), (1, 0, 0)}
    assert down[(3, "remote-down")] == {(0, 0, 0), (1, 0, 0)}
    assert len(down) == 4
    up = by_host(route_events(step(1.5, True, "link-flap", ("p0t1s0", "p0t0r0")), FABRIC))
    assert up == {(host, kind.replace("down", "up")): paths
                  for (host, kind), paths in down.items()}


def test_a_host_port_is_local_to_its_host_and_remote_to_every_sender_towards_it():
    down = by_host(route_events(step(0.5, False, "nic-port-down", ("h1", 1)), FABRIC))
    assert down[(1, "local-down")] == {(d, p.plane, p.spine) for d in (0, 2, 3)
                                       for p in catalogue(FABRIC, 1, d) if p.plane == 1}
    # The same-rack direct path too: h1's T0 has no other way to h1.
    assert down[(0, "remote-down")] == {(1, 1, None), (1, 1, 0), (1, 1, 1)}
    assert down[(2, "remote-down")] == {(1, 1, 0), (1, 1, 1)}
    assert set(down) == {(1, "local-down"), (0, "remote-down"), (2, "remote-down"),
                         (3, "remote-down")}


def test_a_t1_reboot_is_local_everywhere_and_a_t0_reboot_local_to_its_rack_only():
    t1 = by_host(route_events(step(1.0, False, "switch-reboot", ("p1t1s1",)), FABRIC))
    assert {kind for _, kind in t1} == {"local-down"}
    assert t1[(2, "local-down")] == {(0, 1, 1), (1, 1, 1), (3, 1, 1)}
    t0 = by_host(route_events(step(1.0, False, "switch-reboot", ("p0t0r1",)), FABRIC))
    assert set(t0) == {(0, "remote-down"), (1, "remote-down"), (2, "local-down"),
                       (3, "local-down")}
    assert t0[(0, "remote-down")] == {(d, 0, s) for d in (2, 3) for s in (0, 1)}


def test_a_switch_down_is_what_routing_hears_of_a_reboot():
    for switch in ("p1t1s1", "p0t0r1"):
        for up in (False, True):
            down = route_events(step(1.0, up, "switch-down", (switch,)), FABRIC)
            assert down == route_events(step(1.0, up, "switch-reboot", (switch,)), FABRIC)
    # A T0 down: its own hosts lose their port of the plane (local), the others every
    # path into its rack on the plane (remote).
    t0 = by_host(route_events(step(1.0, False, "switch-down", ("p0t0r1",)), FABRIC))
    assert t0[(2, "local-down")] == {(d, 0, s) for d in (0, 1, 3)
                                     for s in ((0, 1) if d != 3 else (None, 0, 1))}
    assert t0[(1, "remote-down")] == {(d, 0, s) for d in (2, 3) for s in (0, 1)}


def test_a_link_down_both_ways_is_a_flap_and_one_way_routing_never_hears_of():
    for link in (("p0t0r0", "p0t1s0"), ("h2", "p1t0r1")):
        for up in (False, True):
            assert (route_events(step(1.0, up, "link-down", link), FABRIC)
                    == route_events(step(1.0, up, "link-flap", link), FABRIC) != [])
    for directed in ("p0t0r0>p0t1s0", "p0t1s0>p0t0r0", "h2>p1t0r1"):
        assert route_events(step(1.0, False, "link-down", (directed,)), FABRIC) == []


def test_each_link_of_links_fail_is_a_flap_of_that_link():
    actions = parse_faults([{"kind": "links-fail", "count": 3, "at_s": 0.5, "every_s": 0.5,
                             "seed": 2}], FABRIC)
    for action in actions:
        flap = step(action.t, action.up, "link-flap", action.target)
        assert route_events(action, FABRIC) == route_events(flap, FABRIC) != []


def test_routing_converged_before_the_start_moves_the_queue_pair_at_once():
    (early,) = parse_faults([{"kind": "link-down", "link": ["p0t0r1", "p0t1s0"],
                              "before_start": True}], FABRIC)
    events = route_events(early, FABRIC)
    assert {e.delay_s for e in events} == {0.0}
    event = next(e for e in events if e.host == 0)
    assert event.kind == "remote-down"  # a second of BGP, had it happened during the job
    assert event.command() == {"cmd": "route", "kind": "remote-down",
                               "paths": [list(p) for p in event.paths], "delay_s": 0.0}
    # A step during the job says no delay: the agent applies its kind's.
    (timed,) = parse_faults([{"kind": "link-down", "link": ["p0t0r1", "p0t1s0"],
                              "at_s": 1}], FABRIC)
    assert "delay_s" not in route_events(timed, FABRIC)[0].command()


def test_a_path_comes_back_only_when_the_last_fault_holding_it_ends():
    routing = RoutingState(FABRIC)
    port = step(0.0, False, "nic-port-down", ("h1", 0), before_start=True)
    t0 = step(1.0, False, "switch-down", ("p0t0r1",))
    first = by_host(routing.events(port))
    assert first[(2, "remote-down")] == {(1, 0, 0), (1, 0, 1)}
    # The T0 of rack 1 going down takes h2's other plane-0 paths, not those to h1 again.
    down = by_host(routing.events(t0))
    assert down[(2, "local-down")] == {(0, 0, 0), (0, 0, 1), (3, 0, None), (3, 0, 0),
                                       (3, 0, 1)}
    # Back: h2 gets its plane-0 paths again, except those to h1, whose port is still down.
    up = by_host(routing.events(step(3.0, True, "switch-down", ("p0t0r1",))))
    assert up[(2, "local-up")] == down[(2, "local-down")]
    assert all(dst != 1 for paths in up.values() for dst, plane, _ in paths if plane == 0)
    last = by_host(routing.events(step(4.0, True, "nic-port-down", ("h1", 0))))
    assert last[(2, "remote-up")] == {(1, 0, 0), (1, 0, 1)}
    assert routing.holds == {}
    # The same link held by two faults: the first to end gives nothing back.
    routing.events(step(0.0, False, "link-down", ("p0t0r0", "p0t1s0")))
    assert routing.events(step(0.0, False, "switch-down", ("p0t1s0",)))  # its other link
    assert by_host(routing.events(step(1.0, True, "link-down", ("p0t0r0", "p0t1s0")))) == {}


@pytest.mark.parametrize("action", [
    step(1.0, False, "blackhole", ("p0t1s0",)),
    step(1.0, True, "blackhole", ("p0t1s0",)),
    step(1.0, False, "loss", ("h0>p0t0r0",), 0.01),
    step(1.0, False, "gray-loss", ("h0", "h3", 0, 1), 0.2),
    step(1.0, False, "link-down", ("p0t1s0>p0t0r1",)),
])
def test_routing_never_hears_of_a_blackhole_or_of_loss(action):
    assert route_events(action, FABRIC) == []


def test_an_event_is_the_agents_route_command():
    event = RouteEvent(2, "remote-down", ((0, 0, 0), (1, 1, None)))
    assert event.command() == {"cmd": "route", "kind": "remote-down",
                               "paths": [[0, 0, 0], [1, 1, None]]}


# ---------------------------------------------------------------------- delays per kind
def test_delay_per_kind_and_unknown_kinds():
    assert route_delay("local-down", 0.005, 1.0) == route_delay("local-up", 0.005, 1.0) == 0.005
    assert route_delay("remote-down", 0.005, 1.0) == route_delay("remote-up", 0.005, 1.0) == 1.0
    with pytest.raises(ValueError, match="local-down"):
        route_delay("blackhole", 0.005, 1.0)
    assert 0.001 <= LOCAL_FAILOVER_S <= 0.01  # hardware ECMP: milliseconds


def flow_on_a_path(reconvergence_s=1.0, **settings):
    """A 1-QP connection h0 -> h3 with data in flight; its path and routing."""
    config = ProtocolConfig(mtu_payload=100, rto_min_s=0.05, rto_max_s=0.2,
                            reconvergence_s=reconvergence_s, **settings)
    routes = Routes(LOCAL_FAILOVER_S, reconvergence_s)
    events = []
    sender = RoceSender(0, 3, 3, FABRIC, config, events.append, lambda *a: None, routes=routes)
    sender.send_message(0, bytes(2000), 0.0)
    sender.poll(0.0)
    return sender, routes, events


def path_of(sender) -> tuple[int, int | None]:
    path = path_for_ev(FABRIC, 0, 3, sender.ev)
    return path.plane, path.spine


def moved_at(sender, start, step=0.0005, until=5.0) -> float | None:
    """Poll from `start` on; when the QP left its first path (None: never)."""
    first, t = sender.ev, start
    while t < until:
        t = round(t + step, 6)
        sender.poll(t)
        if sender.ev != first:
            return t
    return None


@pytest.mark.parametrize("kind, where, host_kind, delay", [
    ("link-flap", "uplink", "local-down", LOCAL_FAILOVER_S),  # its source T0's uplink
    ("link-flap", "downlink", "remote-down", 1.0),  # the T1's link down to rack 1
    ("switch-reboot", "t1", "local-down", LOCAL_FAILOVER_S),
])
def test_the_queue_pair_moves_after_the_delay_of_the_fault_kind(kind, where, host_kind, delay):
    sender, routes, events = flow_on_a_path()
    plane, spine = path_of(sender)  # the path ECMP hashed the flow onto
    t1 = f"p{plane}t1s{spine}"
    target = {"uplink": (f"p{plane}t0r0", t1), "downlink": (f"p{plane}t0r1", t1),
              "t1": (t1,)}[where]
    fault = step(0.1, False, kind, target)
    (event,) = [e for e in route_events(fault, FABRIC) if e.host == 0]
    assert event.kind == host_kind
    routes.event(event.kind, event.paths, fault.t)
    t = moved_at(sender, fault.t)
    assert t == pytest.approx(fault.t + delay, abs=0.001)
    # To the other T1, on the same port: an RC QP is bound to its port.
    assert path_of(sender) == (plane, 1 - spine)
    (reroute,) = [e for e in events if e["event"] == "reroute"]
    assert reroute["t"] == t


def test_a_blackhole_never_moves_the_queue_pair_until_the_switch_is_back():
    sender, routes, events = flow_on_a_path(reconvergence_s=0.5)
    first = sender.ev
    plane, spine = path_of(sender)
    hole = f"p{plane}t1s{spine}"
    for event in route_events(step(0.0, False, "blackhole", (hole,)), FABRIC):
        routes.event(event.kind, event.paths, 0.0)  # there are none
    assert moved_at(sender, 0.0, step=0.01, until=5.0) is None  # far past reconvergence_s
    assert sender.ev == first and sender.stats["timeouts"] >= 3
    assert not [e for e in events if e["event"] == "reroute"]


def test_when_routing_gives_the_path_back_the_queue_pair_returns_to_it():
    sender, routes, _ = flow_on_a_path()
    home = sender.ev
    plane, spine = path_of(sender)
    routes.event("local-down", [(3, plane, spine)], 0.0)
    assert moved_at(sender, 0.0) == pytest.approx(LOCAL_FAILOVER_S, abs=0.001)
    routes.event("remote-up", [(3, plane, spine)], 0.1)
    assert moved_at(sender, 0.1) == pytest.approx(1.1, abs=0.001)
    assert sender.ev == home


def test_a_queue_pair_whose_own_port_loses_carrier_stays_and_fails():
    # An RC QP is bound to its port: with the port down it has nowhere to go, retries
    # and moves to the error state; the job would abort there.
    sender, routes, events = flow_on_a_path(qp_retry_count=3)
    first = sender.ev
    plane, _ = path_of(sender)
    routes.local_plane(plane, False, 0.2)
    assert moved_at(sender, 0.2, step=0.01, until=5.0) is None
    assert sender.ev == first and sender.stats["qp_errors"] == 1
    assert [e["event"] for e in events if e["event"] in ("reroute", "qp-error")] == ["qp-error"]


# ---------------------------------------------------------------------- the fault injector
class Agents:
    """What with_routing needs of an AgentSet: a command per host, recorded."""

    def __init__(self):
        self.sent = []

    def command(self, host, **cmd):
        self.sent.append((host, cmd))


def test_each_fault_step_is_applied_then_told_to_the_hosts_routing():
    applied, agents = [], Agents()
    apply = with_routing(applied.append, agents, FABRIC)
    flap = step(1.0, False, "link-flap", ("p0t0r0", "p0t1s0"))
    apply(flap)
    assert applied == [flap]
    assert [(h, c["kind"]) for h, c in agents.sent] == [
        (0, "local-down"), (1, "local-down"), (2, "remote-down"), (3, "remote-down")]
    assert agents.sent[2][1] == route_events(flap, FABRIC)[2].command()
    agents.sent.clear()
    apply(step(2.0, False, "blackhole", ("p0t1s1",)))
    assert agents.sent == []


# ---------------------------------------------------------------------- on the simulated network
def spine_failure(kind: str, transport: str = "roce-8"):
    """All-to-all of 100 kB on 2tier-2plane; T1 0 of plane 0 fails at 10 ms for 1.5 s,
    as a reboot (routing hears of it) or a blackhole (it does not). Returns the time
    every transfer was done."""
    net = SimNet(FABRIC, transport, seed=2)
    transfers = [(s, d, 0) for s in range(4) for d in range(4) if s != d]
    for src, dst, msg_id in transfers:
        net.send(src, dst, msg_id, 100_000)
    down, up = step(0.01, False, kind, ("p0t1s0",)), step(1.51, True, kind, ("p0t1s0",))
    net.run(down.t)
    net.outages.append(Outage(0, spine=0, start=down.t, end=up.t))
    for event in route_events(down, FABRIC):
        net.hosts[event.host].route_event(event.kind, event.paths, net.now)
    net.run(up.t, lambda: net.all_done(transfers))
    for event in route_events(up, FABRIC):
        net.hosts[event.host].route_event(event.kind, event.paths, net.now)
    net.run(30.0, lambda: net.all_done(transfers))
    assert net.all_done(transfers) and all(net.delivered.values())
    return net.now, net


def test_a_rebooting_t1_costs_the_baseline_milliseconds_and_a_silent_one_its_whole_outage():
    rebooted, net = spine_failure("switch-reboot")
    # Every QP on the spine moved 5 ms after the failure, long before it came back.
    moves = [e["t"] for e in net.events if e["event"] == "reroute"]
    assert moves and min(moves) == pytest.approx(0.01 + LOCAL_FAILOVER_S, abs=0.003)
    assert rebooted < 0.5
    silent, net = spine_failure("blackhole")
    assert not [e for e in net.events if e["event"] == "reroute"]
    assert silent > 1.51  # stalled until the switch forwarded again
