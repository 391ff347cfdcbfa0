"""The BMv2 target: the P4 program on one simple_switch_grpc per switch.

Compiles p4src/ (or a lab's copy of it with a student's pieces, `make cli LAB=02`) into
its build folder when the sources are newer than the outputs, gives every
switch its device id and ports, programs each one over P4Runtime (one write batch,
read back) and sets its queues inside BMv2 from the topology's link parameters. Host
interfaces are still shaped with tc (hosts have no BMv2 queue); switch ports are not,
so the backlog the P4 program reacts to builds inside the switch.

BMv2 is a software switch: every packet of every switch costs CPU, and on a small
machine a fabric at the topology's rates asks for more packets a second than its
switches forward, so delays swing with the CPU and MRC's timers fire. `fabric_for()`
therefore caps every link's rate for this target so that at full load (every host
sending on every plane at the link rate) the hosts send no more than the switches and
the agents keep up with together: the BMv2 budget the calibration measured on this
machine with both running (experiments/run/calibration.py, handed in by the run's
lifecycle), or, before it has, CPU_SHARE of the forwarding steps the switches manage
alone (each packet through three switches), as bench/bmv2_forwarding.py measured them
(build/bmv2-forwarding.json) or MEASURED_PATH_PPS. The rate used and why are in the
run summary.

On a fabric split across servers (docs/scale-out.md) a switch of another server is
programmed by that server's controller (experiments/dataplanes/bmv2_server.py, which
also programs this machine's switches for this module), its counters read there too.

A link's rate changes while it runs (`set_rate`, the single-plane twin's share of a
fault of the planes): a switch end's queues inside BMv2 get the new rate through the
same Thrift CLI calls that set them at start-up, a host end's htb class the new rate.

The `loss` and `gray-loss` faults are not the P4 program's: they are the eBPF switch
program's maps, loaded in faults-only mode on the ports that send the packets
(experiments/dataplanes/targets.py `apply_fault`); a switch end of a link is an interface of the
root namespace, beside BMv2, which sends through it and is left untouched.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from controller.p4info import P4Info
from controller.program import read_counters
from experiments.dataplanes.bmv2_server import PROGRAM_AT_ONCE, configure, server_files
from experiments.dataplanes.kernel_target import link_ends
from topologies.bmv2 import SERVER_FOLDER, Bmv2Error, Bmv2Switch, queue_commands
from topologies.model import Fabric, with_rate_cap
from topologies.remote import is_remote
from topologies.shaping import rate_commands

if TYPE_CHECKING:
    from experiments.dataplanes.ebpf_switch import Counters, Running
    from topologies.network import FabricNet, NodeParams

REPO = Path(__file__).resolve().parents[2]
P4_MAIN = REPO / "p4src" / "mrc_switch.p4"
# Below the kernel's ephemeral port range (32768-60999 by default): a port in it can be
# taken by any outgoing connection (another switch's client) before its switch binds it.
GRPC_BASE, THRIFT_BASE = 28001, 9091

# Full-size frames a second through a path of three testbed switches on the 2-core
# machine the testbed is developed on, while a compiler build shared its cores
# (docs/p4-switch.md, "How fast BMv2 is here"); this machine's own bench results
# replace it.
MEASURED_PATH_PPS = 5_000
MEASURED_SOURCE = "the figure measured on a 2-core machine, docs/p4-switch.md"
BENCH_RESULTS = REPO / "build" / "bmv2-forwarding.json"
# The share of the switches' forwarding capacity the fabric may ask for at full load:
# the rest is for the agents (Python, on the same cores), their acks and bursts.
CPU_SHARE = 0.5
# The longest path crosses T0, T1, T0.
MAX_SWITCH_HOPS = 3
# Rates are rounded down to this many significant digits, so that the summary shows
# a plain number.
RATE_DIGITS = 2
# How long a server's controller may take for its switches (bmv2_server.py): their
# pipelines and tables, with its Python's start.
SERVER_TIMEOUT_S = 120


@dataclasses.dataclass(frozen=True)
class RateChoice:
    """The link rate a BMv2 fabric runs at, and why."""

    rate_mbit: float  # every link's rate on this target
    topology_mbit: float  # the fastest link the topology asks for
    fabric_mbit: float  # what every host together may send at once here
    source: str  # why that much: what it was measured as, where

    @property
    def capped(self) -> bool:
        return self.rate_mbit < self.topology_mbit

    @property
    def data_scale(self) -> float:
        """The capped rate's share of the topology's: what a workload's bytes shrink by."""
        return self.rate_mbit / self.topology_mbit if self.capped else 1.0

    def reason(self) -> str:
        verdict = (f"capped from the topology's {self.topology_mbit:g} Mbit/s"
                   if self.capped else "the topology's own rate")
        return (f"{verdict}: at full load the hosts send at most "
                f"{self.fabric_mbit:.3g} Mbit/s together, {self.source}")


def forwarding_budget(capacity_pps: float, source: str,
                      frame_bytes: int) -> tuple[float, str]:
    """What every host together may send at once (Mbit/s of `frame_bytes` frames) when
    the switches are to be asked for CPU_SHARE of `capacity_pps` forwarding steps a
    second, and a line saying so: the budget before the calibration has measured one."""
    mbit = CPU_SHARE * capacity_pps * frame_bytes * 8 / MAX_SWITCH_HOPS / 1e6
    return mbit, (f"{CPU_SHARE:.0%} of the {capacity_pps:,.0f} forwarding steps/s BMv2 "
                  f"manages here alone ({source}), the rest left to the agents; not "
                  "calibrated with the agents running (make calibrate DATAPLANE=bmv2)")


def machine_capacity(results: Path = BENCH_RESULTS) -> tuple[float, str]:
    """Forwarding steps a second of this machine's BMv2 switches together (a packet
    through three switches is three steps), and where the figure comes from: this
    machine's bench results if there are any, else MEASURED_PATH_PPS."""
    try:
        data = json.loads(results.read_text())
        rows = [r for r in data["rows"] if r["setting"] == "testbed" and r["switches"] == 3]
        if rows and rows[0]["pps"] > 0:
            return (3 * rows[0]["pps"],
                    f"measured here by bench/bmv2_forwarding.py at {data['measured_at']}")
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no usable results: the figure measured when the testbed was made
    return 3 * MEASURED_PATH_PPS, MEASURED_SOURCE


def choose_rate(fabric: Fabric, fabric_mbit: float, source: str) -> RateChoice:
    """The fastest link rate at which every host sending on every plane sends at most
    `fabric_mbit` together, or the topology's rate if that is slower."""
    spec = fabric.spec
    topology_mbit = max(spec.host_t0.rate_mbit, spec.t0_t1.rate_mbit)
    return RateChoice(min(round_down(fabric_mbit / (spec.hosts * spec.planes)),
                          topology_mbit), topology_mbit, fabric_mbit, source)


def round_down(value: float, digits: int = RATE_DIGITS) -> float:
    """`value` rounded down to `digits` significant digits (0.0372 -> 0.037)."""
    if value <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    # round(): the float division may land a hair below an exact multiple.
    return round(math.floor(round(value / step, 9)) * step, 12)


def compile_program(build: Path, main: Path = P4_MAIN) -> tuple[Path, Path]:
    """(P4Info, BMv2 JSON) of the program `main` (p4src/'s, or a lab's copy of it,
    labs/p4lab.py), compiled with p4c-bm2-ss into `build` if a P4 file beside `main`
    changed since. Raises Bmv2Error holding p4c's first errors."""
    build.mkdir(parents=True, exist_ok=True)
    p4info, json_path = build / f"{main.stem}.p4info.txtpb", build / f"{main.stem}.json"
    newest = max(p.stat().st_mtime for p in main.parent.rglob("*.p4"))
    if all(p.exists() and p.stat().st_mtime >= newest for p in (p4info, json_path)):
        return p4info, json_path
    done = subprocess.run(["p4c-bm2-ss", "--arch", "v1model", "--std", "p4-16", "-o",
                           str(json_path), "--p4runtime-files", str(p4info), str(main)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        errors = [line for line in lines if "error" in line.lower()] or lines[-1:]
        raise Bmv2Error(f"p4c-bm2-ss could not compile {main}: " + "\n".join(errors[:6]))
    return p4info, json_path


class Bmv2Target:
    name = "bmv2"
    switch_cls = Bmv2Switch
    shape_switch_ports = False  # queues live inside BMv2
    pfc = ("counted only: a port past XOFF counts the pause it would send, nothing is "
           "paused (lossless queues 16 x deep; DCQCN slows the senders; docs/protocol.md)")

    def __init__(self, build: Path = REPO / "build", program: Path = P4_MAIN):
        self.build = build
        self.p4_main = program  # `make cli LAB=02` runs a lab's program (labs/p4lab.py)
        self.p4info_path, self.json_path = compile_program(build, program)
        self.p4info = P4Info.load(self.p4info_path)
        self.device_config = self.json_path.read_bytes()
        self.write_batches = 0
        self.rate: RateChoice | None = None
        self._shipped: set[str] = set()  # servers that have this fabric's files

    def fabric_for(self, fabric: Fabric,
                   calibrated: tuple[float, str] | None = None) -> Fabric:
        """The fabric this target runs: `fabric` with every link no faster than the
        switches and the agents keep up with here (choose_rate): `calibrated`, what
        every host together may send at once as the calibration measured it with both
        running (Mbit/s, and a line saying where from), else a share of what the
        switches forward alone (`forwarding_budget`). Call it before the network is
        built: the hosts' shaping, the agents' pacing and BMv2's queues all take their
        rate from the fabric."""
        budget = calibrated or forwarding_budget(*machine_capacity(),
                                                 fabric.spec.data_frame_bytes)
        self.rate = choose_rate(fabric, *budget)
        if not self.rate.capped:
            return fabric
        return with_rate_cap(fabric, self.rate.rate_mbit)

    def data_scale(self) -> float:
        return self.rate.data_scale if self.rate is not None else 1.0

    def switch_params(self, fabric: Fabric) -> NodeParams:
        return {s.name: {"device_id": i + 1, "grpc_port": GRPC_BASE + i,
                         "thrift_port": THRIFT_BASE + i, "json_path": str(self.json_path),
                         "log_dir": str(self.build / "logs")}
                for i, s in enumerate(fabric.switches)}

    def _program_here(self, net: FabricNet, fabric: Fabric, name: str) -> tuple[int, int]:
        """Write one switch of this machine's tables and queue settings: (entries,
        write batches)."""
        node = net.get(name)
        return configure(fabric, name, node.grpc_address, node.device_id, self.p4info,
                         self.device_config, node.set_queues,
                         log_path=self.build / "logs" / f"{name}.p4runtime.log")

    def _on_server(self, action: str, fabric: Fabric, nodes: list) -> dict:
        """Run the controller of the server that holds `nodes` (BMv2 switches of one
        server) for them (experiments/dataplanes/bmv2_server.py): `program` or
        `counters`; its answer, by switch. The files it reads are sent there first,
        once a bring-up."""
        first = nodes[0]
        if first.server not in self._shipped:
            first.put_files(server_files(fabric, self.p4info_path, self.json_path))
            self._shipped.add(first.server)
        request = [{"name": n.name, "device_id": n.device_id, "grpc_port": n.grpc_port,
                    "thrift_port": n.thrift_port} for n in nodes]
        proc = first.python("experiments.dataplanes.bmv2_server", action, SERVER_FOLDER,
                            stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(json.dumps(request), timeout=SERVER_TIMEOUT_S)
        if proc.returncode != 0:
            lines = (err or out).strip().splitlines()
            raise Bmv2Error(f"the controller on {first.server} ({action}): "
                            f"{lines[-1] if lines else proc.returncode}")
        return json.loads(out)

    def _program(self, net: FabricNet, fabric: Fabric, names: list[str]) -> list[tuple[int, int]]:
        """Program the switches `names`: those of this machine from here,
        PROGRAM_AT_ONCE at a time, those of each server by its own controller, the
        servers at once. (entries, write batches) of each."""
        here, by_server = _by_server(net, names)
        with ThreadPoolExecutor(max_workers=PROGRAM_AT_ONCE) as pool:
            servers = [pool.submit(self._on_server, "program", fabric, nodes)
                       for nodes in by_server.values()]
            done = list(pool.map(lambda node: self._program_here(net, fabric, node.name), here))
            for job in servers:
                done += [(s["entries"], s["batches"]) for s in job.result().values()]
        return done

    def program(self, net: FabricNet, fabric: Fabric) -> int:
        """Every switch's tables (`_program`)."""
        self._shipped = set()  # a new fabric: its servers get its files again
        done = self._program(net, fabric, [s.name for s in fabric.switches])
        self.write_batches += sum(batches for _, batches in done)
        return sum(entries for entries, _ in done)

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
        [(entries, batches)] = self._program(net, fabric, [switch])
        self.write_batches += batches
        return entries

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

    def set_rate(self, running: Running, a: str, b: str, share: float) -> None:
        """Run the link between a and b at `share` of its rate, both ways (1: its rate
        again): a switch end's data, lossless and priority queues paced at the new rate
        (their depths as at start-up), a host end's htb link class."""
        net, fabric = running.net, running.fabric
        spec = fabric.spec
        for port in link_ends(fabric, a, b):
            link = fabric.link_params(port.tier)
            rate = link.rate_mbit * share
            node = net.get(port.node)
            if isinstance(node, Bmv2Switch):
                node.set_queues(queue_commands(port.number, rate, link.queue_pkts,
                                               spec.trim_size_bytes, spec.priority_share,
                                               spec.data_frame_bytes))
            else:
                node.run(rate_commands(port.intf, rate, spec.data_frame_bytes))

    def blackhole(self, net: FabricNet, fabric: Fabric, switch: str, on: bool) -> None:
        """Everything the switch sends is dropped on its ports; links stay up."""
        node = net.get(switch)
        for _, intf in node.port_intfs():
            node.drop_sent(intf, on)

    def switch_counters(self, running: Running, switches: list[str] | None = None) -> Counters:
        """The P4 program's counters of every switch port (read over P4Runtime), with
        what the eBPF program counted where a fault put it (fault drops on a switch end,
        on a host port)."""
        from experiments.dataplanes import ebpf_switch

        net, fabric = running.net, running.fabric
        found = ebpf_switch.read_counters(running) if running.ebpf_ports.ports else {}
        if switches is not None:
            found = {n: found.get(n, {}) for n in switches}
        names = switches or [s.name for s in fabric.switches]
        here, by_server = _by_server(net, names)
        counted = {node.name: read_counters(node.grpc_address, node.device_id, self.p4info)
                   for node in here}
        for nodes in by_server.values():  # read on each server, by its controller
            for name, counts in self._on_server("counters", fabric, nodes).items():
                counted[name] = {counter: {int(port): n for port, n in by_port.items()}
                                 for counter, by_port in counts.items()}
        for name in names:
            counts = counted[name]
            for port in fabric.ports(name):
                ours = found.setdefault(name, {}).setdefault(port.intf, {})
                for counter, by_port in counts.items():
                    ours[counter] = by_port.get(port.number, 0)
        return found

    def summary_fields(self) -> dict[str, object]:
        # Every switch gets one batch at start-up and one more per reboot: the summary
        # shows that nothing else was written while traffic ran.
        fields: dict[str, object] = {"p4runtime_write_batches": self.write_batches}
        if self.rate is not None:
            fields["bmv2_link_rate_mbit"] = self.rate.rate_mbit
            fields["bmv2_link_rate_reason"] = self.rate.reason()
        else:
            fields["bmv2_link_rate_reason"] = ("the topology's own rate: the runner did not "
                                               "ask for a CPU-safe rate (fabric_for)")
        return fields


def _by_server(net: FabricNet, names: list[str]) -> tuple[list, dict[str, list]]:
    """The switches `names` of `net`: (those of this machine, those of each other
    server by its name)."""
    here, by_server = [], {}
    for name in names:
        node = net.get(name)
        if is_remote(node):
            by_server.setdefault(node.server, []).append(node)
        else:
            here.append(node)
    return here, by_server
