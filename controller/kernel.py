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
# The End route needs a device that is up and never flaps: not a port (Linux deletes a
# port's routes when it goes down) and not `lo` (packets routed to lo are not forwarded).
# Each router has a private veth pair for it (created by topologies/nodes.py).
ANCHOR_DEV = "usid0"
ANCHOR_PEER = "usid1"


class KernelProgramError(RuntimeError):
    """An `ip` command failed while programming a node."""


def switch_commands(tables: SwitchTables) -> list[str]:
    """The `ip` commands that install one switch's static tables."""
    cmds = [
        f"ip -6 route replace {usid_prefix(tables.my_usid)} encap seg6local action End "
        f"flavors next-csid lblen {BLOCK_BITS} nflen {USID_BITS} dev {ANCHOR_DEV}"
    ]
    for route in tables.routes:
        dev = intf_name(tables.switch, route.port)
        cmds.append(f"ip -6 neigh replace {NEXT_HOP} lladdr {route.next_hop_mac} "
                    f"dev {dev} nud permanent")
        cmds.append(f"ip -6 route replace {usid_prefix(route.usid)} via {NEXT_HOP} dev {dev}")
    return cmds


def commands_for_intf(commands: list[str], intf: str) -> list[str]:
    """The commands that name one interface: what Linux flushed when it went down.

    Linux deletes a port's routes and neighbour entries when the port is set down. A
    switch keeps its static configuration across a link flap, so the node puts these
    entries back when the port comes up again (this is not a table change).
    """
    return [c for c in commands if c.endswith(f" dev {intf}") or f" dev {intf} " in c]


def apply(commands: list[str], run: Callable[[str], str], node: str) -> int:
    """Run the commands; raise on the first failure. Returns how many were written."""
    for command in commands:
        output = run(f"{command} 2>&1; echo __status=$?").strip()
        text, _, status = output.rpartition("__status=")
        if status.strip() != "0":
            raise KernelProgramError(f"{node}: '{command}' failed: {text.strip() or status}")
    return len(commands)
