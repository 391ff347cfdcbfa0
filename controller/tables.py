"""The static switch tables: a pure function of the topology, neutral to the data plane.

Every switch gets:
- `my_usid`: the uSID it answers to (shift-and-forward when it is the active uSID);
- `routes`: next active uSID -> egress port and next-hop MAC;
- `ports`: each port's role and queue settings (`PortRole`): host-facing or fabric (no
  ECN for MRC's classes on the last hop; TRIMMED_LASTHOP when trimming there), the
  RED-like ECN thresholds, the trim threshold, the queue's limit, PFC's XOFF and XON,
  the DSCP a trim there writes and the priority queue's limit, in packets (full DATA
  frames, trimmed headers for the priority queue);
- `dscp_behaviour`: what the switch does with each DSCP (hosts/protocol.py
  CLASS_BEHAVIOUR, by the topology's traffic classes); every other DSCP is best effort.

The kernel target turns these into `ip -6 route` entries (controller/kernel.py) and the
eBPF program's maps (controller/ebpf_config.py), the BMv2 target into P4Runtime table
entries (controller/bmv2_entries.py). Both read the same objects, so a path that works
on one works on the other, and a packet is treated alike by both. The entries are
computed once and never change.
"""

from __future__ import annotations

from dataclasses import dataclass

from hosts import protocol
from topologies.model import Fabric, Switch

# RED's mark probability at its upper threshold, in 1/65536 (the switches' unit).
PROBABILITY_ONE = 1 << 16
# RED's "random" draws are a Weyl sequence: the n-th decision of a port draws
# n x WEYL_STEP mod 2^16, spread evenly over [0, 2^16) (2^16 / golden ratio, odd), so
# both data planes take the same decision for the same packet.
WEYL_STEP = 40503
# The lossless class's queue is this many times the data queue: deep enough that it
# never fills, since PFC pauses its senders first (the data planes never drop it).
LOSSLESS_QUEUE_FACTOR = 16


@dataclass(frozen=True)
class Route:
    usid: int  # the active uSID after the shift
    port: int  # egress port
    next_hop_mac: str
    next_hop: str  # the neighbour's node name (for logs)


@dataclass(frozen=True)
class PortRole:
    """One port of a switch: its role and its queue settings (packets of full frames)."""

    port: int
    mac: str
    peer: str
    host_facing: bool
    ecn_kmin: int  # RED-like ECN: no mark below ...
    ecn_kmax: int  # ... every ECT packet marked at or above ...
    ecn_pmax: int  # ... and in between with a probability rising to this (1/65536)
    trim_threshold: int  # trimmable data trimmed at or above
    queue: int  # the data queue's limit: tail drop at or above
    xoff: int  # PFC: lossless packets this port's ingress may queue before its peer pauses
    xon: int  # ... and below which it resumes
    dscp_trimmed: int  # the DSCP a trim on this port writes
    priority_limit: int  # the priority queue's limit, in trimmed headers

    @property
    def ecn_slope(self) -> int:
        """RED's mark probability per packet of backlog over Kmin, in 1/2^32: the P4
        switch takes p = slope x (backlog - Kmin) / 2^16, with no division at run
        time (0 for a step, Kmin = Kmax)."""
        if self.ecn_kmax == self.ecn_kmin:
            return 0
        return self.ecn_pmax * PROBABILITY_ONE // (self.ecn_kmax - self.ecn_kmin)


@dataclass(frozen=True)
class SwitchTables:
    switch: str
    my_usid: int
    routes: tuple[Route, ...]
    ports: tuple[PortRole, ...]
    dscp_behaviour: dict[int, int]  # DSCP -> behaviour, for the DSCPs the topology names
    trim_size_bytes: int  # frame bytes a trimmed packet keeps
    frame_bytes: int = protocol.DATA_FRAME_BYTES  # a full DATA frame: the unit of `ports`

    @property
    def entry_count(self) -> int:
        """Table entries this switch needs: one my-SID entry, the routes, two per port
        (its egress settings, and the PFC thresholds of its ingress) and one per traffic
        class."""
        return 1 + len(self.routes) + 2 * len(self.ports) + len(self.dscp_behaviour)


def switch_tables(fabric: Fabric, switch: Switch) -> SwitchTables:
    """A switch routes to each neighbour's uSID through the port facing it: a T0 to its
    hosts and to the T1s of its plane, a T1 to the T0s of its plane."""
    spec = fabric.spec
    ports = fabric.ports(switch.name)
    routes = tuple(
        Route(fabric.node(p.peer).usid, p.number, p.peer_mac, p.peer) for p in ports
    )
    roles = tuple(port_role(fabric, p) for p in ports)
    behaviour = {dscp: protocol.CLASS_BEHAVIOUR[cls]
                 for cls, dscp in enumerate(spec.traffic_classes)}
    return SwitchTables(switch.name, switch.usid, routes, roles, behaviour,
                        spec.trim_size_bytes, spec.data_frame_bytes)


def port_role(fabric: Fabric, port) -> PortRole:
    """A switch port's settings. ECN marks with RED between the topology's Kmin and
    Kmax (probability 1 at Kmax; Kmin = Kmax is a step); a port facing a host trims at
    the last hop's threshold, a port between switches at the fabric's (both from the
    fabric's BDP unless the topology sets them: topologies/scale.py); the lossless
    class's ingress pauses its peer past a quarter of the port's queue and lets it go
    below an eighth (docs/protocol.md "The RoCE baseline")."""
    spec = fabric.spec
    host_facing = port.tier == "host_t0"
    queue = fabric.link_params(port.tier).queue_pkts
    classes = spec.traffic_classes
    trimmed = protocol.TRIMMED_LASTHOP if host_facing and spec.trim_asymmetric \
        else protocol.TRIMMED
    xoff = max(2, queue // 4)
    return PortRole(port.number, port.mac, port.peer, host_facing,
                    ecn_kmin=spec.ecn_threshold_pkts, ecn_kmax=spec.ecn_kmax,
                    ecn_pmax=PROBABILITY_ONE,
                    trim_threshold=(spec.trim_lasthop if host_facing
                                    else spec.trim_threshold_pkts),
                    queue=queue, xoff=xoff, xon=xoff // 2, dscp_trimmed=classes[trimmed],
                    priority_limit=priority_limit(queue, spec.trim_size_bytes,
                                                  spec.data_frame_bytes))


def priority_limit(queue: int, trim_size_bytes: int, frame_bytes: int) -> int:
    """The priority queue's limit in trimmed headers: the data queue's buffer in bytes,
    as in a switch whose buffer is counted in bytes (`queue` full frames' worth)."""
    return queue * frame_bytes // trim_size_bytes


def lossless_queue(queue: int) -> int:
    """The lossless queue's real depth (packets), for a data queue of `queue`."""
    return queue * LOSSLESS_QUEUE_FACTOR


def all_tables(fabric: Fabric) -> dict[str, SwitchTables]:
    return {s.name: switch_tables(fabric, s) for s in fabric.switches}
