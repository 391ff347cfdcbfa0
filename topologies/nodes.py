"""Mininet node classes for the kernel target: fabric hosts and Linux SRv6 routers.

Both are ordinary Mininet hosts (each in its own network namespace); what makes them
hosts or switches is their configuration:
- `FabricHost`: its own address fcbb:bb00:<uSID>:: on the loopback, and one route per
  plane that sends every path starting in that plane's T0 out of that plane's port;
- `KernelRouter`: IPv6 forwarding on; its uSID tables are written by
  controller/kernel.py, once, after the network is up.
"""

from __future__ import annotations

from mininet.node import Host

from controller.kernel import NEXT_HOP, apply
from topologies.addressing import BLOCK_BITS, t0_usid, usid_address

# Quiet, deterministic IPv6: no DAD, no router solicitations, no autoconf addresses.
_SYSCTLS = (
    "net.ipv6.conf.all.accept_dad=0",
    "net.ipv6.conf.default.accept_dad=0",
    "net.ipv6.conf.all.accept_ra=0",
    "net.ipv6.conf.default.accept_ra=0",
    "net.ipv6.conf.all.router_solicitations=0",
    "net.ipv6.conf.default.router_solicitations=0",
    "net.ipv6.conf.all.disable_ipv6=0",
    "net.ipv6.conf.default.disable_ipv6=0",
)


def _sysctl(node: Host, settings: tuple[str, ...]) -> None:
    apply(["sysctl -qw " + " ".join(settings)], node.cmd, node.name)


def plane_prefix(plane: int) -> str:
    """Every path in a plane starts with a T0 uSID 0x1P.. of that plane: a /40 prefix."""
    return f"{usid_address([t0_usid(plane, 0)])}/{BLOCK_BITS + 8}"


def host_commands(address: str, plane_ports: list[tuple[int, str, str]]) -> list[str]:
    """Commands for a host: (plane, interface, peer MAC) for each plane port."""
    cmds = [f"ip -6 addr replace {address}/128 dev lo"]
    for plane, intf, peer_mac in plane_ports:
        cmds.append(f"ip -6 neigh replace {NEXT_HOP} lladdr {peer_mac} dev {intf} nud permanent")
        cmds.append(f"ip -6 route replace {plane_prefix(plane)} via {NEXT_HOP} dev {intf}")
    return cmds


class FabricHost(Host):
    """A host with one port per plane. `address` and `plane_ports` come from the builder."""

    def config(self, address: str = "", plane_ports=(), **params):
        result = super().config(**params)
        _sysctl(self, _SYSCTLS)
        apply(host_commands(address, list(plane_ports)), self.cmd, self.name)
        return result


class KernelRouter(Host):
    """A Linux router namespace: forwards IPv6; its SRv6 tables are written later."""

    def config(self, **params):
        result = super().config(**params)
        _sysctl(self, _SYSCTLS + ("net.ipv6.conf.all.forwarding=1",))
        return result
