"""The agent's control API, shaped as OCP MRC's controller API (`mrc_ctl.h`): EV profiles,
EV states, EV events and EV probes, as JSON lines on the agent's control channel.

A fabric controller (the paper's Clustermapper and its denylist, section 4) configures
MRC NICs through `mrc_ctl.h`. The testbed's agents answer the same operations, named
as the header names them (the full mapping, field by field, is docs/protocol.md "The
control API"):

- An EV profile is a connection's EV set (hosts/evset.py): one per connection, named
  by its peer (`dst`), its `profile_id` the connection's `conn_id`. Its EVs are
  generated (`ev_mode` GEN: drawn from `ev_seed` when the connection starts) or an
  explicit array (EXP, `modify_ev_profile` with `evs`).
- `query_ev_profile` (mrc_ctl_query_ev_profile): the mode, `ev_count`,
  `ev_min_active`, `ev_event_mask`, and `ev_op` QUERY_EV_ARRAY (every EV with its
  state) or QUERY_EV_STATE (the state of the EVs named).
- `modify_ev_profile` (mrc_ctl_modify_ev_profile): `ev_event_mask`, `ev_mode` EXP with
  its array, and `ev_op` MODIFY_EV_STATE (DENIED, the denylist, and back to GOOD; or
  ASSUMED_BAD) and REPLACE_EV. Entries apply in order and the first failing one stops
  the rest, as the header says. An EV names a path, and the EVs of a path share its
  fate, so a state applies to the path. Without `dst`, a MODIFY_EV_STATE entry names
  a port (and a T1, `spine`) instead of an EV, and applies to every connection, those
  made later included: "deny plane 3 of h2" as a controller says it.
- `ep_batch_send_wait` (mrc_ctl_ep_batch_send_wait, op EV_PROBE): a PROBE outside any
  connection on each EV asked (hosts/endpoint.py `ev_probe`); one answer once every
  reply is in or `rsp_timeout` has passed, each reply with its round trip (`rtt`, ns).
- EV events (mrc_ctl_ev_event, read with mrc_ctl_poll_ev_event): with an event mask
  set, each state change of an EV to a state in the mask (GOOD, ASSUMED_BAD: the ones
  the header supports) is an `ev_event` line on the control channel, with the reason
  the testbed knows (a `retire` event's: timeout, gap, late...; probes, operator).

Every answer is one JSON line whose `event` is the command's name; a failure is an
`error` line with the errno name the header gives for it (EINVAL, ENOENT, ENOTSUP,
E2BIG). Pure logic over an Endpoint: the agent (hosts/agent.py) and the tests drive
it alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hosts.endpoint import Endpoint
from hosts.evset import ASSUMED_BAD, DENIED, GOOD, SKIP, EvSetError
from hosts.protocol import ev_choice, ev_plane
from hosts.reliability import SenderError
from hosts.sender import Sender
from hosts.transport import TransportSender
from topologies.paths import catalogue

UNKNOWN = "UNKNOWN"  # MRC_CTL_EV_UNKNOWN: an EV the profile does not hold
API_STATES = (GOOD, ASSUMED_BAD, DENIED, UNKNOWN)
SETTABLE = (GOOD, ASSUMED_BAD, DENIED)  # what MODIFY_EV_STATE may set
EVENT_STATES = (GOOD, ASSUMED_BAD)  # what `ev_event_mask` may hold (mrc_ctl.h)
COMMANDS = frozenset({"query_ev_profile", "modify_ev_profile", "ep_batch_send_wait"})
EV_OPS_QUERY = ("QUERY_EV_ARRAY", "QUERY_EV_STATE")
EV_OPS_MODIFY = ("MODIFY_EV_STATE", "REPLACE_EV")
F_ALL_COPIES = 1 << 0  # MRC_CTL_EV_OP_F_ALL_COPIES
MAX_REQ_ID = 0xFFFF  # mrc_ctl_ep_req.req_id is 16 bits
MAX_EP_REQUESTS = 256  # per batch (the header leaves it to the device)
RSP_TIMEOUT_NS = 1_000_000_000  # default response wait of a probe batch
MAX_RSP_TIMEOUT_NS = 60_000_000_000
# The testbed's events that change an EV's state, as the API's states.
STATE_EVENTS = {"retire": ASSUMED_BAD, "reinstate": GOOD, "allow": GOOD}


class CtlError(ValueError):
    """A control command the agent cannot carry out; `errno` as mrc_ctl.h names it."""

    def __init__(self, errno: str, message: str):
        super().__init__(message)
        self.errno = errno


def api_state(state: str) -> str:
    """The API's name of an EV state: SKIP (passed over once) is GOOD there."""
    return GOOD if state == SKIP else state


def ev_value(value: object, where: str) -> int:
    """An EV value: a number, or a string such as "0x01000005"."""
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            raise CtlError("EINVAL", f"{where}: {value!r} is not an EV value") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 32:
        raise CtlError("EINVAL", f"{where}: {value!r} is not a 32-bit EV value")
    return value


@dataclass
class Batch:
    """One ep_batch_send_wait: the requests awaiting a reply, the replies so far."""

    pending: set[tuple[int, int]]
    rsp: list[dict] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Rule:
    """A state set for every connection of the host, those made later too."""

    plane: int
    spine: int | None
    state: str


class MrcCtl:
    """The control API of one host's endpoint; answers go to `emit(dict)`."""

    def __init__(self, endpoint: Endpoint, emit: Callable[[dict], None],
                 clock: Callable[[], float] = time.monotonic):
        self.endpoint, self.emit, self.clock = endpoint, emit, clock
        self.me = endpoint.me
        # ev_event_mask per connection (by peer), and for every connection (None).
        self.masks: dict[int | None, frozenset[str]] = {}
        self.rules: list[Rule] = []
        self.batches: list[Batch] = []
        self._tapped = False
        endpoint.on_new_sender = self._new_sender
        endpoint.on_ep_response = self._ep_response

    # ------------------------------------------------------------------ dispatch
    def command(self, cmd: dict, now: float) -> None:
        """Carry out one command (its `cmd` one of COMMANDS) and answer it."""
        name = cmd.get("cmd")
        handler = {"query_ev_profile": self.query_ev_profile,
                   "modify_ev_profile": self.modify_ev_profile,
                   "ep_batch_send_wait": self.ep_batch_send_wait}.get(name)
        try:
            if handler is None:
                raise CtlError("EINVAL", f"unknown control command {name!r}")
            handler(cmd, now)
        except CtlError as err:
            self._error(name, err.errno, str(err))
        except (EvSetError, SenderError, ValueError, KeyError, TypeError) as err:
            self._error(name, "EINVAL", f"{err.__class__.__name__}: {err}"
                        if isinstance(err, (KeyError, TypeError)) else str(err))

    def _error(self, name: object, errno: str, message: str) -> None:
        self.emit({"event": "error", "cmd": name, "errno": errno,
                   "message": f"{name}: {message}"})

    # ------------------------------------------------------------------ profiles
    def query_ev_profile(self, cmd: dict, now: float) -> None:
        """mrc_ctl_query_ev_profile: QUERY_EV_ARRAY (default) or QUERY_EV_STATE."""
        dst = self._dst(cmd, required=False)
        op = cmd.get("ev_op") or {"op": "QUERY_EV_ARRAY"}
        if not isinstance(op, dict) or op.get("op") not in EV_OPS_QUERY:
            raise CtlError("EINVAL", f"ev_op.op: query takes {' or '.join(EV_OPS_QUERY)}")
        self._mrc_only()
        senders = self.endpoint.senders
        if dst is not None and dst not in senders:
            raise CtlError("ENOENT", f"no connection to host {dst} yet (its profile exists "
                           "from its first message or modify_ev_profile)")
        peers = [dst] if dst is not None else sorted(senders)
        if op["op"] == "QUERY_EV_ARRAY":
            profiles = [self.profile(peer, senders[peer]) for peer in peers]
        else:
            entries = self._entries(op)
            values = [ev_value(e.get("ev"), f"ev_op.entries[{i}].ev")
                      for i, e in enumerate(entries)]
            profiles = [self.profile(peer, senders[peer], values) for peer in peers]
        self.emit({"event": "query_ev_profile", "profiles": profiles})

    def profile(self, peer: int, sender: Sender, values: list[int] | None = None) -> dict:
        """The profile of the connection to `peer` as the API reports it: every EV the
        set holds (QUERY_EV_ARRAY), or the state of `values` (QUERY_EV_STATE)."""
        evs = sender.evs
        spines = {(p.plane, ev_choice(p.ev)): p.spine
                  for p in catalogue(self.endpoint.fabric, self.me, peer)}
        if values is None:
            entries = [{"ev": ev.ev, "port": ev.plane + 1, "plane": ev.plane,
                        "path": ev.key[1], "spine": spines.get(ev.key),
                        "state": api_state(ev.state), "active": ev.active,
                        "last_sent": ev.last_sent if ev.last_sent >= 0 else None,
                        "path_tx": sender.path_sent.get(ev.key, 0)}
                       for ev in evs.by_ev.values()]
        else:
            entries = []
            for value in values:
                ev = evs.by_ev.get(value)
                entries.append({"ev": value, "port": ev_plane(value) + 1,
                                "state": api_state(ev.state) if ev else UNKNOWN})
        return {"dst": peer, "profile_id": sender.conn_id,
                "ev_mode": "EXP" if evs.explicit else "GEN", "ev_count": evs.ev_count,
                "ev_min_active": sender.config.ev_min_active,
                "ev_event_mask": sorted(self._mask(peer)), "entries": entries}

    def modify_ev_profile(self, cmd: dict, now: float) -> None:
        """mrc_ctl_modify_ev_profile: `ev_event_mask`, `ev_mode` (EXP with `evs`), and
        `ev_op` MODIFY_EV_STATE or REPLACE_EV, in that order."""
        dst = self._dst(cmd, required=False)
        mask, mode, op = cmd.get("ev_event_mask"), cmd.get("ev_mode"), cmd.get("ev_op")
        if mask is None and mode is None and op is None:
            raise CtlError("EINVAL", "nothing to modify: give ev_event_mask, ev_mode (with "
                           "evs) or ev_op")
        if op is not None and (not isinstance(op, dict) or op.get("op") not in EV_OPS_MODIFY):
            raise CtlError("EINVAL", f"ev_op.op: modify takes {' or '.join(EV_OPS_MODIFY)} "
                           "(queries are query_ev_profile's)")
        self._mrc_only()
        touched: set[int] = set()
        if mask is not None:
            self._set_mask(dst, mask)
        if mode is not None:
            touched |= self._set_mode(dst, mode, cmd.get("evs"), now)
        done = 0
        if op is not None:
            entries = self._entries(op)
            try:
                for done, entry in enumerate(entries):
                    where = f"ev_op.entries[{done}]"
                    if op["op"] == "MODIFY_EV_STATE":
                        touched |= self._modify_state(dst, entry, where, now)
                    else:
                        touched |= self._replace(dst, entry, where, now)
                done = len(entries)
            except (CtlError, EvSetError, SenderError) as err:
                errno = err.errno if isinstance(err, CtlError) else "EINVAL"
                # The header's rule: the first failing entry stops, partial success is
                # possible; say how many went through.
                raise CtlError(errno, f"{err} ({done} of {len(entries)} entries applied)"
                               ) from None
        self.emit({"event": "modify_ev_profile", "dst": dst, "entries": done,
                   "profiles": sorted(self.endpoint.senders[p].conn_id for p in touched)})

    def _set_mask(self, dst: int | None, mask: object) -> None:
        if not isinstance(mask, list) or not all(m in EVENT_STATES for m in mask):
            raise CtlError("EINVAL", f"ev_event_mask: a list of {' and '.join(EVENT_STATES)} "
                           "(the states mrc_ctl.h reports), or [] for none")
        self.masks[dst] = frozenset(mask)
        if mask and not self._tapped:
            self._tapped = True
            self.endpoint.tap_events(self._event)

    def _mask(self, peer: int) -> frozenset[str]:
        return self.masks[peer] if peer in self.masks else self.masks.get(None, frozenset())

    def _set_mode(self, dst: int | None, mode: object, evs: object, now: float) -> set[int]:
        if mode != "EXP":
            raise CtlError("ENOTSUP", f"ev_mode {mode!r}: a connection's EVs are generated "
                           "(GEN) when it starts; EXP, with evs, makes them an explicit "
                           "array (AUTO, and going back to GEN, are not modelled)")
        if dst is None:
            raise CtlError("EINVAL", "ev_mode EXP names one connection's EVs: give dst")
        if not isinstance(evs, list) or not evs:
            raise CtlError("EINVAL", "evs: the explicit EV array, a non-empty list of EVs")
        values = [ev_value(v, f"evs[{i}]") for i, v in enumerate(evs)]
        sender = self._connection(dst)
        sender.set_explicit(values, now)
        return {dst}

    def _modify_state(self, dst: int | None, entry: object, where: str,
                      now: float) -> set[int]:
        state = self._field(entry, "state", where)
        if state not in SETTABLE:
            raise CtlError("EINVAL", f"{where}.state: {state!r}; a controller sets "
                           f"{', '.join(SETTABLE)}")
        if "ev" in entry:
            if dst is None:
                raise CtlError("EINVAL", f"{where}.ev: an EV names a path of one "
                               "connection: give dst, or name a port (and spine) instead")
            value = ev_value(entry["ev"], f"{where}.ev")
            if ev_plane(value) >= self.endpoint.planes:
                raise CtlError("EINVAL", f"{where}.ev: {value:#010x} names plane "
                               f"{ev_plane(value)}; the host has {self.endpoint.planes}")
            self._connection(dst).modify_ev_state(value, state, now)
            return {dst}
        plane, spine = self._port_spine(entry, where)
        if dst is not None:
            self._apply(dst, self._connection(dst), plane, spine, state, now)
            return {dst}
        rule = Rule(plane, spine, state)
        if state == DENIED:
            if rule not in self.rules:
                self.rules.append(rule)
        elif state == GOOD:
            self.rules = [r for r in self.rules if not (
                r.plane == plane and (spine is None or r.spine == spine))]
        touched = set()
        for peer, sender in list(self.endpoint.senders.items()):
            self.endpoint.connection(peer)
            self._apply(peer, sender, plane, spine, state, now)
            touched.add(peer)
        return touched

    def _apply(self, peer: int, sender: Sender, plane: int, spine: int | None, state: str,
               now: float) -> None:
        """`state` on every path of `plane` (through T1 `spine`, if given) to `peer`."""
        evs = sender.evs
        for path in catalogue(self.endpoint.fabric, self.me, peer):
            if path.plane != plane or (spine is not None and path.spine != spine):
                continue
            key = evs.path_key(path.ev)
            if state == GOOD and key not in evs.denied and key not in evs.bad:
                continue
            # An EV of the set on the path if it has one (else the path's own EV, which
            # a denial then remembers).
            value = next((e.ev for e in evs.by_ev.values() if e.key == key), path.ev)
            sender.modify_ev_state(value, state, now)

    def _replace(self, dst: int | None, entry: object, where: str, now: float) -> set[int]:
        if dst is None:
            raise CtlError("EINVAL", "REPLACE_EV names one connection's EVs: give dst")
        old = ev_value(self._field(entry, "ev", where), f"{where}.ev")
        new = ev_value(self._field(entry, "ev_new", where), f"{where}.ev_new")
        state = entry.get("state", GOOD)
        if state != GOOD:
            raise CtlError("EINVAL", f"{where}.state: {state!r}; a replacing EV starts "
                           "GOOD (set another state with MODIFY_EV_STATE after)")
        flags = entry.get("flags", 0)
        if isinstance(flags, list):
            if not set(flags) <= {"ALL_COPIES"}:
                raise CtlError("EINVAL", f"{where}.flags: only ALL_COPIES")
        elif isinstance(flags, bool) or not isinstance(flags, int) or flags & ~F_ALL_COPIES:
            raise CtlError("EINVAL", f"{where}.flags: 0, {F_ALL_COPIES} (ALL_COPIES) or "
                           "[\"ALL_COPIES\"]")
        sender = self._connection(dst)
        if old not in sender.evs.by_ev:
            raise CtlError("ENOENT", f"{where}.ev: {old:#010x} is not in the profile of "
                           f"host {dst}")
        # Every EV is in a testbed array once: ALL_COPIES replaces that one copy.
        sender.replace_ev(old, new, now)
        return {dst}

    # ------------------------------------------------------------------ probes
    def ep_batch_send_wait(self, cmd: dict, now: float) -> None:
        """mrc_ctl_ep_batch_send_wait with op EV_PROBE: probe each (dst, ev) and answer
        once every reply is in or `rsp_timeout` (ns) has passed."""
        op_type = cmd.get("op_type", "EV_PROBE")
        if op_type != "EV_PROBE":
            raise CtlError("ENOTSUP", f"op_type {op_type!r}: the testbed probes EVs "
                           "(EV_PROBE); PORT_STATUS_UPDATE is not modelled")
        reqs = cmd.get("req")
        if not isinstance(reqs, list) or not reqs:
            raise CtlError("EINVAL", "req: a non-empty list of {req_id, dst, ev}")
        if len(reqs) > MAX_EP_REQUESTS:
            raise CtlError("E2BIG", f"req: {len(reqs)} requests; at most {MAX_EP_REQUESTS}")
        timeout = cmd.get("rsp_timeout", RSP_TIMEOUT_NS)
        if (isinstance(timeout, bool) or not isinstance(timeout, int)
                or not 0 < timeout <= MAX_RSP_TIMEOUT_NS):
            raise CtlError("EINVAL", f"rsp_timeout: nanoseconds, 1 to {MAX_RSP_TIMEOUT_NS}")
        probes = []
        for i, req in enumerate(reqs):
            where = f"req[{i}]"
            req_id = self._field(req, "req_id", where)
            if isinstance(req_id, bool) or not isinstance(req_id, int) or not (
                    0 <= req_id <= MAX_REQ_ID):
                raise CtlError("EINVAL", f"{where}.req_id: 0 to {MAX_REQ_ID}")
            dst = self._host(self._field(req, "dst", where), f"{where}.dst")
            value = ev_value(self._field(req, "ev", where), f"{where}.ev")
            plane = ev_plane(value)
            if plane >= self.endpoint.planes:
                raise CtlError("EINVAL", f"{where}.ev: {value:#010x} names plane {plane}; "
                               f"the host has {self.endpoint.planes}")
            if "port" in req and req["port"] != plane + 1:
                raise CtlError("EINVAL", f"{where}.port: {req['port']!r}, but the EV is of "
                               f"port {plane + 1} (plane {plane})")
            if (dst, req_id) in {(d, r) for d, r, _ in probes}:
                raise CtlError("EINVAL", f"{where}.req_id: {req_id} to host {dst} twice")
            probes.append((dst, req_id, value))
        deadline = now + timeout / 1e9
        batch = Batch(set())
        for dst, req_id, value in probes:
            self.endpoint.ev_probe(dst, value, req_id, now, deadline)
            batch.pending.add((dst, req_id))
        self.batches.append(batch)

    def _ep_response(self, peer: int, req_id: int, plane: int | None, rtt: float | None,
                     now: float) -> None:
        batch = next((b for b in self.batches if (peer, req_id) in b.pending), None)
        if batch is None:
            return
        batch.pending.discard((peer, req_id))
        if plane is None:
            batch.timed_out.append(req_id)
        else:
            batch.rsp.append({"req_id": req_id, "dst": peer, "port": plane + 1,
                              "rtt": round(rtt * 1e9), "adj_svc_time": 0})
        if not batch.pending:
            self.batches.remove(batch)
            self.emit({"event": "ep_batch_send_wait", "rsp": batch.rsp,
                       "num_rsp": len(batch.rsp),
                       "errno": "ETIMEDOUT" if batch.timed_out else None,
                       "timed_out": batch.timed_out, "t": now})

    # ------------------------------------------------------------------ events
    def _event(self, event: dict) -> None:
        """An endpoint event: an `ev_event` line if it changes an EV to a state the
        connection's mask holds (mrc_ctl_ev_event)."""
        state = STATE_EVENTS.get(event.get("event"))
        peer = event.get("peer")
        if state is None or peer is None or state not in self._mask(peer):
            return
        reason = event.get("reason") or ("probes" if event["event"] == "reinstate"
                                         else "operator")
        self.emit({"event": "ev_event", "profile_id": self.me << 16 | peer, "dst": peer,
                   "ev": event["ev"], "port": event["plane"] + 1, "plane": event["plane"],
                   "path": event.get("path"), "state": state, "reason": reason,
                   "drop_count": 0, "t": event["t"]})

    def _new_sender(self, peer: int, sender: TransportSender) -> None:
        """A new connection gets the states set for every connection (rules)."""
        if self.rules and not self.endpoint.qps:  # MRC: the baseline has no EV profiles
            now = self.clock()
            for rule in self.rules:
                self._apply(peer, sender, rule.plane, rule.spine, rule.state, now)

    # ------------------------------------------------------------------ fields
    def _mrc_only(self) -> None:
        if self.endpoint.qps:
            raise CtlError("ENOTSUP", f"the {self.endpoint.transport} transport has no EV "
                           "profiles (its queue pairs take the paths ECMP gives them)")

    def _connection(self, dst: int) -> Sender:
        self._mrc_only()
        return self.endpoint.connection(dst)  # an MRC endpoint's senders are Senders

    def _host(self, value: object, where: str) -> int:
        hosts = len(self.endpoint.fabric.hosts)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < hosts:
            raise CtlError("EINVAL", f"{where}: {value!r} is not a host index (0 to "
                           f"{hosts - 1})")
        if value == self.me:
            raise CtlError("EINVAL", f"{where}: {value} is this host")
        return value

    def _dst(self, cmd: dict, required: bool) -> int | None:
        if cmd.get("dst") is None:
            if required:
                raise CtlError("EINVAL", "dst: the peer host of the connection")
            return None
        return self._host(cmd["dst"], "dst")

    def _port_spine(self, entry: dict, where: str) -> tuple[int, int | None]:
        planes, spines = self.endpoint.planes, self.endpoint.fabric.spec.t1_per_plane
        port = entry.get("port")
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= planes:
            raise CtlError("EINVAL", f"{where}: name an ev, or a port (1 to {planes}, the "
                           f"plane + 1) and optionally a spine (got port {port!r})")
        spine = entry.get("spine")
        if spine is not None and (isinstance(spine, bool) or not isinstance(spine, int)
                                  or not 0 <= spine < spines):
            raise CtlError("EINVAL", f"{where}.spine: a T1 index, 0 to {spines - 1}")
        return port - 1, spine

    @staticmethod
    def _entries(op: dict) -> list:
        entries = op.get("entries")
        if not isinstance(entries, list) or not entries:
            raise CtlError("EINVAL", f"ev_op.entries: {op.get('op')} needs a non-empty list")
        return entries

    @staticmethod
    def _field(entry: object, name: str, where: str):
        if not isinstance(entry, dict) or name not in entry:
            raise CtlError("EINVAL", f"{where}.{name}: required")
        return entry[name]
