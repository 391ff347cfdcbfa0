"""The eBPF switch program on a running fabric: loaded at bring-up, faults, counters, PFC.

The program (ebpf/mrc_switch.bpf.c, docs/ebpf-switch.md) and its settings
(controller/ebpf_config.py) exist apart from any network; this module puts them on one:

- `prepare(pid)` builds the object when it is stale and tries it in the namespace of a
  scratch node; a build error or a kernel that refuses it is the reason, said in the
  run summary, why the run goes on without it;
- `load_fabric()` loads the program once and attaches it to every port of the fabric:
  each switch port with the htb classes it picks from and that port's settings (the
  values the P4 program gets), each host port in faults-only mode; one tc batch per
  node, one bpftool batch for every map entry;
- `fault_port()` puts it on a port in faults-only mode where it is not yet (on bmv2,
  the switch ends of the links, which live in the root namespace beside BMv2);
- `set_loss()` / `set_gray_loss()` write the `loss` and `gray-loss` faults (and a
  one-way `link-down`, a loss of 1.0) into the maps, and clear them;
- `read_counters()` reads every port's counters, the time its lossless queue spent
  paused by PFC, and what the port's real queues dropped (`queue_dropped`).

The program once loaded and the ports it runs on ((node, interface) -> ifindex) are one
`EbpfPorts`, kept by the running fabric (experiments/run/fabric.py `RunningFabric
.ebpf_ports`), so a fault applied by any caller and every counter reading find what the
bring-up loaded. The functions here are handed the running fabric (`Running`: this tier
cannot import experiments/run/, which stands above it). PFC's pause and resume are
carried out by experiments/dataplanes/pfc.py.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller import ebpf_config as cfg
from controller.tables import switch_tables
from experiments.dataplanes.switch_counters import Counters
from topologies.ebpf_program import (
    PIN_DIR,
    EbpfError,
    EbpfProgram,
    RemoteWriter,
    Shell,
    build,
    ebpf_available,
)
from topologies.model import Fabric
from topologies.network import FabricNet
from topologies.remote import is_remote


@dataclass(frozen=True)
class EbpfStatus:
    """Whether the program can run on this machine, and if not, why."""

    available: bool
    reason: str


@dataclass
class EbpfPorts:
    """The eBPF switch program on one running fabric: the program once loaded on this
    machine (`program`, None before), the ports it runs on (`ports`: (node, interface)
    -> ifindex, unique over the fabric: load_fabric) and, on a fabric split across
    servers, the program loaded on each server (`servers`: name -> program) and the
    server of each node there (`node_server`)."""

    program: EbpfProgram | None = None
    ports: dict[tuple[str, str], int] = field(default_factory=dict)
    servers: dict[str, EbpfProgram] = field(default_factory=dict)
    node_server: dict[str, str] = field(default_factory=dict)

    def by_index(self) -> dict[int, tuple[str, str]]:
        """ifindex -> (node, interface) of every port the program runs on."""
        return {ifindex: port for port, ifindex in self.ports.items()}

    def program_of(self, node: str) -> EbpfProgram:
        """The program on the machine `node` runs on."""
        server = self.node_server.get(node)
        return self.servers[server] if server is not None else _program(self)

    def programs(self) -> list[tuple[str | None, EbpfProgram]]:
        """(server, program) of every machine the program is loaded on (None: this one)."""
        head = [(None, self.program)] if self.program is not None else []
        return head + list(self.servers.items())

    def write(self, ops) -> int:
        """Apply map writes: a port's on the machine the port is on, the settings every
        port shares (classes by DSCP) on every machine the program is loaded on, the
        machines at once (each server's write is a round trip). Returns how many."""
        ops = list(ops)
        programs = self.programs() or [(None, _program(self))]
        if len(programs) == 1:
            return programs[0][1].write(ops)
        where = self.by_index()
        by_server: dict[str | None, list] = {server: [] for server, _ in programs}
        for op in ops:
            port = where.get(cfg.port_of(op))
            if port is None:  # every port's, or a port not known yet: everywhere
                for server_ops in by_server.values():
                    server_ops.append(op)
            else:
                by_server[self.node_server.get(port[0])].append(op)
        with ThreadPoolExecutor(max_workers=len(programs)) as pool:
            list(pool.map(lambda item: item[1].write(by_server[item[0]]), programs))
        return len(ops)

    def unload(self) -> None:
        for _, program in self.programs():
            program.unload()


class Running(Protocol):
    """The running fabric as the data planes and the faults are handed it
    (experiments/run/fabric.py `RunningFabric`)."""

    net: FabricNet  # the Mininet network
    fabric: Fabric
    target: Any  # its data plane (experiments/dataplanes/targets.py Target)
    ebpf_ports: EbpfPorts
    agents: Any  # the host agents running now (experiments/run/agents.py AgentSet), or None


def prepare(pid: int | None, ebpf: EbpfPorts | None = None) -> EbpfStatus:
    """Build the program if its sources changed, and try it in the namespace of `pid`
    (a scratch node of the fabric whose `ebpf` it then stays: `_program`). A failed
    build is a reason, not an error: the run then goes on without the program."""
    failed = _build()
    if failed is not None:
        return failed
    program = EbpfProgram(cfg.OBJECT) if ebpf is not None and ebpf.program is None else None
    status = EbpfStatus(*ebpf_available(cfg.OBJECT, pid, keep=program))
    if status.available and program is not None:
        ebpf.program = program
    return status


def prepare_servers(net: FabricNet, ebpf: EbpfPorts) -> EbpfStatus:
    """For a fabric split across servers (topologies/placement.py): build the program
    here and load it on every server that holds nodes, tried in one node's namespace
    there. The servers read the object at this machine's path (a namespace server
    shares the files; a real server has the project at the same path, `make ebpf`
    there). Any server that cannot run it is the reason, naming the server."""
    failed = _build()
    if failed is not None:
        return failed
    first: dict[str | None, Any] = {}
    for node in net.hosts + net.switches:
        first.setdefault(node.server if is_remote(node) else None, node)
        if is_remote(node):
            ebpf.node_server[node.name] = node.server
    head = first.pop(None, None)
    if head is not None:
        status = prepare(head.pid, ebpf)
        if not status.available:
            return status

    def load(server: str) -> str | None:
        """Load the program on `server`: None, or why it cannot run there."""
        node = first[server]
        program = EbpfProgram(cfg.OBJECT, PIN_DIR.with_name(f"{PIN_DIR.name}-{server}"),
                              _shell(node))
        available, reason = ebpf_available(cfg.OBJECT, node.pid, program.pin, keep=program)
        if available:
            # Its map writes (faults, rate changes) through one process there: a
            # bpftool over ssh each took a fifth of a second.
            program.writer = RemoteWriter(node.python("topologies.ebpf_program", "writer",
                                                      str(program.pin)))
            ebpf.servers[server] = program
        return None if available else f"on server {server}: {reason}"

    with ThreadPoolExecutor(max_workers=max(1, len(first))) as pool:  # the servers at once
        for reason in pool.map(load, sorted(first)):
            if reason is not None:
                return EbpfStatus(False, reason)
    return EbpfStatus(True, "eBPF switch program on every port, loaded on each server")


def _build() -> EbpfStatus | None:
    """Build the program if its sources changed: None, or why it could not be built
    (one line for the summary: what failed and the compiler's first complaint)."""
    try:
        build(cfg.compile_command(), cfg.OBJECT, cfg.BUILD_INPUTS)
    except EbpfError as err:
        return EbpfStatus(False, "no eBPF switch program: "
                          + " ".join(str(err).splitlines()[:2]).strip())
    return None


def _shell(node) -> Shell:
    """How a program reaches the server of `node` (topologies/remote.py RemoteNode)."""
    def run(command: list[str], stdin: str | None) -> str:
        done = node.rrun(command, stdin)
        if done.returncode != 0:
            text = (done.stderr or done.stdout).strip().splitlines()
            raise EbpfError(f"on {node.server}: {' '.join(command[:4])}: "
                            f"{text[-1] if text else done.returncode}")
        return done.stdout
    return run


def _program(ebpf: EbpfPorts) -> EbpfProgram:
    """The fabric's program on this machine, loaded on first use."""
    if ebpf.program is None:
        program = EbpfProgram(cfg.OBJECT)
        program.load()
        ebpf.program = program
    return ebpf.program


def _indexes(net: FabricNet, node: str) -> dict[str, int]:
    item = net.get(node)
    return _remote_indexes(item) if is_remote(item) else net.link_state.indexes(item.pid)


def _remote_indexes(node) -> dict[str, int]:
    """Interface -> ifindex of a server's node, as its shell lists its ports ("7:
    h0-eth0@if8: <...>")."""
    found = {}
    for line in node.cmd("ip -o link show").splitlines():
        number, _, rest = line.partition(": ")
        if number.strip().isdigit() and rest:
            found[rest.split(":")[0].split("@")[0]] = int(number)
    return found


def load_fabric(running: Running, priority_share: float | None = None) -> int:
    """The program on every port: switch ports with their htb classes and settings,
    host ports in faults-only mode (and as PFC's last hop back to the NIC). Returns the
    tc commands and map writes made."""
    net, fabric, ebpf = running.net, running.fabric, running.ebpf_ports
    index = {}  # (node, interface) -> ifindex, over the whole fabric
    for node in (*fabric.hosts, *fabric.switches):
        found = _indexes(net, node.name)
        for port in fabric.ports(node.name):
            index[(node.name, port.intf)] = found[port.intf]
    if len(set(index.values())) != len(index):
        raise EbpfError("two ports of the fabric share an interface index: the program's "
                        "maps, keyed by it, cannot tell them apart")
    count, writes = 0, []
    attach: dict[int, tuple[EbpfProgram, list]] = {}  # by program: (pid, ports, before)

    def put(node: str, before: list[str]) -> None:
        program = ebpf.program_of(node)
        attach.setdefault(id(program), (program, []))[1].append(
            (net.get(node).pid, [p.intf for p in fabric.ports(node)], before))

    for switch in fabric.switches:
        tables = switch_tables(fabric, switch)
        roles = {role.port: role for role in tables.ports}
        qdiscs = []
        for port in fabric.ports(switch.name):
            link = fabric.link_params(port.tier)
            qdiscs += cfg.qdisc_commands(port.intf, link, priority_share,
                                         fabric.spec.trim_size_bytes,
                                         fabric.spec.data_frame_bytes)
            peer = index[(port.peer, fabric.ports(port.peer)[port.peer_port].intf)]
            writes.append(cfg.port_config(tables, roles[port.number], link, peer)
                          .write(index[(switch.name, port.intf)]))
        put(switch.name, qdiscs)
        writes += cfg.class_writes(tables)
    for host in fabric.hosts:
        put(host.name, [])
        for port in fabric.ports(host.name):
            peer = index[(port.peer, fabric.ports(port.peer)[port.peer_port].intf)]
            writes.append(cfg.faults_only_config(fabric.link_params(port.tier), peer)
                          .write(index[(host.name, port.intf)]))
    # Every machine's ports at once: one shell each.
    with ThreadPoolExecutor(max_workers=len(attach)) as pool:
        count += sum(pool.map(lambda item: item[0].attach_all(item[1]), attach.values()))
    sizes = ebpf.programs()[0][1].sizes  # the same object everywhere
    for ifindex in index.values():
        writes += cfg.fresh_state_writes(ifindex, sizes)
    count += ebpf.write(writes)
    running.ebpf_ports.ports.update(index)
    return count


def fault_port(running: Running, node: str, intf: str) -> int:
    """The ifindex of a port running the program, which is put on it in faults-only
    mode if it does not run there yet (on bmv2: the switch ends beside BMv2, in the root
    namespace)."""
    net, fabric, ebpf = running.net, running.fabric, running.ebpf_ports
    ifindex = ebpf.ports.get((node, intf))
    if ifindex is not None:
        return ifindex
    need = "loss, gray-loss and one-way link-down faults need the eBPF switch program"
    if not cfg.OBJECT.exists():
        raise EbpfError(f"{node} {intf}: {need}, which is not built ({cfg.OBJECT}; clang, "
                        "libbpf-dev: make deps)")
    (port,) = [p for p in fabric.ports(node) if p.intf == intf]
    item = net.get(node)
    pid = item.pid if item.inNamespace else None  # BMv2 switches live in the root one
    try:
        program = ebpf.program_of(node)
        program.attach(pid, [intf])
        ifindex = (_indexes(net, node) if pid else _root_indexes())[intf]
        ebpf.write([cfg.faults_only_config(fabric.link_params(port.tier)).write(ifindex),
                    *cfg.fresh_state_writes(ifindex, program.sizes)])
    except EbpfError as err:
        raise EbpfError(f"{node} {intf}: {need}, which this machine did not load: "
                        + " ".join(str(err).split())) from err
    ebpf.ports[(node, intf)] = ifindex
    return ifindex


def _root_indexes() -> dict[str, int]:
    import socket

    return {name: index for index, name in socket.if_nameindex()}


def fault_ports(fabric: Fabric, steps) -> set[tuple[str, str]]:
    """(node, interface) of every port whose eBPF maps a step of the timeline writes."""
    return {port for step in steps for port in step.fault.ebpf_ports(fabric)}


def prepare_faults(running: Running, steps) -> int:
    """Put the program, before traffic starts, on every port a loss fault or a one-way
    link-down of the timeline will use, so that applying the fault is only a map write.
    Returns the ports it was put on."""
    new = [p for p in sorted(fault_ports(running.fabric, steps))
           if p not in running.ebpf_ports.ports]
    for node, intf in new:
        fault_port(running, node, intf)
    return len(new)


def set_loss(running: Running, ports: list[tuple[str, str]], probability: float) -> None:
    """Random loss of `probability` (0 clears it) on each (node, interface)."""
    writes = [cfg.loss_write(fault_port(running, node, intf), probability)
              for node, intf in ports]
    running.ebpf_ports.write(writes)


def set_gray_loss(running: Running, entries: list[tuple[str, str, str, int]],
                  probability: float | None) -> None:
    """Gray loss of `probability` (None clears it) of the packets to each destination
    prefix, on the port that sends them: entries are (node, interface, address,
    prefix length)."""
    writes = []
    for node, intf, address, prefix_len in entries:
        ifindex = fault_port(running, node, intf)
        writes.append(cfg.gray_loss_clear(ifindex, address, prefix_len) if probability is None
                      else cfg.gray_loss_write(ifindex, address, probability, prefix_len))
    running.ebpf_ports.write(writes)


def _by_port(ebpf: EbpfPorts, name: str, decode: Callable[[bytes], object],
             where: dict[int, tuple[str, str]]) -> dict:
    """A map's entries of every port in `where` (EbpfPorts.by_index): node -> interface
    -> value, each read on the machine its port is on."""
    out: dict = {}
    for server, program in ebpf.programs():
        for key, value in program.dump(name):
            port = where.get(int.from_bytes(key, "little"))
            if port is not None and ebpf.node_server.get(port[0]) == server:
                out.setdefault(port[0], {})[port[1]] = decode(value)
    return out


def read_counters(running: Running) -> Counters:
    """Every port's counters: node -> interface -> {forwarded, trim_pkts, ...},
    `pfc_paused_us`, the time its lossless queue has spent paused by PFC so far (pauses
    that ended), and `queue_dropped`, the packets the kernel's own queues of the port
    dropped (`_queue_drops`)."""
    ebpf = running.ebpf_ports
    where = ebpf.by_index()
    counters = _by_port(ebpf, cfg.COUNTERS_MAP, cfg.decode_counters, where)
    paused = _by_port(ebpf, cfg.STATE_MAP,
                      lambda value: cfg.STATE_PAUSED_TOTAL.unpack_from(value)[0] // 1000, where)
    dropped = _queue_drops(running.net, counters, where)
    for node, ports in counters.items():
        for intf, values in ports.items():
            values["pfc_paused_us"] = paused.get(node, {}).get(intf, 0)
            values["queue_dropped"] = dropped.get(node, {}).get(intf, 0)
    return counters


def paused_ports(running: Running) -> set[tuple[str, str]]:
    """The (node, interface) of every port PFC holds paused now, in the program's model."""
    ebpf = running.ebpf_ports
    paused = _by_port(ebpf, cfg.STATE_MAP, lambda value: cfg.STATE_PAUSED.unpack_from(value)[0],
                      ebpf.by_index())
    return {(node, intf) for node, ports in paused.items() for intf, on in ports.items() if on}


def _queue_drops(net: FabricNet, ports: dict,
                 where: dict[int, tuple[str, str]]) -> dict[str, dict[str, int]]:
    """node -> interface -> packets its root qdisc dropped so far, for the nodes of
    `ports` (their interfaces found in `where`, EbpfPorts.by_index). The program decides
    every drop of its model before a packet is queued, so the real queues, as deep as
    the model's or deeper (the lossless one far deeper), drop only when the kernel
    drains them later than the model's clock: the machine fell behind the emulated
    switch (experiments/analysis/health.py)."""
    out: dict[str, dict[str, int]] = {}
    for node in ports:
        item = net.get(node)
        found = (_remote_queue_drops(item) if is_remote(item)
                 else net.link_state.root_queue_drops(item.pid))
        for ifindex, drops in found.items():
            port = where.get(ifindex)
            if port is not None and port[0] == node:
                out.setdefault(node, {})[port[1]] = drops
    return out


def _remote_queue_drops(node) -> dict[int, int]:
    """ifindex -> packets the root qdisc of each port of a server's node dropped, read
    through its shell (`tc -s qdisc` names the port; its index from `ip`)."""
    indexes = _remote_indexes(node)
    drops, port = {}, None
    for line in node.cmd("tc -s qdisc show").splitlines():
        words = line.split()
        if words[:1] == ["qdisc"]:
            port = words[words.index("dev") + 1] if "root" in words and "dev" in words else None
        elif port is not None and "(dropped" in words:
            drops[indexes[port]] = int(words[words.index("(dropped") + 1].rstrip(","))
            port = None
    return drops
