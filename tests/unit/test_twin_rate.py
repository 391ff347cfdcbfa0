"""How the single-plane twin's rate cut is applied: the exact commands each data-plane
target runs for it (tc on a shaped port, the eBPF switch program's port settings,
BMv2's queues), and that the fault player gives the link its rate back. Pure: the
nodes are recorders, no network, no root."""

from __future__ import annotations

import struct

import pytest

from controller import ebpf_config
from controller.tables import switch_tables
from experiments.dataplanes.bmv2_target import Bmv2Target
from experiments.dataplanes.ebpf_switch import EbpfPorts
from experiments.dataplanes.kernel_target import KernelTarget
from experiments.dataplanes.targets import apply_fault
from experiments.dataplanes.twin import twin_of, twin_steps
from experiments.faults import Env, FaultInjector, Step
from experiments.faults.kinds.capacity import RateCut
from experiments.scenarios.scenario import check_scenario
from hosts.config import ProtocolConfig
from hosts.endpoint import Endpoint
from hosts.protocol import PRIORITY_DATA, link_pps
from tests.steps import running
from topologies.bmv2 import Bmv2Switch, queue_commands
from topologies.model import LinkParams, load_topology
from topologies.shaping import LINK_CLASS, ShapingFeatures, rate_commands, tc_commands

EIGHT = load_topology("2tier-8plane")
TWIN = twin_of(EIGHT)  # every link at 80 Mbit/s
FRAME = TWIN.spec.data_frame_bytes


class Node:
    def __init__(self, name: str, log: list):
        self.name, self.log = name, log

    def run(self, commands: list[str]) -> int:
        self.log.append((self.name, commands))
        return len(commands)


class Program:
    def __init__(self):
        self.writes = []

    def write(self, ops) -> int:
        self.writes += list(ops)
        return len(self.writes)


class Net:
    """What a target's set_rate asks of the network: its nodes."""

    def __init__(self, switches: dict | None = None):
        self.log: list = []
        self.switches = switches or {}

    def get(self, name: str):
        return self.switches.get(name) or Node(name, self.log)


def on_twin(target, net: Net, ebpf_ports: dict | None = None):
    """The twin as if up on `target` over `net`, with the eBPF program (a recorder) on
    `ebpf_ports`."""
    twin = running(TWIN, target, net)
    twin.ebpf_ports = EbpfPorts(Program(), ebpf_ports or {})
    return twin


def mapped(entry: dict) -> tuple[Step, ...]:
    steps = check_scenario({"workload": "transfer", "faults": [entry]}, "s.yaml", EIGHT).faults
    return twin_steps(steps, EIGHT, TWIN)[0]


def test_the_rate_command_changes_the_link_class_in_place():
    assert rate_commands("p0t0r0-eth5", 70, FRAME) == [
        "tc class change dev p0t0r0-eth5 parent 1: classid 1:1 htb rate 70mbit ceil 70mbit "
        f"quantum {FRAME}"]
    assert rate_commands("h2-eth0", 0.2604, FRAME) == [
        "tc class change dev h2-eth0 parent 1: classid 1:1 htb rate 0.2604mbit "
        f"ceil 0.2604mbit quantum {FRAME}"]


def test_the_link_class_is_the_one_every_shaped_port_has():
    # tc's shaping of any port, and the eBPF switch program's of a switch port, both
    # hold the link's rate in class 1:1 under root 1:.
    shaped = tc_commands("x-eth0", LinkParams(80, 0.5, 512), 16, ShapingFeatures(True, True),
                         FRAME)
    assert f"classid {LINK_CLASS} htb rate 80mbit ceil 80mbit" in shaped[1]
    assert ebpf_config.tc_class(ebpf_config.CLASS_LINK) == LINK_CLASS
    switch = ebpf_config.qdisc_commands("x-eth0", LinkParams(80, 0.5, 512))
    assert any(f"parent 1: classid {LINK_CLASS} htb rate 80mbit ceil 80mbit" in line
               for line in switch)


def test_a_link_down_in_one_plane_is_its_twin_link_at_seven_eighths_on_the_kernel():
    down, up = mapped({"kind": "link-flap", "link": ["p3t0r0", "p3t1s1"], "at_s": 1,
                       "down_s": 1})
    assert down.fault == RateCut("p0t0r0", "p0t1s1", 7, 8)
    net = Net()
    twin = on_twin(KernelTarget(), net)
    apply_fault(twin, down)
    assert net.log == [
        ("p0t0r0", ["tc class change dev p0t0r0-eth5 parent 1: classid 1:1 htb rate 70mbit "
                    f"ceil 70mbit quantum {FRAME}"]),
        ("p0t1s1", ["tc class change dev p0t1s1-eth0 parent 1: classid 1:1 htb rate 70mbit "
                    f"ceil 70mbit quantum {FRAME}"])]
    assert twin.ebpf_ports.program.writes == []  # no eBPF program on this machine's ports
    net.log.clear()
    apply_fault(twin, up)
    assert [line for _, lines in net.log for line in lines] == [
        "tc class change dev p0t0r0-eth5 parent 1: classid 1:1 htb rate 80mbit ceil 80mbit "
        f"quantum {FRAME}",
        "tc class change dev p0t1s1-eth0 parent 1: classid 1:1 htb rate 80mbit ceil 80mbit "
        f"quantum {FRAME}"]


def test_where_the_ebpf_program_runs_a_switch_port_its_queues_drain_at_the_new_rate():
    # Every port of the twin runs the program (its switch ports in switch mode, its host
    # ports in faults-only mode, which has no queue and keeps its settings).
    ports = {(node.name, p.intf): 1000 + i for i, (node, p) in enumerate(
        (node, p) for node in (*TWIN.hosts, *TWIN.switches) for p in TWIN.ports(node.name))}
    net = Net()
    twin = on_twin(KernelTarget(), net, ports)
    (down,) = mapped({"kind": "transceiver-flap", "host": "h2", "planes": [0, 1, 2, 3],
                      "at_s": 1, "down_s": 1})[:1]
    assert down.fault == RateCut("h2", "p0t0r0", 4, 8)
    apply_fault(twin, down)
    assert net.log == [
        ("h2", ["tc class change dev h2-eth0 parent 1: classid 1:1 htb rate 40mbit "
                f"ceil 40mbit quantum {FRAME}"]),
        ("p0t0r0", ["tc class change dev p0t0r0-eth2 parent 1: classid 1:1 htb rate 40mbit "
                    f"ceil 40mbit quantum {FRAME}"])]
    (write,) = twin.ebpf_ports.program.writes
    tables = switch_tables(TWIN, TWIN.node("p0t0r0"))
    (role,) = [r for r in tables.ports if r.port == 2]
    assert write == ebpf_config.port_config(
        tables, role, LinkParams(40, 0.5, 512), ports[("h2", "h2-eth0")]).write(
        ports[("p0t0r0", "p0t0r0-eth2")])
    (rate,) = struct.unpack_from("=Q", write.value)
    assert rate == 40_000_000 // 8


class Switch(Bmv2Switch):
    """A BMv2 switch node that records its queue settings instead of calling its CLI."""

    def __init__(self, name: str, log: list):  # no switch process
        self.log_name, self.calls = name, log

    def set_queues(self, commands: list[str]) -> None:
        self.calls.append((self.log_name, commands))


def test_on_bmv2_a_switch_end_gets_its_queues_paced_at_the_new_rate():
    log: list = []
    net = Net(switches={"p0t0r1": Switch("p0t0r1", log), "p0t1s2": Switch("p0t1s2", log)})
    target = Bmv2Target.__new__(Bmv2Target)  # set_rate needs no compiled program
    (down,) = mapped({"kind": "link-down", "link": ["p6t0r1", "p6t1s2"], "at_s": 1})
    apply_fault(on_twin(target, net), down)
    spec = TWIN.spec
    assert log == [
        ("p0t0r1", queue_commands(6, 70.0, 512, spec.trim_size_bytes, spec.priority_share,
                                  FRAME)),
        ("p0t1s2", queue_commands(1, 70.0, 512, spec.trim_size_bytes, spec.priority_share,
                                  FRAME))]
    # Full DATA frames at 70 Mbit/s a second, where the link's 80 gave 8/7 as many.
    pps = round(link_pps(70, FRAME))
    assert log[0][1][0] == f"set_queue_rate {pps} 6 {PRIORITY_DATA}"
    assert pps == round(link_pps(80, FRAME) * 7 / 8)
    assert net.log == []  # no host end, no tc
    # A host end is shaped by tc on BMv2 too.
    host = mapped({"kind": "nic-port-down", "host": "h6", "plane": 2, "at_s": 1})
    net = Net(switches={"p0t0r1": Switch("p0t0r1", log)})
    apply_fault(on_twin(target, net), host[0])
    assert net.log == [("h6", ["tc class change dev h6-eth0 parent 1: classid 1:1 htb "
                               f"rate 70mbit ceil 70mbit quantum {FRAME}"])]


class Recorder:
    def __init__(self):
        self.calls = []

    def set_rate(self, running, a, b, share):
        self.calls.append((a, b, share))

    def set_link(self, net, a, b, up):
        self.calls.append((a, b, up))


def test_the_player_gives_a_cut_link_its_rate_back_when_the_run_stops():
    steps = mapped({"kind": "nic-port-down", "host": "h5", "plane": 6, "at_s": 0})
    target = Recorder()
    apply = lambda step: apply_fault(running(TWIN, target), step)  # noqa: E731
    injector = FaultInjector(list(steps), apply, clock=lambda: 0.0)
    injector.start(0.0)
    injector.stop(restore=apply)
    assert target.calls == [("h5", "p0t0r1", 7 / 8), ("h5", "p0t0r1", 1.0)]
    assert injector.errors == []


class Agents:
    def __init__(self):
        self.commands = []

    def command(self, host: int, **cmd) -> None:
        self.commands.append((host, cmd))


def with_agents(agents: Agents) -> Env:
    """What a fault acts on: the twin up on the kernel target, `agents` running on it."""
    twin = on_twin(KernelTarget(), Net())
    twin.agents = agents
    return Env(twin)


def test_a_cut_of_a_hosts_own_link_makes_its_agent_pace_to_the_slower_port():
    # On the twin a NIC port down in one plane is the host's one link at 7/8: the
    # host's agent must send no faster, or its own queue drops what the port cannot
    # carry (a loss the planes' host never has).
    agents = Agents()
    cut = RateCut("h1", "p0t0r0", 7, 8)
    cut.apply(with_agents(agents), up=False)
    cut.apply(with_agents(agents), up=True)
    assert agents.commands == [(1, {"cmd": "line-rate", "share": 7 / 8}),
                               (1, {"cmd": "line-rate", "share": 1.0})]
    # A cut in place before the agents started reaches them once they are up.
    later = Agents()
    cut.tell_agents(later, TWIN)
    assert later.commands == [(1, {"cmd": "line-rate", "share": 7 / 8})]
    # A link between switches is no NIC's port: the agents hear nothing.
    quiet = Agents()
    RateCut("p0t0r0", "p0t1s1", 7, 8).apply(with_agents(quiet), up=False)
    assert quiet.commands == []


def test_an_endpoint_at_a_share_of_its_line_rate_paces_every_sender_to_it():
    config = ProtocolConfig(window=1000, cc=False, rto_min_s=1.0, rto_initial_s=1.0)
    host = Endpoint(0, TWIN, "roce-8", config, lambda e: None, lambda *a: None,
                    lambda *a: None)
    host.send_message(3, 0, bytes(100_000), 0.0)
    full = host.pacer.byte_s
    roce = host.senders[3]
    assert roce.line_rate_Bps == TWIN.spec.host_t0.rate_mbit * 1e6 / 8
    host.set_line_share(0.5)
    assert host.pacer.byte_s == pytest.approx(2 * full)
    assert roce.line_rate_Bps == TWIN.spec.host_t0.rate_mbit * 1e6 / 16
    with pytest.raises(ValueError):
        host.set_line_share(0)
