"""Segmentation offloads of a BMv2 switch's ports: off, so that no burst is lost before BMv2.

simple_switch reads each port through libpcap, in immediate mode, from a ring of
packet slots in a 2 MiB buffer (libpcap's default; BMv2 sets no size). libpcap sizes
a slot for the largest frame the interface can hand it: the MTU, or 64 KiB when the
interface does TCP/generic segmentation or receive offload, as a veth does by default.
With offloads on, a port's ring holds 31 frames; a burst longer than that which comes
while BMv2's receive thread waits for a CPU is dropped by the kernel before BMv2 sees
it, and no P4 counter tells. With them off a slot is MTU-sized and the ring holds
about 1,200 frames. No testbed frame needs them: every frame is at most one MTU.

Set through the SIOCETHTOOL ioctl (what `ethtool -K <intf> tso off gso off gro off`
does), in the namespace of the calling process, where BMv2's ports are.
"""

from __future__ import annotations

import array
import fcntl
import socket
import struct

SIOCETHTOOL = 0x8946
# linux/ethtool.h: the set command of each offload libpcap looks at. LRO is read-only
# ("fixed") on a veth and left alone.
OFFLOADS = {
    "tso": 0x1F,  # ETHTOOL_STSO
    "gso": 0x24,  # ETHTOOL_SGSO
    "gro": 0x2C,  # ETHTOOL_SGRO
}
IFREQ_BYTES = 40  # struct ifreq on a 64-bit kernel


def _ethtool(sock: socket.socket, intf: str, command: int, data: int) -> None:
    """One ETHTOOL_ set command with a struct ethtool_value {u32 cmd; u32 data}."""
    value = array.array("I", [command, data])
    address, _ = value.buffer_info()
    ifreq = struct.pack("16sP", intf.encode(), address).ljust(IFREQ_BYTES, b"\0")
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)


def offloads_off(intfs: list[str]) -> None:
    """Turn OFFLOADS off on every interface of `intfs` (OSError if one is missing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for intf in intfs:
            for set_command in OFFLOADS.values():
                _ethtool(sock, intf, set_command, 0)
