"""Scenario files: what a run does on the network once it is up, checked in one step.

A scenario is a YAML file in experiments/scenarios/ (or any path):

    name: link-flap
    description: ...
    workload: all-reduce          # pathcheck | all-to-all | all-reduce | incast | transfer
    params: {data_bytes: 4000000} # the workload's parameters (experiments/scenarios/workloads.py)
    transports: [mrc, single-path]
    timeout_s: 60                 # per transport; unfinished transfers count as failed
    protocol: {}                  # overrides of the agents' protocol settings
    faults:                       # experiments/faults/ (a module per kind)
      - {kind: link-flap, link: [p0t0r0, p0t1s0], at_s: 1.0, down_s: 0.5, count: 4}
    check_paths: false            # check every path first, as pathcheck does

`load_scenario(path, fabric)` reads the file and checks every field against the
topology (`check_scenario` does the checking, also for scenarios built in code): the
workload's transfers, the fault timeline, the protocol overrides, the transports.
The `Scenario` it returns holds all of them parsed, so nothing is parsed again once
the network is built; every mistake is a `ScenarioError`, `WorkloadError` or
`FaultError` (all `UserError`s) naming the file and the field.

Hosts, switches, links and planes may be named by role (experiments/scenarios/roles.py: `plane:
last`, `switch: {t1: 1, plane: last}`, `victim: auto`), so that one file fits every
topology; `Scenario.resolved` says what each role named, for the run to print. A
scenario that means nothing on a topology (a NIC port loss where NICs have one port)
is `NotApplicable`, with the reason.

`pathcheck` sends datagrams along every path of the catalogue and takes no transports,
faults, protocol or timeout_s.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from experiments.faults import Step, not_applicable, read_timeline
from experiments.faults.base import MAX_TIME_S
from experiments.scenarios.workloads import WORKLOADS as TRANSFER_WORKLOADS
from experiments.scenarios.workloads import Transfer, phases
from hosts.config import ConfigError, ProtocolConfig
from hosts.endpoint import link_adjusted
from hosts.protocol import TRANSPORTS
from topologies.errors import UserError, shown
from topologies.model import Fabric, read_yaml

SCENARIO_DIR = Path(__file__).resolve().parent  # the shipped scenarios sit beside this module
WORKLOADS = ("pathcheck", *TRANSFER_WORKLOADS)
FIELDS = ("name", "description", "workload", "params", "transports", "timeout_s",
          "protocol", "faults", "check_paths")
PATHCHECK_PARAMS = ("copies", "timeout_s")
MAX_COPIES = 10
MAX_CHECK_WAIT_S = 60.0
# The name is part of the results folder's name: no separators, nothing to escape.
NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ScenarioError(UserError):
    """A scenario file is missing or invalid. The message is one line."""


class NotApplicable(ScenarioError):
    """A valid scenario that means nothing on this topology; the message says why."""


@dataclass(frozen=True)
class Scenario:
    """A scenario file checked against one fabric: everything a run needs, parsed."""

    name: str
    workload: str
    source: str
    description: str = ""
    params: dict = field(default_factory=dict)  # as written, for the summary
    plan: tuple[tuple[Transfer, ...], ...] = ()  # the workload's phases; () for pathcheck
    transports: tuple[str, ...] = ()
    timeout_s: float = 60.0
    protocol: dict = field(default_factory=dict)  # checked overrides of ProtocolConfig
    faults: tuple[Step, ...] = ()  # the expanded fault timeline
    resolved: tuple[str, ...] = ()  # what each name given by role resolved to
    check_copies: int = 2  # pathcheck: rounds of datagrams per path
    check_wait_s: float = 3.0  # pathcheck: how long receivers wait for the last ones
    check_paths: bool = False  # a workload: check every path first (the main job's showcase)
    data_scale: float = 1.0  # what the plan's byte counts were multiplied by (scaled())
    time_dilation: float = 1.0  # how many times slower its clock runs (dilated())


def scaled(scenario: Scenario, factor: float) -> Scenario:
    """`scenario` with every transfer `factor` times its size (at least a byte): on a
    fabric whose links run at `factor` of the topology's rate, the same run in the same
    time, each fault at the same point of the transfers."""
    if factor >= 1.0:
        return scenario
    plan = tuple(tuple(dataclasses.replace(t, size=max(1, round(t.size * factor)))
                       for t in phase) for phase in scenario.plan)
    return dataclasses.replace(scenario, plan=plan, data_scale=factor)


# The protocol's delays that belong to the network's control plane rather than to a
# transport: how long routing takes to move a baseline's traffic off a failure. They are
# seconds of the scenario, as its faults are; a transport's own timers follow the link
# rate already (hosts/endpoint.py `link_adjusted`).
ROUTING_DELAYS = ("reconvergence_s", "local_failover_s")


def dilated(scenario: Scenario, factor: float) -> Scenario:
    """`scenario` with its clock `factor` times slower (time dilation), for links that
    run at 1/`factor` of the topology's rate: every transfer keeps its size, and every
    time the scenario gives (each fault step, the timeout, a flow's start, the
    baselines' routing delays) is `factor` times later, so the whole run keeps its
    proportions in round trips and frames, and lasts `factor` times as long."""
    if factor <= 1.0:
        return scenario
    plan = tuple(tuple(dataclasses.replace(t, start_s=t.start_s * factor) for t in phase)
                 for phase in scenario.plan)
    faults = tuple(dataclasses.replace(step, t=step.t * factor) for step in scenario.faults)
    config = ProtocolConfig.with_overrides(scenario.protocol)
    protocol = dict(scenario.protocol, **{name: getattr(config, name) * factor
                                          for name in ROUTING_DELAYS})
    return dataclasses.replace(scenario, plan=plan, faults=faults, protocol=protocol,
                               timeout_s=scenario.timeout_s * factor,
                               time_dilation=factor)


def scale_note(factor: float) -> str:
    """What a run says of transfers `scaled` by `factor`."""
    return (f"every transfer at {factor:.3g} of its size: the links run at that share of "
            "the topology's rate")


def available_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def scenario_path(name_or_path: str) -> Path:
    """`SCENARIO=` takes a name from experiments/scenarios/ or a path to a file."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml") and "/" not in name_or_path:
        path = SCENARIO_DIR / f"{name_or_path}.yaml"
    return path


def load_scenario(name_or_path: str, fabric: Fabric) -> Scenario:
    """Read a scenario and check all of it against `fabric`; raises a UserError."""
    path = scenario_path(name_or_path)
    source = str(path)
    if not path.is_file():
        raise ScenarioError(source, "SCENARIO", "no such scenario file",
                            f"use one of: {', '.join(available_scenarios())}, or a path")
    return check_scenario(read_yaml(path, ScenarioError), source, fabric, default_name=path.stem)


def check_scenario(data: object, source: str, fabric: Fabric,
                   default_name: str = "scenario") -> Scenario:
    """Check a scenario's fields, as read from YAML, against `fabric`; raises a
    UserError naming `source`. Suites of experiments that build their scenarios in
    code (experiments/paper/replay.py) check them here, as a file is checked."""
    if not isinstance(data, dict):
        raise ScenarioError(source, "document", "must be a mapping of fields",
                            "start from experiments/scenarios/link-flap.yaml")
    unknown = sorted(set(map(str, data)) - set(FIELDS))
    if unknown:
        raise ScenarioError(source, unknown[0], "unknown field", f"use only {', '.join(FIELDS)}")
    workload = data.get("workload")
    if workload not in WORKLOADS:
        raise ScenarioError(source, "workload", f"unknown workload {shown(workload)}",
                            f"use one of: {', '.join(WORKLOADS)}")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ScenarioError(source, "name", f"must be 1-64 letters, digits, '-' or '_' "
                            f"(got {shown(name)})", "e.g. name: link-flap")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ScenarioError(source, "description", f"must be text (got {shown(description)})",
                            "write description: one line of text")
    params = _mapping(data, "params", source)
    common = {"name": name, "workload": workload, "source": source,
              "description": description, "params": params}
    if workload == "pathcheck":
        return _pathcheck(data, params, common)

    timeout = data.get("timeout_s", 60.0)
    if (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
            or not 0 < timeout <= MAX_TIME_S):
        raise ScenarioError(source, "timeout_s", f"must be a number of seconds above 0 up to "
                            f"{MAX_TIME_S:g} (got {shown(timeout)})", "e.g. timeout_s: 60")
    transports = data.get("transports", ["mrc", "single-path"])
    if (not isinstance(transports, list) or not transports
            or not all(isinstance(t, str) and t in TRANSPORTS for t in transports)
            or len(set(transports)) != len(transports)):
        raise ScenarioError(source, "transports", f"must be a list of different transports "
                            f"from {', '.join(TRANSPORTS)} (got {shown(transports)})",
                            "e.g. transports: [mrc, single-path]")
    reason = not_applicable(data.get("faults"), fabric)
    if reason:
        raise NotApplicable(source, "faults", f"not applicable on {fabric.name}: {reason}",
                            "run it on a topology where it means something (docs/running.md)")
    check_paths = data.get("check_paths", False)
    if not isinstance(check_paths, bool):
        raise ScenarioError(source, "check_paths", f"must be true or false (got "
                            f"{shown(check_paths)})", "e.g. check_paths: true")
    resolved: list[str] = []
    plan = phases(workload, params, fabric, source, resolved)
    timeline = read_timeline(data.get("faults"), fabric, source, horizon_s=float(timeout))
    return Scenario(**common, plan=tuple(map(tuple, plan)), transports=tuple(transports),
                    timeout_s=float(timeout), protocol=_protocol(data, source, fabric),
                    faults=tuple(timeline.steps),
                    resolved=tuple(resolved + timeline.resolved), check_paths=check_paths)


def _mapping(data: dict, key: str, source: str) -> dict:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ScenarioError(source, key, f"must be a mapping (got {shown(value)})",
                            f"write {key}: {{name: value}}")
    return value


def _protocol(data: dict, source: str, fabric: Fabric) -> dict:
    overrides = _mapping(data, "protocol", source)
    for key, value in overrides.items():
        # YAML's .nan and .inf would slip through range checks that compare.
        if isinstance(value, float) and not math.isfinite(value):
            raise ScenarioError(source, f"protocol.{key}", f"must be a finite number "
                                f"(got {value})", "see the settings in docs/protocol.md")
    try:
        # As the agents will take them on this fabric (a packet no larger than its MTU).
        link_adjusted(ProtocolConfig.with_overrides(overrides), fabric)
    except ConfigError as err:
        where, _, problem = str(err).partition(": ")
        raise ScenarioError(source, where, problem,
                            "see the settings in docs/protocol.md") from None
    return dict(overrides)


def _pathcheck(data: dict, params: dict, common: dict) -> Scenario:
    source = common["source"]
    unused = [key for key in ("transports", "timeout_s", "protocol", "faults", "check_paths")
              if key in data]
    if unused:
        raise ScenarioError(source, unused[0], "pathcheck does not use it",
                            "remove it, or pick a workload with host agents")
    unknown = sorted(set(map(str, params)) - set(PATHCHECK_PARAMS))
    if unknown:
        raise ScenarioError(source, f"params.{unknown[0]}", "not a parameter of pathcheck",
                            f"use only {', '.join(PATHCHECK_PARAMS)}")
    copies = params.get("copies", 2)
    if isinstance(copies, bool) or not isinstance(copies, int) or not 1 <= copies <= MAX_COPIES:
        raise ScenarioError(source, "params.copies", f"must be a whole number from 1 to "
                            f"{MAX_COPIES} (got {shown(copies)})", "e.g. copies: 2")
    wait = params.get("timeout_s", 3.0)
    if (isinstance(wait, bool) or not isinstance(wait, (int, float))
            or not 0 < wait <= MAX_CHECK_WAIT_S):
        raise ScenarioError(source, "params.timeout_s", f"must be a number of seconds above 0 "
                            f"up to {MAX_CHECK_WAIT_S:g} (got {shown(wait)})",
                            "e.g. timeout_s: 3.0")
    return Scenario(**common, check_copies=copies, check_wait_s=float(wait))
