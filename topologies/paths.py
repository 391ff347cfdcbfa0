"""The path catalogue and the entropy-value (EV) rule.

Between two hosts A and B the fabric offers, in every plane p:
- different racks: one path per T1 spine s:  T0(A,p) : T1(p,s) : T0(B,p) : B
- same rack: the direct path T0(p) : B, plus one per spine up and down again
  T0(p) : T1(p,s) : T0(p) : B (a detour: it shares both host links and the T0 with the
  direct path, and loads two T0 uplinks, so transports keep to the shortest paths,
  `shortest_choices`, unless told otherwise)

A path is named by a 32-bit entropy value (EV): a plane and a choice among that plane's
paths (the bit layout is a protocol fact, in hosts/protocol.py). The choice counts
modulo the number of paths (`path_index`, the one home of that rule), so any EV maps
to a path and many EVs may share one (as in MRC, where a connection keeps 128-256
EVs). The catalogue gives each path its canonical EV (choice < paths per plane).
Nothing per path needs storing but the EV: the destination address follows by rule.

The RoCE baseline does not choose paths: switches hash its flows (`ecmp_path`). Each
switch on the way picks among its equal-cost next hops on shortest paths by a hash of
the packet's 5-tuple: a source T0 among the plane's T1s for another rack, nothing to
pick for the same rack (the T0 delivers it) or on the way down. The hash is
`ecmp_hash`: CRC-32 of the switch's uSID and the 5-tuple (source and destination
addresses, UDP source and destination ports, protocol 17), modulo the live next hops
(resilient: a flow moves only when its own next hop is gone). The fabric's switches
forward by static uSID tables, so the sender asks this rule and writes the path it
gives into the destination address: the same path, for the same 5-tuple, as the
switches' hash would take.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv6Address

from hosts.protocol import ROCE_UDP_PORT, ev_choice, ev_plane, make_ev
from topologies.addressing import host_address, usid_address
from topologies.model import Fabric


@dataclass(frozen=True)
class Path:
    src: int  # host index
    dst: int
    plane: int
    spine: int | None  # None for the direct same-rack path
    usids: tuple[int, ...]
    ev: int

    @property
    def address(self) -> str:
        return usid_address(self.usids)

    @property
    def label(self) -> str:
        via = "direct" if self.spine is None else f"spine {self.spine}"
        return f"h{self.src}->h{self.dst} plane {self.plane} {via}"


def choices_per_plane(fabric: Fabric, src: int, dst: int) -> int:
    """How many distinct paths one plane offers between two hosts."""
    same_rack = fabric.host(src).rack == fabric.host(dst).rack
    return fabric.spec.t1_per_plane + (1 if same_rack else 0)


def shortest_choices(fabric: Fabric, src: int, dst: int) -> tuple[int, ...]:
    """The indices, within a plane, of the shortest paths between two hosts: the
    direct path (index 0) in the same rack, every spine between racks."""
    if fabric.host(src).rack == fabric.host(dst).rack:
        return (0,)
    return tuple(range(choices_per_plane(fabric, src, dst)))


def path_index(ev: int, paths_per_plane: int) -> int:
    """The index, within its plane, of the path an EV names: its choice modulo the
    plane's path count."""
    return ev_choice(ev) % paths_per_plane


def path_for_ev(fabric: Fabric, src: int, dst: int, ev: int) -> Path:
    """The path an EV names between two hosts. Raises ValueError for a plane that does
    not exist or for src == dst."""
    if src == dst:
        raise ValueError("a path needs two different hosts")
    plane = ev_plane(ev)
    if plane >= fabric.spec.planes:
        raise ValueError(f"EV {ev:#010x} names plane {plane}; the fabric has "
                         f"{fabric.spec.planes}")
    a, b = fabric.host(src), fabric.host(dst)
    choice = path_index(ev, choices_per_plane(fabric, src, dst))
    t0a, t0b = fabric.t0(plane, a.rack).usid, fabric.t0(plane, b.rack).usid
    if a.rack == b.rack:
        if choice == 0:
            return Path(src, dst, plane, None, (t0a, b.usid), ev)
        spine = choice - 1
    else:
        spine = choice
    t1 = fabric.t1(plane, spine).usid
    return Path(src, dst, plane, spine, (t0a, t1, t0b, b.usid), ev)


def catalogue(fabric: Fabric, src: int, dst: int) -> list[Path]:
    """Every distinct path from src to dst, plane by plane, with canonical EVs."""
    n = choices_per_plane(fabric, src, dst)
    return [path_for_ev(fabric, src, dst, make_ev(p, c))
            for p in range(fabric.spec.planes) for c in range(n)]


def path_nodes(fabric: Fabric, usids: tuple[int, ...], src: str) -> list[str]:
    """The nodes a path from host `src` through `usids` visits, by name, in order."""
    by_usid = {n.usid: n.name for n in (*fabric.hosts, *fabric.switches)}
    return [src] + [by_usid[u] for u in usids]


def all_paths(fabric: Fabric) -> list[Path]:
    """The catalogue of every ordered host pair."""
    n = len(fabric.hosts)
    return [path for a in range(n) for b in range(n) if a != b
            for path in catalogue(fabric, a, b)]


def ecmp_hash(seed: int, src: str, dst: str, sport: int, dport: int = ROCE_UDP_PORT) -> int:
    """A switch's ECMP hash of a UDP flow: CRC-32 of its uSID (`seed`) and the
    5-tuple (source and destination IPv6 addresses, ports, protocol 17)."""
    key = (seed.to_bytes(2, "big") + IPv6Address(src).packed + IPv6Address(dst).packed
           + sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + b"\x11")
    return zlib.crc32(key)


def ecmp_candidates(fabric: Fabric, src: int, dst: int, plane: int) -> list[Path]:
    """The shortest paths between two hosts in one plane: the direct path in the same
    rack, one per T1 between racks."""
    return [path_for_ev(fabric, src, dst, make_ev(plane, c))
            for c in shortest_choices(fabric, src, dst)]


def ecmp_path(fabric: Fabric, src: int, dst: int, plane: int, sport: int,
              usable: Callable[[Path], bool] = lambda path: True) -> Path | None:
    """The path the switches' ECMP takes for the flow (src, dst, `sport`) in `plane`
    (module docstring), among the `usable` ones (those routing still offers); None if
    routing offers none."""
    candidates = ecmp_candidates(fabric, src, dst, plane)
    if len(candidates) == 1:
        return candidates[0] if usable(candidates[0]) else None
    seed = fabric.t0(plane, fabric.host(src).rack).usid
    h = ecmp_hash(seed, host_address(src), host_address(dst), sport)
    home = candidates[h % len(candidates)]
    if usable(home):
        return home
    alive = [p for p in candidates if usable(p)]
    return alive[h % len(alive)] if alive else None
