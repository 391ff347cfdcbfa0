"""Bring a fabric up on a data-plane target: build, shape, program, and tear it down.

Used by the runner, the Mininet tests and the benchmarks, so that they all stand on the
same network. If anything fails (or Ctrl-C arrives) half way, what was built is stopped
before the error goes on. The hosts are the same on every target: their configuration
(`host_params()`) is built here and handed to the Mininet nodes, the switches' comes
from the target.

Where the switches have no queues of their own (the kernel target), every switch port
gets the eBPF switch program (experiments/dataplanes/ebpf_switch.py: traffic classes by DSCP,
trimming, RED-like ECN on virtual queues, PFC for the lossless class, counters) under
htb classes instead of the plain shaping, and PFC's pauses are carried out
(experiments/dataplanes/pfc.py); where the program cannot be built or loaded, the ports are shaped
as before and `link_emulation()` says why trimming and ECN are missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from controller.kernel import by_interface, host_commands
from experiments.dataplanes import ebpf_switch
from experiments.dataplanes.ebpf_switch import EbpfStatus
from experiments.dataplanes.pfc import PfcController
from experiments.dataplanes.targets import Target
from experiments.run.cleanup import cleanup
from experiments.run.fabric_lock import FabricLock
from topologies.addressing import host_address
from topologies.model import Fabric
from topologies.network import FabricNet, NodeParams, shape_links, start_network, stop_network
from topologies.shaping import ShapingFeatures, probe_features


@dataclass
class Network:
    net: FabricNet
    fabric: Fabric
    target: Target
    features: ShapingFeatures
    tc_commands: int
    table_writes: int
    bringup_s: float
    ebpf: EbpfStatus
    ebpf_switch_ports: bool  # the program trims and marks on every switch port

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
                "ebpf": {"available": self.ebpf.available, "reason": self.ebpf.reason},
                "tc_commands": self.tc_commands, "notes": notes}


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


def bring_up(fabric: Fabric, target: Target,
             say: Callable[[str], None] = lambda _: None) -> Network:
    started = time.monotonic()
    try:
        net = start_network(fabric, target.switch_cls, target.switch_params(fabric),
                            host_params(fabric))
    except BaseException:
        cleanup()  # whatever the half-built network's stop left behind
        raise
    try:
        scratch = net.get(fabric.hosts[0].name)
        features = probe_features(scratch.cmd)
        ebpf = ebpf_switch.prepare(scratch.pid, net)
        on_switches = target.shape_switch_ports and ebpf.available
        tc = shape_links(net, fabric, features,
                         hosts_only=on_switches or not target.shape_switch_ports)
        if on_switches:
            say("loading the eBPF switch program on every port")
            tc += ebpf_switch.load_fabric(net, fabric, fabric.spec.priority_share)
            net.pfc = PfcController(net, fabric)
        network = Network(net, fabric, target, features, tc, 0, 0.0, ebpf, on_switches)
        for note in network.link_emulation()["notes"]:
            say(f"note: {note}")
        say(f"programming {len(fabric.switches)} switches (static tables, written once)")
        network.table_writes = target.program(net, fabric)
    except BaseException:
        tear_down(net)
        raise
    network.bringup_s = round(time.monotonic() - started, 3)
    return network


def tear_down(net: FabricNet) -> None:
    """Stop the network; whatever a broken stop leaves, cleanup() removes."""
    try:
        stop_network(net)
    finally:
        cleanup()


def remove_remains(net: FabricNet) -> None:
    """Remove what is left of a network whose nodes disappeared from under it: its
    shells are gone, so Mininet's stop (a command in every node's shell) would wait
    for answers that never come. The netlink sockets that hold its namespaces go
    first, then whatever cleanup() finds (the caller holds the fabric lock, so all of
    it is this run's)."""
    try:
        if net.pfc is not None:
            net.pfc.stop()
        net.link_state.close()
    finally:
        cleanup()


@contextmanager
def running(fabric: Fabric, target: Target, lock: FabricLock) -> Iterator[Network]:
    """A fabric up for the `with` block, for tests, the benchmarks, the calibration and
    the labs. The caller holds the machine's fabric lock (`lock`, taken before anything
    else: the start-up cleanup removes every node of the testbed on the machine, which
    only the lock's holder may do)."""
    if not lock.held:
        raise RuntimeError("running() needs the machine's fabric lock held by its caller")
    cleanup()
    network = bring_up(fabric, target)
    try:
        yield network
    finally:
        tear_down(network.net)
