"""Link faults: `link-flap`, `link-down` (both ways, or one way with `from`), `links-fail`.

- `link-flap`: both ends of a link go down for `down_s`, `count` times every `every_s`;
- `link-down`: a link goes down, both ways (carrier lost, both ends see it), or with
  `from: <node>` only the direction that node sends in: a one-way cut whose carrier
  stays up, so neither end's link state shows it (a loss of everything the sending port
  sends, written into the eBPF program's maps); back after `down_s` if given;
- `links-fail`: `count` different T0-T1 links, drawn at random (`seed`), fail one after
  another, the i-th at `at_s + i * every_s`, each as a `link-down` (back after `down_s`
  if given); one T1 of every plane, drawn too, keeps all its links, so every plane
  still connects every pair of racks (`links_fail_pick()`).

A both-ways cut is what routing sees (the link's ends lose carrier); a one-way cut it
does not see (no BFD). On the single-plane twin a link is one of the `planes` links the
twin's link of the same rack and T1 (or the host's only port) stands for: a cut both
ways takes 1/planes of that link's rate, a one-way cut loses 1/planes of what its
sender sends there (experiments/faults/kinds/capacity.py).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from experiments.faults.base import (
    Env,
    Fault,
    RouteLink,
    Step,
    link_of,
    link_route,
)
from experiments.faults.fields import Entry
from experiments.faults.kinds.capacity import TwinShare
from topologies.errors import shown
from topologies.model import Fabric, Link

MAX_SEED = 2**32 - 1
# A one-way cut is a loss of everything its sending port sends.
ONE_WAY_LOSS = 1.0


@dataclass(frozen=True)
class LinkFlap(Fault):
    """A link down both ways: both ends lose carrier, as when a cable is pulled."""

    kind = "link-flap"
    entry_fields = ("link",)
    before_start_ok = True
    help = "both ends of a link go down for down_s (count times, every every_s)"
    a: str
    b: str

    @classmethod
    def read(cls, entry: Entry) -> Fault:
        link = entry.link()
        return cls(link.a, link.b)

    @property
    def target(self) -> tuple:
        return (self.a, self.b)

    def key(self) -> tuple:
        return (self.kind, tuple(sorted(self.target)))  # whichever end is named first

    def apply(self, env: Env, up: bool) -> None:
        env.target.set_link(env.net, self.a, self.b, up)

    def routing_links(self, fabric: Fabric) -> set[RouteLink]:
        return {link_route(fabric, link_of(fabric, self.a, self.b))}

    def on_twin(self, fabric: Fabric, twin: Fabric) -> TwinShare:
        return TwinShare.links_down(fabric, twin, [link_of(fabric, self.a, self.b)])

    def cuts(self, nodes: list[str], plane: int) -> str | None:
        hops = {frozenset(pair) for pair in zip(nodes, nodes[1:])}
        a, b = sorted((self.a, self.b))
        return f"link {a}-{b} down" if {a, b} in hops else None


@dataclass(frozen=True)
class LinkDown(LinkFlap):
    """A link down both ways, or (with `from`) one way (`OneWayCut`)."""

    kind = "link-down"
    entry_fields = ("link", "from")
    open_ended = True
    before_start_ok = True
    help = ("a link goes down both ways (or only the direction `from` sends in), for "
            "down_s or for the rest of the run")

    @classmethod
    def read(cls, entry: Entry) -> Fault:
        link = entry.link()
        sender = entry.get("from")
        if sender is None:
            return cls(link.a, link.b)
        return OneWayCut.between(entry, link, sender)


@dataclass(frozen=True)
class OneWayCut(Fault, register=False):
    """What `sender` sends on the link to `receiver` is lost; the carrier stays up."""

    kind = "link-down"
    entry_fields = LinkDown.entry_fields
    open_ended = True
    before_start_ok = True
    sender: str
    receiver: str

    @classmethod
    def between(cls, entry: Entry, link: Link, sender: object) -> OneWayCut:
        if sender not in (link.a, link.b):
            raise entry.error("from", f"must be one end of the link, {link.a} or {link.b} "
                              f"(got {shown(sender)})", "or leave it out for both directions")
        return cls(sender, link.b if sender == link.a else link.a)

    @property
    def target(self) -> tuple:
        return (f"{self.sender}>{self.receiver}",)

    def apply(self, env: Env, up: bool) -> None:
        from experiments.dataplanes import ebpf_switch

        ebpf_switch.set_loss(env.running, sorted(self.ebpf_ports(env.fabric)),
                             0.0 if up else ONE_WAY_LOSS)

    def ebpf_ports(self, fabric: Fabric) -> set[tuple[str, str]]:
        return {(self.sender, p.intf) for p in fabric.ports(self.sender)
                if p.peer == self.receiver}

    def links_out(self, fabric: Fabric) -> set[RouteLink]:
        return {link_route(fabric, link_of(fabric, self.sender, self.receiver))}

    def on_twin(self, fabric: Fabric, twin: Fabric) -> TwinShare:
        return TwinShare.sent_lost(fabric, twin, [(self.sender, self.receiver, ONE_WAY_LOSS)])

    def cuts(self, nodes: list[str], plane: int) -> str | None:
        hops = set(zip(nodes, nodes[1:]))
        if (self.sender, self.receiver) in hops or (self.receiver, self.sender) in hops:
            return f"link {self.sender}>{self.receiver} cut one way"
        return None


@dataclass(frozen=True)
class LinksFail(Fault):
    """T0-T1 links drawn at random, failing one after another (each a `link-down`)."""

    kind = "links-fail"
    entry_fields = ("seed",)
    open_ended = True
    before_start_ok = True
    help = ("count T0-T1 links drawn with seed fail every_s apart, one T1 of every plane "
            "keeping all its links")

    @classmethod
    def applicable(cls, fabric: Fabric) -> str | None:
        if max_links_fail(fabric) == 0:
            return (f"{fabric.name} has one T1 per plane: no T0-T1 link can fail with every "
                    "plane still connecting every pair of racks")
        return None

    @classmethod
    def steps(cls, entry: Entry) -> list[Step]:
        early = entry.before_start(cls.before_start_ok)
        at = entry.start(early)
        down_s = entry.down_s(cls.open_ended)
        fabric = entry.fabric
        most = max_links_fail(fabric)
        if most == 0:
            raise entry.error("kind", cls.applicable(fabric),
                              "use a topology with t1_per_plane of 2 or more")
        count = entry.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= most:
            raise entry.error("count", f"must be a number of T0-T1 links from 1 to {most}, "
                              f"the most that can fail on {fabric.name} with every plane "
                              f"still connecting every pair of racks (got {shown(count)})",
                              f"e.g. count: {most}")
        seed = entry.whole("seed", 0, 0, MAX_SEED, "e.g. seed: 1")
        every = entry.seconds("every_s", 0.0)
        if early and every != 0:
            raise entry.error("every_s", f"links in place before the start all fail at once "
                              f"(got {shown(entry.get('every_s'))})",
                              "leave every_s out, or drop before_start")
        entry.check_horizon(at + (count - 1) * every, count)
        steps = []
        for n, link in enumerate(links_fail_pick(fabric, count, seed)):
            fault = LinkDown(link.a, link.b)
            steps.append(Step(at + n * every, False, fault, early))
            if down_s is not None:
                steps.append(Step(at + n * every + down_s, True, fault))
        return steps


def max_links_fail(fabric: Fabric) -> int:
    """The most T0-T1 links links-fail takes down: all but one T1's in every plane.

    Fewer cannot stay: every rack needs a link, so a plane keeps at least `racks` of
    its links; one T1 with all of them connects every pair of racks."""
    spec = fabric.spec
    return spec.planes * spec.racks * (spec.t1_per_plane - 1)


def links_fail_pick(fabric: Fabric, count: int, seed: int) -> list[Link]:
    """`count` different T0-T1 links, in the order they fail, drawn with `seed` (the
    same fabric and seed give the same links). In every plane one T1, drawn first,
    keeps all its links, so no T0 loses its last uplink and every pair of racks still
    shares a T1: each plane keeps connecting every pair of racks however many of the
    other links fail."""
    rng = random.Random(seed)
    spines = fabric.spec.t1_per_plane
    keep = {plane: rng.randrange(spines) for plane in range(fabric.spec.planes)}
    candidates = [link for link in fabric.links if link.tier == "t0_t1"
                  and fabric.node(link.b).index != keep[link.plane]]
    return rng.sample(candidates, count)
