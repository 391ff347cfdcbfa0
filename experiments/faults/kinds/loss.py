"""Loss faults: `loss` and `gray-loss`, written into the eBPF switch program's maps.

- `loss`: random loss of `probability` of the packets on a link (both ways, or only
  those sent by the node named in `from`), or on every host link (`link: hosts`);
- `gray-loss`: `probability` of the packets of one path are lost while everything else
  gets through: the path from host `path[0]` to host `path[1]` through `plane` and
  `spine`, or every path through a T1 (`switch`).

Both act on the ports that send the packets (the program is loaded there in
faults-only mode where it does not run already, experiments/dataplanes/ebpf_switch.py), so they
need no netem. Routing sees neither: no link goes down.

On the single-plane twin both lose the same share of the packets: a link's loss is
1/planes of what the twin link carries, a loss of `probability` on its share of it, so
the twin link loses probability/planes (the mean over its planes, for several at once);
a gray loss of one plane's path or T1 is probability/planes of the twin's path through
the same T1, or of its T1 (experiments/faults/kinds/capacity.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from experiments.faults.base import Env, Fault, FaultError, twin_name
from experiments.faults.fields import Entry
from experiments.faults.kinds.capacity import TwinShare
from topologies.addressing import intf_name, t1_name, usid_address
from topologies.errors import shown
from topologies.model import Fabric
from topologies.paths import catalogue

ALL_HOST_LINKS = "hosts"  # `link: hosts` in a loss fault: every host link


@dataclass(frozen=True)
class LossFault(Fault, register=False):
    """A loss probability rather than a state: on while down, cleared when up."""

    open_ended = True
    before_start_ok = True
    probability: float

    def step_text(self, up: bool) -> str:
        return f"{self.describe()} {'off' if up else f'on ({self.probability:g})'}"

    def log(self, up: bool) -> dict:
        entry = super().log(up)
        if not up:
            entry["probability"] = self.probability
        return entry


@dataclass(frozen=True)
class Loss(LossFault):
    kind = "loss"
    entry_fields = ("link", "from", "probability")
    help = ("random loss of probability on a link (both ways, or what `from` sends), or on "
            "every host link (link: hosts)")
    links: tuple[tuple[str, str], ...] = ()  # (sender, receiver) of each direction

    @classmethod
    def read(cls, entry: Entry) -> Fault:
        fabric = entry.fabric
        sender = entry.get("from")
        if entry.get("link") == ALL_HOST_LINKS:
            if sender is not None:
                raise entry.error("from", "takes one link, not link: hosts",
                                  "name a link, e.g. link: [h0, p0t0r0], from: h0")
            links = tuple(pair for lk in fabric.links if lk.tier == "host_t0"
                          for pair in ((lk.a, lk.b), (lk.b, lk.a)))
        else:
            link = entry.link(alternative=f", or be {ALL_HOST_LINKS}")
            a, b = link.a, link.b
            if sender is None:
                links = ((a, b), (b, a))
            elif sender not in (a, b):
                raise entry.error("from", f"must be one end of the link, {a} or {b} "
                                  f"(got {shown(sender)})", "or leave it out for both directions")
            else:
                links = ((a, b),) if sender == a else ((b, a),)
        return cls(entry.probability(), links)

    @property
    def target(self) -> tuple:
        return tuple(f"{a}>{b}" for a, b in self.links)

    def apply(self, env: Env, up: bool) -> None:
        from experiments.dataplanes import ebpf_switch

        ebpf_switch.set_loss(env.running, self.ports(env.fabric),
                             0.0 if up else self.probability)

    def ports(self, fabric: Fabric) -> list[tuple[str, str]]:
        """(node, interface) of the sending end of each direction, in order."""
        return [(a, p.intf) for a, b in self.links for p in fabric.ports(a) if p.peer == b]

    def ebpf_ports(self, fabric: Fabric) -> set[tuple[str, str]]:
        return set(self.ports(fabric))

    def on_twin(self, fabric: Fabric, twin: Fabric) -> TwinShare:
        return TwinShare.sent_lost(fabric, twin, [(a, b, self.probability)
                                                  for a, b in self.links])

    def cuts(self, nodes: list[str], plane: int) -> str | None:
        hops = set(zip(nodes, nodes[1:]))
        lossy = [f"{a}>{b}" for a, b in self.links if (a, b) in hops]
        return f"{', '.join(lossy)} lose {self.probability:.1%}" if lossy else None


@dataclass(frozen=True)
class GrayLoss(LossFault):
    kind = "gray-loss"
    entry_fields = ("path", "plane", "spine", "switch", "probability")
    help = ("probability of one path's packets are lost (path, plane, spine), or of every "
            "path through a T1 (switch)")
    path: tuple[str, str, int, int] | None = None  # source, destination, plane, spine
    switch: str | None = None  # a T1: every path through it

    @classmethod
    def read(cls, entry: Entry) -> Fault:
        fabric = entry.fabric
        path, switch = entry.get("path"), entry.get("switch")
        if (path is None) == (switch is None):
            raise entry.error("", "needs either path (with plane and spine) or switch",
                              "e.g. {kind: gray-loss, path: [h0, h3], plane: 0, spine: 1, ...}")
        if switch is not None:
            extra = [k for k in ("plane", "spine") if entry.has(k)]
            if extra:
                raise entry.error(extra[0], "belongs to a path, not to switch",
                                  "remove it: a T1 names its plane and spine")
            t1 = entry.switch(kinds=("t1",)).name
            return cls(entry.probability(), switch=t1)
        wrong = entry.error("path", f"must be [source, destination], two different hosts "
                            f"of {fabric.name} (got {shown(path)})",
                            f"e.g. [h0, {fabric.hosts[-1].name}]")
        if not isinstance(path, list) or len(path) != 2:
            raise wrong
        try:
            src, dst = (entry.host("path", item).name for item in path)
        except FaultError:
            raise wrong from None
        if src == dst:
            raise wrong
        plane, spine = entry.plane(), entry.spine()
        return cls(entry.probability(), path=(src, dst, plane, spine))

    @property
    def target(self) -> tuple:
        return self.path if self.path is not None else (self.switch,)

    def apply(self, env: Env, up: bool) -> None:
        from experiments.dataplanes import ebpf_switch

        ebpf_switch.set_gray_loss(env.running, self.entries(env.fabric),
                                  None if up else self.probability)

    def entries(self, fabric: Fabric) -> list[tuple[str, str, str, int]]:
        """(node, interface, destination address, prefix length) of each entry the
        fault writes. The packets are taken as they leave their source host, where the
        destination address still holds the whole uSID path: the full address names one
        path exactly (one source, one destination, one plane and spine); the first two
        uSIDs (the host's T0 and the T1) name every path of that host through the T1."""
        if self.switch is not None:
            t1 = fabric.node(self.switch)
            return [(h.name, intf_name(h.name, t1.plane),
                     usid_address([fabric.t0(t1.plane, h.rack).usid, t1.usid]), 64)
                    for h in fabric.hosts]
        src, dst, plane, spine = self.path
        s, d = fabric.node(src).index, fabric.node(dst).index
        (path,) = [p for p in catalogue(fabric, s, d) if p.plane == plane and p.spine == spine]
        return [(src, intf_name(src, plane), path.address, 128)]

    def ebpf_ports(self, fabric: Fabric) -> set[tuple[str, str]]:
        return {(node, intf) for node, intf, _, _ in self.entries(fabric)}

    def on_twin(self, fabric: Fabric, twin: Fabric) -> TwinShare:
        if self.switch is not None:
            return TwinShare.gray_lost(fabric, (twin_name(fabric, twin, self.switch),),
                                       fabric.node(self.switch).plane, self.probability)
        src, dst, plane, spine = self.path
        return TwinShare.gray_lost(fabric, (src, dst, 0, spine), plane, self.probability)

    def cuts(self, nodes: list[str], plane: int) -> str | None:
        if self.switch is not None:
            hit = self.switch in nodes
        else:
            src, dst, on_plane, spine = self.path
            hit = ((nodes[0], nodes[-1], plane) == (src, dst, on_plane)
                   and t1_name(on_plane, spine) in nodes)
        return f"{self.probability:.0%} gray loss" if hit else None
