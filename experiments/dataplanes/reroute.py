"""What the fabric's routing tells each host when a fault happens (the baseline's reroute model).

MRC needs no routing: it finds dead paths by its own packets. The RoCE-like baseline
(hosts/baseline.py) moves a queue pair only where ECMP and BGP would move it, so the
fault injector tells every agent of a baseline transport what its routing learns
(experiments/run/workload_run.py sends each `RouteEvent` as a `route` command). This module
is the pure rule: a fault timeline step and the topology in, per host the paths
(destination, plane, spine) that routing takes away or gives back, and whether the
news is *local* or *remote*:

- **local**: the first failed link of the path is the source host's own port or its
  T0's uplink. The NIC sees its carrier go, or the T0 sees its port go and drops the
  link from its ECMP group in hardware: the traffic moves after `local_failover_s`
  (milliseconds).
- **remote**: the path fails further on: a T1's link down to the destination's T0, or
  the destination's own port. The switch next to the failure has no other way there,
  so the route must be withdrawn and the withdrawal must reach the source's T0 (BGP):
  after `reconvergence_s` (1 s by default).
- **nothing** for a blackhole (the switch drops traffic silently and keeps its control
  plane up, so routing never moves traffic off it until it comes back), for loss and
  gray loss (routing does not see lost packets), and for a one-way `link-down` (its
  carrier stays up, so neither end's link state changes; BFD, which would notice the
  missing hellos in one direction, is not modelled).
- **nothing** for a `rate-cut`, how the single-plane twin carries a link, switch or
  NIC port down in some of the planes (experiments/dataplanes/twin.py): the twin's
  link runs slower but stays up, so no route changes. Routing on the twin sees a link
  go only when all the planes' links it stands for are down.

The step that ends a fault gives the same paths back, `local-up` or `remote-up`, with
the same delays: the adjacent switch re-adds its link, remote switches hear the route
advertised again. A switch reboot or a switch down is every one of its links failing
at once; a `link-down` both ways, and each link of `links-fail`, is a link flap's down
step.

Faults overlap: a T0 may come back while a host port behind it is still down. A
`RoutingState` (one per transport run) counts the faults holding each link down, so a
step takes away only paths that were still up and gives back only paths no other
fault still holds.

A step in place before the workload starts (`Step.before_start`) comes with
`delay_s: 0` in its route command: routing converged around it long before the job
started.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from experiments.faults import RouteLink, Step
from topologies.model import Fabric
from topologies.paths import catalogue

# Links as routing sees them (experiments/faults/base.py): a host's port ("host",
# host, plane) and a T0-T1 link ("t0t1", plane, rack, spine). Faults act on both
# directions of a link.
Link = RouteLink


@dataclass(frozen=True)
class RouteEvent:
    """What routing tells `host`: `paths` ((destination, plane, spine or None) each)
    are gone (`*-down`) or back (`*-up`)."""

    host: int
    kind: str  # local-down, local-up, remote-down, remote-up
    paths: tuple[tuple[int, int, int | None], ...]
    # When the traffic follows, if not after the kind's delay (hosts/baseline.py): 0 for
    # a fault in place before the start.
    delay_s: float | None = None

    def command(self) -> dict:
        """The agent's `route` command (hosts/agent.py)."""
        command = {"cmd": "route", "kind": self.kind, "paths": [list(p) for p in self.paths]}
        if self.delay_s is not None:
            command["delay_s"] = self.delay_s
        return command


def failed_links(step: Step, fabric: Fabric) -> set[Link]:
    """The links a fault step takes down (or, for an up step, brings back) as routing
    sees them (each fault kind says: experiments/faults/kinds/); empty for faults
    routing does not see."""
    return step.fault.routing_links(fabric)


def path_links(fabric: Fabric, src: int, dst: int, plane: int,
               spine: int | None) -> list[Link]:
    """The links of a path in the order the packets cross them."""
    a, b = fabric.host(src).rack, fabric.host(dst).rack
    middle = [] if spine is None else [("t0t1", plane, a, spine), ("t0t1", plane, b, spine)]
    return [("host", src, plane), *middle, ("host", dst, plane)]


def route_events(step: Step, fabric: Fabric,
                 held: frozenset[Link] | set[Link] = frozenset()) -> list[RouteEvent]:
    """Per host, the paths routing takes away (a down step) or gives back (an up
    step), local and remote apart; hosts that learn nothing are left out.

    `held`: links that other faults hold down. A path over one of them is gone
    already: this step neither takes it away nor gives it back (`RoutingState`)."""
    failed = failed_links(step, fabric)
    if not failed:
        return []
    state = "up" if step.up else "down"
    found: dict[tuple[int, str], list] = {}
    n = len(fabric.hosts)
    for src in range(n):
        for dst in range(n):
            if src == dst:
                continue
            for path in catalogue(fabric, src, dst):
                links = path_links(fabric, src, dst, path.plane, path.spine)
                hit = next((i for i, link in enumerate(links) if link in failed), None)
                if hit is None or any(link in held for link in links):
                    continue
                # The source's port (0) and its T0's uplink (1, on a path through a
                # spine) fail next to whoever forwards the flow first: local.
                where = "local" if hit == 0 or (hit == 1 and path.spine is not None) \
                    else "remote"
                found.setdefault((src, f"{where}-{state}"), []).append(
                    (dst, path.plane, path.spine))
    delay_s = 0.0 if step.before_start else None
    return [RouteEvent(host, kind, tuple(paths), delay_s)
            for (host, kind), paths in sorted(found.items())]


class RoutingState:
    """The links faults hold down during one run, so that overlapping faults give a
    path back only when the last one holding it ends (a T0 coming back does not
    revive a path to a host whose port is still down)."""

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.holds: Counter[Link] = Counter()  # link -> faults holding it down

    def events(self, step: Step) -> list[RouteEvent]:
        """What routing tells each host of this step, given the other faults."""
        links = failed_links(step, self.fabric)
        if step.up:
            self.holds.subtract(links)
            self.holds = +self.holds  # drop links no fault holds any more
            return route_events(step, self.fabric, set(self.holds))
        events = route_events(step, self.fabric, set(self.holds))
        self.holds.update(links)
        return events
