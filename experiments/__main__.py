"""Command line: `python3 -m experiments run --topo 2tier-8plane [--dataplane auto] ...`.

User mistakes (bad topology or scenario file, missing tools, not root) end with a
one-line message and exit status 2; a run ends with status 0 only if it succeeded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.dataplane import DataplaneError, choose
from experiments.faults import FaultError, parse_faults
from experiments.scenario import ScenarioError, load_scenario
from experiments.workloads import WORKLOADS, WorkloadError, phases
from hosts.config import ProtocolConfig
from topologies.model import TopologyError, load_topology

USAGE_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m experiments",
                                     description="Run an experiment on the emulated fabric.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="build the network, run a scenario, write results")
    run.add_argument("--topo", default="2tier-8plane", help="topology name or YAML path")
    run.add_argument("--dataplane", default="auto", help="auto, kernel or bmv2")
    run.add_argument("--scenario", default="pathcheck", help="scenario name or YAML path")
    run.add_argument("--results", default="results", help="folder for results")
    sub.add_parser("clean", help="remove leftovers of interrupted runs")
    check = sub.add_parser("validate", help="validate a topology file and print its size")
    check.add_argument("--topo", required=True)
    args = parser.parse_args(argv)

    if args.command == "clean":
        from experiments.cleanup import cleanup

        print(f"removed {cleanup().describe()}")
        return 0
    try:
        fabric = load_topology(args.topo)
        if args.command == "validate":
            print(f"{fabric.spec.source}: ok: {len(fabric.hosts)} hosts, "
                  f"{len(fabric.switches)} switches, {len(fabric.links)} links")
            return 0
        scenario = load_scenario(args.scenario)
        # Check fault targets and workload parameters against the topology up front.
        parse_faults(scenario.faults, fabric, scenario.source)
        if scenario.workload in WORKLOADS:
            try:
                phases(scenario.workload, scenario.params, len(fabric.hosts))
            except WorkloadError as err:
                where, _, problem = str(err).partition(": ")
                raise ScenarioError(scenario.source, where, problem,
                                    "see the workload parameters in docs/running.md") from None
        try:
            ProtocolConfig.with_overrides(scenario.protocol)
        except (ValueError, TypeError) as err:
            where, _, problem = str(err).partition(": ")
            raise ScenarioError(scenario.source, where, problem,
                                "see the settings in docs/protocol.md") from None
        dataplane, reason = choose(args.dataplane)
        from experiments.runner import require_root, run_experiment

        require_root()
    except (TopologyError, ScenarioError, FaultError, DataplaneError, PermissionError) as err:
        print(f"error: {err}", file=sys.stderr)
        return USAGE_ERROR
    status, folder = run_experiment(fabric, dataplane, reason, scenario, Path(args.results))
    print(f"results: {folder}")
    return status


if __name__ == "__main__":
    sys.exit(main())
