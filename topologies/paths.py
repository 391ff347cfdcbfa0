"""The path catalogue and the entropy-value (EV) rule.

Between two hosts A and B the fabric offers, in every plane p:
- different racks: one path per T1 spine s:  T0(A,p) : T1(p,s) : T0(B,p) : B
- same rack: the direct path T0(p) : B, plus one per spine up and down again
  T0(p) : T1(p,s) : T0(p) : B

A path is named by a 32-bit entropy value (EV): a plane and a choice among that plane's
paths (the bit layout is a protocol fact, in hosts/protocol.py). The choice counts
modulo the number of paths, so any EV maps to a path and many EVs may share one (as in
MRC, where a connection keeps 128-256 EVs). The catalogue gives each path its canonical
EV (choice < paths per plane). Nothing per path needs storing but the EV: the
destination address follows by rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from hosts.protocol import ev_choice, ev_plane, make_ev
from topologies.addressing import usid_address
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
    choice = ev_choice(ev) % choices_per_plane(fabric, src, dst)
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


def all_paths(fabric: Fabric) -> list[Path]:
    """The catalogue of every ordered host pair."""
    n = len(fabric.hosts)
    return [path for a in range(n) for b in range(n) if a != b
            for path in catalogue(fabric, a, b)]
