"""The BMv2 target: the P4 program on one simple_switch_grpc per switch.

Compiles p4src/ into build/ when the sources are newer than the outputs, gives every
switch its device id and ports, programs each one over P4Runtime (one write batch,
read back) and sets its queues inside BMv2 from the topology's link parameters. Host
interfaces are still shaped with tc (hosts have no BMv2 queue); switch ports are not,
so the backlog the P4 program reacts to builds inside the switch.

The `loss` and `gray-loss` faults are not the P4 program's: they are the eBPF switch
program's maps, loaded in faults-only mode on the ports that send the packets
(experiments/targets.py `apply_fault`); a switch end of a link is an interface of the
root namespace, beside BMv2, which sends through it and is left untouched.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from controller.p4info import P4Info
from controller.program import program_switch
from controller.tables import switch_tables
from topologies.bmv2 import Bmv2Error, Bmv2Switch
from topologies.model import Fabric

if TYPE_CHECKING:
    from topologies.network import FabricNet, NodeParams

REPO = Path(__file__).resolve().parent.parent
P4_MAIN = REPO / "p4src" / "mrc_switch.p4"
GRPC_BASE, THRIFT_BASE = 50001, 9091


def compile_program(build: Path) -> tuple[Path, Path]:
    """(P4Info, BMv2 JSON), compiled with p4c-bm2-ss if p4src/ changed since."""
    build.mkdir(parents=True, exist_ok=True)
    p4info, json_path = build / "mrc_switch.p4info.txtpb", build / "mrc_switch.json"
    newest = max(p.stat().st_mtime for p in (REPO / "p4src").rglob("*.p4"))
    if all(p.exists() and p.stat().st_mtime >= newest for p in (p4info, json_path)):
        return p4info, json_path
    done = subprocess.run(["p4c-bm2-ss", "--arch", "v1model", "--std", "p4-16", "-o",
                           str(json_path), "--p4runtime-files", str(p4info), str(P4_MAIN)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise Bmv2Error(f"p4c-bm2-ss could not compile {P4_MAIN}: {last}")
    return p4info, json_path


class Bmv2Target:
    name = "bmv2"
    switch_cls = Bmv2Switch
    shape_switch_ports = False  # queues live inside BMv2

    def __init__(self, build: Path = REPO / "build"):
        self.build = build
        self.p4info_path, self.json_path = compile_program(build)
        self.p4info = P4Info.load(self.p4info_path)
        self.device_config = self.json_path.read_bytes()
        self.write_batches = 0

    def switch_params(self, fabric: Fabric) -> NodeParams:
        return {s.name: {"device_id": i + 1, "grpc_port": GRPC_BASE + i,
                         "thrift_port": THRIFT_BASE + i, "json_path": str(self.json_path),
                         "log_dir": str(self.build / "logs")}
                for i, s in enumerate(fabric.switches)}

    def _program_one(self, net: FabricNet, fabric: Fabric, name: str) -> int:
        node = net.get(name)
        result = program_switch(node.grpc_address, node.device_id, self.p4info,
                                self.device_config, switch_tables(fabric, fabric.node(name)),
                                log_path=self.build / "logs" / f"{name}.p4runtime.log")
        self.write_batches += result.write_batches
        queues = {}
        for port in fabric.ports(name):
            params = fabric.link_params(port.tier)
            queues[port.number] = (params.rate_mbit, params.queue_pkts)
        node.set_queues(queues)
        return result.entries

    def program(self, net: FabricNet, fabric: Fabric) -> int:
        return sum(self._program_one(net, fabric, s.name) for s in fabric.switches)

    def reboot(self, net: FabricNet, fabric: Fabric, switch: str, up: bool) -> int:
        """The switch process dies with its tables and its ports go dark; coming back,
        a new process gets the same entries again."""
        node = net.get(switch)
        if not up:
            node.stop(deleteIntfs=False)
        # Its ports change state only while no BMv2 process holds them (see set_link).
        node.set_ports(up)
        if not up:
            return 0
        node.start()
        return self._program_one(net, fabric, switch)

    def set_link(self, net: FabricNet, a: str, b: str, up: bool) -> None:
        """Fail (or restore) the link between nodes a and b, both ways.

        A running BMv2 switch must not see its own interfaces set down and up again:
        it then stops forwarding on all its ports (seen with BMv2 1.15.5 and libpcap
        1.10), which no real link failure does to a switch. So a switch end of the link
        drops everything it would send (a tc queue of zero packets), and a host end goes
        down as on the kernel target: its agent sees the carrier loss, and the switch
        port beside it loses carrier, which BMv2 takes in its stride.
        """
        for link in net.linksBetween(net.get(a), net.get(b)):
            for intf in (link.intf1, link.intf2):
                if isinstance(intf.node, Bmv2Switch):
                    intf.node.drop_sent(intf.name, not up)
                else:
                    intf.node.set_port(intf.name, up)

    def blackhole(self, net: FabricNet, fabric: Fabric, switch: str, on: bool) -> None:
        """Everything the switch sends is dropped on its ports; links stay up."""
        node = net.get(switch)
        for _, intf in node.port_intfs():
            node.drop_sent(intf, on)

    def summary_fields(self) -> dict[str, object]:
        # Every switch gets one batch at start-up and one more per reboot: the summary
        # shows that nothing else was written while traffic ran.
        return {"p4runtime_write_batches": self.write_batches}

