"""The controller of the BMv2 switches of one machine: their tables over P4Runtime and
their queues over Thrift, to switches of that machine only.

`configure()` gives one switch its static tables and its queues; the BMv2 target calls
it for the switches of the head (experiments/dataplanes/bmv2_target.py). A fabric split
across servers (docs/scale-out.md) runs this module on each server that holds BMv2
switches, so that P4Runtime and the Thrift CLI never cross between machines: every
table is written on the server that holds its switch, computed there from the run's
topology.

    python -m experiments.dataplanes.bmv2_server program FOLDER < switches.json
    python -m experiments.dataplanes.bmv2_server counters FOLDER < switches.json

FOLDER holds what the head sent there first, each file checked by its SHA-256
(`server_files`): the run's topology.json, the P4Info and the compiled program. The
input is a JSON list of the switches to act on, each {"name", "device_id",
"grpc_port", "thrift_port"}; the output is one JSON object, by switch name: the
entries and write batches it was given (`program`), or its counters by port
(`counters`). A failure is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from controller.p4info import P4Info
from controller.program import program_switch, read_counters
from controller.tables import switch_tables
from topologies.bmv2 import SERVER_FOLDER, queue_commands, run_cli
from topologies.model import Fabric
from topologies.resolved import read_fabric, resolved_topology

TOPOLOGY, P4INFO, PROGRAM = "topology.json", "mrc_switch.p4info.txtpb", "mrc_switch.json"
# Switches programmed at once: each write waits on its switch's process (the pipeline,
# then the queues' CLI); 48 one after the other took 7.3 s on 2 cores.
PROGRAM_AT_ONCE = 8


def configure(fabric: Fabric, name: str, grpc_address: str, device_id: int,
              p4info: P4Info, device_config: bytes, set_queues: Callable[[list[str]], object],
              log_path: Path | str | None = None) -> tuple[int, int]:
    """Write switch `name`'s pipeline and tables (read back) and set its ports' queues
    from their links (`set_queues` runs simple_switch_CLI commands on it): (entries,
    write batches)."""
    tables = switch_tables(fabric, fabric.node(name))
    result = program_switch(grpc_address, device_id, p4info, device_config, tables,
                            log_path=log_path)
    commands = []
    for port in fabric.ports(name):
        link = fabric.link_params(port.tier)
        commands += queue_commands(port.number, link.rate_mbit, link.queue_pkts,
                                   tables.trim_size_bytes, fabric.spec.priority_share,
                                   tables.frame_bytes)
    set_queues(commands)
    return result.entries, result.write_batches


def server_files(fabric: Fabric, p4info_path: Path, program_path: Path,
                 folder: str = SERVER_FOLDER) -> dict[str, bytes]:
    """The files a server's controller reads (path there -> content): the fabric as the
    run built it (its capped rates), the P4Info and the compiled program."""
    topology = json.dumps(resolved_topology(fabric, "bmv2")).encode()
    return {f"{folder}/{TOPOLOGY}": topology,
            f"{folder}/{P4INFO}": p4info_path.read_bytes(),
            f"{folder}/{PROGRAM}": program_path.read_bytes()}


def _program(folder: Path, switches: list[dict]) -> dict:
    fabric = read_fabric(folder / TOPOLOGY)
    p4info = P4Info.load(folder / P4INFO)
    config = (folder / PROGRAM).read_bytes()

    def one(switch: dict) -> tuple[int, int]:
        return configure(fabric, switch["name"], f"127.0.0.1:{switch['grpc_port']}",
                         switch["device_id"], p4info, config,
                         lambda commands: run_cli(switch["thrift_port"], commands,
                                                  switch["name"]),
                         folder / f"{switch['name']}.p4runtime.log")

    with ThreadPoolExecutor(max_workers=PROGRAM_AT_ONCE) as pool:
        done = list(pool.map(one, switches))
    return {s["name"]: {"entries": e, "batches": b} for s, (e, b) in zip(switches, done)}


def _counters(folder: Path, switches: list[dict]) -> dict:
    p4info = P4Info.load(folder / P4INFO)
    return {s["name"]: read_counters(f"127.0.0.1:{s['grpc_port']}", s["device_id"], p4info)
            for s in switches}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.dataplanes.bmv2_server",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("program", "counters"))
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        switches = json.load(sys.stdin)
        act = _program if args.action == "program" else _counters
        json.dump(act(args.folder, switches), sys.stdout)
    except Exception as err:  # noqa: BLE001 - one line for the head, which raises it
        print(f"{type(err).__name__}: {err}".splitlines()[0], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
