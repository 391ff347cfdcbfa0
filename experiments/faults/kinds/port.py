"""Host port faults: `nic-port-down` and `transceiver-flap`.

- `nic-port-down`: one host port (a plane) goes down, back after `down_s` if given: the
  host's agent sees its carrier go, and so does the T0 at the other end;
- `transceiver-flap`: several ports of one host go down and up together, `count`
  times every `every_s`, as when the NIC's shared transceiver flaps (the paper's Fig.
  9b: four of a NIC's eight links at once); `planes` lists them (default: the first
  half of the planes).

A host whose NIC has a single port has nothing to lose but everything, so on a
single-plane fabric these faults mean nothing to a scenario (`applicable`). On the
single-plane twin of a multi-plane run the NIC's one port stands for its `planes`
ports: k of them down take k/planes of its rate, and the port goes down only with all
of them (experiments/faults/kinds/capacity.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from experiments.faults.base import Env, Fault, RouteLink
from experiments.faults.fields import Entry
from experiments.faults.kinds.capacity import TwinShare
from topologies.addressing import intf_name
from topologies.errors import shown
from topologies.model import Fabric

SINGLE_PORT = ("the hosts' NICs have one port: losing it disconnects the host, which no "
               "transport rides out")


@dataclass(frozen=True)
class PortFault(Fault, register=False):
    """Ports of one host going down together; subclasses say which (`planes()`)."""

    host: str

    @classmethod
    def applicable(cls, fabric: Fabric) -> str | None:
        return SINGLE_PORT if fabric.spec.planes == 1 else None

    def planes(self) -> tuple[int, ...]:
        raise NotImplementedError

    def apply(self, env: Env, up: bool) -> None:
        node = env.net.get(self.host)
        for plane in self.planes():
            node.set_port(intf_name(self.host, plane), up)

    def routing_links(self, fabric: Fabric) -> set[RouteLink]:
        index = fabric.node(self.host).index
        return {("host", index, plane) for plane in self.planes()}

    def on_twin(self, fabric: Fabric, twin: Fabric) -> TwinShare:
        return TwinShare.links_down(fabric, twin, [
            link for link in fabric.links if link.a == self.host and link.plane in self.planes()])

    def cuts(self, nodes: list[str], plane: int) -> str | None:
        if self.host in (nodes[0], nodes[-1]) and plane in self.planes():
            return f"port {self.host} plane {plane} down"
        return None


@dataclass(frozen=True)
class NicPortDown(PortFault):
    kind = "nic-port-down"
    entry_fields = ("host", "plane")
    open_ended = True
    before_start_ok = True
    help = "one port (plane) of a host's NIC goes down, for down_s or for the rest of the run"
    plane: int

    @classmethod
    def read(cls, entry: Entry) -> Fault:
        return cls(entry.host().name, entry.plane())

    @property
    def target(self) -> tuple:
        return (self.host, self.plane)

    def planes(self) -> tuple[int, ...]:
        return (self.plane,)


@dataclass(frozen=True)
class TransceiverFlap(PortFault):
    kind = "transceiver-flap"
    entry_fields = ("host", "planes")
    help = ("several ports of one host's NIC go down together for down_s (count times, "
            "every every_s), as when a shared transceiver flaps")
    ports: tuple[int, ...]

    @classmethod
    def read(cls, entry: Entry) -> Fault:
        host = entry.host().name
        value = entry.get("planes", list(range(max(1, entry.fabric.spec.planes // 2))))
        if not isinstance(value, list) or not value:
            raise entry.error("planes", f"must be a list of planes (got {shown(value)})",
                              "e.g. planes: [0, 1, 2, 3]")
        ports = [entry.plane(f"planes[{i}]", item) for i, item in enumerate(value)]
        if len(set(ports)) != len(ports):
            raise entry.error("planes", f"names a plane twice (got {shown(value)})",
                              "list each plane once")
        return cls(host, tuple(sorted(ports)))

    @property
    def target(self) -> tuple:
        return (self.host, *self.ports)

    def planes(self) -> tuple[int, ...]:
        return self.ports
