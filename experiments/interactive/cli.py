"""The interactive fabric: `python3 -m experiments.interactive.cli --topo 2tier-2plane`
(`--dataplane auto`, the default, or kernel or bmv2).

Builds, shapes and programs the fabric as an experiment run does
(experiments/run/fabric.py), gives the hosts the addresses Mininet's own commands use
(mininet_commands.py), starts an MRC agent on every host, and opens Mininet's CLI with
the testbed's commands added (`help <command>` explains each):

    send h0 h3 [bytes] [transport]    one message through the agents, and what happened
                                      (h1,h2,h3 h0: three at once, an incast)
    link down|up a b                  fail or restore a link (also Mininet's `link a b down`)
    switch down|up|blackhole|restore s    reboot a switch (down, then up) or blackhole it
    port down|up h plane              a host's NIC port of one plane
    paths h [peer]                    the host's paths to a peer: route, faults on it, EV states
    evs h [peer]                      the host's EV profiles through the control API
    ev deny|allow|replace|explicit|probe|events ...   the control API as a controller uses
                                      it (experiments/interactive/cli_ev.py)
    tables s / counters s             a switch's tables and counters, as the data plane holds them
    p4shell s [write]                 p4runtime-shell on a BMv2 switch, read-only or writing

Faults are the scenarios' fault kinds (experiments/faults/kinds/), applied by the
same code. Mininet's own commands (`h0 ping h1`, `pingall`, `iperf`, `h0 ip -6 route`,
`nodes`, `links`, `xterm h0`...) work as usual. A bad command prints one line and the
CLI goes on. Leaving (exit, Ctrl-D, end of input, SIGTERM) stops the agents and tears
the network down as a run does (experiments/run/lifecycle.py), leaving no namespace,
interface or process behind.

The session writes into a results folder (`results/<time>-<topology>-cli/`): the
resolved topology (`topology.json`) and the agents' configurations and event logs.

This module is the entry point alone; the CLI's parts, each with its job:
commands.py (the testbed's commands in Mininet's CLI), parse.py (their arguments),
session.py (agents, faults, sends), cli_ev.py (`evs` and `ev`), switches.py (a
switch's tables and counters), reports.py (what is printed), mininet_commands.py
(Mininet's own commands on the fabric).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.interactive import mininet_commands
from experiments.interactive.commands import TESTBED_HELP, FabricCLI
from experiments.interactive.session import FabricSession
from hosts.protocol import TRANSPORTS

USAGE_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m experiments.interactive.cli",
        description="Build and program a fabric, start the agents, open Mininet's CLI "
                    "with the testbed's commands; exit tears everything down.")
    parser.add_argument("--topo", default="2tier-2plane", help="topology name or YAML path")
    parser.add_argument("--dataplane", default="auto", help="auto, kernel or bmv2")
    parser.add_argument("--capture", default=None, metavar="SPEC",
                        help="capture packets into the session folder: 1 for the default "
                             "ports, or nodes and node:port, comma separated "
                             "(docs/wireshark.md)")
    parser.add_argument("--results", default="results", help="folder for the session folder")
    parser.add_argument("--mtu", type=int, default=None,
                        help="payload bytes per DATA packet instead of the topology's "
                             "mtu_payload (e.g. 4096)")
    parser.add_argument("--twin", action="store_true",
                        help="build the topology's single-plane twin, where the RoCE "
                             "transports run (experiments/dataplanes/twin.py)")
    parser.add_argument("--p4", type=Path, default=None, metavar="MAIN",
                        help="run this P4 main file on BMv2 instead of p4src/'s, e.g. a "
                             "lab's program (`make cli LAB=03`, labs/p4lab.py)")
    args = parser.parse_args(argv)

    from experiments.dataplanes.twin import fabric_of, twin_of
    from experiments.run.lifecycle import PREFLIGHT_ERRORS, Run
    from topologies.model import load_topology

    try:
        fabric = load_topology(args.topo, args.mtu)
        if args.twin:
            fabric = twin_of(fabric)
        # A session caps its links from the machine's measured budget, or the default
        # where none is cached: it never spends a minute calibrating before a prompt.
        run = Run.prepare("cli", fabric, args.dataplane, args.results, args.capture,
                          program=args.p4, cap="cached")
    except PREFLIGHT_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return USAGE_ERROR
    # The transports that run on this fabric: on a multi-plane one MRC and RoCE with
    # @planes, on a single-plane one (its own twin) every transport.
    return _session(run, tuple(t for t in TRANSPORTS if fabric_of(t, fabric) is fabric))


def _session(run, transports: tuple[str, ...]) -> int:
    from mininet.log import setLogLevel

    from experiments.run.lifecycle import ctrl_c_held

    setLogLevel("output")
    with run:
        network = run.up()
        session = FabricSession(network, run.folder, transports)
        try:
            mininet_commands.install(network.net, network.fabric)
            session.agents_for(transports[0])
            print(f"fabric up in {network.bringup_s:.1f} s, {network.table_writes} table "
                  f"writes; an {transports[0]} agent on every host; session folder "
                  f"{run.folder}", flush=True)
            print(TESTBED_HELP, flush=True)
            FabricCLI(session)
        finally:
            with ctrl_c_held():  # from here to the end of the teardown
                session.close()
        run.status = 0
    print(f"torn down; session folder {run.folder}", flush=True)
    return run.status


if __name__ == "__main__":
    sys.exit(main())
