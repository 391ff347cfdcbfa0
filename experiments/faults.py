"""Scripted faults: parse a scenario's fault list, expand it to a timeline, apply it.

Kinds (all times in seconds from the start of the workload):

- `link-flap`: both ends of a link go down for `down_s`, `count` times every `every_s`;
- `link-down`: a link goes down, both ways (carrier lost, both ends see it), or with
  `from: <node>` only the direction that node sends in: a one-way cut whose carrier
  stays up, so neither end's link state shows it; back after `down_s` if given;
- `links-fail`: `count` different T0-T1 links, drawn at random (`seed`), fail one
  after another, the i-th at `at_s + i * every_s`, each as a `link-down` (back after
  `down_s` if given); one T1 of every plane, drawn too, keeps all its links, so every
  plane still connects every pair of racks (`links_fail_pick()`);
- `switch-reboot`: every port of a switch goes down for `down_s`; the switch then comes
  back empty and gets the same static tables again;
- `switch-down`: a T0 or T1 goes down (every port) for the rest of the run, or for
  `down_s`, and comes back as from a reboot;
- `nic-port-down`: one host port (a plane) goes down; back after `down_s` if given;
- `blackhole`: a switch silently drops everything it should forward, links stay up;
- `loss`: random loss of `probability` of the packets on a link (both ways, or only
  those sent by the node named in `from`), or on every host link (`link: hosts`);
- `gray-loss`: `probability` of the packets of one path are lost while everything else
  gets through: the path from host `path[0]` to host `path[1]` through `plane` and
  `spine`, or every path through a T1 (`switch`).

`before_start: true` (on the kinds of BEFORE_START_KINDS, with `at_s` 0 or absent)
puts a fault in place before the workload starts: the network the job finds at its
start already has it ("links down at start"), and routing has long converged around
it. Those steps have `Action.before_start` set; experiments/workload_run.py applies
them before it starts the agents.

`loss`, `gray-loss` and a one-way `link-down` (a loss of 1.0 on the sending port) are
written into the maps of the eBPF program on the ports that send the packets
(experiments/ebpf_switch.py), so they need no netem; `loss_ports()` and
`gray_loss_ports()` say which ports and which destination addresses.

The schedule is a pure function of the scenario (tested without root); `FaultInjector`
plays it on a started network in a background thread and records what it did.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass, field

from topologies.addressing import intf_name, usid_address
from topologies.errors import UserError, shown
from topologies.model import Fabric, Link
from topologies.paths import catalogue

# The fields naming each kind's target (or, for links-fail, its draw); `at_s`,
# `down_s`, `count` and `every_s` are common.
TARGET_FIELDS = {
    "link-flap": ("link",),
    "link-down": ("link", "from"),
    "links-fail": ("seed",),
    "switch-reboot": ("switch",),
    "switch-down": ("switch",),
    "nic-port-down": ("host", "plane"),
    "blackhole": ("switch",),
    "loss": ("link", "from", "probability"),
    "gray-loss": ("path", "plane", "spine", "switch", "probability"),
}
# Faults that are a loss probability rather than a state: they take `probability`.
LOSS_KINDS = ("loss", "gray-loss")
# Faults that may last for the rest of the run (no `down_s`).
OPEN_ENDED = ("nic-port-down", "switch-down", "link-down", "links-fail", *LOSS_KINDS)
# Faults that may be in place before the workload starts (`before_start: true`).
BEFORE_START_KINDS = ("link-flap", "link-down", "links-fail", "switch-down", "nic-port-down",
                      *LOSS_KINDS)
# A one-way link-down is a loss of everything its sending port sends.
ONE_WAY_LOSS = 1.0
ALL_HOST_LINKS = "hosts"  # `link: hosts` in a loss fault: every host link
KINDS = tuple(TARGET_FIELDS)
TIMING_FIELDS = ("at_s", "down_s", "count", "every_s")
MAX_TIME_S = 3600.0  # no scenario runs longer than an hour
MAX_COUNT = 1000  # repetitions of one entry
MAX_STEPS = 10_000  # down and up steps of the whole timeline
MAX_SEED = 2**32 - 1
FIX = "see the fault kinds and their fields in docs/running.md"


class FaultError(UserError):
    """A fault entry is invalid. The message is one line."""


@dataclass(frozen=True, order=True)
class Action:
    """One step of the timeline: at `t`, set `target` of `kind` up or down."""

    t: float
    up: bool
    kind: str = field(compare=False)
    target: tuple = field(compare=False)
    # Loss faults: the probability set while the fault is on (None for the others and
    # for the step that clears it).
    probability: float | None = field(default=None, compare=False)
    # Applied before the workload starts (t is then 0): routing converged long ago.
    before_start: bool = field(default=False, compare=False)

    def describe(self) -> str:
        what = f"{self.kind} {' '.join(map(str, self.target))}"
        if self.kind in LOSS_KINDS:
            return f"{what} {'off' if self.up else f'on ({self.probability:g})'}"
        return f"{what} {'up' if self.up else 'down'}"


def one_way(action: Action) -> bool:
    """Whether a link-down fails one direction only (its target is "a>b")."""
    return action.kind == "link-down" and len(action.target) == 1


def _seconds(entry: dict, key: str, source: str, where: str, default: float | None = None,
             positive: bool = False) -> float:
    value = entry.get(key, default)
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value > MAX_TIME_S
            or (value <= 0 if positive else value < 0)):
        low = "above 0" if positive else "from 0"
        raise FaultError(source, f"{where}.{key}", f"must be a number of seconds {low} up to "
                         f"{MAX_TIME_S:g} (got {shown(value)})", FIX)
    return float(value)


def _target(entry: dict, kind: str, fabric: Fabric, source: str, where: str) -> tuple:
    if kind == "loss":
        return _loss_target(entry, fabric, source, where)
    if kind == "gray-loss":
        return _gray_target(entry, fabric, source, where)
    if kind in ("link-flap", "link-down"):
        link = entry.get("link")
        if (not isinstance(link, list) or len(link) != 2
                or not all(isinstance(n, str) for n in link) or not _linked(fabric, *link)):
            last = fabric.links[-1]
            raise FaultError(source, f"{where}.link", f"must name two linked nodes of "
                             f"{fabric.name} (got {shown(link)})", f"e.g. [{last.a}, {last.b}]")
        a, b = link
        sender = entry.get("from")
        if sender is None:
            return (a, b)
        if sender not in link:
            raise FaultError(source, f"{where}.from", f"must be one end of the link, {a} or "
                             f"{b} (got {shown(sender)})", "or leave it out for both directions")
        return (f"{a}>{b}",) if sender == a else (f"{b}>{a}",)
    if kind in ("switch-reboot", "switch-down", "blackhole"):
        name = entry.get("switch")
        if not isinstance(name, str) or name not in {s.name for s in fabric.switches}:
            raise FaultError(source, f"{where}.switch", f"{shown(name)} is not a switch of "
                             f"{fabric.name}", f"e.g. {fabric.switches[-1].name}")
        return (name,)
    host, plane = entry.get("host"), entry.get("plane")
    if not isinstance(host, str) or host not in {h.name for h in fabric.hosts}:
        raise FaultError(source, f"{where}.host", f"{shown(host)} is not a host of "
                         f"{fabric.name}", f"e.g. {fabric.hosts[-1].name}")
    planes = fabric.spec.planes
    if isinstance(plane, bool) or not isinstance(plane, int) or not 0 <= plane < planes:
        raise FaultError(source, f"{where}.plane", f"must be a plane 0..{planes - 1} "
                         f"(got {shown(plane)})", "name one of the host's ports by its plane")
    return (host, plane)


def _loss_target(entry: dict, fabric: Fabric, source: str, where: str) -> tuple:
    """Directed links "a>b" (a sends, b receives) of a loss fault."""
    link, sender = entry.get("link"), entry.get("from")
    if link == ALL_HOST_LINKS:
        if sender is not None:
            raise FaultError(source, f"{where}.from", "takes one link, not link: hosts",
                             "name a link, e.g. link: [h0, p0t0r0], from: h0")
        return tuple(f"{a}>{b}" for lk in fabric.links if lk.tier == "host_t0"
                     for a, b in ((lk.a, lk.b), (lk.b, lk.a)))
    if (not isinstance(link, list) or len(link) != 2
            or not all(isinstance(n, str) for n in link) or not _linked(fabric, *link)):
        last = fabric.links[-1]
        raise FaultError(source, f"{where}.link", f"must name two linked nodes of "
                         f"{fabric.name}, or be {ALL_HOST_LINKS} (got {shown(link)})",
                         f"e.g. [{last.a}, {last.b}]")
    a, b = link
    if sender is None:
        return (f"{a}>{b}", f"{b}>{a}")
    if sender not in link:
        raise FaultError(source, f"{where}.from", f"must be one end of the link, {a} or {b} "
                         f"(got {shown(sender)})", "or leave it out for both directions")
    return (f"{a}>{b}",) if sender == a else (f"{b}>{a}",)


def _gray_target(entry: dict, fabric: Fabric, source: str, where: str) -> tuple:
    """(src host, dst host, plane, spine) of one path, or (T1,) for all paths through it."""
    path, switch = entry.get("path"), entry.get("switch")
    if (path is None) == (switch is None):
        raise FaultError(source, where, "needs either path (with plane and spine) or switch",
                         "e.g. {kind: gray-loss, path: [h0, h3], plane: 0, spine: 1, ...}")
    if switch is not None:
        extra = [k for k in ("plane", "spine") if k in entry]
        if extra:
            raise FaultError(source, f"{where}.{extra[0]}", "belongs to a path, not to switch",
                             "remove it: a T1 names its plane and spine")
        t1s = [s.name for s in fabric.switches if s.role == "t1"]
        if switch not in t1s:
            raise FaultError(source, f"{where}.switch", f"{shown(switch)} is not a T1 of "
                             f"{fabric.name}", f"e.g. {t1s[-1]}")
        return (switch,)
    hosts = {h.name for h in fabric.hosts}
    if (not isinstance(path, list) or len(path) != 2
            or not all(isinstance(h, str) and h in hosts for h in path) or path[0] == path[1]):
        raise FaultError(source, f"{where}.path", f"must be [source, destination], two "
                         f"different hosts of {fabric.name} (got {shown(path)})",
                         f"e.g. [h0, {fabric.hosts[-1].name}]")
    plane, spine = entry.get("plane"), entry.get("spine")
    planes, spines = fabric.spec.planes, fabric.spec.t1_per_plane
    if isinstance(plane, bool) or not isinstance(plane, int) or not 0 <= plane < planes:
        raise FaultError(source, f"{where}.plane", f"must be a plane 0..{planes - 1} "
                         f"(got {shown(plane)})", "the plane of the path")
    if isinstance(spine, bool) or not isinstance(spine, int) or not 0 <= spine < spines:
        raise FaultError(source, f"{where}.spine", f"must be a T1 index 0..{spines - 1} "
                         f"(got {shown(spine)})", "the spine the path goes through")
    return (path[0], path[1], plane, spine)


def _probability(entry: dict, source: str, where: str) -> float:
    value = entry.get("probability")
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or not 0 < value <= 1):
        raise FaultError(source, f"{where}.probability", f"must be a number above 0 up to 1 "
                         f"(got {shown(value)})", "e.g. probability: 0.01 for 1%")
    return float(value)


def loss_ports(fabric: Fabric, target: tuple) -> list[tuple[str, str]]:
    """(node, interface) of each port a loss fault acts on: the sending end of each
    directed link of its target."""
    ports = []
    for directed in target:
        a, b = directed.split(">")
        ports += [(a, p.intf) for p in fabric.ports(a) if p.peer == b]
    return ports


def gray_loss_ports(fabric: Fabric, target: tuple) -> list[tuple[str, str, str, int]]:
    """(node, interface, destination address, prefix length) of each entry a gray-loss
    fault writes. The packets are taken as they leave their source host, where the
    destination address still holds the whole uSID path: the full address names one
    path exactly (one source, one destination, one plane and spine); the first two
    uSIDs (the host's T0 and the T1) name every path of that host through the T1."""
    if len(target) == 1:
        t1 = fabric.node(target[0])
        return [(h.name, intf_name(h.name, t1.plane),
                 usid_address([fabric.t0(t1.plane, h.rack).usid, t1.usid]), 64)
                for h in fabric.hosts]
    src, dst, plane, spine = target
    s, d = int(src[1:]), int(dst[1:])
    (path,) = [p for p in catalogue(fabric, s, d) if p.plane == plane and p.spine == spine]
    return [(src, intf_name(src, plane), path.address, 128)]


def parse_faults(entries: object, fabric: Fabric, source: str = "scenario",
                 horizon_s: float | None = None) -> list[Action]:
    """Validate a scenario's `faults:` list against the fabric and expand it to a timeline.

    `horizon_s` (the scenario's timeout) rejects faults that would start after it and so
    never happen.
    """
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise FaultError(source, "faults", "must be a list of fault entries",
                         "write faults: [{kind: link-flap, ...}, ...]")
    actions: list[Action] = []
    for i, entry in enumerate(entries):
        actions += _expand(entry, fabric, source, f"faults[{i}]", horizon_s, len(actions))
    return sorted(actions)


def _expand(entry: object, fabric: Fabric, source: str, where: str, horizon_s: float | None,
            steps_so_far: int) -> list[Action]:
    """One fault entry, checked, as its timeline steps."""
    if not isinstance(entry, dict):
        raise FaultError(source, where, f"must be a mapping (got {shown(entry)})",
                         "write {kind: ..., at_s: ...}")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise FaultError(source, f"{where}.kind", f"unknown fault kind {shown(kind)}",
                         f"use one of {', '.join(KINDS)}")
    known = ("kind", *TARGET_FIELDS[kind], *TIMING_FIELDS,
             *(("before_start",) if kind in BEFORE_START_KINDS else ()))
    unknown = sorted(set(map(str, entry)) - set(known))
    if unknown:
        raise FaultError(source, f"{where}.{unknown[0]}", f"not a field of {kind}",
                         f"use only {', '.join(known)}")
    early = _before_start(entry, source, where)
    at = _seconds(entry, "at_s", source, where, 0.0 if early else None)
    if early and at != 0:
        raise FaultError(source, f"{where}.at_s", f"a fault in place before the start has "
                         f"no start time (got {shown(entry['at_s'])})",
                         "leave at_s out, or drop before_start")
    # A port loss, a switch or link down, or a loss fault may last for the rest of the
    # run; the others end.
    down_s = (None if entry.get("down_s") is None and kind in OPEN_ENDED
              else _seconds(entry, "down_s", source, where, positive=True))
    if kind == "links-fail":
        return _links_fail(entry, fabric, source, where, horizon_s, steps_so_far, at, down_s,
                           early)
    target = _target(entry, kind, fabric, source, where)
    probability = _probability(entry, source, where) if kind in LOSS_KINDS else None
    count = _whole(entry, "count", source, where, 1, MAX_COUNT, "e.g. count: 4")
    if count > 1 and down_s is None:
        raise FaultError(source, f"{where}.count", "a fault that lasts for the rest of "
                         "the run cannot start again", "give down_s too, or leave count out")
    if count > 1 and early:
        raise FaultError(source, f"{where}.count", "a fault in place before the start "
                         "happens once", "leave count out, or add a second entry without "
                         "before_start")
    every = _seconds(entry, "every_s", source, where, (down_s or 0) * 2)
    if count > 1 and every <= down_s:
        raise FaultError(source, f"{where}.every_s", f"must be longer than down_s "
                         f"({down_s:g})", f"e.g. every_s: {down_s * 2:g}")
    _check_horizon(at + (count - 1) * every, count, horizon_s, source, where)
    _check_steps(steps_so_far + count * 2, source, where)
    actions = []
    for n in range(count):
        start = at + n * every
        actions.append(Action(start, False, kind, target, probability, early))
        if down_s is not None:
            actions.append(Action(start + down_s, True, kind, target))
    return actions


def _links_fail(entry: dict, fabric: Fabric, source: str, where: str,
                horizon_s: float | None, steps_so_far: int, at: float,
                down_s: float | None, early: bool) -> list[Action]:
    """A links-fail entry as link-down steps: the i-th drawn link down at
    at + i * every_s (and up down_s later, if given)."""
    most = max_links_fail(fabric)
    if most == 0:
        raise FaultError(source, f"{where}.kind", f"{fabric.name} has one T1 per plane: no "
                         "T0-T1 link can fail with every plane still connecting every pair "
                         "of racks", "use a topology with t1_per_plane of 2 or more")
    count = entry.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= most:
        raise FaultError(source, f"{where}.count", f"must be a number of T0-T1 links from 1 "
                         f"to {most}, the most that can fail on {fabric.name} with every "
                         f"plane still connecting every pair of racks (got {shown(count)})",
                         f"e.g. count: {most}")
    seed = _whole(entry, "seed", source, where, 0, MAX_SEED, "e.g. seed: 1")
    every = _seconds(entry, "every_s", source, where, 0.0)
    if early and every != 0:
        raise FaultError(source, f"{where}.every_s", "links in place before the start all "
                         f"fail at once (got {shown(entry['every_s'])})",
                         "leave every_s out, or drop before_start")
    _check_horizon(at + (count - 1) * every, count, horizon_s, source, where)
    _check_steps(steps_so_far + count * 2, source, where)
    actions = []
    for n, link in enumerate(links_fail_pick(fabric, count, seed)):
        start = at + n * every
        actions.append(Action(start, False, "link-down", (link.a, link.b), None, early))
        if down_s is not None:
            actions.append(Action(start + down_s, True, "link-down", (link.a, link.b)))
    return actions


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


def _before_start(entry: dict, source: str, where: str) -> bool:
    value = entry.get("before_start", False)
    if not isinstance(value, bool):
        raise FaultError(source, f"{where}.before_start", f"must be true or false (got "
                         f"{shown(value)})", "write before_start: true, or leave it out")
    return value


def _whole(entry: dict, key: str, source: str, where: str, default: int, most: int,
           fix: str) -> int:
    value = entry.get(key, default)
    low = 1 if key == "count" else 0
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= most:
        raise FaultError(source, f"{where}.{key}", f"must be a whole number from {low} to "
                         f"{most} (got {shown(value)})", fix)
    return value


def _check_horizon(last: float, count: int, horizon_s: float | None, source: str,
                   where: str) -> None:
    if horizon_s is not None and last >= horizon_s:
        what = "it starts" if count == 1 else "its last repetition starts"
        raise FaultError(source, f"{where}.{'at_s' if count == 1 else 'count'}",
                         f"{what} at {last:g} s, not before timeout_s ({horizon_s:g} s), "
                         "so it would never happen",
                         "start it earlier, repeat it less, or raise timeout_s")


def _check_steps(steps: int, source: str, where: str) -> None:
    if steps > MAX_STEPS:
        raise FaultError(source, f"{where}.count", f"the timeline would exceed "
                         f"{MAX_STEPS} fault steps", "use fewer or shorter fault series")


def _linked(fabric: Fabric, a: str, b: str) -> bool:
    return any({link.a, link.b} == {a, b} for link in fabric.links)


class FaultInjector:
    """Plays a timeline on a network through `apply(action)` in a background thread.

    `played`: the log of steps applied before the start (`apply_before_start`), which
    the injector's log begins with and `stop()` restores like its own."""

    def __init__(self, actions: list[Action], apply, clock=time.monotonic,
                 played: list[dict] | None = None):
        self.actions = actions
        self.apply = apply
        self.clock = clock
        self.log: list[dict] = list(played or [])
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._restored = False
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
                self.log.append(log_entry(action, round(self.clock() - self.start_time, 4)))
            except Exception as err:  # noqa: BLE001 - reported in the summary, run goes on
                self.errors.append(f"{action.describe()}: {err}")

    def stop(self, restore=None) -> None:
        """Stop playing; `restore(action)` is called for every fault left down (once:
        a second stop restores nothing again). A step that fails, played or restoring,
        goes to `errors`, which fail the run."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        if restore and not self._restored:
            self._restored = True
            down: dict[tuple, Action] = {}
            for entry in self.log:
                key = (entry["fault"], tuple(entry["target"]))
                if entry["up"]:
                    down.pop(key, None)
                else:
                    down[key] = Action(0, True, entry["fault"], tuple(entry["target"]))
            for action in down.values():
                try:
                    restore(action)
                except Exception as err:  # noqa: BLE001 - reported like any failed step
                    self.errors.append(f"restoring {action.describe()}: {err}")


def log_entry(action: Action, t: float) -> dict:
    """The fault log's record of a step applied at `t` (seconds from the start)."""
    entry = {"t": t, "event": "fault", "fault": action.kind, "target": list(action.target),
             "up": action.up}
    if action.probability is not None:
        entry["probability"] = action.probability
    if action.before_start:
        entry["before_start"] = True
    return entry


def apply_before_start(actions: list[Action], apply
                       ) -> tuple[list[dict], list[str], list[Action]]:
    """Apply the steps in place before the start, now: (their log entries at t=0, the
    errors of those that failed, the steps applied)."""
    log, errors, applied = [], [], []
    for action in actions:
        try:
            apply(action)
        except Exception as err:  # noqa: BLE001 - reported in the summary, run goes on
            errors.append(f"{action.describe()} (before the start): {err}")
            continue
        log.append(log_entry(action, 0.0))
        applied.append(action)
    return log, errors, applied
