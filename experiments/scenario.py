"""Scenario files: what a run does on the network once it is up.

A scenario is a YAML file in experiments/scenarios/ (or any path):

    name: link-flap
    description: ...
    workload: all-reduce          # pathcheck | all-to-all | all-reduce | incast | transfer
    params: {data_bytes: 4000000} # the workload's parameters (experiments/workloads.py)
    transports: [mrc, single-path]
    timeout_s: 60                 # per transport; unfinished transfers count as failed
    protocol: {}                  # overrides of the agents' protocol settings
    faults:                       # experiments/faults.py
      - {kind: link-flap, link: [p0t0r0, p0t1s0], at_s: 1.0, down_s: 0.5, count: 4}

`pathcheck` sends datagrams along every path of the catalogue and takes no transports.
Fault targets and workload parameters are checked against the topology by the runner,
before anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from experiments.workloads import WORKLOADS as TRANSFER_WORKLOADS

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
WORKLOADS = ("pathcheck", *TRANSFER_WORKLOADS)
TRANSPORTS = ("mrc", "mrc-no-trim", "mrc-no-probe", "single-path")


class ScenarioError(ValueError):
    """A scenario file is missing or invalid. The message is one line."""

    def __init__(self, source: str, fieldname: str, problem: str, fix: str):
        super().__init__(f"{source}: {fieldname}: {problem}; fix: {fix}")


@dataclass(frozen=True)
class Scenario:
    name: str
    workload: str
    description: str = ""
    params: dict = field(default_factory=dict)
    source: str = ""
    transports: tuple[str, ...] = ()
    timeout_s: float = 60.0
    protocol: dict = field(default_factory=dict)
    faults: list = field(default_factory=list)


def available_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def load_scenario(name_or_path: str) -> Scenario:
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml") and "/" not in name_or_path:
        path = SCENARIO_DIR / f"{name_or_path}.yaml"
    source = str(path)
    if not path.is_file():
        raise ScenarioError(source, "SCENARIO", "no such scenario file",
                            f"use one of: {', '.join(available_scenarios())}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        raise ScenarioError(source, "file", "not valid YAML",
                            "check the indentation and 'key: value' syntax") from None
    if not isinstance(data, dict):
        raise ScenarioError(source, "document", "must be a mapping",
                            "start from experiments/scenarios/pathcheck.yaml")
    workload = data.get("workload")
    if workload not in WORKLOADS:
        raise ScenarioError(source, "workload", f"unknown workload {workload!r}",
                            f"use one of: {', '.join(WORKLOADS)}")
    known = {"name", "description", "workload", "params", "transports", "timeout_s",
             "protocol", "faults"}
    unknown = sorted(set(map(str, data)) - known)
    if unknown:
        raise ScenarioError(source, unknown[0], "unknown field",
                            f"use only {', '.join(sorted(known))}")
    params = data.get("params") or {}
    protocol = data.get("protocol") or {}
    for key, value in (("params", params), ("protocol", protocol)):
        if not isinstance(value, dict):
            raise ScenarioError(source, key, "must be a mapping", f"write {key}: {{key: value}}")
    default = () if workload == "pathcheck" else ("mrc", "single-path")
    transports = data.get("transports", list(default))
    if not isinstance(transports, list) or any(t not in TRANSPORTS for t in transports) \
            or (workload != "pathcheck" and not transports):
        raise ScenarioError(source, "transports", f"must be a list drawn from "
                            f"{', '.join(TRANSPORTS)} (got {transports!r})",
                            "e.g. transports: [mrc, single-path]")
    timeout = data.get("timeout_s", 60.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ScenarioError(source, "timeout_s", f"must be a positive number (got {timeout!r})",
                            "e.g. timeout_s: 60")
    return Scenario(str(data.get("name", path.stem)), workload,
                    str(data.get("description", "")), params, source, tuple(transports),
                    float(timeout), protocol, data.get("faults") or [])
