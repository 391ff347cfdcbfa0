"""Command line: `python3 -m experiments run --topo 2tier-8plane [--dataplane auto] ...`.

Everything that can fail for a reason the user can fix happens in the pre-flight,
before the results folder exists: reading and checking the topology and the scenario
(once, against each other) and the capture list, choosing the data plane, the root
check, the machine's one-fabric lock (experiments/fabric_lock.py: a second run while
one is active stops here, naming it), and creating the data-plane target (for BMv2,
compiling the P4 program). A failure there ends with one
line on stderr and exit status 2; a run ends with status 0 only if it succeeded.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.dataplane import choose
from experiments.scenario import load_scenario, scaled
from topologies.errors import UserError
from topologies.model import load_topology

if TYPE_CHECKING:
    from experiments.fabric_lock import FabricLock
    from experiments.targets import Target

USAGE_ERROR = 2


class TargetError(Exception):
    """The data-plane target could not be created (e.g. the P4 program did not compile)."""


def prepare(dataplane: str) -> tuple[Target, FabricLock]:
    """Root check, the one-fabric lock (taken before anything of another run could be
    touched), then the target (which compiles the P4 program for BMv2). The lock is
    returned held; it is released here if the target cannot be made."""
    # Imported here: they pull in Mininet, which validation alone does not need.
    from experiments.fabric_lock import FabricLock
    from experiments.runner import require_root
    from experiments.targets import make_target
    from topologies.bmv2 import Bmv2Error

    require_root()
    lock = FabricLock().acquire()
    try:
        return make_target(dataplane), lock
    except (Bmv2Error, OSError) as err:
        lock.release()
        raise TargetError(" ".join(f"DATAPLANE={dataplane}: {err}".split())) from None


def results_root(name: str) -> Path:
    """The folder that gets one results folder per run, made and writable."""
    root = Path(name)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"--results {name}", "", f"cannot be made ({err.strerror or err})",
                        "give a folder you can write to") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise UserError(f"--results {name}", "", "is not writable",
                        "give a folder you can write to")
    return root


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
    run.add_argument("--no-fault-free", dest="fault_free", action="store_false",
                     help="do not play a scenario with faults a second time without them "
                          "(no slowdown figures; half the time)")
    sub.add_parser("clean", help="remove leftovers of interrupted runs")
    check = sub.add_parser("validate", help="validate a topology file and print its size")
    check.add_argument("--topo", required=True)
    args = parser.parse_args(argv)

    if args.command == "clean":
        from experiments.cleanup import cleanup
        from experiments.fabric_lock import FabricBusy, FabricLock

        try:
            with FabricLock("clean"):  # never pull an active run's fabric from under it
                print(f"removed {cleanup().describe()}")
        except FabricBusy as err:
            print(f"error: {err}", file=sys.stderr)
            return USAGE_ERROR
        return 0
    try:
        fabric = load_topology(args.topo)
        if args.command == "validate":
            print(f"{fabric.spec.source}: ok: {len(fabric.hosts)} hosts, "
                  f"{len(fabric.switches)} switches, {len(fabric.links)} links")
            return 0
        scenario = load_scenario(args.scenario, fabric)
        if args.capture is not None:
            from experiments.capture import parse_spec

            parse_spec(args.capture, fabric)
        dataplane, reason = choose(args.dataplane)
        target, lock = prepare(dataplane)
        try:
            results = results_root(args.results)
        except UserError:
            lock.release()
            raise
        fabric = target.fabric_for(fabric)  # BMv2: links no faster than its CPU keeps up
        scenario = scaled(scenario, target.data_scale())  # and as many seconds of data
    except (UserError, PermissionError, TargetError) as err:
        print(f"error: {err}", file=sys.stderr)
        return USAGE_ERROR
    from experiments.runner import run_experiment

    try:
        status, folder = run_experiment(fabric, target, reason, scenario, results,
                                        capture=args.capture, lock=lock,
                                        fault_free=args.fault_free)
    finally:
        lock.release()
    print(f"results: {folder}")
    return status


if __name__ == "__main__":
    sys.exit(main())
