"""Scenario files: what a run does on the network once it is up.

A scenario is a YAML file in experiments/scenarios/ (or any path) naming a workload and
its parameters. `pathcheck` sends datagrams along every path of the catalogue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
WORKLOADS = ("pathcheck",)


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
    params = data.get("params") or {}
    if not isinstance(params, dict):
        raise ScenarioError(source, "params", "must be a mapping", "write params: {key: value}")
    return Scenario(str(data.get("name", path.stem)), workload,
                    str(data.get("description", "")), params, source)
