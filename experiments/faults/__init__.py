"""Scripted faults: every kind a class (experiments/faults/kinds/), a scenario's faults a
timeline of their steps, played on a running fabric.

- `base.py`: what a fault kind is (`Fault`), a timeline `Step`, the registry `KINDS`;
- `fields.py`: reading one entry (names and roles resolved, one-line errors);
- `timeline.py`: a scenario's `faults:` list into steps (`parse_faults`);
- `player.py`: playing the steps in a background thread (`FaultInjector`);
- `kinds/`: the kinds; every module there is imported here, so adding a kind is
  adding a class.
"""

from __future__ import annotations

import importlib
import pkgutil

from experiments.faults import kinds as _kinds
from experiments.faults.base import KINDS, Env, Fault, FaultError, NotOnTwin, RouteLink, Step
from experiments.faults.player import FaultInjector, apply_before_start, log_entry
from experiments.faults.timeline import Timeline, not_applicable, parse_faults, read_timeline

for _module in pkgutil.iter_modules(_kinds.__path__):
    importlib.import_module(f"{_kinds.__name__}.{_module.name}")

__all__ = ["KINDS", "Env", "Fault", "FaultError", "NotOnTwin", "RouteLink", "Step",
           "FaultInjector", "apply_before_start", "log_entry", "Timeline", "not_applicable",
           "parse_faults", "read_timeline"]
