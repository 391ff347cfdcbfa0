"""Scripted faults: parse a scenario's fault list, expand it to a timeline, apply it.

Kinds (all times in seconds from the start of the workload):

- `link-flap`: both ends of a link go down for `down_s`, `count` times every `every_s`;
- `switch-reboot`: every port of a switch goes down for `down_s`; the switch then comes
  back empty and gets the same static tables again;
- `nic-port-down`: one host port (a plane) goes down; back after `down_s` if given;
- `blackhole`: a switch silently drops everything it should forward, links stay up.

The schedule is a pure function of the scenario (tested without root); `FaultInjector`
plays it on a started network in a background thread and records what it did.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from topologies.model import Fabric

KINDS = ("link-flap", "switch-reboot", "nic-port-down", "blackhole")


class FaultError(ValueError):
    """A fault entry is invalid. The message is one line."""


@dataclass(frozen=True, order=True)
class Action:
    """One step of the timeline: at `t`, set `target` of `kind` up or down."""

    t: float
    up: bool
    kind: str = field(compare=False)
    target: tuple = field(compare=False)

    def describe(self) -> str:
        return f"{self.kind} {' '.join(map(str, self.target))} {'up' if self.up else 'down'}"


def _num(entry: dict, key: str, where: str, default: float | None = None,
         low: float = 0.0) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
        raise FaultError(f"{where}.{key}: must be a number >= {low:g} (got {value!r})")
    return float(value)


def parse_faults(entries: object, fabric: Fabric, source: str = "scenario") -> list[Action]:
    """Validate a scenario's `faults:` list against the fabric and expand it."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise FaultError(f"{source}: faults: must be a list of fault entries")
    actions: list[Action] = []
    for i, entry in enumerate(entries):
        where = f"{source}: faults[{i}]"
        if not isinstance(entry, dict) or entry.get("kind") not in KINDS:
            raise FaultError(f"{where}.kind: must be one of {', '.join(KINDS)}")
        kind = entry["kind"]
        at = _num(entry, "at_s", where)
        down = entry.get("down_s")
        down_s = None if down is None and kind == "nic-port-down" else _num(entry, "down_s", where)
        if kind == "link-flap":
            link = entry.get("link")
            if (not isinstance(link, list) or len(link) != 2
                    or not _linked(fabric, str(link[0]), str(link[1]))):
                raise FaultError(f"{where}.link: must name two linked nodes, e.g. "
                                 f"[{fabric.links[-1].a}, {fabric.links[-1].b}]")
            target: tuple = (str(link[0]), str(link[1]))
        elif kind in ("switch-reboot", "blackhole"):
            name = str(entry.get("switch"))
            if name not in {s.name for s in fabric.switches}:
                raise FaultError(f"{where}.switch: {name!r} is not a switch of {fabric.name}, "
                                 f"e.g. {fabric.switches[-1].name}")
            target = (name,)
        else:
            host, plane = str(entry.get("host")), entry.get("plane")
            if host not in {h.name for h in fabric.hosts}:
                raise FaultError(f"{where}.host: {host!r} is not a host of {fabric.name}")
            if not isinstance(plane, int) or not 0 <= plane < fabric.spec.planes:
                raise FaultError(f"{where}.plane: must be 0..{fabric.spec.planes - 1}")
            target = (host, plane)
        count = int(_num(entry, "count", where, 1, low=1))
        every = _num(entry, "every_s", where, (down_s or 0) * 2)
        if count > 1 and down_s is not None and every <= down_s:
            raise FaultError(f"{where}.every_s: must be longer than down_s ({down_s:g})")
        for n in range(count):
            start = at + n * every
            actions.append(Action(start, False, kind, target))
            if down_s is not None:
                actions.append(Action(start + down_s, True, kind, target))
    return sorted(actions)


def _linked(fabric: Fabric, a: str, b: str) -> bool:
    return any({link.a, link.b} == {a, b} for link in fabric.links)


class FaultInjector:
    """Plays a timeline on a network through `apply(action)` in a background thread."""

    def __init__(self, actions: list[Action], apply, clock=time.monotonic):
        self.actions = actions
        self.apply = apply
        self.clock = clock
        self.log: list[dict] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.start_time = 0.0

    def start(self, start_time: float) -> None:
        self.start_time = start_time
        self._thread = threading.Thread(target=self._run, name="faults", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for action in self.actions:
            delay = self.start_time + action.t - self.clock()
            if delay > 0 and self._stop.wait(delay):
                return
            try:
                self.apply(action)
                self.log.append({"t": round(self.clock() - self.start_time, 4),
                                 "event": "fault", "fault": action.kind,
                                 "target": list(action.target), "up": action.up})
            except Exception as err:  # noqa: BLE001 - reported in the summary, run goes on
                self.errors.append(f"{action.describe()}: {err}")

    def stop(self, restore=None) -> None:
        """Stop playing; `restore(action)` is called for every fault left down."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        if restore:
            down: dict[tuple, Action] = {}
            for entry in self.log:
                key = (entry["fault"], tuple(entry["target"]))
                if entry["up"]:
                    down.pop(key, None)
                else:
                    down[key] = Action(0, True, entry["fault"], tuple(entry["target"]))
            for action in down.values():
                restore(action)
