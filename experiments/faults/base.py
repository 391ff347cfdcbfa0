"""What every fault kind is: a class that reads its fields, acts on a running fabric and
says what it means for routing, the eBPF ports, the single-plane twin and the CLI.

A fault kind (experiments/faults/kinds/) is a frozen dataclass deriving from `Fault`,
whose fields are its typed, resolved target (two node names, a switch, a host and a
plane, a loss probability...). The class:

- reads a scenario entry (`steps(entry)`: its target through `Entry`, which resolves
  names and roles and names the field of any mistake) and expands it into timeline
  steps (`repeat()` for the common `at_s`, `down_s`, `count`, `every_s`);
- applies and reverts itself on a running fabric (`apply(env, up)`), or through the
  host agents running on it (`Env.agents`, `agent_side`: a controller's action);
- says which links routing sees go (`routing_links`), which links it takes out of
  service whether routing sees it or not (`links_out`, the plane rule of make paper),
  which ports need the eBPF program before traffic starts (`ebpf_ports`), what it is on
  the single-plane twin of the fabric (`on_twin`, or `NotOnTwin` with the reason), and
  whether it cuts a path (`cuts`, the CLI's `paths`).

A `Step` is one point of the timeline: at `t`, the fault down (on) or up (off).
Links as routing sees them (`RouteLink`): a host's port ("host", host, plane) and a
T0-T1 link ("t0t1", plane, rack, spine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

# A kind reads its entry through fields.py, which imports nothing of this module; the
# entry's error and the longest time are named here too, where the kinds find them.
from experiments.faults.fields import MAX_TIME_S as MAX_TIME_S
from experiments.faults.fields import Entry
from experiments.faults.fields import FaultError as FaultError
from topologies.model import Fabric, Link

RouteLink = tuple
MAX_COUNT = 1000  # repetitions of one entry


class NotOnTwin(Exception):
    """A fault that has no counterpart on the single-plane twin; the text says why."""


@dataclass(frozen=True)
class Env:
    """What a fault acts on: the running fabric (`running`: experiments/run/fabric.py
    RunningFabric, as experiments/dataplanes/ebpf_switch.py `Running` describes it; a
    target's `set_rate` and the eBPF program's maps take it whole), and what it keeps:
    its Mininet network, its fabric, its data-plane target, and the host agents running
    on it now (`agents`: experiments/run/agents.py AgentSet, None between runs), which
    kinds that act through the agents reach."""

    running: Any

    @property
    def net(self) -> Any:
        """The running fabric's Mininet network."""
        return self.running.net

    @property
    def fabric(self) -> Fabric:
        """The running fabric's Fabric (topologies/model.py)."""
        return self.running.fabric

    @property
    def target(self) -> Any:
        """Its data-plane target (experiments/dataplanes/targets.py)."""
        return self.running.target

    @property
    def agents(self) -> Any:
        """The host agents running on it now, or None."""
        return self.running.agents


KINDS: dict[str, type[Fault]] = {}


@dataclass(frozen=True)
class Fault:
    """One fault kind's target; subclasses set `kind` and `entry_fields` and register."""

    kind: ClassVar[str] = ""
    entry_fields: ClassVar[tuple[str, ...]] = ()  # the entry fields naming its target
    open_ended: ClassVar[bool] = False  # may last for the rest of the run (no down_s)
    before_start_ok: ClassVar[bool] = False  # may be in place before the start
    # Acts through the host agents (Env.agents), not the network: a new set of agents
    # (the CLI's, for another transport) must be told it again.
    agent_side: ClassVar[bool] = False
    help: ClassVar[str] = ""  # one line for docs and the CLI

    def __init_subclass__(cls, register: bool = True, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.kind and register:
            if cls.kind in KINDS:
                raise TypeError(f"two fault kinds are called {cls.kind!r}")
            KINDS[cls.kind] = cls

    # ------------------------------------------------------------ reading a scenario
    @classmethod
    def steps(cls, entry: Entry) -> list[Step]:
        """The entry as timeline steps; the default reads the common timing fields and
        the target (`read`), and repeats the fault `count` times."""
        early = entry.before_start(cls.before_start_ok)
        at = entry.start(early)
        down_s = entry.down_s(cls.open_ended)
        return repeat(cls.read(entry), entry, at, down_s, early)

    @classmethod
    def read(cls, entry: Entry) -> Fault:
        raise NotImplementedError

    @classmethod
    def applicable(cls, fabric: Fabric) -> str | None:
        """Why this kind means nothing on `fabric` (None: it does)."""
        return None

    # ------------------------------------------------------------ on a running fabric
    def apply(self, env: Env, up: bool) -> None:
        raise NotImplementedError

    def tell_agents(self, agents: Any, fabric: Fabric) -> None:
        """What host agents started after the fault was applied must hear of it (a NIC
        that came up slower paces to its port's speed); nothing for most kinds, whose
        network state the agents find for themselves."""

    # ------------------------------------------------------------ what it means
    @property
    def target(self) -> tuple:
        """The target as the fault log and summary.json show it."""
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.kind} {' '.join(map(str, self.target))}"

    def step_text(self, up: bool) -> str:
        return f"{self.describe()} {'up' if up else 'down'}"

    def key(self) -> tuple:
        """What the fault acts on: two faults with one key undo each other."""
        return (self.kind, self.target)

    def routing_links(self, fabric: Fabric) -> set[RouteLink]:
        """The links routing sees go down (or come back) with this fault."""
        return set()

    def links_out(self, fabric: Fabric) -> set[RouteLink]:
        """The links the fault takes out of service, seen by routing or not."""
        return self.routing_links(fabric)

    def ebpf_ports(self, fabric: Fabric) -> set[tuple[str, str]]:
        """(node, interface) of the ports whose eBPF maps the fault writes."""
        return set()

    def on_twin(self, fabric: Fabric, twin: Fabric):
        """What the fault takes from `twin`, the single-plane twin of `fabric` (the same
        hosts, racks and T1 numbers in one plane; experiments/dataplanes/twin.py): a
        `TwinShare` of the links it touches (experiments/faults/kinds/capacity.py), which
        the twin adds up over the faults down at each step."""
        raise NotOnTwin(f"{self.kind} has no counterpart on a single-plane fabric")

    def cuts(self, nodes: list[str], plane: int) -> str | None:
        """How the fault cuts a path through `nodes` in `plane`, if it does."""
        return None

    def log(self, up: bool) -> dict:
        """The fault log's fields for a step of this fault."""
        return {"fault": self.kind, "target": list(self.target), "up": up}


@dataclass(frozen=True)
class Step:
    """One step of the timeline: at `t`, the fault goes down (on) or up (off). Steps
    sort by time, a down step before an up step at the same time."""

    t: float
    up: bool
    fault: Fault
    # In place before the workload starts (t is then 0): routing converged long ago.
    before_start: bool = False

    def __lt__(self, other: Step) -> bool:
        return (self.t, self.up) < (other.t, other.up)

    @property
    def kind(self) -> str:
        return self.fault.kind

    @property
    def probability(self) -> float | None:
        """The loss probability this step sets (None: it clears one, or it is no loss)."""
        return None if self.up else getattr(self.fault, "probability", None)

    @property
    def target(self) -> tuple:
        return self.fault.target

    def describe(self) -> str:
        return self.fault.step_text(self.up)

    def apply(self, env: Env) -> None:
        self.fault.apply(env, self.up)


def repeat(fault: Fault, entry: Entry, at: float, down_s: float | None,
           early: bool) -> list[Step]:
    """`fault` down at `at` and up `down_s` later (never, if None), `count` times every
    `every_s`."""
    count = entry.whole("count", 1, 1, MAX_COUNT, "e.g. count: 4")
    if count > 1 and down_s is None:
        raise entry.error("count", "a fault that lasts for the rest of the run cannot start "
                          "again", "give down_s too, or leave count out")
    if count > 1 and early:
        raise entry.error("count", "a fault in place before the start happens once",
                          "leave count out, or add a second entry without before_start")
    every = entry.seconds("every_s", (down_s or 0) * 2)
    if count > 1 and every <= down_s:
        raise entry.error("every_s", f"must be longer than down_s ({down_s:g})",
                          f"e.g. every_s: {down_s * 2:g}")
    entry.check_horizon(at + (count - 1) * every, count)
    steps = []
    for n in range(count):
        start = at + n * every
        steps.append(Step(start, False, fault, early))
        if down_s is not None:
            steps.append(Step(start + down_s, True, fault))
    return steps


# Shared by several kinds: the link between two nodes, both directions.
def link_of(fabric: Fabric, a: str, b: str) -> Link:
    return next(lk for lk in fabric.links if {lk.a, lk.b} == {a, b})


def twin_name(fabric: Fabric, twin: Fabric, name: str) -> str:
    """A node of `fabric` on its single-plane twin: hosts keep their names, a T0 is its
    rack's T0, a T1 the T1 of the same number (the plane is gone)."""
    node = fabric.node(name)
    if node.role == "host":
        return name
    if node.role == "t0":
        return twin.t0(0, node.index).name
    return twin.t1(0, node.index).name


def link_route(fabric: Fabric, link: Link) -> RouteLink:
    """A link as routing sees it."""
    lower, upper = fabric.node(link.a), fabric.node(link.b)  # `a` is the lower tier
    if link.tier == "host_t0":
        return ("host", lower.index, link.plane)
    return ("t0t1", link.plane, lower.index, upper.index)
