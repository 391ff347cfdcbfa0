"""Workloads as phases of transfers (pure): all-to-all, ring all-reduce, incast, flows,
transfer.

A phase is a list of transfers that start together; the next phase starts when every
transfer of the previous one has been received and verified, as in a synchronous
collective. Message ids are unique per (source, destination) across the workload.

- `all-to-all`: every host sends one message to every other host; `message_bytes` may
  be a list of sizes, a size sweep: one phase per size, smallest first;
- `all-reduce`: ring all-reduce, 2(N-1) phases of one chunk per host;
- `incast`: `fan_in` senders to one `receiver`, optionally beside a `victim` flow that
  has hosts of its own: its source sends nothing else and its destination receives
  nothing else, so whatever slows it down is congestion that spread from the incast;
- `flows`: long flows between given host pairs, all at once (e.g. two flows that
  compete for one path);
- `transfer`: `count` messages from one host to another.

`phases()` checks every parameter (type, range, known name) and raises `WorkloadError`
naming the scenario file and the `params.<name>` field.
"""

from __future__ import annotations

from dataclasses import dataclass

from topologies.errors import UserError, shown

# The parameters each workload takes; anything else in `params:` is a mistake.
PARAMS = {
    "all-to-all": ("message_bytes",),
    "all-reduce": ("data_bytes",),
    "incast": ("message_bytes", "receiver", "fan_in", "victim", "victim_bytes"),
    "flows": ("flows", "message_bytes"),
    "transfer": ("src", "dst", "message_bytes", "count"),
}
WORKLOADS = tuple(PARAMS)
MAX_BYTES = 1 << 30  # per message: a run keeps every message in memory to verify it
MAX_COUNT = 1000  # messages of one `transfer` workload
MAX_SIZES = 16  # sizes of one all-to-all sweep
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


def _int(params: dict, key: str, default: int, low: int, high: int, what: str,
         source: str) -> int:
    value = params.get(key, default)
    if not _is_int(value) or not low <= value <= high:
        raise WorkloadError(source, f"params.{key}", f"must be {what} from {low} to {high} "
                            f"(got {shown(value)})", FIX)
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pair(value: object, hosts: int) -> bool:
    """Whether `value` is [source, destination]: two different host indexes."""
    return (isinstance(value, list) and len(value) == 2
            and all(_is_int(h) and 0 <= h < hosts for h in value) and value[0] != value[1])


def phases(workload: str, params: dict, hosts: int,
           source: str = "scenario") -> list[list[Transfer]]:
    """The transfers of `workload` on a fabric of `hosts` hosts, phase by phase."""
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

    def transfer(src: int, dst: int, size: int, role: str = "data") -> Transfer:
        msg_id = next_id.get((src, dst), 0)
        next_id[(src, dst)] = msg_id + 1
        return Transfer(src, dst, msg_id, size, role)

    def size(key: str, default: int) -> int:
        return _int(params, key, default, 1, MAX_BYTES, "a byte count", source)

    def host(key: str, default: int) -> int:
        return _int(params, key, default, 0, hosts - 1, "a host index", source)

    if workload == "all-to-all":
        return [[transfer(s, d, nbytes) for s in range(hosts) for d in range(hosts) if s != d]
                for nbytes in _sizes(params, 256_000, source)]
    if workload == "all-reduce":
        # Ring all-reduce: reduce-scatter then all-gather, 2(N-1) steps of one chunk each.
        chunk = max(1, size("data_bytes", 2_000_000) // hosts)
        return [[transfer(i, (i + 1) % hosts, chunk) for i in range(hosts)]
                for _ in range(2 * (hosts - 1))]
    if workload == "incast":
        return [_incast(params, hosts, source, size, host, transfer)]
    if workload == "flows":
        nbytes = size("message_bytes", 4_000_000)
        return [[transfer(src, dst, nbytes) for src, dst in _flows(params, hosts, source)]]
    src, dst = host("src", 0), host("dst", hosts - 1)
    if src == dst:
        raise WorkloadError(source, "params.dst", f"must differ from params.src ({src})",
                            "pick two different hosts")
    nbytes = size("message_bytes", 4_000_000)
    count = _int(params, "count", 1, 1, MAX_COUNT, "a number of messages", source)
    return [[transfer(src, dst, nbytes) for _ in range(count)]]


def _sizes(params: dict, default: int, source: str) -> list[int]:
    """`message_bytes` of all-to-all: one size, or a list of different sizes (a sweep),
    smallest first."""
    value = params.get("message_bytes", default)
    if not isinstance(value, list):
        return [_int(params, "message_bytes", default, 1, MAX_BYTES, "a byte count", source)]
    if (not 1 <= len(value) <= MAX_SIZES
            or not all(_is_int(v) and 1 <= v <= MAX_BYTES for v in value)
            or len(set(value)) != len(value)):
        raise WorkloadError(source, "params.message_bytes", f"must be a byte count, or a list "
                            f"of 1 to {MAX_SIZES} different byte counts, each from 1 to "
                            f"{MAX_BYTES} (got {shown(value)})",
                            "e.g. message_bytes: [64000, 256000, 1000000]")
    return sorted(value)


def _incast(params: dict, hosts: int, source: str, size, host, transfer) -> list[Transfer]:
    nbytes = size("message_bytes", 500_000)
    receiver = host("receiver", 0)
    victim = params.get("victim")
    busy = {receiver}
    if victim is not None:
        if not _pair(victim, hosts):
            raise WorkloadError(source, "params.victim", "must be [source, destination], "
                                f"two different host indexes 0..{hosts - 1} "
                                f"(got {shown(victim)})", "e.g. victim: [3, 1]")
        if receiver in victim:
            raise WorkloadError(source, "params.victim", f"must not include the incast "
                                f"receiver (params.receiver: {receiver}): the victim has "
                                f"hosts of its own", "pick two other hosts")
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
    senders = [h for h in range(hosts) if h not in busy][:fan_in]
    phase = [transfer(s, receiver, nbytes) for s in senders]
    if victim is not None:
        phase.append(transfer(victim[0], victim[1], size("victim_bytes", nbytes), "victim"))
    return phase


def _flows(params: dict, hosts: int, source: str) -> list[tuple[int, int]]:
    if "flows" not in params:
        raise WorkloadError(source, "params.flows", "missing: the host pairs of the flows",
                            "e.g. flows: [[0, 2], [1, 3]]")
    flows = params["flows"]
    if not isinstance(flows, list) or not 1 <= len(flows) <= hosts * (hosts - 1):
        raise WorkloadError(source, "params.flows", f"must be a list of 1 to "
                            f"{hosts * (hosts - 1)} [source, destination] pairs "
                            f"(got {shown(flows)})", "e.g. flows: [[0, 2], [1, 3]]")
    seen: set[tuple[int, int]] = set()
    for i, pair in enumerate(flows):
        if not _pair(pair, hosts):
            raise WorkloadError(source, f"params.flows[{i}]", "must be [source, destination], "
                                f"two different host indexes 0..{hosts - 1} "
                                f"(got {shown(pair)})", "e.g. [0, 2]")
        if tuple(pair) in seen:
            raise WorkloadError(source, f"params.flows[{i}]", f"{pair} is listed twice",
                                "list each flow once (raise message_bytes for a longer flow)")
        seen.add(tuple(pair))
    return [tuple(pair) for pair in flows]
