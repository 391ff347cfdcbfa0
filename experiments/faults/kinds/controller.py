"""What a fabric controller does, through the host agents: `deny`.

- `deny`: a controller (the paper's Clustermapper, section 4, which keeps a denylist of
  bad links and has the NICs stop using the paths through them) denies the EVs of one
  host's plane toward every peer (or toward `peer`), or only those through one T1 of
  the plane (`spine`): the host's MRC connections stop using those paths (DENIED), those
  it opens later too, until the step ends (`down_s`), when they are GOOD again. Sent to
  the host's agent as the control API's MODIFY_EV_STATE (hosts/mrc_ctl.py, OCP MRC's
  mrc_ctl.h) on the port (plane + 1).

Nothing in the network changes, so routing learns nothing and no eBPF port is needed.
The RoCE baseline's queue pairs have no EVs: on the agents of a baseline transport the
step does nothing, and on the single-plane twin it has no counterpart.
"""

from __future__ import annotations

from dataclasses import dataclass

from experiments.faults.base import Env, Fault, NotOnTwin
from experiments.faults.fields import Entry
from hosts.mrc_ctl import DENIED, GOOD
from hosts.protocol import transport_spec
from topologies.addressing import t1_name
from topologies.model import Fabric


class AgentsNeeded(RuntimeError):
    """A step that acts through the host agents, with none running on the network."""


@dataclass(frozen=True)
class Deny(Fault):
    kind = "deny"
    entry_fields = ("host", "plane", "spine", "peer")
    open_ended = True
    agent_side = True
    help = ("a controller denies the EVs of a host's plane (or of one T1 of it) toward every "
            "peer or one, for down_s or for the rest of the run")
    host: str
    plane: int
    spine: int | None = None  # a T1 of the plane: only the paths through it
    peer: str | None = None  # toward this host only

    @classmethod
    def read(cls, entry: Entry) -> Fault:
        host = entry.host().name
        plane = entry.plane()
        spine = entry.spine() if entry.has("spine") else None
        peer = entry.host("peer").name if entry.has("peer") else None
        if peer == host:
            raise entry.error("peer", f"is the host itself ({host})",
                              "name another host, or leave peer out for every peer")
        return cls(host, plane, spine, peer)

    @property
    def target(self) -> tuple:
        full = (self.host, self.plane, self.spine, self.peer)
        while full[-1] is None:
            full = full[:-1]
        return full

    def describe(self) -> str:
        return (f"deny {self.host} plane {self.plane}"
                + (f" spine {self.spine}" if self.spine is not None else "")
                + (f" toward {self.peer}" if self.peer else ""))

    def step_text(self, up: bool) -> str:
        return f"{self.describe()} {'lifted' if up else 'set'}"

    def apply(self, env: Env, up: bool) -> None:
        agents = env.agents
        if agents is None:
            if up:
                return  # the agents it was set on are gone, and the denial with them
            raise AgentsNeeded(f"{self.describe()}: no host agents run on the network "
                               "(a denylist lives in the agents)")
        if transport_spec(agents.transport).baseline:
            return  # queue pairs have no EVs: ECMP picks their paths
        agents.modify_ev_state(env.fabric.node(self.host).index, GOOD if up else DENIED,
                               port=self.plane + 1, spine=self.spine,
                               dst=None if self.peer is None else env.fabric.node(
                                   self.peer).index)

    def on_twin(self, fabric: Fabric, twin: Fabric) -> Fault:
        raise NotOnTwin("the RoCE baseline's queue pairs have no EVs to deny")

    def cuts(self, nodes: list[str], plane: int) -> str | None:
        if (nodes[0] != self.host or plane != self.plane
                or (self.peer is not None and nodes[-1] != self.peer)
                or (self.spine is not None and t1_name(plane, self.spine) not in nodes)):
            return None
        return f"EVs denied by the controller ({self.describe()})"
