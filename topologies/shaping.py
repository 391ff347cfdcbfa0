"""Link emulation with tc: rate, queue limit, delay and ECN marking per interface.

Every interface gets, on egress:

    htb (rate) -> [red ... ecn] -> netem (delay, queue limit)   or   pfifo (queue limit)

The htb class limits the rate, so the backlog builds in the queue below it, which holds
at most `queue_pkts` packets (a host's own port: the NIC's send queue, which drops
nothing, `nic_send_queue`). On ports that do not face a host, a RED qdisc with
probability 1 between min and max marks ECT packets CE once the backlog passes the ECN
threshold (its byte limit is far above the queue limit, so RED itself never drops).
RED counts bytes: a threshold of N packets is N full DATA frames of the fabric's MTU
(TopologySpec.data_frame_bytes), the unit BMv2's queues count in, so "N packets" means
the same backlog on both data planes.
Ports facing a host are never ECN-marked: in MRC a mark means "this path is busier than
its siblings", which the last hop cannot tell.

A link's rate can change while it runs (`rate_commands`): its htb class is changed in
place, and the queue and marking below it stay as they are.

Not every kernel has netem and RED (minimal cloud and CI kernels often lack them):
`probe_features()` finds out once, and the links then emulate what the kernel can; the
run summary says what was left out.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace

from topologies.model import Fabric, LinkParams, without_delay


@dataclass(frozen=True)
class ShapingFeatures:
    """Which optional qdiscs this kernel has."""

    netem: bool
    red: bool

    def missing(self, red_needed: bool = True) -> list[str]:
        """What the links cannot emulate here. RED is needed only where tc marks ECN
        (the kernel data plane; the P4 switch marks by itself)."""
        gaps = []
        if not self.netem:
            gaps.append("delay not emulated: the kernel has no netem qdisc "
                        "(CONFIG_NET_SCH_NETEM); the links run without delay, their queues "
                        "and thresholds at the same BDPs (topologies/scale.py)")
        if red_needed and not self.red:
            gaps.append("no ECN marking: the kernel has no RED qdisc (CONFIG_NET_SCH_RED)")
        return gaps


def netem_here() -> bool:
    """Whether this kernel has netem, tried in a namespace of its own (root), so that a
    run knows before it builds anything whether its links' delays will be emulated."""
    name = f"mrc-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode != 0:
        return True  # cannot tell: the bring-up's own probe will say
    try:
        return probe_features(lambda command: subprocess.run(
            ["ip", "netns", "exec", name, "sh", "-c", command], capture_output=True,
            text=True).stdout).netem
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def as_emulated_here(fabric: Fabric) -> Fabric:
    """`fabric` as this kernel runs it: without its delays, at the same BDPs
    (model.without_delay), where there is no netem to carry them."""
    return fabric if netem_here() else without_delay(fabric)


def probe_features(run: Callable[[str], str]) -> ShapingFeatures:
    """Try each optional qdisc on the loopback of a scratch namespace (run = its cmd)."""

    def works(qdisc: str) -> bool:
        out = run(f"tc qdisc add dev lo root handle 9: {qdisc} 2>&1; echo __status=$?")
        run("tc qdisc del dev lo root 2>/dev/null")
        return out.strip().endswith("__status=0")

    return ShapingFeatures(
        netem=works("netem delay 1ms"),
        red=works("red limit 400000 min 30000 max 31500 avpkt 1500 burst 21 "
                  "bandwidth 10mbit probability 1 ecn"),
    )


def tc_commands(intf: str, params: LinkParams, ecn_threshold_pkts: int | None,
                features: ShapingFeatures, frame: int) -> list[str]:
    """The tc commands for one interface whose largest frame is `frame` bytes (a full
    DATA frame of the fabric). ecn_threshold_pkts=None: no ECN marking."""
    rate = f"{params.rate_mbit:g}mbit"
    cmds = [
        f"tc qdisc replace dev {intf} root handle 1: htb default 1",
        # htb's quantum must cover the largest frame.
        f"tc class replace dev {intf} parent 1: classid 1:1 htb rate {rate} ceil {rate} "
        f"quantum {frame}",
    ]
    parent = "1:1"
    if ecn_threshold_pkts is not None and features.red:
        low = ecn_threshold_pkts * frame
        limit = (params.queue_pkts + 8) * frame * 8
        cmds.append(
            f"tc qdisc replace dev {intf} parent {parent} handle 2: red limit {limit} "
            f"min {low} max {low + frame} avpkt {frame} "
            f"burst {ecn_threshold_pkts + 1} bandwidth {rate} probability 1 ecn"
        )
        parent = "2:1"
    if features.netem:
        cmds.append(f"tc qdisc replace dev {intf} parent {parent} handle 10: netem "
                    f"delay {params.delay_ms:g}ms limit {params.queue_pkts}")
    else:
        cmds.append(f"tc qdisc replace dev {intf} parent {parent} handle 10: pfifo "
                    f"limit {params.queue_pkts}")
    return cmds


# How many frames a host's own port queues: a NIC takes its host's packets from queues
# in the host's memory as its port has room, and drops none of them. A switch-sized
# queue at the host's port dropped MRC's bursts of control packets (a probe to each
# peer and plane at once): 494k-583k of 1.7-1.9M datagrams in a 64-host all-to-all on
# cluster-c, each loss a timeout and a retired path (docs/paper.md).
NIC_SEND_QUEUE_FRAMES = 10_000


def nic_send_queue(params: LinkParams) -> LinkParams:
    """A host port's link parameters: its link's, with the NIC's send queue."""
    return replace(params, queue_pkts=max(params.queue_pkts, NIC_SEND_QUEUE_FRAMES))


# The htb class that holds a port's rate: tc_commands' 1:1, which is also the link class
# of the eBPF switch program's set-up of a switch port (controller/ebpf_config.py
# qdisc_commands), under whose rate its leaves borrow.
LINK_CLASS = "1:1"


def rate_commands(intf: str, rate_mbit: float, frame: int) -> list[str]:
    """The tc command that runs a shaped port at `rate_mbit` from now on (a share of its
    link's rate, or the rate again): its htb link class changed in place, with the same
    quantum (`frame`, the largest frame), so its queue, marking and delay stay."""
    rate = f"{rate_mbit:g}mbit"
    return [f"tc class change dev {intf} parent 1: classid {LINK_CLASS} htb rate {rate} "
            f"ceil {rate} quantum {frame}"]
