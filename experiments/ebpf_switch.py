"""The eBPF switch program on a running fabric: loaded at bring-up, faults, counters.

The program (ebpf/mrc_switch.bpf.c, docs/ebpf-switch.md) and its settings
(controller/ebpf_config.py) exist apart from any network; this module puts them on one:

- `prepare(run)` builds the object when it is stale and tries it on a scratch
  namespace's loopback; a build error or a kernel that refuses it is the reason, said
  in the run summary, why the run goes on without it;
- `load_switch_ports()` gives every port of every kernel switch the htb priority
  classes and the program with that port's settings (the values the P4 `port_config`
  table gets), so the kernel data plane trims, marks ECN and counts like the P4 switch;
- `fault_port()` finds the program on any port, or loads it in faults-only mode (it
  then never marks, trims or drops by itself): host ports on every target, and on
  bmv2 the switch ends of the links, which live in the root namespace beside BMv2;
- `set_loss()` / `set_gray_loss()` write the `loss` and `gray-loss` faults (and a
  one-way `link-down`, a loss of 1.0) into the maps, and clear them;
- `read_counters()` reads every loaded port's counters for the summary.

Every loaded port is kept in the network's `ebpf_ports` (node, interface) -> EbpfPort,
so a fault applied by any caller finds the program the bring-up loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller import ebpf_config as cfg
from controller.tables import switch_tables
from topologies.ebpf_port import EbpfError, EbpfPort, build, ebpf_available
from topologies.model import Fabric
from topologies.network import FabricNet
from topologies.nodes import run_commands

Counters = dict[str, dict[str, dict[str, int]]]  # node -> interface -> counter -> packets


@dataclass(frozen=True)
class EbpfStatus:
    """Whether the program can run on this machine, and if not, why."""

    available: bool
    reason: str


def prepare(run: Callable[[str], str]) -> EbpfStatus:
    """Build the program if its sources changed, and try it (run = a scratch
    namespace's command runner). A failed build is a reason, not an error: the run
    then goes on without the program."""
    try:
        build(cfg.compile_command(), cfg.OBJECT, cfg.BUILD_INPUTS)
    except EbpfError as err:
        # One line for the summary: what failed and the compiler's first complaint.
        return EbpfStatus(False, "no eBPF switch program: "
                          + " ".join(str(err).splitlines()[:2]).strip())
    return EbpfStatus(*ebpf_available(run, cfg.OBJECT, cfg.SECTION))


def load_switch_ports(net: FabricNet, fabric: Fabric) -> int:
    """The htb priority classes and the program with its settings on every switch port;
    returns the tc commands run (the program's loads included)."""
    count = 0
    for switch in fabric.switches:
        node = net.get(switch.name)
        configs = cfg.switch_port_configs(fabric, switch_tables(fabric, switch))
        for port in fabric.ports(switch.name):
            count += run_commands(cfg.qdisc_commands(port.intf, fabric.link_params(port.tier)),
                                  node.cmd, switch.name)
            program = EbpfPort(node.cmd, port.intf)
            program.load(cfg.OBJECT, cfg.SECTION)
            program.apply(configs[port.intf].write())
            net.ebpf_ports[(switch.name, port.intf)] = program
            count += 2  # the clsact qdisc and the filter
    return count


def fault_port(net: FabricNet, fabric: Fabric, node: str, intf: str) -> EbpfPort:
    """The program on a port, loaded in faults-only mode if the port has none yet."""
    program = net.ebpf_ports.get((node, intf))
    if program is not None:
        return program
    need = "loss, gray-loss and one-way link-down faults need the eBPF switch program"
    if not cfg.OBJECT.exists():
        raise EbpfError(f"{node} {intf}: {need}, which is not built ({cfg.OBJECT}; clang, "
                        "libbpf-dev: make deps)")
    (port,) = [p for p in fabric.ports(node) if p.intf == intf]
    program = EbpfPort(net.get(node).cmd, intf)
    try:
        program.load(cfg.OBJECT, cfg.SECTION)
    except EbpfError as err:
        raise EbpfError(f"{node} {intf}: {need}, which this machine did not load: "
                        + " ".join(str(err).split())) from err
    program.apply(cfg.faults_only_config(fabric.link_params(port.tier)).write())
    net.ebpf_ports[(node, intf)] = program
    return program


def fault_ports(fabric: Fabric, steps) -> set[tuple[str, str]]:
    """(node, interface) of every port whose eBPF maps a step of the timeline writes."""
    return {port for step in steps for port in step.fault.ebpf_ports(fabric)}


def prepare_faults(net: FabricNet, fabric: Fabric, steps) -> int:
    """Load the program, before traffic starts, on every port a loss fault or a one-way
    link-down of the timeline will use, so that applying the fault is only a map write.
    Returns the ports loaded."""
    new = [p for p in sorted(fault_ports(fabric, steps)) if p not in net.ebpf_ports]
    for node, intf in new:
        fault_port(net, fabric, node, intf)
    return len(new)


def set_loss(net: FabricNet, fabric: Fabric, ports: list[tuple[str, str]],
             probability: float) -> None:
    """Random loss of `probability` (0 clears it) on each (node, interface)."""
    for node, intf in ports:
        fault_port(net, fabric, node, intf).apply(cfg.loss_write(probability))


def set_gray_loss(net: FabricNet, fabric: Fabric, entries: list[tuple[str, str, str, int]],
                  probability: float | None) -> None:
    """Gray loss of `probability` (None clears it) of the packets to each destination
    prefix, on the port that sends them: entries are (node, interface, address,
    prefix length)."""
    for node, intf, address, prefix_len in entries:
        program = fault_port(net, fabric, node, intf)
        if probability is None:
            program.apply(cfg.gray_loss_clear(address, prefix_len))
        else:
            program.apply(cfg.gray_loss_write(address, probability, prefix_len))


def read_counters(net: FabricNet) -> Counters:
    """Every loaded port's counters: node -> interface -> {forwarded, trimmed, ...}."""
    out: Counters = {}
    for (node, intf), program in sorted(net.ebpf_ports.items()):
        out.setdefault(node, {})[intf] = cfg.decode_counters(
            program.read_counters(cfg.COUNTERS_MAP))
    return out


def counter_totals(fabric: Fabric, before: Counters, after: Counters) -> dict[str, dict]:
    """What the ports counted between two readings, summed over the switch ports that
    face a host (the last hops: `host_ports`), over the switch ports of the fabric
    (T0-T1: `fabric_ports`), so that a run can show, say, that ECN marks appear on
    fabric ports and never on host ports, and, when a fault loaded the program on a
    host's own ports, over those (`host_nics`)."""
    switches = {s.name for s in fabric.switches}
    tiers = {(n, p.intf): p.tier for n in switches for p in fabric.ports(n)}
    totals = {"host_ports": dict.fromkeys(cfg.COUNTERS, 0),
              "fabric_ports": dict.fromkeys(cfg.COUNTERS, 0)}
    for node, ports in after.items():
        for intf, counters in ports.items():
            if node not in switches:
                group = "host_nics"
                totals.setdefault(group, dict.fromkeys(cfg.COUNTERS, 0))
            else:
                group = "host_ports" if tiers[(node, intf)] == "host_t0" else "fabric_ports"
            old = before.get(node, {}).get(intf, {})
            for name, value in counters.items():
                totals[group][name] += value - old.get(name, 0)
    return totals
