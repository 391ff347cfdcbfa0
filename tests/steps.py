"""Fault steps for tests, written as the fault log shows them: `step(t, up, kind, target)`,
and the running fabric they are applied to without a network: `running(fabric, target)`.

`target` is the tuple a fault's `target` gives (experiments/faults/kinds/): two node
names of a link, ("a>b",) for a one-way cut or the directions of a loss, a switch, a
host and a plane, a gray-loss path or T1.
"""

from __future__ import annotations

from experiments.faults import KINDS, Step
from experiments.faults.kinds.link import OneWayCut
from experiments.faults.kinds.loss import GrayLoss, Loss
from experiments.run.fabric import RunningFabric
from topologies.model import Fabric


def fault(kind: str, target: tuple, probability: float | None = None):
    cls = KINDS[kind]
    if kind == "link-down" and len(target) == 1:
        return OneWayCut(*target[0].split(">"))
    if kind == "loss":
        return Loss(probability, tuple(tuple(d.split(">")) for d in target))
    if kind == "gray-loss":
        if len(target) == 1:
            return GrayLoss(probability, switch=target[0])
        return GrayLoss(probability, path=tuple(target))
    return cls(*target)


def step(t: float, up: bool, kind: str, target: tuple, probability: float | None = None,
         before_start: bool = False) -> Step:
    return Step(t, up, fault(kind, target, probability), before_start)


def running(fabric: Fabric, target=None, net=None) -> RunningFabric:
    """`fabric` as if up on `target` (a recorder, say) over `net` (a stand-in for the
    Mininet network, or None), never started: what `apply_fault` and the agents are
    handed, with nothing running on it yet."""
    live = RunningFabric(fabric, target, None)
    live.net = net
    return live
