"""Mininet node classes for the kernel target: fabric hosts and Linux SRv6 routers.

Both are ordinary Mininet hosts (each in its own network namespace); what makes them
hosts or switches is their configuration:
- `FabricHost`: its own address fcbb:bb00:<uSID>:: on the loopback, and one route per
  plane that sends every path starting in that plane's T0 out of that plane's port;
- `KernelRouter`: IPv6 forwarding on; its uSID tables are written by `program()`, once,
  after the network is up.

Linux flushes a port's routes and neighbour entries when the port is set down (Mininet's
link-down primitive does that). A real host or switch keeps its static configuration
across a link flap, so both classes put that port's entries back in `restore_port()`
when the link comes up; `restored` counts those re-installs apart from table writes.
"""

from __future__ import annotations

from mininet.node import Host

from controller.kernel import (
    ANCHOR_DEV,
    ANCHOR_PEER,
    NEXT_HOP,
    apply,
    commands_for_intf,
    switch_commands,
)
from controller.tables import SwitchTables
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


class StaticConfigNode(Host):
    """A node whose static `ip` configuration is remembered to survive link flaps."""

    def config(self, **params):
        result = super().config(**params)
        self.static_commands: list[str] = []
        self.restored = 0
        apply(["sysctl -qw " + " ".join(_SYSCTLS + self.extra_sysctls)], self.cmd, self.name)
        return result

    extra_sysctls: tuple[str, ...] = ()

    def install(self, commands: list[str]) -> int:
        self.static_commands += commands
        return apply(commands, self.cmd, self.name)

    def restore_port(self, intf: str) -> int:
        count = apply(commands_for_intf(self.static_commands, intf), self.cmd, self.name)
        self.restored += count
        return count


def switch_commands_end(commands: list[str]) -> str:
    """The switch's own End route among its static commands."""
    return next(c for c in commands if "seg6local" in c)


class FabricHost(StaticConfigNode):
    """A host with one port per plane. `address` and `plane_ports` come from the builder."""

    def config(self, address: str = "", plane_ports=(), **params):
        result = super().config(**params)
        self.install(host_commands(address, list(plane_ports)))
        return result

    def set_port(self, intf: str, up: bool) -> None:
        """A NIC port going down or coming back (its peer sees carrier loss)."""
        apply([f"ip link set {intf} {'up' if up else 'down'}"], self.cmd, self.name)
        if up:
            self.restore_port(intf)


class KernelRouter(StaticConfigNode):
    """A Linux router namespace: forwards IPv6; `program()` writes its SRv6 tables."""

    extra_sysctls = ("net.ipv6.conf.all.forwarding=1",)

    def config(self, **params):
        result = super().config(**params)
        apply([f"ip link add {ANCHOR_DEV} type veth peer name {ANCHOR_PEER}",
               f"ip link set {ANCHOR_DEV} up", f"ip link set {ANCHOR_PEER} up"],
              self.cmd, self.name)
        return result

    def program(self, tables: SwitchTables) -> int:
        return self.install(switch_commands(tables))

    def power_off(self) -> None:
        """A reboot's first half: every port down, every table entry gone."""
        apply([f"ip link set {intf} down" for intf in self.intfNames() if intf != "lo"]
              + ["ip -6 route flush proto boot", "ip -6 neigh flush all"], self.cmd, self.name)
        self.static_commands = []

    def power_on(self, tables: SwitchTables) -> int:
        """A reboot's second half: ports up, then the same static tables again."""
        apply([f"ip link set {intf} up" for intf in self.intfNames() if intf != "lo"],
              self.cmd, self.name)
        return self.program(tables)

    def blackhole(self, on: bool) -> None:
        """Silently drop everything addressed to this switch (links stay up), or stop."""
        end_route = switch_commands_end(self.static_commands)
        prefix = end_route.split()[4]
        apply([f"ip -6 route replace blackhole {prefix}" if on else end_route],
              self.cmd, self.name)
