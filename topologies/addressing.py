"""The addressing plan: node names, uSIDs, IPv6 uSID addresses, MACs and interface names.

One rule, documented in docs/addressing.md, gives every node a unique 16-bit micro-SID
(uSID) inside the locator block fcbb:bb00::/32. The top nibble says the role, so an
address can be read by eye:

    T0 (leaf)   0x1PRR   P = plane (0-15), RR = rack (0-255)
    T1 (spine)  0x2PSS   P = plane (0-15), SS = spine index in the plane (0-255)
    host        0x8000 + host index (0-32767)

A path is the block followed by up to six uSIDs, e.g. host 5 through plane 3, spine 1:
fcbb:bb00:1300:2301:1301:8005:: (T0 plane 3 rack 0, T1 plane 3 spine 1, T0 plane 3
rack 1, host 5). MACs are derived from the node's uSID and the port number, so a packet
capture names its sender: 02:00:<uSID>:00:<port>.
"""

from __future__ import annotations

import ipaddress
import socket

LOCATOR_BLOCK = 0xFCBB_BB00  # 32-bit locator block: fcbb:bb00::/32
BLOCK_BITS = 32
USID_BITS = 16
MAX_USIDS = (128 - BLOCK_BITS) // USID_BITS  # 6 uSIDs fit behind the block

MAX_PLANES = 16
MAX_RACKS = 256
MAX_T1_PER_PLANE = 256
MAX_HOSTS = 0x8000
MAX_PORTS = 256  # the MAC rule gives the port one byte
MAX_INTF_NAME = 15  # Linux IFNAMSIZ - 1

ROLE_T0 = 0x1
ROLE_T1 = 0x2
HOST_BASE = 0x8000


class AddressingError(ValueError):
    """A value does not fit the addressing rule."""


def t0_usid(plane: int, rack: int) -> int:
    _check(plane, MAX_PLANES, "plane")
    _check(rack, MAX_RACKS, "rack")
    return ROLE_T0 << 12 | plane << 8 | rack


def t1_usid(plane: int, spine: int) -> int:
    _check(plane, MAX_PLANES, "plane")
    _check(spine, MAX_T1_PER_PLANE, "spine")
    return ROLE_T1 << 12 | plane << 8 | spine


def host_usid(index: int) -> int:
    _check(index, MAX_HOSTS, "host index")
    return HOST_BASE | index


def _check(value: int, limit: int, what: str) -> None:
    if not 0 <= value < limit:
        raise AddressingError(f"{what} {value} outside 0..{limit - 1}")


def describe_usid(usid: int) -> str:
    """Human-readable meaning of a uSID, for logs and docs."""
    if usid & HOST_BASE:
        return f"host {usid & 0x7FFF}"
    role, plane, low = usid >> 12, (usid >> 8) & 0xF, usid & 0xFF
    if role == ROLE_T0:
        return f"T0 plane {plane} rack {low}"
    if role == ROLE_T1:
        return f"T1 plane {plane} spine {low}"
    return f"unassigned uSID {usid:#06x}"


def usid_address(usids: list[int] | tuple[int, ...]) -> str:
    """The IPv6 address block:uSID1:uSID2:...:: (compressed text form)."""
    if not 1 <= len(usids) <= MAX_USIDS:
        raise AddressingError(f"a uSID list holds 1..{MAX_USIDS} uSIDs, got {len(usids)}")
    value = LOCATOR_BLOCK
    for usid in usids:
        value = value << USID_BITS | usid
    value <<= USID_BITS * (MAX_USIDS - len(usids))
    # inet_ntop writes the same compressed form as ipaddress (the locator block is never
    # zero, so never the IPv4-embedded form), seven times faster: an agent names every
    # path it sends on, 16,000 of them in cluster-c's all-to-all.
    return socket.inet_ntop(socket.AF_INET6, value.to_bytes(16, "big"))


def usid_prefix(usid: int) -> str:
    """The /48 prefix whose active (first) uSID is `usid`: what a route matches on."""
    return f"{usid_address([usid])}/{BLOCK_BITS + USID_BITS}"


def parse_usids(address: str) -> list[int]:
    """Split a uSID address into its uSIDs (trailing zeros dropped)."""
    value = int(ipaddress.IPv6Address(address))
    if value >> (128 - BLOCK_BITS) != LOCATOR_BLOCK:
        raise AddressingError(f"{address} is not inside the locator block fcbb:bb00::/32")
    usids = [(value >> (USID_BITS * (MAX_USIDS - 1 - i))) & 0xFFFF for i in range(MAX_USIDS)]
    while usids and usids[-1] == 0:
        usids.pop()
    return usids


def host_address(index: int) -> str:
    """A host's own address: the block followed by its uSID (where paths end)."""
    return usid_address([host_usid(index)])


# The hosts' Mininet addresses, for Mininet's own commands in make cli (ping, iperf):
# IPv4 in Mininet's numbering (h0 is 10.0.0.1), IPv6 from the host's uSID (h3 is
# fd00::8003). The fabric never routes them: the hosts carry them over a uSID path
# (experiments/interactive/mininet_commands.py).
MININET_IPV4_BASE = ipaddress.IPv4Address("10.0.0.0")
MININET_IPV6_BASE = ipaddress.IPv6Address("fd00::")


def host_ipv4(index: int) -> str:
    return str(MININET_IPV4_BASE + index + 1)


def host_ipv6(index: int) -> str:
    return str(MININET_IPV6_BASE + host_usid(index))


def host_name(index: int) -> str:
    return f"h{index}"


def t0_name(plane: int, rack: int) -> str:
    return f"p{plane}t0r{rack}"


def t1_name(plane: int, spine: int) -> str:
    return f"p{plane}t1s{spine}"


def intf_name(node: str, port: int) -> str:
    """Mininet's naming: <node>-eth<port> (at most 15 characters for Linux)."""
    return f"{node}-eth{port}"


def node_usid(name: str) -> int:
    """Invert the naming rule: the uSID of a node from its name."""
    try:
        if name.startswith("h"):
            return host_usid(int(name[1:]))
        plane, rest = name[1:].split("t", 1)
        if rest.startswith("0r"):
            return t0_usid(int(plane), int(rest[2:]))
        if rest.startswith("1s"):
            return t1_usid(int(plane), int(rest[2:]))
    except ValueError:
        pass
    raise AddressingError(f"{name!r} is not a node name of the addressing plan")


def mac_address(node: str, port: int) -> str:
    usid = node_usid(node)
    if not 0 <= port < MAX_PORTS:
        raise AddressingError(f"port {port} outside 0..{MAX_PORTS - 1}")
    return f"02:00:{usid >> 8:02x}:{usid & 0xFF:02x}:00:{port:02x}"
