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
the same fault timeline, mapped onto the twin (`twin_steps`).

A fault must take the same share of the capacity, and cut off the same hosts, on the
twin as on the planes. A link of the twin stands for `planes` links (the same host, or
the same rack and T1 number, in every plane), so a fault of the planes is a share of
the twin's links (each kind's `on_twin`, experiments/faults/kinds/capacity.py
`TwinShare`): a link, switch or NIC port down in one plane takes 1/planes of the rate
of each twin link it touches (k of a twin link's planes: k/planes), a `rate-cut` that
routing does not see; the twin link goes down only when all `planes` of its links are
out. What is lost silently (loss, a one-way cut, a blackhole) is the same share of the
twin link's packets, and a gray loss the same share of the twin path's or T1's. At each
step of the timeline the shares of the faults down then are added up into the twin's
settings (`twin_settings`), and the steps set what changed. A kind with no counterpart
there raises `NotOnTwin` and is left out with its reason (`deny`: queue pairs have no
EVs).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from fractions import Fraction

from experiments.faults import Fault, NotOnTwin, Step
from experiments.faults.kinds.capacity import RateCut, TwinShare
from experiments.faults.kinds.link import LinkDown
from experiments.faults.kinds.loss import GrayLoss, Loss
from hosts.protocol import transport_spec
from topologies.addressing import t1_name
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
    there (left out, with the reason).

    A fault whose `on_twin` is a `TwinShare` changes the twin's settings: each of its
    steps becomes the steps that set what changed, at the same time (new settings first,
    then those that end: a link coming back from down to a rate cut gets its rate before
    it comes up). A fault whose `on_twin` is a fault of the twin is played as it is."""
    if twin is fabric:
        return steps, []
    mapped, notes = [], []
    held: dict[tuple, TwinShare] = {}  # the shares of the faults down now, by their key
    settings: dict[tuple, Fault] = {}
    for step in steps:
        try:
            fault = step.fault.on_twin(fabric, twin)
        except NotOnTwin as why:
            if not step.up:
                notes.append(f"{step.fault.describe()}: not on the twin ({why})")
            continue
        if not isinstance(fault, TwinShare):
            mapped.append(dataclasses.replace(step, fault=fault))
            continue
        if step.up:
            held.pop(step.fault.key(), None)
        else:
            held[step.fault.key()] = fault
        now = twin_settings(held.values())
        mapped += [Step(step.t, False, setting, step.before_start)
                   for key, setting in now.items() if settings.get(key) != setting]
        mapped += [Step(step.t, True, setting, step.before_start)
                   for key, setting in settings.items() if key not in now]
        settings = now
    return tuple(mapped), notes


def _twin_rate(a: str, b: str, planes: int, planes_out: set[int],
               slowed: dict[int, Fraction]) -> Fault:
    """The twin link a-b with its planes' links `planes_out` out and `slowed` kept at a
    share of their rate: down when nothing is left, else a `rate-cut` to the sum of
    what each plane keeps (in planes-ths when no link is slowed, as 7/8)."""
    kept = [Fraction(0) if p in planes_out else slowed.get(p, Fraction(1))
            for p in range(planes)]
    if not any(kept):
        return LinkDown(a, b)
    scale = math.lcm(*(k.denominator for k in kept))
    return RateCut(a, b, int(sum(k * scale for k in kept)), planes * scale)


def twin_settings(shares: Iterable[TwinShare]) -> dict[tuple, Fault]:
    """The faults that put the twin where `shares` (of the faults down at once) leave it,
    by what each acts on (`Fault.key`):

    - a twin link with k of its `planes` links out: a `rate-cut` to (planes - k)/planes,
      or `link-down` both ways when k is `planes`; a plane's link slowed (`link-rate`)
      keeps its share of that plane's part;
    - a direction of a twin link that loses packets: a `loss` of the mean, over its
      planes still up, of what each plane's link loses (several losses of one plane's
      link compound); none on a link that is down;
    - a gray loss: the mean over all planes of what each plane's path or T1 loses. The
      eBPF program takes only the longest prefix that matches a packet, so in a plane
      where the path has no gray loss of its own the twin's path holds its T1's."""
    shares = list(shares)
    if not shares:
        return {}
    planes = shares[0].planes
    out: dict[tuple[str, str], set[int]] = {}
    kept: dict[tuple[str, str], dict[int, float]] = {}  # direction -> plane -> share kept
    gray: dict[tuple, dict[int, float]] = {}  # twin path or T1 -> plane -> share kept
    slowed: dict[tuple[str, str], dict[int, Fraction]] = {}  # link -> plane -> rate kept
    for share in shares:
        for a, b, plane in share.down:
            out.setdefault((a, b), set()).add(plane)
        for a, b, plane, kept_share in share.slowed:
            slowed.setdefault((a, b), {})[plane] = kept_share
        for a, b, plane, p in share.lost:
            by_plane = kept.setdefault((a, b), {})
            by_plane[plane] = by_plane.get(plane, 1.0) * (1 - p)
        for target, plane, p in share.gray:
            by_plane = gray.setdefault(target, {})
            by_plane[plane] = by_plane.get(plane, 1.0) * (1 - p)
    found: list[Fault] = []
    for a, b in sorted({*out, *slowed}):
        found.append(_twin_rate(a, b, planes, out.get((a, b), set()), slowed.get((a, b), {})))
    for (a, b), by_plane in sorted(kept.items()):
        planes_out = out.get((a, b)) or out.get((b, a)) or set()
        live = [plane for plane in range(planes) if plane not in planes_out]
        lost = math.fsum(1 - by_plane.get(plane, 1.0) for plane in live) / len(live) \
            if live else 0.0
        if lost > 0:
            found.append(Loss(lost, ((a, b),)))
    for target, by_plane in sorted(gray.items()):
        if len(target) == 1:
            lost = math.fsum(1 - left for left in by_plane.values()) / planes
            found.append(GrayLoss(lost, switch=target[0]))
            continue
        through = gray.get((t1_name(0, target[3]),), {})
        lost = math.fsum(1 - by_plane.get(plane, through.get(plane, 1.0))
                         for plane in range(planes)) / planes
        found.append(GrayLoss(lost, path=target))
    return {fault.key(): fault for fault in found}
