"""The interactive fabric's EV commands: the control API (hosts/mrc_ctl.py, OCP MRC's
mrc_ctl.h) from the CLI, as a fabric controller would use it.

    evs h0 [h3]                                 h0's EV profiles: every EV, its state, use
    ev deny|allow h2 [h0] plane 1 [spine 0]     a controller's denylist: a plane (or a T1
                                                of it) of h2's, toward every peer or h0
    ev deny|allow h0 h3 EV                      one EV of h0's connection to h3 (its path)
    ev replace h0 h3 OLD NEW                    REPLACE_EV
    ev explicit h0 h3 EV [EV...]                an explicit EV array (EXP mode)
    ev probe h0 h3 [plane P [spine S]]          EV probes and their round trips
    ev events h0 [h3] [GOOD] [ASSUMED_BAD]|off  the EV event mask; without states, the
                                                events received since

The plane form of deny/allow is the scenarios' `deny` fault kind
(experiments/faults/kinds/controller.py), played by the session like a link failure,
so `paths` shows what it cuts and new agents (another transport) get it again. The
parsing here is pure (tests/unit/test_cli_ev_commands.py); `EvCommands` runs the commands
on the session's agents.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from experiments.faults import Step
from experiments.faults.kinds.controller import Deny
from experiments.interactive.parse import CommandError, host_index
from experiments.run.agents import AgentError, ev_state_command
from hosts.mrc_ctl import ASSUMED_BAD, EVENT_STATES, GOOD
from hosts.protocol import ev_choice, ev_plane, transport_spec
from topologies.model import Fabric
from topologies.paths import catalogue

EV_ACTIONS = ("deny", "allow", "replace", "explicit", "probe", "events")
EV_USAGE = {
    "deny": "ev deny h2 [h0] plane 1 [spine 0], or ev deny h0 h3 0x01000005",
    "allow": "ev allow h2 [h0] plane 1 [spine 0], or ev allow h0 h3 0x01000005",
    "replace": "ev replace h0 h3 OLD NEW (EV values, as `evs h0 h3` shows them)",
    "explicit": "ev explicit h0 h3 EV [EV ...]",
    "probe": "ev probe h0 h3 [plane 1 [spine 0]]",
    "events": "ev events h0 [h3] [GOOD] [ASSUMED_BAD], ev events h0 off, or ev events h0",
}
PROBE_TIMEOUT_NS = 1_000_000_000  # how long `ev probe` waits for each reply


@dataclass(frozen=True)
class EvRequest:
    action: str  # one of EV_ACTIONS
    src: int
    peer: int | None = None
    plane: int | None = None
    spine: int | None = None
    evs: tuple[int, ...] = ()
    states: tuple[str, ...] | None = None  # events: the mask to set (None: show events)

    def step(self, fabric: Fabric) -> Step:
        """The deny/allow of a plane as the `deny` fault's step (allow: its up step)."""
        peer = None if self.peer is None else fabric.host(self.peer).name
        return Step(0.0, self.action == "allow",
                    Deny(fabric.host(self.src).name, self.plane, self.spine, peer))


def parse_evs(fabric: Fabric, args: list[str]) -> tuple[int, int | None]:
    """`evs HOST [PEER]`."""
    if not 1 <= len(args) <= 2:
        raise CommandError("evs", "arguments", f"expected 1 or 2, got {len(args)}",
                           "use `evs h0` or `evs h0 h3`")
    src = host_index(fabric, args[0], "evs")
    return src, _peer(fabric, args[1], src, "evs") if len(args) == 2 else None


def parse_ev_value(fabric: Fabric, text: str, command: str = "ev") -> int:
    """An EV value: hexadecimal (0x01000005) or decimal, of a plane the fabric has."""
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if not 0 <= value < 1 << 32:
        raise CommandError(command, "EV", f"{text!r} is not an EV value",
                           "give it as `evs` shows it, e.g. 0x01000005")
    if ev_plane(value) >= fabric.spec.planes:
        raise CommandError(command, "EV", f"{text} names plane {ev_plane(value)}; "
                           f"{fabric.name} has {fabric.spec.planes}",
                           "the plane is the EV's top byte")
    return value


def parse_ev(fabric: Fabric, args: list[str]) -> EvRequest:
    """`ev ACTION HOST ...` (EV_USAGE)."""
    if not args or args[0] not in EV_ACTIONS:
        got = repr(args[0]) if args else "nothing"
        raise CommandError("ev", "action", f"{got} is not one of {', '.join(EV_ACTIONS)}",
                           "use e.g. `ev deny h2 plane 1` (help ev)")
    action, rest = args[0], args[1:]
    command = f"ev {action}"
    usage = f"use `{EV_USAGE[action]}`"
    if not rest:
        raise CommandError(command, "host", "missing", usage)
    src = host_index(fabric, rest[0], command)
    rest = rest[1:]
    peer = None
    if rest and rest[0] in {h.name for h in fabric.hosts}:
        peer = _peer(fabric, rest[0], src, command)
        rest = rest[1:]
    if action == "events":
        return _parse_events(src, peer, rest, command, usage)
    if action in ("deny", "allow") and rest[:1] != ["plane"]:
        if peer is None or len(rest) != 1:
            raise CommandError(command, "arguments", "name a plane, or a peer and one EV",
                               usage)
        return EvRequest(action, src, peer, evs=(parse_ev_value(fabric, rest[0], command),))
    if action in ("deny", "allow", "probe"):
        if action == "probe" and peer is None:
            raise CommandError(command, "peer", "missing", usage)
        plane, spine = _plane_spine(fabric, rest, command, usage, required=action != "probe")
        return EvRequest(action, src, peer, plane, spine)
    if peer is None:
        raise CommandError(command, "peer", "missing", usage)
    evs = tuple(parse_ev_value(fabric, text, command) for text in rest)
    if action == "replace" and len(evs) != 2:
        raise CommandError(command, "arguments", f"expected OLD and NEW, got {len(evs)} EVs",
                           usage)
    if action == "explicit" and not evs:
        raise CommandError(command, "arguments", "no EV given", usage)
    return EvRequest(action, src, peer, evs=evs)


def _peer(fabric: Fabric, name: str, src: int, command: str) -> int:
    peer = host_index(fabric, name, command, "peer")
    if peer == src:
        raise CommandError(command, "peer", "is the host itself", "name another host")
    return peer


def _plane_spine(fabric: Fabric, rest: list[str], command: str, usage: str,
                 required: bool) -> tuple[int | None, int | None]:
    found: dict[str, int] = {}
    limits = {"plane": fabric.spec.planes, "spine": fabric.spec.t1_per_plane}
    words = list(rest)
    while words:
        word = words.pop(0)
        if word not in limits or word in found or not words:
            raise CommandError(command, "arguments", f"{word!r} is not expected here", usage)
        value = words.pop(0)
        if not value.isdigit() or int(value) >= limits[word]:
            raise CommandError(command, word, f"{value!r} is not a {word} of {fabric.name}",
                               f"use 0..{limits[word] - 1}")
        found[word] = int(value)
    if "spine" in found and "plane" not in found:
        raise CommandError(command, "spine", "a T1 is one of a plane's", "name the plane too")
    if required and "plane" not in found:
        raise CommandError(command, "plane", "missing", usage)
    return found.get("plane"), found.get("spine")


def _parse_events(src: int, peer: int | None, rest: list[str], command: str,
                  usage: str) -> EvRequest:
    if rest == ["off"]:
        return EvRequest("events", src, peer, states=())
    wrong = [w for w in rest if w not in EVENT_STATES]
    if wrong:
        raise CommandError(command, "state", f"{wrong[0]!r} is not a state the API reports",
                           f"use {' and/or '.join(EVENT_STATES)}, or off")
    return EvRequest("events", src, peer, states=tuple(dict.fromkeys(rest)) or None)


# ------------------------------------------------------------------ reports (pure)
def spines_of(fabric: Fabric, src: int, dst: int) -> dict[tuple[int, int], int | None]:
    """(plane, path index) -> the path's T1 (None: the direct same-rack path)."""
    return {(p.plane, ev_choice(p.ev)): p.spine for p in catalogue(fabric, src, dst)}


def profile_lines(fabric: Fabric, src: int, profile: dict, now: float) -> list[str]:
    """One EV profile as `query_ev_profile` gave it: a head line, then every EV, those
    in use first."""
    name, dst = fabric.host(src).name, fabric.host(profile["dst"]).name
    mask = ", ".join(profile["ev_event_mask"]) or "none"
    lines = [f"{name} -> {dst}: profile {profile['profile_id']:#x}, ev_mode "
             f"{profile['ev_mode']}, ev_count {profile['ev_count']}, ev_min_active "
             f"{profile['ev_min_active']}, ev_event_mask {mask}",
             f"  {'EV':10}  {'port':>4}  {'spine':>6}  {'state':11}  {'in use':6}  "
             f"{'last sent':>11}  {'path tx':>7}"]
    for e in sorted(profile["entries"], key=lambda e: (not e["active"], e["plane"],
                                                        e["path"], e["ev"])):
        spine = "direct" if e.get("spine") is None else str(e["spine"])
        sent = "never" if e["last_sent"] is None else f"{now - e['last_sent']:.2f} s ago"
        lines.append(f"  {e['ev']:#010x}  {e['port']:>4}  {spine:>6}  {e['state']:11}  "
                     f"{'yes' if e['active'] else 'no':6}  {sent:>11}  {e['path_tx']:>7}")
    return lines


def probe_lines(fabric: Fabric, src: int, dst: int, paths: list, answer: dict) -> list[str]:
    """What `ep_batch_send_wait` found: each path's round trip (`paths` in req_id order)."""
    rsp = {r["req_id"]: r for r in answer["rsp"]}
    lines = [f"{fabric.host(src).name} -> {fabric.host(dst).name}: EV probes on "
             f"{len(paths)} paths, {answer['num_rsp']} answered"]
    for req_id, path in enumerate(paths):
        spine = "direct" if path.spine is None else f"spine {path.spine}"
        got = rsp.get(req_id)
        result = (f"rtt {got['rtt'] / 1e6:.3f} ms (port {got['port']})" if got else
                  f"no reply within {PROBE_TIMEOUT_NS / 1e9:g} s")
        lines.append(f"  plane {path.plane} {spine:8} EV {path.ev:#010x}  {result}")
    return lines


def event_line(fabric: Fabric, src: int, event: dict, now: float) -> str:
    spine = spines_of(fabric, src, event["dst"]).get((event["plane"], event["path"]))
    where = "direct" if spine is None else f"spine {spine}"
    return (f"  {now - event['t']:6.2f} s ago  {fabric.host(src).name} -> "
            f"{fabric.host(event['dst']).name}  EV {event['ev']:#010x}  plane "
            f"{event['plane']} {where}  {event['state']} ({event['reason']})")


# ------------------------------------------------------------------ on the session
class EvCommands:
    """`evs` and `ev` on a FabricSession's agents (experiments/interactive/session.py)."""

    def __init__(self, session):
        self.session = session
        self.fabric = session.fabric

    def _mrc(self, command: str) -> None:
        agents = self.session.agents
        transport = agents.transport if agents is not None else "no"
        if agents is None or transport_spec(transport).baseline:
            raise CommandError(command, "transport", f"the {transport} agents have no EV "
                               "profiles (queue pairs take the paths ECMP gives them)",
                               "send over mrc first, e.g. `send h0 h3 1k mrc`")

    def evs(self, src: int, peer: int | None) -> list[str]:
        self._mrc("evs")
        answer = self.session.ask(src, "query_ev_profile", cmd="query_ev_profile")
        profiles = [p for p in answer["profiles"] if peer is None or p["dst"] == peer]
        if not profiles:
            toward = f" to {self.fabric.host(peer).name}" if peer is not None else ""
            return [f"{self.fabric.host(src).name}: no connection{toward} yet (send a "
                    "message first, or give one an explicit array: ev explicit)"]
        now = time.monotonic()
        return [line for p in profiles for line in profile_lines(self.fabric, src, p, now)]

    def ev(self, req: EvRequest) -> list[str]:
        command = f"ev {req.action}"
        self._mrc(command)
        run = getattr(self, f"_{req.action}")
        return run(req)

    def _deny(self, req: EvRequest) -> list[str]:
        if req.plane is not None:  # a controller's denylist: the `deny` fault kind
            done = self.session.fault(req.step(self.fabric))
            self._acknowledged(req.src)
            return [done]
        state = "DENIED" if req.action == "deny" else GOOD
        self._modify(req.src, **ev_state_command(state, dst=req.peer, ev=req.evs[0]))
        return [f"{self._pair(req)}: EV {req.evs[0]:#010x} {state} (with every EV of the "
                f"set on its path: plane {ev_plane(req.evs[0])}); `evs "
                f"{self.fabric.host(req.src).name} {self.fabric.host(req.peer).name}` shows "
                "them"]

    _allow = _deny

    def _replace(self, req: EvRequest) -> list[str]:
        old, new = req.evs
        self._modify(req.src, cmd="modify_ev_profile", dst=req.peer, ev_op={
            "op": "REPLACE_EV", "entries": [{"ev": old, "ev_new": new, "state": GOOD}]})
        return [f"{self._pair(req)}: EV {old:#010x} replaced by {new:#010x}"]

    def _explicit(self, req: EvRequest) -> list[str]:
        self._modify(req.src, cmd="modify_ev_profile", dst=req.peer, ev_mode="EXP",
                     evs=list(req.evs))
        return [f"{self._pair(req)}: an explicit array of {len(req.evs)} EVs (ev_mode EXP); "
                "the connection sprays over these alone from now on"]

    def _probe(self, req: EvRequest) -> list[str]:
        paths = [p for p in catalogue(self.fabric, req.src, req.peer)
                 if (req.plane is None or p.plane == req.plane)
                 and (req.spine is None or p.spine == req.spine)]
        if not paths:
            raise CommandError("ev probe", "spine", "no path of that plane goes through "
                               "that T1 (a same-rack pair's direct path has none)",
                               "leave spine out")
        answer = self.session.ask(
            req.src, "ep_batch_send_wait", cmd="ep_batch_send_wait", op_type="EV_PROBE",
            rsp_timeout=PROBE_TIMEOUT_NS,
            req=[{"req_id": i, "dst": req.peer, "ev": p.ev} for i, p in enumerate(paths)])
        return probe_lines(self.fabric, req.src, req.peer, paths, answer)

    def _events(self, req: EvRequest) -> list[str]:
        name = self.fabric.host(req.src).name
        toward = (f"toward {self.fabric.host(req.peer).name}" if req.peer is not None
                  else "of every connection")
        if req.states is not None:
            cmd = {"cmd": "modify_ev_profile", "ev_event_mask": list(req.states)}
            if req.peer is not None:
                cmd["dst"] = req.peer
            self._modify(req.src, **cmd)
            if not req.states:
                return [f"{name}: no EV events {toward} from now on"]
            return [f"{name}: EV events ({', '.join(req.states)}) {toward} are collected; "
                    f"`ev events {name}` shows those received"]
        now = time.monotonic()
        found = []
        while True:  # what has come in so far, kept for us by the session
            message = self.session.next_message(now, lambda m: (
                m["event"] == "ev_event" and m["agent"] == req.src
                and (req.peer is None or m["dst"] == req.peer)))
            if message is None:
                break
            found.append(message)
        if not found:
            return [f"{name}: no EV events {toward} received (set a mask first: "
                    f"`ev events {name} {GOOD} {ASSUMED_BAD}`)"]
        return [f"{name}: {len(found)} EV events {toward}"] + [
            event_line(self.fabric, req.src, e, now) for e in found]

    # -------------------------------------------------------------- helpers
    def _pair(self, req: EvRequest) -> str:
        return f"{self.fabric.host(req.src).name} -> {self.fabric.host(req.peer).name}"

    def _modify(self, host: int, **cmd) -> dict:
        return self.session.ask(host, "modify_ev_profile", **cmd)

    def _acknowledged(self, host: int) -> None:
        """The agent's answer to a command a fault step sent it (an error is raised)."""
        message = self.session.next_message(time.monotonic() + 5.0, lambda m: (
            m["agent"] == host and m["event"] in ("modify_ev_profile", "error", "exited")))
        if message is None:
            raise AgentError(f"agent h{host} did not answer the denylist change")
        if message["event"] != "modify_ev_profile":
            self.session.agent_failed(message)
