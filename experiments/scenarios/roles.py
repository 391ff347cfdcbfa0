"""Nodes, links and planes named by role, so one scenario file fits every topology.

A scenario may name what it acts on by its name on one topology (`p2t1s1`, `h7`,
`plane: 3`) or by its role, which the run resolves on the topology at hand and prints:

- an index (`plane`, a T1's number, a rack, a host): a number, `first`, `last` or
  `middle` (the one at half the count, rounded down);
- a host: its name (`h3`), its index (`3`), an index word (`last`), or
  `{rack: R, index: I}` (the I-th host of rack R);
- a switch: its name, `{t1: S, plane: P}` (T1 number S of plane P) or
  `{t0: R, plane: P}` (the T0 of rack R in plane P);
- a link: its two ends (`[p0t0r0, p0t1s0]`, ends by role too: `[{t0: 0, plane: 0},
  {t1: 1, plane: 0}]`), `{uplink: S, rack: R, plane: P}` (the T0 of rack R to T1 number
  S of plane P) or `{host: H, plane: P}` (host H's port of plane P).

A role that cannot exist on the topology (T1 number 3 of a plane that has two) is a
`RoleError` saying what the topology has; the scenario layer turns it into its own
one-line error naming the field. Pure: nothing here runs anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from topologies.errors import shown
from topologies.model import Fabric, Link, Switch

WORDS = ("first", "middle", "last")


class RoleError(ValueError):
    """A name or role that the topology does not have: `problem` and `fix` for one line."""

    def __init__(self, problem: str, fix: str):
        super().__init__(f"{problem}; fix: {fix}")
        self.problem, self.fix = problem, fix


@dataclass(frozen=True)
class Resolved:
    """What a role named on this topology, and whether it was a role at all (a plain
    name needs no mention in the run's output)."""

    value: object
    by_role: bool


def index(value: object, count: int, what: str) -> int:
    """A number from 0 to count-1, or first, middle or last."""
    if isinstance(value, str) and value in WORDS:
        return {"first": 0, "middle": count // 2, "last": count - 1}[value]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
        raise RoleError(f"must be {what} 0..{count - 1} (got {shown(value)}), or one of "
                        f"{', '.join(WORDS)}", f"this topology has {count}")
    return value


def plane(fabric: Fabric, value: object) -> Resolved:
    planes = fabric.spec.planes
    return Resolved(index(value, planes, "a plane"), isinstance(value, str))


def host(fabric: Fabric, value: object) -> Resolved:
    """A host by name, index, index word or {rack, index}."""
    hosts = fabric.hosts
    if isinstance(value, str) and value not in WORDS:
        if value not in {h.name for h in hosts}:
            raise RoleError(f"{shown(value)} is not a host of {fabric.name}",
                            f"use h0..h{len(hosts) - 1}, first, last, or {{rack: R, index: I}}")
        return Resolved(fabric.node(value), False)
    if isinstance(value, dict):
        _only(value, ("rack", "index"), "a host by role")
        spec = fabric.spec
        rack = index(value.get("rack"), spec.racks, "a rack")
        within = index(value.get("index", 0), spec.hosts_per_rack, "a host's index in its rack")
        return Resolved(fabric.host(rack * spec.hosts_per_rack + within), True)
    return Resolved(fabric.host(index(value, len(hosts), "a host")), isinstance(value, str))


def switch(fabric: Fabric, value: object, roles: tuple[str, ...] = ("t0", "t1")) -> Resolved:
    """A switch by name, {t1: S, plane: P} or {t0: R, plane: P}; `roles` limits which."""
    if isinstance(value, str):
        node = fabric.find(value)
        if not isinstance(node, Switch) or node.role not in roles:
            example = next(s.name for s in reversed(fabric.switches) if s.role in roles)
            what = "switch" if len(roles) == 2 else roles[0].upper()
            raise RoleError(f"{shown(value)} is not a {what} of {fabric.name}",
                            f"e.g. {example}, or {_switch_roles(roles)}")
        return Resolved(node, False)
    if not isinstance(value, dict) or len(set(value) & {"t0", "t1"}) != 1:
        raise RoleError(f"{shown(value)} names no switch",
                        f"write a name or {_switch_roles(roles)}")
    role = "t1" if "t1" in value else "t0"
    if role not in roles:
        raise RoleError(f"a {role.upper()} cannot be named here", f"use {_switch_roles(roles)}")
    _only(value, (role, "plane"), "a switch by role")
    spec = fabric.spec
    p = index(value.get("plane", 0), spec.planes, "a plane")
    if role == "t1":
        return Resolved(fabric.t1(p, index(value["t1"], spec.t1_per_plane, "a T1 index")), True)
    return Resolved(fabric.t0(p, index(value["t0"], spec.racks, "a rack")), True)


def link(fabric: Fabric, value: object, alternative: str = "") -> Resolved:
    """A link by its two ends (names or roles), {uplink, rack, plane} or {host, plane}.
    `alternative` ends the "must name two linked nodes of ..." of a mistake: what else
    the field may be."""
    if isinstance(value, dict):
        spec = fabric.spec
        if "uplink" in value:
            _only(value, ("uplink", "rack", "plane"), "an uplink by role")
            p = index(value.get("plane", 0), spec.planes, "a plane")
            a = fabric.t0(p, index(value.get("rack", 0), spec.racks, "a rack"))
            b = fabric.t1(p, index(value["uplink"], spec.t1_per_plane, "a T1 index"))
        elif "host" in value:
            _only(value, ("host", "plane"), "a host link by role")
            a = host(fabric, value["host"]).value
            b = fabric.t0(index(value.get("plane", 0), spec.planes, "a plane"), a.rack)
        else:
            raise RoleError(f"{shown(value)} names no link", "write [node, node], "
                            "{uplink: S, rack: R, plane: P} or {host: H, plane: P}")
        return Resolved(_between(fabric, a.name, b.name), True)  # linked by construction
    last = fabric.links[-1]
    wrong = RoleError(f"must name two linked nodes of {fabric.name}{alternative} "
                      f"(got {shown(value)})", f"e.g. [{last.a}, {last.b}], or "
                      "{uplink: S, rack: R, plane: P}")
    if not isinstance(value, list) or len(value) != 2:
        raise wrong
    try:
        ends = [node(fabric, end) for end in value]
    except RoleError:
        raise wrong from None
    found = _between(fabric, ends[0].value.name, ends[1].value.name)
    if found is None:
        raise wrong
    return Resolved(found, any(e.by_role for e in ends))


def node(fabric: Fabric, value: object) -> Resolved:
    """Any host or switch, by name or role."""
    if isinstance(value, dict) and ("t0" in value or "t1" in value):
        return switch(fabric, value)
    if isinstance(value, str) and fabric.find(value) is not None:
        return Resolved(fabric.node(value), False)
    return host(fabric, value)


def _between(fabric: Fabric, a: str, b: str) -> Link | None:
    return next((lk for lk in fabric.links if {lk.a, lk.b} == {a, b}), None)


def _only(value: dict, keys: tuple[str, ...], what: str) -> None:
    extra = sorted(set(map(str, value)) - set(keys))
    if extra:
        raise RoleError(f"{extra[0]!r} is not a field of {what}", f"use {', '.join(keys)}")


def _switch_roles(roles: tuple[str, ...]) -> str:
    forms = {"t1": "{t1: S, plane: P}", "t0": "{t0: R, plane: P}"}
    return " or ".join(forms[r] for r in roles)


def describe(value: object) -> str:
    """A role as the scenario wrote it, in one line (for the run's output)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(describe(v) for v in value) + "]"
    return str(value)
