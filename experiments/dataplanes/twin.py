"""The single-plane twin of a multi-plane fabric, where the RoCE baseline runs, and which
fabric each transport of a run runs on.

The MRC paper compared MRC on a four-plane network with RoCE on a single-plane network
"as is common", with "the GPUs, NICs, switches, and aggregate bandwidth identical"
(section 5.2.7): RoCE gets one NIC port at the rate of all MRC's ports together. The
twin of a fabric is that network: the same hosts, racks and T1 numbers in one plane,
every link at `planes` times the rate, and every queue and marking threshold `planes`
times deeper, so that a port holds the same bytes as the planes' ports it replaces and
a threshold means the same queueing delay (`twin_of`). `2tier-1plane` is the twin of
`2tier-8plane`.

The RoCE transports (`roce`, `roce-8`, `roce-16`, `single-path` and their `-pfc`
variants) run on the twin; with `@planes` (`roce-8@planes`) on the multi-plane fabric
itself, one queue pair per NIC port in turn, for those who want to see RoCE there; MRC
runs on the multi-plane fabric (`fabric_of`). A run brings up one fabric at a time: the
multi-plane fabric for its MRC transports, then the twin for its RoCE ones, each under
the same fault timeline, mapped onto the twin by each fault kind (`on_twin`,
experiments/faults/kinds/): a link or switch is the twin's link or switch of the same
rack and T1 number, a NIC port the NIC's only port (`twin_steps`).
"""

from __future__ import annotations

import dataclasses

from experiments.faults import NotOnTwin, Step
from hosts.protocol import transport_spec
from topologies.model import Fabric, LinkParams, build_fabric


def twin_of(fabric: Fabric) -> Fabric:
    """The single-plane twin of `fabric` (itself when it has one plane already)."""
    spec = fabric.spec
    planes = spec.planes
    if planes == 1:
        return fabric

    def wider(link: LinkParams) -> LinkParams:
        return LinkParams(link.rate_mbit * planes, link.delay_ms, link.queue_pkts * planes)

    return build_fabric(dataclasses.replace(
        spec, name=f"{spec.name}-twin", planes=1, host_t0=wider(spec.host_t0),
        t0_t1=wider(spec.t0_t1), ecn_threshold_pkts=spec.ecn_threshold_pkts * planes,
        ecn_kmax_pkts=spec.ecn_kmax * planes,
        trim_threshold_pkts=spec.trim_threshold_pkts * planes,
        trim_lasthop_pkts=spec.trim_lasthop * planes))


def fabric_of(transport: str, fabric: Fabric) -> Fabric:
    """The fabric `transport` runs on in a run on `fabric`."""
    return twin_of(fabric) if transport_spec(transport).on_twin else fabric


def by_fabric(transports: tuple[str, ...], fabric: Fabric) -> list[tuple[Fabric, tuple]]:
    """The transports grouped by the fabric they run on, the multi-plane fabric first:
    one bring-up per group."""
    groups: dict[str, tuple[Fabric, list[str]]] = {}
    for transport in transports:
        on = fabric_of(transport, fabric)
        groups.setdefault(on.name, (on, []))[1].append(transport)
    order = sorted(groups.values(), key=lambda g: g[0].spec.planes, reverse=True)
    return [(on, tuple(names)) for on, names in order]


def twin_steps(steps: tuple[Step, ...], fabric: Fabric, twin: Fabric
               ) -> tuple[tuple[Step, ...], list[str]]:
    """The fault timeline on the twin, and one note per fault that has no counterpart
    there (left out, with the reason)."""
    if twin is fabric:
        return steps, []
    mapped, notes = [], []
    for step in steps:
        try:
            fault = step.fault.on_twin(fabric, twin)
        except NotOnTwin as why:
            if not step.up:
                notes.append(f"{step.fault.describe()}: not on the twin ({why})")
            continue
        mapped.append(dataclasses.replace(step, fault=fault))
    return tuple(mapped), notes
