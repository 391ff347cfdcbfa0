"""Workloads as phases of transfers (pure): all-to-all, ring all-reduce, incast, transfer.

A phase is a list of transfers that start together; the next phase starts when every
transfer of the previous one has been received and verified, as in a synchronous
collective. Message ids are unique per (source, destination) across the workload.

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
    "incast": ("message_bytes", "receiver", "fan_in", "victim"),
    "transfer": ("src", "dst", "message_bytes", "count"),
}
WORKLOADS = tuple(PARAMS)
MAX_BYTES = 1 << 30  # per message: a run keeps every message in memory to verify it
MAX_COUNT = 1000  # messages of one `transfer` workload
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
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise WorkloadError(source, f"params.{key}", f"must be {what} from {low} to {high} "
                            f"(got {shown(value)})", FIX)
    return value


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
        nbytes = size("message_bytes", 256_000)
        return [[transfer(s, d, nbytes) for s in range(hosts) for d in range(hosts) if s != d]]
    if workload == "all-reduce":
        # Ring all-reduce: reduce-scatter then all-gather, 2(N-1) steps of one chunk each.
        chunk = max(1, size("data_bytes", 2_000_000) // hosts)
        return [[transfer(i, (i + 1) % hosts, chunk) for i in range(hosts)]
                for _ in range(2 * (hosts - 1))]
    if workload == "incast":
        nbytes = size("message_bytes", 500_000)
        receiver = host("receiver", 0)
        fan_in = _int(params, "fan_in", hosts - 1, 1, hosts - 1, "a number of senders", source)
        senders = [h for h in range(hosts) if h != receiver][:fan_in]
        phase = [transfer(s, receiver, nbytes) for s in senders]
        if "victim" in params:
            victim = params["victim"]
            if (not isinstance(victim, list) or len(victim) != 2
                    or not all(isinstance(h, int) and not isinstance(h, bool)
                               and 0 <= h < hosts for h in victim)
                    or victim[0] == victim[1]):
                raise WorkloadError(source, "params.victim", "must be [source, destination], "
                                    f"two different host indexes 0..{hosts - 1} "
                                    f"(got {shown(victim)})", "e.g. victim: [2, 1]")
            phase.append(transfer(victim[0], victim[1], nbytes, "victim"))
        return [phase]
    src, dst = host("src", 0), host("dst", hosts - 1)
    if src == dst:
        raise WorkloadError(source, "params.dst", f"must differ from params.src ({src})",
                            "pick two different hosts")
    nbytes = size("message_bytes", 4_000_000)
    count = _int(params, "count", 1, 1, MAX_COUNT, "a number of messages", source)
    return [[transfer(src, dst, nbytes) for _ in range(count)]]
