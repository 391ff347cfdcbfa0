"""Workloads as phases of transfers (pure): all-to-all, ring all-reduce, incast, flows,
transfer.

A phase is a list of transfers that start together; the next phase starts when every
transfer of the previous one has been received and verified, as in a synchronous
collective. Message ids are unique per (source, destination) across the workload.

- `all-to-all`: every host sends one message to every other host; `message_bytes` may
  be a list of sizes, a size sweep: one phase per size, smallest first;
- `all-reduce`: ring all-reduce, 2(N-1) phases of one chunk per host; `data_bytes` may
  be a list of sizes, a size sweep (one all-reduce per size, smallest first); `order:
  across-racks` makes the ring alternate between racks (h0, h4, h1, h5, ... on two racks
  of four), so that every hop crosses the spine, as the ring of the paper's 64 GPUs
  mostly did, instead of running through each rack in turn (`order: hosts`);
- `incast`: `fan_in` senders to one `receiver` (hosts of other racks first, so that
  the incast crosses the spine), optionally beside a `victim` flow that
  has hosts of its own: its source sends nothing else and its destination receives
  nothing else, so whatever slows it down is congestion that spread from the incast.
  `victim: auto` picks them as the MRC paper did (section 5.2.8): the destination an
  idle host in the receiver's rack, the source a host of another rack, so the victim
  crosses the spine into the receiver's T0 beside the incast;
- `flows`: long flows between given host pairs, all at once (e.g. two flows that
  compete for one path), or each from its own `start_s` (seconds after the phase
  starts: a second flow that joins a first); `message_bytes` is one size or one per
  flow;
- `transfer`: `count` messages from one host to another.

Hosts are named by index, name or role (experiments/scenarios/roles.py: `last`, `{rack: 1,
index: 0}`). `phases()` checks every parameter (type, range, known name) and raises
`WorkloadError` naming the scenario file and the `params.<name>` field; what a role
resolved to is added to `resolved`, for the run to print.
"""

from __future__ import annotations

from dataclasses import dataclass

from experiments.scenarios import roles
from topologies.errors import UserError, shown
from topologies.model import Fabric

# The parameters each workload takes; anything else in `params:` is a mistake.
PARAMS = {
    "all-to-all": ("message_bytes",),
    "all-reduce": ("data_bytes", "order"),
    "incast": ("message_bytes", "receiver", "fan_in", "victim", "victim_bytes"),
    "flows": ("flows", "message_bytes", "start_s"),
    "transfer": ("src", "dst", "message_bytes", "count"),
}
WORKLOADS = tuple(PARAMS)
MAX_BYTES = 1 << 30  # per message: a run keeps every message in memory to verify it
MAX_COUNT = 1000  # messages of one `transfer` workload
MAX_SIZES = 16  # sizes of one all-to-all or all-reduce sweep
MAX_START_S = 3600.0  # a flow's latest start
RING_ORDERS = ("hosts", "across-racks")
FIX = "see the workload parameters in docs/running.md"


class WorkloadError(UserError):
    """Bad workload parameters. The message is one line."""


@dataclass(frozen=True)
class Transfer:
    src: int
    dst: int
    msg_id: int
    size: int
    role: str = "data"  # "victim" for the incast victim flow
    start_s: float = 0.0  # after its phase starts (flows' start_s)


def _int(params: dict, key: str, default: int, low: int, high: int, what: str,
         source: str) -> int:
    value = params.get(key, default)
    if not _is_int(value) or not low <= value <= high:
        raise WorkloadError(source, f"params.{key}", f"must be {what} from {low} to {high} "
                            f"(got {shown(value)})", FIX)
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Hosts:
    """Host parameters by index, name or role, resolved on the fabric."""

    def __init__(self, fabric: Fabric, source: str, resolved: list[str]):
        self.fabric, self.source, self.resolved = fabric, source, resolved

    def one(self, value: object, where: str) -> int:
        try:
            found = roles.host(self.fabric, value)
        except roles.RoleError as err:
            raise WorkloadError(self.source, where, err.problem, err.fix) from None
        if found.by_role:
            self.resolved.append(f"{where}: {roles.describe(value)} is {found.value.name}")
        return found.value.index

    def pair(self, value: object, where: str) -> tuple[int, int] | None:
        """[source, destination]: two different hosts, or None if `value` is not one."""
        if not isinstance(value, list) or len(value) != 2 or any(
                isinstance(h, bool) or h is None for h in value):
            return None
        try:
            src, dst = (self.one(h, where) for h in value)
        except WorkloadError:
            return None
        return (src, dst) if src != dst else None


def phases(workload: str, params: dict, fabric: Fabric, source: str = "scenario",
           resolved: list[str] | None = None) -> list[list[Transfer]]:
    """The transfers of `workload` on `fabric`, phase by phase."""
    resolved = resolved if resolved is not None else []
    by_role = _Hosts(fabric, source, resolved)
    hosts = len(fabric.hosts)
    if workload not in PARAMS:
        raise WorkloadError(source, "workload", f"unknown workload {shown(workload)}",
                            f"use one of {', '.join(WORKLOADS)}")
    if not isinstance(params, dict):
        raise WorkloadError(source, "params", "must be a mapping", "write params: {key: value}")
    unknown = sorted(set(map(str, params)) - set(PARAMS[workload]))
    if unknown:
        raise WorkloadError(source, f"params.{unknown[0]}", f"not a parameter of {workload}",
                            f"use only {', '.join(PARAMS[workload])}")
    next_id: dict[tuple[int, int], int] = {}

    def transfer(src: int, dst: int, size: int, role: str = "data",
                 start_s: float = 0.0) -> Transfer:
        msg_id = next_id.get((src, dst), 0)
        next_id[(src, dst)] = msg_id + 1
        return Transfer(src, dst, msg_id, size, role, start_s)

    def size(key: str, default: int) -> int:
        return _int(params, key, default, 1, MAX_BYTES, "a byte count", source)

    def host(key: str, default: int) -> int:
        return by_role.one(params.get(key, default), f"params.{key}")

    if workload == "all-to-all":
        return [[transfer(s, d, nbytes) for s in range(hosts) for d in range(hosts) if s != d]
                for nbytes in _sizes(params, 256_000, source, "message_bytes")]
    if workload == "all-reduce":
        # Ring all-reduce: reduce-scatter then all-gather, 2(N-1) steps of one chunk each.
        ring = _ring(params, fabric, source)
        return [[transfer(a, b, max(1, nbytes // hosts)) for a, b in zip(ring, ring[1:] + ring[:1])]
                for nbytes in _sizes(params, 2_000_000, source, "data_bytes")
                for _ in range(2 * (hosts - 1))]
    if workload == "incast":
        return [_incast(params, fabric, source, size, host, transfer, by_role)]
    if workload == "flows":
        pairs = _flows(params, hosts, source, by_role)
        starts = _starts(params, len(pairs), source)
        sizes = _flow_sizes(params, len(pairs), source)
        return [[transfer(src, dst, nbytes, start_s=start)
                 for (src, dst), start, nbytes in zip(pairs, starts, sizes)]]
    src, dst = host("src", 0), host("dst", hosts - 1)
    if src == dst:
        raise WorkloadError(source, "params.dst", f"must differ from params.src ({src})",
                            "pick two different hosts")
    nbytes = size("message_bytes", 4_000_000)
    count = _int(params, "count", 1, 1, MAX_COUNT, "a number of messages", source)
    return [[transfer(src, dst, nbytes) for _ in range(count)]]


def _ring(params: dict, fabric: Fabric, source: str) -> list[int]:
    """The hosts in ring order: by index, or alternating between racks."""
    order = params.get("order", "hosts")
    if order not in RING_ORDERS:
        raise WorkloadError(source, "params.order", f"must be one of {', '.join(RING_ORDERS)} "
                            f"(got {shown(order)})", "across-racks makes every hop cross the spine")
    hosts = range(len(fabric.hosts))
    if order == "hosts":
        return list(hosts)
    per = fabric.spec.hosts_per_rack
    return sorted(hosts, key=lambda h: (h % per, h // per))


def _starts(params: dict, flows: int, source: str) -> list[float]:
    """`start_s` of flows: one start per flow, in seconds after the phase starts."""
    value = params.get("start_s", [0.0] * flows)
    if (not isinstance(value, list) or len(value) != flows
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       and 0 <= v <= MAX_START_S for v in value)):
        raise WorkloadError(source, "params.start_s", f"must be a list of {flows} starts, "
                            f"one per flow, 0 to {MAX_START_S:g} seconds (got {shown(value)})",
                            "e.g. start_s: [0, 1.5]")
    return [float(v) for v in value]


def _flow_sizes(params: dict, flows: int, source: str) -> list[int]:
    """`message_bytes` of flows: one size for every flow, or one per flow (flows that
    join one after another and should end together need less the later they start)."""
    value = params.get("message_bytes", 4_000_000)
    if not isinstance(value, list):
        return [_int(params, "message_bytes", 4_000_000, 1, MAX_BYTES, "a byte count",
                     source)] * flows
    if len(value) != flows or not all(_is_int(v) and 1 <= v <= MAX_BYTES for v in value):
        raise WorkloadError(source, "params.message_bytes", f"must be a byte count, or a "
                            f"list of {flows}, one per flow, each from 1 to {MAX_BYTES} "
                            f"(got {shown(value)})", "e.g. message_bytes: [4000000, 2000000]")
    return list(value)


def _sizes(params: dict, default: int, source: str, key: str) -> list[int]:
    """`key` (all-to-all's message_bytes, all-reduce's data_bytes): one size, or a list
    of different sizes (a sweep), smallest first."""
    value = params.get(key, default)
    if not isinstance(value, list):
        return [_int(params, key, default, 1, MAX_BYTES, "a byte count", source)]
    if (not 1 <= len(value) <= MAX_SIZES
            or not all(_is_int(v) and 1 <= v <= MAX_BYTES for v in value)
            or len(set(value)) != len(value)):
        raise WorkloadError(source, f"params.{key}", f"must be a byte count, or a list "
                            f"of 1 to {MAX_SIZES} different byte counts, each from 1 to "
                            f"{MAX_BYTES} (got {shown(value)})",
                            f"e.g. {key}: [64000, 256000, 1000000]")
    return sorted(value)


def _incast(params: dict, fabric: Fabric, source: str, size, host, transfer,
            by_role: _Hosts) -> list[Transfer]:
    hosts = len(fabric.hosts)
    nbytes = size("message_bytes", 500_000)
    receiver = host("receiver", 0)
    victim = params.get("victim")
    busy = {receiver}
    if victim == "auto":
        victim = _auto_victim(fabric, receiver)
        if victim is None:
            raise WorkloadError(source, "params.victim", f"no host for a victim of its own "
                                f"on {fabric.name} ({hosts} hosts)", "use a topology with 4 "
                                "hosts or more, or remove the victim")
        by_role.resolved.append(f"params.victim: auto is [h{victim[0]}, h{victim[1]}]")
    elif victim is not None:
        victim = by_role.pair(victim, "params.victim")
        if victim is None:
            raise WorkloadError(source, "params.victim", "must be [source, destination], "
                                f"two different hosts (got {shown(params['victim'])})",
                                "e.g. victim: [3, 1], or victim: auto")
        if receiver in victim:
            raise WorkloadError(source, "params.victim", f"must not include the incast "
                                f"receiver (params.receiver: {receiver}): the victim has "
                                f"hosts of its own", "pick two other hosts")
    if victim is not None:
        busy |= set(victim)
    elif "victim_bytes" in params:
        raise WorkloadError(source, "params.victim_bytes", "needs params.victim",
                            "add victim: [source, destination] or remove victim_bytes")
    most = hosts - len(busy)
    if most < 1:
        raise WorkloadError(source, "params.victim", f"leaves no host to send the incast "
                            f"on a fabric of {hosts} hosts", "use a topology with 4 hosts "
                            "or more, or remove the victim")
    fan_in = _int(params, "fan_in", most, 1, most, "a number of senders", source)
    senders = incast_senders(fabric, receiver, busy, fan_in)
    phase = [transfer(s, receiver, nbytes) for s in senders]
    if victim is not None:
        phase.append(transfer(victim[0], victim[1], size("victim_bytes", nbytes), "victim"))
    return phase


def incast_senders(fabric: Fabric, receiver: int, busy: set[int], fan_in: int) -> list[int]:
    """The `fan_in` senders of an incast to `receiver` among the hosts not `busy`: from
    the other racks first, so that the incast crosses the spine into the receiver's T0
    as the paper's 7:1 did; the receiver's rack only where they are too few."""
    rack = fabric.host(receiver).rack
    idle = [h.index for h in fabric.hosts if h.index not in busy]
    return sorted(idle, key=lambda h: fabric.host(h).rack == rack)[:fan_in]


def _auto_victim(fabric: Fabric, receiver: int) -> tuple[int, int] | None:
    """The paper's victim (section 5.2.8): to an idle host in the incast receiver's rack,
    from a host of another rack (the last one), so that it crosses a spine into the
    receiver's T0; on one rack, from any other host. None if there are too few hosts."""
    rack = fabric.host(receiver).rack
    neighbours = [h.index for h in fabric.hosts if h.rack == rack and h.index != receiver]
    others = [h.index for h in fabric.hosts if h.rack != rack]
    if not neighbours:
        return None
    dst = neighbours[0]
    sources = others or [h for h in neighbours if h != dst]
    # Leave at least one host to send the incast.
    if not sources or len(fabric.hosts) < 4:
        return None
    return (sources[-1], dst)


def _flows(params: dict, hosts: int, source: str, by_role: _Hosts) -> list[tuple[int, int]]:
    if "flows" not in params:
        raise WorkloadError(source, "params.flows", "missing: the host pairs of the flows",
                            "e.g. flows: [[0, 2], [1, 3]]")
    flows = params["flows"]
    if not isinstance(flows, list) or not 1 <= len(flows) <= hosts * (hosts - 1):
        raise WorkloadError(source, "params.flows", f"must be a list of 1 to "
                            f"{hosts * (hosts - 1)} [source, destination] pairs "
                            f"(got {shown(flows)})", "e.g. flows: [[0, 2], [1, 3]]")
    pairs: list[tuple[int, int]] = []
    for i, pair in enumerate(flows):
        found = by_role.pair(pair, f"params.flows[{i}]")
        if found is None:
            raise WorkloadError(source, f"params.flows[{i}]", "must be [source, destination], "
                                f"two different host indexes 0..{hosts - 1} (got {shown(pair)})",
                                "e.g. [0, 2]")
        if found in pairs:
            raise WorkloadError(source, f"params.flows[{i}]", f"{pair} is listed twice",
                                "list each flow once (raise message_bytes for a longer flow)")
        pairs.append(found)
    return pairs
