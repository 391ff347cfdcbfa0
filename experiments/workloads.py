"""Workloads as phases of transfers (pure): all-to-all, ring all-reduce, incast, transfer.

A phase is a list of transfers that start together; the next phase starts when every
transfer of the previous one has been received and verified, as in a synchronous
collective. Message ids are unique per (source, destination) across the workload.
"""

from __future__ import annotations

from dataclasses import dataclass

WORKLOADS = ("all-to-all", "all-reduce", "incast", "transfer")


class WorkloadError(ValueError):
    """Bad workload parameters. The message is one line."""


@dataclass(frozen=True)
class Transfer:
    src: int
    dst: int
    msg_id: int
    size: int
    role: str = "data"  # "victim" for the incast victim flow


def _size(params: dict, key: str, default: int) -> int:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1 << 30:
        raise WorkloadError(f"params.{key}: must be a byte count from 1 to 2^30 (got {value!r})")
    return value


def _host(params: dict, key: str, default: int, hosts: int) -> int:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < hosts:
        raise WorkloadError(f"params.{key}: must be a host index 0..{hosts - 1} (got {value!r})")
    return value


def phases(workload: str, params: dict, hosts: int) -> list[list[Transfer]]:
    next_id: dict[tuple[int, int], int] = {}

    def transfer(src: int, dst: int, size: int, role: str = "data") -> Transfer:
        msg_id = next_id.get((src, dst), 0)
        next_id[(src, dst)] = msg_id + 1
        return Transfer(src, dst, msg_id, size, role)

    if workload == "all-to-all":
        size = _size(params, "message_bytes", 256_000)
        return [[transfer(s, d, size) for s in range(hosts) for d in range(hosts) if s != d]]
    if workload == "all-reduce":
        # Ring all-reduce: reduce-scatter then all-gather, 2(N-1) steps of one chunk each.
        size = _size(params, "data_bytes", 2_000_000)
        chunk = max(1, size // hosts)
        return [[transfer(i, (i + 1) % hosts, chunk) for i in range(hosts)]
                for _ in range(2 * (hosts - 1))]
    if workload == "incast":
        size = _size(params, "message_bytes", 500_000)
        receiver = _host(params, "receiver", 0, hosts)
        senders = [h for h in range(hosts) if h != receiver][: params.get("fan_in", hosts - 1)]
        phase = [transfer(s, receiver, size) for s in senders]
        if "victim" in params:
            victim = params["victim"]
            if (not isinstance(victim, list) or len(victim) != 2
                    or not all(isinstance(h, int) and 0 <= h < hosts for h in victim)
                    or victim[0] == victim[1]):
                raise WorkloadError("params.victim: must be [source, destination] host indexes")
            phase.append(transfer(victim[0], victim[1], size, "victim"))
        return [phase]
    if workload == "transfer":
        src, dst = _host(params, "src", 0, hosts), _host(params, "dst", hosts - 1, hosts)
        if src == dst:
            raise WorkloadError("params.dst: must differ from params.src")
        size = _size(params, "message_bytes", 4_000_000)
        return [[transfer(src, dst, size) for _ in range(int(params.get("count", 1)))]]
    raise WorkloadError(f"workload: unknown {workload!r}; use one of {', '.join(WORKLOADS)}")
