"""The running fabric: one object that builds, shapes and programs a fabric on a
data-plane target, holds it while it is up, and tears it down.

Every entry point stands on it (the runner's lifecycle, the calibration, the benchmarks,
the labs and the Mininet tests), so that they all stand on the same network, under the
machine's fabric lock. If anything fails (or Ctrl-C arrives) half way, what was built
is stopped before the error goes on. What the fabric puts on the machine is written in
the lock's file before it is built (`planned_remains`, then its namespaces once they
exist), so that its stop, or the next holder after a kill -9, removes exactly that
(experiments/run/cleanup.py `remove`) and nothing another tool made. The hosts are the
same on every target: their configuration (`host_params()`) is built here and handed to
the Mininet nodes, the switches' comes from the target.

Where the switches have no queues of their own (the kernel target), every switch port
gets the eBPF switch program (experiments/dataplanes/ebpf_switch.py: traffic classes by
DSCP, trimming, RED-like ECN on virtual queues, PFC for the lossless class, counters)
under htb classes instead of the plain shaping, and PFC's pauses are carried out
(experiments/dataplanes/pfc.py); where the program cannot be built or loaded, the ports
are shaped as before and `link_emulation()` says why trimming and ECN are missing.

What the layers above keep while the fabric is up is kept here too, not on the Mininet
network: the eBPF program and its ports (`ebpf_ports`), PFC's controller (`pfc`), the
host agents running now (`agents`, set and cleared by experiments/run/agents.py
AgentSet) and the run's topology.json (`resolved_topology`, set by the lifecycle). The
data planes and the faults, below this module, are handed the running fabric.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.kernel import by_interface, host_commands
from experiments.dataplanes import ebpf_switch
from experiments.dataplanes.ebpf_switch import EbpfPorts, EbpfStatus
from experiments.dataplanes.pfc import PfcController
from experiments.dataplanes.targets import Target
from experiments.run.cleanup import Remains, namespace_of, remove, remove_stale
from experiments.run.fabric_lock import FabricLock
from topologies.addressing import host_address
from topologies.model import Fabric
from topologies.network import FabricNet, NodeParams, shape_links, start_network, stop_network
from topologies.placement import Placement
from topologies.remote import is_remote
from topologies.shaping import ShapingFeatures, probe_features


def host_params(fabric: Fabric) -> NodeParams:
    """Each host's `ip` commands (its address, one route per plane port) and, per port,
    those that put the port's entries back after a flap."""
    params = {}
    for host in fabric.hosts:
        ports = fabric.ports(host.name)
        # A host's port number is its plane.
        commands = host_commands(host_address(host.index),
                                 [(p.number, p.intf, p.peer_mac) for p in ports])
        params[host.name] = {"commands": commands,
                             "port_commands": by_interface(commands, [p.intf for p in ports])}
    return params


def planned_remains(fabric: Fabric) -> Remains:
    """What building `fabric` may put on the machine, before a node exists: its nodes,
    every interface of its links, the eBPF program's pins."""
    nodes = tuple(node.name for node in fabric.hosts + fabric.switches)
    return Remains(nodes=nodes, interfaces=tuple(port.intf for name in nodes
                                                 for port in fabric.ports(name)), pins=True)


class RunningFabric:
    """One fabric up on one target: built by start() (or on entering a `with` block,
    which first removes whatever an earlier run left), stopped by stop(). Where its
    nodes ran, what its links and switches emulate, what its bring-up cost, and what
    runs on it now are read here."""

    def __init__(self, fabric: Fabric, target: Target, lock: FabricLock | None,
                 say: Callable[[str], None] = lambda _: None,
                 placement: Placement | None = None):
        self.fabric, self.target, self.lock, self.say = fabric, target, lock, say
        # Which server runs each node (topologies/placement.py); None: all on this one.
        self.placement = placement
        self.net: FabricNet | None = None  # the Mininet network, while up
        self.features = ShapingFeatures(netem=False, red=False)
        self.ebpf = EbpfStatus(False, "not up")
        self.ebpf_switch_ports = False  # the program trims and marks on every switch port
        self.tc_commands = 0
        self.table_writes = 0
        self.bringup_s = 0.0
        self.split = False  # some of its nodes run on other servers (placement)
        self.remains = Remains()  # what it put on the machine (the lock's file names it)
        self._clear()  # what runs on the fabric: nothing yet

    def _clear(self) -> None:
        """What runs on the fabric, as before start and after stop: nothing."""
        # The eBPF switch program once loaded and the ports it runs on, so that every
        # fault and every counter reading finds what the bring-up loaded.
        self.ebpf_ports = EbpfPorts()
        self.pfc: PfcController | None = None  # carries out the program's PFC pauses
        # The host agents running now (experiments/run/agents.py AgentSet, which sets
        # and clears it): what faults acting through the agents reach (a controller's
        # denylist, a link's share of its rate) and PFC pauses.
        self.agents: Any = None
        # The run's topology.json for this fabric, once written (the host agents read it).
        self.resolved_topology: Path | None = None

    # ------------------------------------------------------------ up and down
    def start(self) -> RunningFabric:
        """Build, shape and program the fabric; the caller holds the machine's fabric
        lock (one fabric at a time)."""
        self._require_lock()
        fabric, target, say = self.fabric, self.target, self.say
        started = time.monotonic()
        if self.placement is not None:  # one fabric on each server too
            self.lock.hold_servers(self.placement.servers)
        self.remains = planned_remains(fabric)
        # The lock holds the machine, so anything with this fabric's names is no running
        # fabric's: a crash half way through a bring-up, which would make this one fail.
        stray = remove(self.remains)
        if stray:
            say(f"removed what had this fabric's names: {stray.describe()}")
        self.lock.record(self.remains)
        try:
            net = start_network(fabric, target.switch_cls, target.switch_params(fabric),
                                host_params(fabric), self.placement)
        except BaseException:
            remove(self.remains)  # whatever the half-built network's stop left behind
            raise
        self.net = net
        # A node on another server has a pid of that server's: its namespace is not
        # this machine's to record (its shell's ssh, named after it, is: cleanup.py).
        self.remains = dataclasses.replace(self.remains, namespaces=tuple(
            ns for ns in (namespace_of(node.pid) for node in map(net.get, self.remains.nodes)
                          if not is_remote(node))
            if ns is not None))
        self.lock.record(self.remains)
        try:
            scratch = net.get(fabric.hosts[0].name)
            self.features = probe_features(scratch.cmd)
            self.split = any(is_remote(node) for node in net.hosts + net.switches)
            self.ebpf = (ebpf_switch.prepare_servers(net, self.ebpf_ports) if self.split
                         else ebpf_switch.prepare(scratch.pid, self.ebpf_ports))
            on_switches = target.shape_switch_ports and self.ebpf.available
            self.tc_commands = shape_links(net, fabric, self.features,
                                           hosts_only=on_switches or not target.shape_switch_ports)
            if on_switches:
                say("loading the eBPF switch program on every port")
                self.tc_commands += ebpf_switch.load_fabric(self, fabric.spec.priority_share)
                self.pfc = PfcController(self)
            self.ebpf_switch_ports = on_switches
            for note in self.link_emulation()["notes"]:
                say(f"note: {note}")
            say(f"programming {len(fabric.switches)} switches (static tables, written once)")
            self.table_writes = target.program(net, fabric)
        except BaseException:
            self.stop()
            raise
        self.bringup_s = round(time.monotonic() - started, 3)
        return self

    def stop(self) -> None:
        """Stop PFC's reader and the network, then remove the eBPF program's pins (the
        program and its maps go with their last port); whatever a broken stop leaves of
        the fabric is removed."""
        net, self.net = self.net, None
        if net is None:
            return
        try:
            if self.pfc is not None:
                self.pfc.stop()
            stop_network(net)
            self.ebpf_ports.unload()
        finally:
            self._remove_own()

    def _remove_own(self) -> None:
        """Forget what ran on the fabric and remove what is left of it."""
        self._clear()
        remove(self.remains)
        self.remains = Remains()
        self.lock.record(self.remains)

    def remove_remains(self) -> None:
        """Remove what is left of a network whose nodes disappeared from under it: its
        shells are gone, so Mininet's stop (a command in every node's shell) would wait
        for answers that never come. The netlink sockets that hold its namespaces go
        first, then what is left of its recorded remains."""
        net, self.net = self.net, None
        try:
            if self.pfc is not None:
                self.pfc.stop()
            if net is not None:
                net.link_state.close()
        finally:
            self._remove_own()

    def __enter__(self) -> RunningFabric:
        """Up for a `with` block (tests, the benchmarks, the calibration, the labs):
        what a killed holder of the lock left is removed first."""
        self._require_lock()
        remove_stale(self.lock)
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()

    def _require_lock(self) -> None:
        if self.lock is None or not self.lock.held:
            raise RuntimeError("a fabric is built only under the machine's fabric lock")

    # ------------------------------------------------------------ what it is
    def node_processes(self) -> list[tuple[str, int]]:
        """(node, pid) of the process on this machine each node lives as long as: its
        shell, or the ssh that carries the shell of a node on another server."""
        return [(node.name, node.shell.pid if is_remote(node) else node.pid)
                for node in self.net.hosts + self.net.switches]

    def link_emulation(self) -> dict:
        """What the links and switches emulate here, and how (a falsy value: not at
        all), with a note for every gap."""
        switch_queues = not self.target.shape_switch_ports  # BMv2 marks and trims itself
        if switch_queues:
            ecn, trimming = "P4 switch queue", "P4 switch"
        elif self.ebpf_switch_ports:
            ecn, trimming = "eBPF virtual queue", "eBPF"
        else:
            ecn, trimming = ("RED qdisc" if self.features.red else False), False
        notes = self.features.missing(red_needed=not (switch_queues or self.ebpf_switch_ports))
        if not self.ebpf.available:
            lost = ("loss, gray-loss and one-way link-down faults" if switch_queues
                    else "trimming, and loss, gray-loss and one-way link-down faults")
            notes.append(f"{self.ebpf.reason}: no {lost}")
        return {"rate": True, "queue_limit": True, "delay": self.features.netem,
                "ecn": ecn, "trimming": trimming, "pfc": self.target.pfc,
                "faults": "eBPF maps" if self.ebpf.available else False,
                # A switch port's queue sampled through a run (queue_sampler.py).
                "queue_sampling": "eBPF virtual queue" if self.ebpf_switch_ports else False,
                "ebpf": {"available": self.ebpf.available, "reason": self.ebpf.reason},
                "tc_commands": self.tc_commands, "notes": notes}
