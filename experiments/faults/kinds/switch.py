"""Switch faults: `switch-reboot`, `switch-down`, `blackhole`.

- `switch-reboot`: every port of a switch goes down for `down_s`; the switch then comes
  back empty and gets the same static tables again (the data-plane target's `reboot`);
- `switch-down`: a T0 or T1 goes down (every port) for the rest of the run, or for
  `down_s`, and comes back as from a reboot;
- `blackhole`: a switch silently drops everything it should forward for `down_s`; its
  links stay up and its control plane keeps advertising routes, so routing never moves
  traffic off it (the paper's silent T1, section 5.1).

Routing sees a switch go down as every one of its links failing at once. On the
single-plane twin a switch is one of the `planes` switches the twin's T0 of the same
rack, or T1 of the same number, stands for: a switch down or rebooted takes 1/planes of
the rate of each of the twin switch's links; a blackhole loses, silently, 1/planes of
what the twin switch forwards on each of its ports (experiments/faults/kinds/capacity.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from experiments.faults.base import Env, Fault, RouteLink
from experiments.faults.fields import Entry
from experiments.faults.kinds.capacity import TwinShare
from topologies.model import Fabric


def switch_links(fabric: Fabric, name: str) -> set[RouteLink]:
    """Every link of a switch as routing sees it."""
    switch = fabric.node(name)
    spec = fabric.spec
    if switch.role == "t1":
        return {("t0t1", switch.plane, r, switch.index) for r in range(spec.racks)}
    return ({("t0t1", switch.plane, switch.index, s) for s in range(spec.t1_per_plane)}
            | {("host", h.index, switch.plane) for h in fabric.hosts if h.rack == switch.index})


@dataclass(frozen=True)
class SwitchReboot(Fault):
    kind = "switch-reboot"
    entry_fields = ("switch",)
    help = "every port of a switch goes dark for down_s; it boots with the same tables"
    switch: str

    @classmethod
    def read(cls, entry: Entry) -> Fault:
        return cls(entry.switch().name)

    @property
    def target(self) -> tuple:
        return (self.switch,)

    def apply(self, env: Env, up: bool) -> None:
        env.target.reboot(env.net, env.fabric, self.switch, up)

    def routing_links(self, fabric: Fabric) -> set[RouteLink]:
        return switch_links(fabric, self.switch)

    def on_twin(self, fabric: Fabric, twin: Fabric) -> TwinShare:
        return TwinShare.links_down(fabric, twin, [link for link in fabric.links
                                                   if self.switch in (link.a, link.b)])

    def cuts(self, nodes: list[str], plane: int) -> str | None:
        return f"switch {self.switch} down" if self.switch in nodes else None


@dataclass(frozen=True)
class SwitchDown(SwitchReboot):
    kind = "switch-down"
    open_ended = True
    before_start_ok = True
    help = "a switch goes down for the rest of the run (or down_s), then boots as from a reboot"


@dataclass(frozen=True)
class Blackhole(SwitchReboot):
    kind = "blackhole"
    help = "a switch silently drops what it should forward for down_s; links stay up"

    def apply(self, env: Env, up: bool) -> None:
        env.target.blackhole(env.net, env.fabric, self.switch, not up)

    def routing_links(self, fabric: Fabric) -> set[RouteLink]:
        return set()  # its control plane stays up: routing learns nothing

    def links_out(self, fabric: Fabric) -> set[RouteLink]:
        return switch_links(fabric, self.switch)

    def on_twin(self, fabric: Fabric, twin: Fabric) -> TwinShare:
        # What it should forward is lost on the ports it sends from: once a packet.
        return TwinShare.sent_lost(fabric, twin, [(self.switch, port.peer, 1.0)
                                                  for port in fabric.ports(self.switch)])

    def cuts(self, nodes: list[str], plane: int) -> str | None:
        return f"switch {self.switch} blackholed" if self.switch in nodes else None
