"""A scenario's `faults:` list, checked against the fabric and expanded into a timeline.

All times are seconds from the start of the workload. Every entry names its `kind`
(experiments/faults/kinds/), its target by the kind's fields (names or roles,
experiments/scenarios/roles.py) and its timing: `at_s`, `down_s`, `count`, `every_s`, and for
some kinds `before_start: true` (in place before the workload starts: the network the
job finds already has it, and routing has long converged around it). `parse_faults`
returns the steps in time order; `Timeline` also keeps what each role resolved to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from experiments.faults.base import KINDS, FaultError, Step
from experiments.faults.fields import TIMING_FIELDS, Entry
from topologies.errors import shown
from topologies.model import Fabric

MAX_STEPS = 10_000  # down and up steps of the whole timeline


@dataclass
class Timeline:
    steps: list[Step] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)  # "faults[0].switch: ... is p7t1s1"


def read_timeline(entries: object, fabric: Fabric, source: str = "scenario",
                  horizon_s: float | None = None) -> Timeline:
    """Validate a scenario's `faults:` list against the fabric and expand it.

    `horizon_s` (the scenario's timeout) rejects faults that would start after it and so
    never happen."""
    timeline = Timeline()
    if entries is None:
        return timeline
    if not isinstance(entries, list):
        raise FaultError(source, "faults", "must be a list of fault entries",
                         "write faults: [{kind: link-flap, ...}, ...]")
    for i, data in enumerate(entries):
        where = f"faults[{i}]"
        if not isinstance(data, dict):
            raise FaultError(source, where, f"must be a mapping (got {shown(data)})",
                             "write {kind: ..., at_s: ...}")
        kind = data.get("kind")
        cls = KINDS.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise FaultError(source, f"{where}.kind", f"unknown fault kind {shown(kind)}",
                             f"use one of {', '.join(KINDS)}")
        known = ("kind", *cls.entry_fields, *TIMING_FIELDS,
                 *(("before_start",) if cls.before_start_ok else ()))
        unknown = sorted(set(map(str, data)) - set(known))
        if unknown:
            raise FaultError(source, f"{where}.{unknown[0]}", f"not a field of {kind}",
                             f"use only {', '.join(known)}")
        entry = Entry(data, kind, fabric, source, where, horizon_s, timeline.resolved)
        steps = cls.steps(entry)
        if len(timeline.steps) + len(steps) > MAX_STEPS:
            raise FaultError(source, f"{where}.count", f"the timeline would exceed "
                             f"{MAX_STEPS} fault steps", "use fewer or shorter fault series")
        timeline.steps += steps
    timeline.steps.sort()
    return timeline


def parse_faults(entries: object, fabric: Fabric, source: str = "scenario",
                 horizon_s: float | None = None) -> list[Step]:
    """The timeline's steps, in time order (read_timeline)."""
    return read_timeline(entries, fabric, source, horizon_s).steps


def not_applicable(entries: object, fabric: Fabric) -> str | None:
    """Why a fault list means nothing on `fabric` (a kind that needs what it lacks), or
    None. Checked before the entries themselves, so a scenario written for every
    topology says "not applicable" where it does not fit instead of failing."""
    if not isinstance(entries, list):
        return None
    for data in entries:
        cls = KINDS.get(data.get("kind")) if isinstance(data, dict) else None
        reason = cls.applicable(fabric) if cls is not None else None
        if reason:
            return f"{cls.kind}: {reason}"
    return None
