"""One fault entry of a scenario as it is read: typed fields, roles resolved, one-line errors.

A kind's `read`/`steps` (experiments/faults/kinds/) asks its `Entry` for each field
(`link()`, `switch()`, `host()`, `plane()`, `probability()`, the timing fields); every
mistake is a `FaultError` naming the file and the field (`faults[2].plane`), and every
name given by role (experiments/scenarios/roles.py) is noted in `resolved`, so the run can print
what it chose.

It needs nothing of base.py (what a fault kind is), which reads its entries here.
"""

from __future__ import annotations

import math

from experiments.scenarios import roles
from topologies.errors import UserError, shown
from topologies.model import Fabric, Host, Link, Switch

TIMING_FIELDS = ("at_s", "down_s", "count", "every_s")
MAX_TIME_S = 3600.0  # no scenario runs longer than an hour
FIX = "see the fault kinds and their fields in docs/running.md"


class FaultError(UserError):
    """A fault entry is invalid. The message is one line."""


def checked_seconds(value: object, where: str, source: str, positive: bool = False) -> float:
    """A number of seconds from 0 (or above 0) up to MAX_TIME_S, or a FaultError."""
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value > MAX_TIME_S
            or (value <= 0 if positive else value < 0)):
        low = "above 0" if positive else "from 0"
        raise FaultError(source, where, f"must be a number of seconds {low} up to "
                         f"{MAX_TIME_S:g} (got {shown(value)})", FIX)
    return float(value)


class Entry:
    def __init__(self, data: dict, kind: str, fabric: Fabric, source: str, where: str,
                 horizon_s: float | None = None, resolved: list[str] | None = None):
        self.data, self.kind, self.fabric = data, kind, fabric
        self.source, self.where, self.horizon_s = source, where, horizon_s
        self.resolved = resolved if resolved is not None else []

    def error(self, name: str, problem: str, fix: str = FIX) -> FaultError:
        return FaultError(self.source, f"{self.where}.{name}" if name else self.where,
                          problem, fix)

    def get(self, name: str, default=None):
        return self.data.get(name, default)

    def has(self, name: str) -> bool:
        return name in self.data

    # ------------------------------------------------------------ names and roles
    def _role(self, name: str, resolve, value=None, **kwargs):
        value = self.data.get(name) if value is None else value
        try:
            found = resolve(self.fabric, value, **kwargs)
        except roles.RoleError as err:
            raise self.error(name, err.problem, err.fix) from None
        if found.by_role:
            self.resolved.append(f"{self.where}.{name}: {roles.describe(value)} is "
                                 f"{_name(found.value)}")
        return found.value

    def link(self, name: str = "link", alternative: str = "") -> Link:
        return self._role(name, roles.link, alternative=alternative)

    def switch(self, name: str = "switch", kinds: tuple[str, ...] = ("t0", "t1")) -> Switch:
        return self._role(name, roles.switch, roles=kinds)

    def host(self, name: str = "host", value=None) -> Host:
        return self._role(name, roles.host, value)

    def plane(self, name: str = "plane", value=None) -> int:
        return self._role(name, roles.plane, value)

    def spine(self, name: str = "spine") -> int:
        try:
            return roles.index(self.data.get(name), self.fabric.spec.t1_per_plane,
                               "a T1 index")
        except roles.RoleError as err:
            raise self.error(name, err.problem, err.fix) from None

    # ------------------------------------------------------------ values
    def probability(self) -> float:
        return self.fraction("probability", "e.g. probability: 0.01 for 1%")

    def fraction(self, name: str, example: str) -> float:
        """A number above 0 up to 1 (a probability, a share of a link's rate)."""
        value = self.data.get(name)
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value) or not 0 < value <= 1):
            raise self.error(name, f"must be a number above 0 up to 1 "
                             f"(got {shown(value)})", example)
        return float(value)

    def seconds(self, name: str, default: float | None = None, positive: bool = False) -> float:
        return checked_seconds(self.data.get(name, default), f"{self.where}.{name}",
                               self.source, positive)

    def whole(self, name: str, default: int, low: int, most: int, fix: str) -> int:
        value = self.data.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= most:
            raise self.error(name, f"must be a whole number from {low} to {most} "
                             f"(got {shown(value)})", fix)
        return value

    # ------------------------------------------------------------ timing
    def before_start(self, allowed: bool) -> bool:
        """`before_start` (the timeline's parser refused it where not `allowed`)."""
        value = self.data.get("before_start", False)
        if not isinstance(value, bool):
            raise self.error("before_start", f"must be true or false (got {shown(value)})",
                             "write before_start: true, or leave it out")
        return value and allowed

    def start(self, early: bool) -> float:
        """`at_s`: required, except for a fault in place before the start (then 0)."""
        at = self.seconds("at_s", 0.0 if early else None)
        if early and at != 0:
            raise self.error("at_s", f"a fault in place before the start has no start time "
                             f"(got {shown(self.data['at_s'])})",
                             "leave at_s out, or drop before_start")
        return at

    def down_s(self, open_ended: bool) -> float | None:
        """How long the fault lasts: `down_s`, or None (the rest of the run) where the
        kind allows it."""
        if self.data.get("down_s") is None and open_ended:
            return None
        return self.seconds("down_s", positive=True)

    def check_horizon(self, last: float, count: int) -> None:
        """The last start must fall before the scenario's timeout, or it never happens."""
        if self.horizon_s is not None and last >= self.horizon_s:
            what = "it starts" if count == 1 else "its last repetition starts"
            raise self.error("at_s" if count == 1 else "count",
                             f"{what} at {last:g} s, not before timeout_s "
                             f"({self.horizon_s:g} s), so it would never happen",
                             "start it earlier, repeat it less, or raise timeout_s")


def _name(value: object) -> str:
    if isinstance(value, Link):
        return f"{value.a}-{value.b}"
    return getattr(value, "name", str(value))
