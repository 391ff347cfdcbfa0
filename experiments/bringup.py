"""Bring a fabric up on a data-plane target: build, shape, program, and tear it down.

Used by the runner, the Mininet tests and the benchmarks, so that they all stand on the
same network. If anything fails (or Ctrl-C arrives) half way, what was built is stopped
before the error goes on. The hosts are the same on every target: their configuration
(`host_params()`) is built here and handed to the Mininet nodes, the switches' comes
from the target.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from controller.kernel import by_interface, host_commands
from experiments.cleanup import cleanup
from experiments.targets import Target
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

    def link_emulation(self) -> dict:
        # Where switches queue by themselves (BMv2), they also mark ECN and trim.
        switch_queues = not self.target.shape_switch_ports
        return {"rate": True, "queue_limit": True, "delay": self.features.netem,
                "ecn": switch_queues or self.features.red, "trimming": switch_queues,
                "tc_commands": self.tc_commands,
                "notes": self.features.missing(red_needed=not switch_queues)}


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
    net = start_network(fabric, target.switch_cls, target.switch_params(fabric),
                        host_params(fabric))
    try:
        features = probe_features(net.get(fabric.hosts[0].name).cmd)
        tc = shape_links(net, fabric, features, hosts_only=not target.shape_switch_ports)
        for note in features.missing(red_needed=target.shape_switch_ports):
            say(f"note: {note}")
        say(f"programming {len(fabric.switches)} switches (static tables, written once)")
        writes = target.program(net, fabric)
    except BaseException:
        tear_down(net)
        raise
    return Network(net, fabric, target, features, tc, writes,
                   round(time.monotonic() - started, 3))


def tear_down(net: FabricNet) -> None:
    """Stop the network; whatever a broken stop leaves, cleanup() removes."""
    try:
        stop_network(net)
    finally:
        cleanup()


@contextmanager
def running(fabric: Fabric, target: Target) -> Iterator[Network]:
    cleanup()
    network = bring_up(fabric, target)
    try:
        yield network
    finally:
        tear_down(network.net)
