"""Command line: `python3 -m experiments run --topo 2tier-8plane [--dataplane auto] ...`.

The topology, the scenario (checked against it once) and the capture list are read
first; the run's lifecycle (experiments/run/lifecycle.py) then does the pre-flight (data
plane, root, the machine's one-fabric lock, the target, the results folder's root),
and a mistake anywhere before the results folder exists ends with one line on stderr
and exit status 2. A run ends with status 0 only if it succeeded
(experiments/run/runner.py), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import sys

from experiments.run.lifecycle import PREFLIGHT_ERRORS, USAGE_ERROR, Run
from experiments.run.timescale import TIME_MODES
from experiments.scenarios.scenario import load_scenario
from topologies.model import load_topology


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m experiments",
                                     description="Run an experiment on the emulated fabric.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="build the network, run a scenario, write results")
    run.add_argument("--topo", default="2tier-8plane", help="topology name or YAML path")
    run.add_argument("--dataplane", default="auto", help="auto, kernel or bmv2")
    run.add_argument("--scenario", default="pathcheck", help="scenario name or YAML path")
    run.add_argument("--results", default="results", help="folder for results")
    run.add_argument("--capture", default=None, metavar="PORTS",
                     help="capture ports into <results>/pcap: 1 (h0 and its plane-0 T0) "
                          "or node[:port],... (docs/wireshark.md)")
    run.add_argument("--rate-cap", default="calibrated",
                     help="cap the links to what the agents drive here (calibrated, or "
                          "cached: experiments/run/calibration.py), to a link rate in Mbit/s "
                          "(e.g. 4), or not (off: the topology's rate)")
    run.add_argument("--mtu", type=int, default=None,
                     help="payload bytes per DATA packet instead of the topology's "
                          "mtu_payload (e.g. 4096, as the NICs carry)")
    run.add_argument("--servers", default=None, metavar="FILE",
                     help="a cluster file placing planes and hosts on other servers "
                          "(docs/scale-out.md)")
    run.add_argument("--time", default="auto", choices=TIME_MODES,
                     help="on links slower than the topology's: shrink the transfers (the "
                          "scenario's seconds), dilate its clock (full-size transfers, a "
                          "longer run), or auto: dilate where shrinking leaves an EV too "
                          "few frames (experiments/run/timescale.py)")
    run.add_argument("--no-fault-free", dest="fault_free", action="store_false",
                     help="do not play a scenario with faults a second time without them "
                          "(no slowdown figures; half the time)")
    sub.add_parser("clean", help="remove leftovers of interrupted runs")
    check = sub.add_parser("validate", help="validate a topology file and print its size")
    check.add_argument("--topo", required=True)
    args = parser.parse_args(argv)

    if args.command == "clean":
        from experiments.run.cleanup import cleanup
        from experiments.run.fabric_lock import FabricBusy, FabricLock

        try:
            with FabricLock("clean"):  # never pull an active run's fabric from under it
                print(f"removed {cleanup().describe()}")
        except FabricBusy as err:
            print(f"error: {err}", file=sys.stderr)
            return USAGE_ERROR
        return 0
    try:
        fabric = load_topology(args.topo, getattr(args, "mtu", None))
        if args.command == "validate":
            print(f"{fabric.spec.source}: ok: {len(fabric.hosts)} hosts, "
                  f"{len(fabric.switches)} switches, {len(fabric.links)} links")
            return 0
        scenario = load_scenario(args.scenario, fabric)
        run = Run.prepare(scenario.name, fabric, args.dataplane, args.results, args.capture,
                          cap=args.rate_cap, servers=args.servers)
    except PREFLIGHT_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return USAGE_ERROR
    from experiments.run.runner import run_experiment

    run_experiment(run, scenario, fault_free=args.fault_free, time_mode=args.time)
    print(f"results: {run.folder}")
    return run.status


if __name__ == "__main__":
    sys.exit(main())
