"""What a fault of a multi-plane fabric takes from its single-plane twin; `rate-cut`,
the fault that carries a share of a link's capacity there; and `link-rate`, a link slowed
on purpose (a port that came up at a lower speed, or the appendix's T0-T1 links at a
quarter of a NIC's rate).

A link of the twin (experiments/dataplanes/twin.py) stands for `planes` links of the
multi-plane fabric, the links of the same host, or of the same rack and T1 number, in
every plane, at `planes` times their rate. A fault of the planes is therefore, on the
twin, a share of the links it touches, plane by plane: a `TwinShare`, which each kind's
`on_twin` returns.

- `down`: each of the planes' links the fault takes out as routing sees it (a link down
  both ways, a switch down or rebooted, a NIC port down), named by its twin link and
  its plane. With k of a twin link's `planes` links out, the twin link runs at
  (planes - k)/planes of its rate (`RateCut`), which routing does not see: it goes
  down only when all `planes` are out;
- `lost`: what the fault loses without routing knowing (a random loss, a one-way cut,
  what a blackholed switch should forward), per direction and plane, as the share of
  the packets sent on that plane's link. The twin link loses the same share of its
  packets: the mean over its planes still up;
- `gray`: a gray loss of one plane's path or T1 is the same share of the packets of the
  twin's path (the same host pair and T1) or T1: the probability over `planes`;
- `slowed`: a plane's link kept at a share of its rate (`link-rate`): that plane's part
  of the twin link's rate is cut to the same share.

experiments/dataplanes/twin.py adds up the shares of the faults down at each step of
the timeline into the twin's settings: rate cuts, links down, losses, gray losses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from experiments.faults.base import Env, Fault, link_of, twin_name
from experiments.faults.fields import Entry
from topologies.model import Fabric, Link

# A share of a link's rate is kept as a fraction of at most this denominator: a rate
# finer than a thousandth of a link's means nothing to a token bucket.
SHARE_DENOMINATOR = 1000


@dataclass(frozen=True)
class TwinShare:
    """What one fault of a fabric of `planes` planes takes from its single-plane twin.

    `down`: (a, b, plane) for each planes' link out as routing sees it, (a, b) its twin
    link as the twin names it (the lower tier first); `lost`: (sender, receiver, plane,
    probability) for each direction of a plane's link that loses a share of what it
    sends, silently; `gray`: (target, plane, probability) for each gray loss, `target`
    the twin's path or T1 as a `gray-loss` names it ((source, destination, 0, spine) or
    (T1,)); `slowed`: (a, b, plane, share) for each planes' link kept at a share of its
    rate, (a, b) its twin link."""

    planes: int
    down: frozenset[tuple[str, str, int]] = frozenset()
    lost: frozenset[tuple[str, str, int, float]] = frozenset()
    gray: frozenset[tuple[tuple, int, float]] = frozenset()
    slowed: frozenset[tuple[str, str, int, Fraction]] = frozenset()

    @classmethod
    def links_down(cls, fabric: Fabric, twin: Fabric, links: Iterable[Link]) -> TwinShare:
        """The links out, as routing sees them."""
        return cls(fabric.spec.planes, down=frozenset(
            (twin_name(fabric, twin, link.a), twin_name(fabric, twin, link.b), link.plane)
            for link in links))

    @classmethod
    def sent_lost(cls, fabric: Fabric, twin: Fabric,
                  directions: Iterable[tuple[str, str, float]]) -> TwinShare:
        """Each (sender, receiver, probability): that share of what the sender sends on
        its link to the receiver is lost."""
        return cls(fabric.spec.planes, lost=frozenset(
            (twin_name(fabric, twin, a), twin_name(fabric, twin, b), plane_of(fabric, a, b), p)
            for a, b, p in directions))

    @classmethod
    def gray_lost(cls, fabric: Fabric, target: tuple, plane: int,
                  probability: float) -> TwinShare:
        """A gray loss of one plane's path or T1, `target` its twin counterpart."""
        return cls(fabric.spec.planes, gray=frozenset({(target, plane, probability)}))


def plane_of(fabric: Fabric, a: str, b: str) -> int:
    """The plane of the link between nodes a and b (a host's port is its switch's plane)."""
    return next(n.plane for n in map(fabric.node, (a, b)) if n.role != "host")


@dataclass(frozen=True)
class RateCut(Fault, register=False):
    """A link at `left`/`of` of its rate both ways: on the single-plane twin, the share of
    its planes' links that faults of the multi-plane fabric took out (`TwinShare`). The
    link stays up: routing sees nothing, and no path through it is cut."""

    kind = "rate-cut"
    help = ("a link runs at a share of its rate both ways: the single-plane twin's part of "
            "a fault of some of the links it stands for")
    a: str
    b: str
    left: int
    of: int

    @property
    def share(self) -> float:
        return self.left / self.of

    @property
    def target(self) -> tuple:
        return (self.a, self.b, f"{self.left}/{self.of}")

    def key(self) -> tuple:
        return (self.kind, tuple(sorted((self.a, self.b))))  # at whatever share

    def step_text(self, up: bool) -> str:
        back = "back to its rate" if up else f"at {self.left}/{self.of} of its rate"
        return f"rate-cut {self.a}-{self.b} {back}"

    def apply(self, env: Env, up: bool) -> None:
        env.target.set_rate(env.running, self.a, self.b, 1.0 if up else self.share)
        if env.agents is not None:
            self._line_share(env.agents, env.fabric, 1.0 if up else self.share)

    def tell_agents(self, agents, fabric: Fabric) -> None:
        self._line_share(agents, fabric, self.share)

    def _line_share(self, agents, fabric: Fabric, share: float) -> None:
        """A cut of a host's own link is its NIC's port at a lower speed: the host's
        agent paces to it (hosts/agent.py `line-rate`), as a NIC paces to its port, so
        the host's queue does not drop what the port can no longer carry."""
        for name in (self.a, self.b):
            node = fabric.node(name)
            if node.role == "host":
                agents.command(node.index, cmd="line-rate", share=share)


@dataclass(frozen=True)
class LinkRate(RateCut):
    """A link kept at a share of its rate both ways, as a port that came up at a lower
    speed: it stays up, so routing and the agents' link state see nothing, and a flow
    through it finds the slower rate only in its queue (ECN, trims, losses)."""

    kind = "link-rate"
    entry_fields = ("link", "share")
    open_ended = True
    before_start_ok = True
    help = ("a link runs at `share` of its rate both ways (a port at a lower speed); "
            "routing sees nothing")

    @classmethod
    def read(cls, entry: Entry) -> Fault:
        link = entry.link()
        share = Fraction(entry.fraction("share", "e.g. share: 0.25 for a quarter of the "
                                        "link's rate")).limit_denominator(SHARE_DENOMINATOR)
        return cls(link.a, link.b, share.numerator, share.denominator)

    def on_twin(self, fabric: Fabric, twin: Fabric) -> TwinShare:
        link = link_of(fabric, self.a, self.b)
        return TwinShare(fabric.spec.planes, slowed=frozenset({(
            twin_name(fabric, twin, link.a), twin_name(fabric, twin, link.b), link.plane,
            Fraction(self.left, self.of))}))
