"""The links of a fabric on one server: veth pairs made whole in one command.

A link is a veth pair whose ends get their name, MAC, MTU and namespace at once, and
interface indexes no other port of the fabric has (`IFINDEX_BASE`): the eBPF switch
program keys its maps by the index. A link whose nodes run on two servers is a tunnel
instead (topologies/tunnels.py `CrossingLink`, built on `FabricLink`).
"""

from __future__ import annotations

import itertools

from mininet.link import Intf, Link
from mininet.util import quietRun

from topologies.remote import is_remote

# Interface indexes are counted per namespace: two ports of a fabric, in two nodes,
# would often share one. The eBPF switch program keys its maps by the index, so every
# port is given one of its own, from here up (far above what a machine's own interfaces
# take).
IFINDEX_BASE = 100_000


class FabricIntf(Intf):
    """A port made whole by FabricLink.makeIntfPair (name, index, MAC, MTU, namespace in
    one `ip link add`): it only records its MAC, where Mininet's Intf would set it
    again and bring the port up with four commands of its own. The ports come up
    together, one command per node (FabricNet.buildFromTopo)."""

    def config(self, mac=None, **params):
        self.mac = mac
        return {}


class FabricLink(Link):
    """A Mininet link whose two interfaces get interface indexes no other port of the
    fabric has (IFINDEX_BASE), and the fabric's MTU (`mtu`: a full DATA packet leaves
    whole, TopologySpec.interface_mtu)."""

    indexes = itertools.count(IFINDEX_BASE)  # every link's, tunnels' too

    def __init__(self, *args, mtu: int = 1500, **kwargs):
        self.mtu = mtu
        kwargs["intf"] = FabricIntf  # Mininet.addLink passes its own default
        super().__init__(*args, **kwargs)

    def stop(self) -> None:
        """Nothing: FabricNet.stop deleted the pair already, or it goes with the nodes'
        namespaces when they stop, together (deleting each port on its own took 22 ms a
        port: 6 s of a 2tier-8plane teardown)."""

    def in_root(self) -> str | None:
        """An end of the pair in this machine's root namespace (BMv2's switches live
        there), which must be deleted for the pair to go; None if both ends are in
        nodes' namespaces or on another server (topologies/remote.py RemoteBmv2Switch
        deletes its own)."""
        for intf in (self.intf1, self.intf2):
            if not intf.node.inNamespace and not is_remote(intf.node):
                return intf.name
        return None

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None,  # noqa: N802
                     node1=None, node2=None, deleteIntfs=True):  # noqa: N803 - Mininet's
        run = node1.cmd if node1 is not None else quietRun
        netns = node2.pid if node2 is not None else 1
        first, second = next(self.indexes), next(self.indexes)
        mac1 = f" address {addr1}" if addr1 else ""
        mac2 = f" address {addr2}" if addr2 else ""
        mtu = f" mtu {self.mtu}"
        out = run(f"ip link add name {intfname1} index {first}{mac1}{mtu} type veth "
                  f"peer name {intfname2} index {second}{mac2}{mtu} netns {netns}")
        if out.strip():
            raise OSError(f"creating the link {intfname1} - {intfname2}: {out.strip()}")
