"""The kernel target's table writer: static tables -> `ip -6` commands for Linux SRv6.

Each switch is a Linux router in its own network namespace:
- its own uSID is a `seg6local` route with action `End` and the NEXT-C-SID flavor
  (Linux >= 6.1), which shifts the uSID list behind the 32-bit block by 16 bits and
  looks the new destination up again;
- each route "next active uSID -> port, next-hop MAC" is a /48 route via the fixed
  link-local next hop fe80::1 with a permanent neighbour entry holding the peer's MAC,
  so no neighbour discovery runs and the MAC comes from the addressing plan.

Commands are built by pure functions (tested without root) and run through a callable
the caller supplies (a Mininet node's `cmd`, usually). They are written once at
start-up; `apply()` counts them so a run can report its table writes.
"""

from __future__ import annotations

from collections.abc import Callable

from controller.tables import SwitchTables
from topologies.addressing import BLOCK_BITS, USID_BITS, intf_name, usid_prefix

NEXT_HOP = "fe80::1"


class KernelProgramError(RuntimeError):
    """An `ip` command failed while programming a node."""


def switch_commands(tables: SwitchTables) -> list[str]:
    """The `ip` commands that install one switch's static tables."""
    first_port = intf_name(tables.switch, tables.ports[0].port)
    cmds = [
        f"ip -6 route replace {usid_prefix(tables.my_usid)} encap seg6local action End "
        f"flavors next-csid lblen {BLOCK_BITS} nflen {USID_BITS} dev {first_port}"
    ]
    for route in tables.routes:
        dev = intf_name(tables.switch, route.port)
        cmds.append(f"ip -6 neigh replace {NEXT_HOP} lladdr {route.next_hop_mac} "
                    f"dev {dev} nud permanent")
        cmds.append(f"ip -6 route replace {usid_prefix(route.usid)} via {NEXT_HOP} dev {dev}")
    return cmds


def apply(commands: list[str], run: Callable[[str], str], node: str) -> int:
    """Run the commands; raise on the first failure. Returns how many were written."""
    for command in commands:
        output = run(f"{command} 2>&1; echo __status=$?").strip()
        text, _, status = output.rpartition("__status=")
        if status.strip() != "0":
            raise KernelProgramError(f"{node}: '{command}' failed: {text.strip() or status}")
    return len(commands)
