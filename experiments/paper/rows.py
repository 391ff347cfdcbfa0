"""The MRC paper's section-5 experiments as rows (pure): a scenario, a claim, a criterion.

Each `Row` says which experiment of "Resilient AI Supercomputer Networking using MRC
and SRv6" (2026) it reproduces in shape (the section and the paper's claim in one
line), the scenario that runs it on the fabric at hand (the same fields as a scenario
file, checked by experiments/scenarios/scenario.py), the pass it is measured against (the same
workload without the faults, unless a row says otherwise), and the criterion that
gives the verdict, in words and as a function of the measured figures
(experiments/paper/judge.py). `differs` says what differs from the paper's set-up,
and why; a FAIL is read against it.

Sizes and times are scaled to the fabric: a workload is sized to take `WORKLOAD_S`
seconds at the hosts' line rate, and faults happen at fractions of that time, so the
same rows run on 2tier-8plane (the default) or 2tier-2plane (BMv2 on a small
machine). Each row also names the paper's cluster it was measured on (`shape`):
`make paper SHAPES=paper` plays each row on that cluster's shape (`SHAPES`), the
default plays every row on the one fabric given. A row with a `curve` gives one curve
of a figure drawn over message size (Fig. 16, 17): the rows of one figure differ only
in their loss. Nothing here runs anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hosts.protocol import data_frame_bytes
from topologies.model import Fabric

WORKLOAD_S = 3.0  # a workload's duration at the hosts' line rate
BASELINE = "roce-8"  # the RoCE-like baseline of the fault rows: one QP per plane
MIN_TIMEOUT_S = 30.0
TIMEOUT_FACTOR = 12  # a row's timeout: this many times WORKLOAD_S (the baseline may stall)
MAX_LINKS_FAILING = 20  # the paper's sequence of T0-T1 links taken down (section 5.2.2)
# The paper's clusters (its Table 1) and the topology of this testbed in their shape:
# B (8 x 100G planes, the fault experiments) is 2tier-8plane; C (64 GPUs, 4 x 100G
# planes against RoCE on one 400G plane) and D (16 servers, 4 racks of 4, 4 spines,
# one 400G plane) have files of their own.
SHAPES = {"B": "2tier-8plane", "C": "cluster-c", "D": "cluster-d"}
DIFFERS_EMULATION = ("Python agents on a shared CPU, milliseconds of RTT instead of "
                     "microseconds, link rates in Mbit/s")


@dataclass(frozen=True)
class Row:
    key: str
    section: str
    claim: str
    criterion: str
    differs: str
    scenario: dict
    judge: str  # a judge of experiments/paper/judge.py, by name
    reference: dict | None | str = "fault-free"  # "fault-free", another scenario, or none
    needs: tuple[str, ...] = ()  # data-plane features (FEATURES of replay.py)
    params: dict = field(default_factory=dict)  # the judge's parameters
    shape: str = "B"  # the paper's cluster it ran on (SHAPES)
    curve: tuple[str, str] | None = None  # (figure, this row's curve): throughput by size


def payload_rate_mbit(fabric: Fabric, mtu_payload: int | None = None) -> float:
    """The most payload a host can send: its line rate times the payload's share of a
    full DATA frame (headers, as on the wire), of the fabric's MTU unless a scenario
    sends smaller packets."""
    mtu_payload = mtu_payload or fabric.spec.mtu_payload
    return fabric.spec.host_line_rate_mbit * mtu_payload / data_frame_bytes(mtu_payload)


def _link(fabric: Fabric, plane: int, rack: int, spine: int) -> list[str]:
    spec = fabric.spec
    plane, rack, spine = plane % spec.planes, rack % spec.racks, spine % spec.t1_per_plane
    return [f"p{plane}t0r{rack}", f"p{plane}t1s{spine}"]


def rows(fabric: Fabric, only: Callable[[str], bool] = lambda key: True) -> list[Row]:
    """Every row, scaled to `fabric`; `only` picks rows by key."""
    spec = fabric.spec
    n, planes = len(fabric.hosts), spec.planes
    d = WORKLOAD_S
    timeout = max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * d)
    # all-to-all: every host sends to n-1 others; sized to take d at line rate.
    a2a = {"workload": "all-to-all", "params": {"message_bytes": spec.host_bytes_in(d) // (n - 1)},
           "transports": ["mrc", BASELINE], "timeout_s": timeout}
    # Bidirectional cross-T1 flows, one out of and one into every host (each host with
    # the host in its place in the next rack): the paper's fault experiments ran
    # ib_write_bw between NICs across the T1s. Every T0-T1 fault lies on their paths,
    # and each agent serves one peer, so its CPU measures the network, not itself.
    pairs = [[h, (h + spec.hosts_per_rack) % n] for h in range(n)]
    cross_flows = {"workload": "flows",
                   "params": {"flows": pairs, "message_bytes": spec.host_bytes_in(d)},
                   "transports": ["mrc", BASELINE], "timeout_s": timeout}
    # Ring all-reduce over three sizes (a curve, as Fig. 16), each host sending
    # 2(n-1)/n of the data; the ring alternates racks, so that every hop crosses the
    # spine as in the paper's 64-GPU ring (in host order, all but two hops of a ring
    # on two racks would stay in a rack and prove nothing about load balancing).
    # The 1-QP baseline has one path, 1/planes of a host: give it time to finish.
    ring_total = spec.host_bytes_in(d) * n // (2 * (n - 1))
    # The ring's largest step in a NIC's bandwidth-delay products: a loss in a step's
    # tail waits for a timeout, which a step of a few BDPs cannot hide.
    step_bdps = ring_total / n / (planes * spec.bdp_frames * spec.data_frame_bytes)
    tail = (f"the ring's largest step is {step_bdps:.2g} of a NIC's BDPs (the paper's "
            "16 GB all-reduce moves 250 MB a step, hundreds of a 400G NIC's BDPs), so a "
            "loss in a step's tail, recovered after a timeout, costs a share of the step "
            "the paper's large messages never pay")
    ring = {"workload": "all-reduce",
            "params": {"data_bytes": sorted({max(n, ring_total // k) for k in (16, 4, 1)}),
                       "order": "across-racks"},
            "transports": ["mrc", "roce-16", "roce"],
            "timeout_s": max(timeout, 3 * planes * d)}
    cross = [0, n - 1] if spec.racks > 1 else [0, 1]  # a cross-T1 pair
    one = {"workload": "transfer",
           "params": {"src": cross[0], "dst": cross[1], "message_bytes": spec.host_bytes_in(d)},
           "transports": ["mrc", BASELINE], "timeout_s": timeout}
    flaps = [_link(fabric, p, p, p) for p in range(min(4, planes * spec.racks))]
    flap_every = 0.3
    links_total = sum(1 for lk in fabric.links if lk.tier == "t0_t1")
    failing = min(MAX_LINKS_FAILING, links_total // 3)
    victim = [n - 1, 1]
    fan_in = max(1, min(7, n - 3))  # the paper's 7:1, where the hosts allow it
    incast_bytes = spec.host_bytes_in(d) // fan_in
    # ECN migration in the paper's sequence, on one plane: flow 1 alone, then flow 2
    # joins on flow 1's path; each moves a plane's worth of data.
    pinned_flows = {"flows": [[0, cross[1]], [1, cross[1] - 1]],
                    "message_bytes": spec.host_bytes_in(d) // planes,
                    "start_s": [0.0, round(0.3 * d, 3)]}
    pinned = {"workload": "flows", "params": pinned_flows, "transports": ["mrc"],
              "timeout_s": timeout}
    # T0-local, both ways, between the first two hosts of a rack (Fig. 9a, 9b).
    local = [0, 1] if spec.hosts_per_rack > 1 else cross
    local_flows = {"workload": "flows",
                   "params": {"flows": [local, local[::-1]],
                              "message_bytes": spec.host_bytes_in(d)},
                   "transports": ["mrc", BASELINE], "timeout_s": timeout}
    half = list(range(max(1, planes // 2)))

    def with_faults(base: dict, *faults: dict, **extra) -> dict:
        return {**base, **extra, "faults": list(faults)}

    # One T0-T1 uplink of rack 0's T0 down in each of up to four planes before the
    # start: broken-at-start judges the run's goodput, startup-losses its losses.
    broken_start = with_faults(cross_flows, *({"kind": "link-down",
                                               "link": _link(fabric, p, 0, p + 1),
                                               "before_start": True}
                                              for p in range(min(planes, 4))))

    table = [
        Row("t0-t1-link-flaps", "5.1, 5.2.2 (Fig. 5, 9d)",
            "T0-T1 link flaps, several a minute in production, have almost no impact on "
            "the job: MRC maps the paths out and back in.",
            "MRC's slowdown against its own fault-free run is at most 5%.",
            f"{len(flaps)} links flap several times a second under {d:g} s of cross-T1 "
            f"flows (the paper: a constant rate of flaps over days); {DIFFERS_EMULATION}.",
            with_faults(cross_flows, *({"kind": "link-flap", "link": link,
                                        "at_s": 0.1 * d + 0.05 * i, "down_s": 0.1,
                                        "every_s": flap_every,
                                        "count": max(1, int(0.7 * d / flap_every))}
                                       for i, link in enumerate(flaps))),
            "slowdown_at_most", params={"limit": 0.05}),
        Row("silent-t1", "5.1 (Fig. 8)",
            "A T1 that stops forwarding but stays up costs a short dip: MRC maps the bad "
            "paths out; routing never moves traffic off it until it is rebooted.",
            "MRC finishes with goodput against its fault-free run at least the capacity "
            "left in the plane that lost most uplinks at one T0, minus 5% (the links "
            "rows' rule), while the baseline's last transfer waits for the reboot.",
            f"The T1 is silent for {0.5 * d:g} s, then rebooted (the paper: minutes until "
            f"automation rebooted it); it is one of {spec.t1_per_plane} in its plane (the "
            f"paper: one of hundreds), so while it is silent a T0 of its plane has "
            f"{1 - 1 / spec.t1_per_plane:.0%} of its uplinks, and MRC, keeping its planes "
            f"equally loaded, is bounded by that plane; the baseline's routing is BGP with "
            f"ECMP; {DIFFERS_EMULATION}.",
            with_faults(cross_flows, {"kind": "blackhole", "switch": f"p{2 % planes}t1s"
                              f"{1 % spec.t1_per_plane}", "at_s": 0.2 * d, "down_s": 0.5 * d}),
            "silent_t1", params={"slack": 0.05}),
        Row("t1-down", "5.2.3 (Fig. 11)",
            "With a T1 switch down, each QP still has enough paths: no steady-state "
            "bandwidth degradation.",
            "From 0.5 s after the failure to the end, MRC's goodput against its "
            "fault-free goodput is at least the capacity left in the plane that lost "
            "most uplinks at one T0, minus 5% (the links rows' rule).",
            f"The T1 is one of {spec.t1_per_plane} in its plane (the paper: one of "
            f"hundreds, so no degradation): a T0 of its plane keeps "
            f"{1 - 1 / spec.t1_per_plane:.0%} of its uplinks, and MRC, keeping its planes "
            f"equally loaded (section 4), is bounded by that plane; {DIFFERS_EMULATION}.",
            with_faults(cross_flows, {"kind": "switch-down", "switch": f"p{1 % planes}t1s0",
                              "at_s": 0.3 * d}),
            "steady_state", params={"settle_s": 0.5, "slack": 0.05}),
        Row("t0-down", "5.2.3 (Fig. 10)",
            "With a T0 switch down, throughput settles at a level proportional to the "
            "capacity left.",
            f"MRC's goodput against its fault-free run drops by at most the 1/{planes} of "
            "capacity the hosts under the T0 lose, plus 5%.",
            f"The T0 takes one plane from {spec.hosts_per_rack} hosts, each with a flow "
            f"out and one in (the paper: a point-to-point test between NICs under the T0); "
            f"{DIFFERS_EMULATION}.",
            with_faults(cross_flows, {"kind": "switch-down", "switch": "p0t0r0", "at_s": 0.3 * d}),
            "proportional", params={"lost": 1 / planes, "slack": 0.05}),
        Row("nic-port-loss", "5.2.2 (Fig. 9a), 2",
            f"Losing one NIC port costs 1/{planes} of the host's capacity, not the job.",
            f"MRC's slowdown is at most 1/{planes} + 5%.",
            f"One port of one host goes down for good under cross-T1 flows; "
            f"{DIFFERS_EMULATION}.",
            with_faults(cross_flows, {"kind": "nic-port-down", "host": "h1", "plane": planes - 1,
                              "at_s": 0.3 * d}),
            "slowdown_at_most", params={"limit": 1 / planes + 0.05}),
        Row("links-failing", "5.2.2 (Fig. 9c)",
            "T0-T1 links taken down one after another have minimal impact on throughput: "
            "MRC maps out the affected EVs.",
            "MRC finishes, and its goodput against its fault-free run is at least the "
            "capacity left in the plane that lost most uplinks at one T0, minus 5% (MRC "
            "loads its planes equally, section 4).",
            f"{failing} of {links_total} T0-T1 links fail, {0.6 * d / failing:.2f} s apart "
            f"(the paper: 20 of thousands, 1 s apart), so a T0 may keep one uplink of "
            f"{spec.t1_per_plane} in a plane; MRC keeps its planes equally loaded "
            f"(section 4), so the plane that lost most sets the pace of every flow; "
            f"{DIFFERS_EMULATION}.",
            with_faults(cross_flows, {"kind": "links-fail", "count": failing, "at_s": 0.1 * d,
                              "every_s": round(0.6 * d / failing, 3), "seed": 1}),
            "plane_bound", params={"slack": 0.05}),
        Row("broken-at-start", "2.2",
            "At scale some links are always down; with static SRv6 routes MRC must find "
            "and avoid them by itself from the first packet.",
            "MRC finishes, and its goodput against its fault-free run is at least the "
            "capacity left in the plane that lost most uplinks at one T0, minus 5% (MRC "
            "loads its planes equally, section 4).",
            f"{min(planes, 4)} T0-T1 links are down before the job starts, one of "
            f"{spec.t1_per_plane} uplinks of a T0 in each of {min(planes, 4)} planes; "
            f"{DIFFERS_EMULATION}.",
            broken_start,
            "plane_bound", params={"slack": 0.05}),
        Row("ev-20pct-loss", "5.2.4 (Fig. 12, 13)",
            "An EV dropping 20% of its packets is taken out of the active set at once and "
            "bandwidth stays at line rate.",
            "MRC retires the path within 10 RTT of its first lost packet, and its goodput "
            "is at least 95% of its fault-free run.",
            "One path of one cross-T1 transfer loses 20% (the paper: one EV of 16 paths, "
            f"NIC debug drops); per-packet events are on for this row; {DIFFERS_EMULATION}.",
            with_faults({**one, "protocol": {"packet_events": True}},
                        {"kind": "gray-loss", "path": [f"h{cross[0]}", f"h{cross[1]}"],
                         "plane": 0, "spine": 1 % spec.t1_per_plane, "probability": 0.2,
                         "at_s": 0.3 * d}),
            "gray_loss", needs=("faults",),
            params={"rtts": 10, "limit": 0.95, "plane": 0, "spine": 1 % spec.t1_per_plane}),
        Row("ecn-migration", "5.2.5 (Fig. 14)",
            "A second flow forced onto a first flow's EV: ECN separates them, and both "
            "sustain near-peak bandwidth.",
            "A flow moves off the shared path within 10 RTT of the second flow's start, "
            "and in the second half of their time together each flow gets at least 80% "
            "of its throughput in the same sequence unpinned on the same plane.",
            f"Flow 1 ({pinned_flows['flows'][0]}) starts alone with every EV on one path "
            f"of plane 0 (protocol pin_path), flow 2 ({pinned_flows['flows'][1]}) joins "
            f"{pinned_flows['start_s'][1]:g} s later on the same path: the shared T0 "
            f"uplink is 1 of {spec.t1_per_plane} of the plane (the paper: EV-A and EV-B "
            "of one plane). The reference plays the same sequence on plane 0 with the "
            "EVs spread over its paths (pin_path [0, null]). On links capped to a few "
            "Mbit/s NSCC's delay reaction can hold the shared queue under the ECN "
            f"threshold, and then no mark comes and nothing migrates; {DIFFERS_EMULATION}.",
            {**pinned, "protocol": {"pin_path": [0, 0]}},
            "ecn_migration", needs=("ecn",),
            reference={**pinned, "protocol": {"pin_path": [0, None]}},
            params={"rtts": 10, "share": 0.8}),
        Row("ring-allreduce-qps", "5.2.7 (Fig. 16)",
            "One MRC QP spraying over all paths beats RoCE with 16 QPs, which beats RoCE "
            "with 1 QP (ECMP collisions).",
            "At the largest size: goodput MRC >= 0.95 x roce-16, and roce-16 > roce "
            "(1 QP).",
            f"{n}-host ring across racks at three sizes (the paper: 64 GPUs, 4 MB to "
            f"16 GB, 4 x 100G planes against RoCE on one 400G plane); RoCE runs on the "
            f"single-plane twin; {DIFFERS_EMULATION}.",
            ring, "qp_order", reference=None, params={"slack": 0.95}, shape="C",
            curve=("ring all-reduce (Fig. 16)", "no loss")),
        Row("random-loss-0p1pct", "5.2.7 (Fig. 16)",
            "With 0.1% random loss MRC retransmits fast enough that large transfers barely "
            "notice.",
            "MRC's goodput is at least 90% of its loss-free run.",
            "0.1% loss on every host link, both ways (each packet crosses two: about 0.2% "
            f"a path; the paper: on NIC receive); {tail}; {DIFFERS_EMULATION}.",
            with_faults(ring, {"kind": "loss", "link": "hosts", "probability": 0.001,
                               "at_s": 0}),
            "loss_ratio", needs=("faults",), params={"mrc": 0.9}, shape="C",
            curve=("ring all-reduce (Fig. 16)", "0.1% loss")),
        Row("random-loss-1pct", "5.2.7 (Fig. 16)",
            "At 1% loss RoCE is unusable and MRC keeps about a third of its throughput.",
            "MRC's goodput is at least 1/4 of its loss-free run, and the 1-QP go-back-N "
            "baseline's ratio is at most half of MRC's.",
            f"1% loss on every host link, both ways (about 2% a path); {tail}; "
            f"{DIFFERS_EMULATION}.",
            with_faults(ring, {"kind": "loss", "link": "hosts", "probability": 0.01,
                               "at_s": 0}),
            "loss_ratio", needs=("faults",), params={"mrc": 0.25, "baseline": "roce",
                                                     "baseline_factor": 0.5}, shape="C",
            curve=("ring all-reduce (Fig. 16)", "1% loss")),
        Row("all-to-all-sizes", "5.2.7 (Fig. 17)",
            "In all-to-all MRC outperforms RoCE at every message size.",
            "At every size, MRC's phase time is at most 1.05 x the best baseline's plus "
            "one round trip (a phase of a few round trips varies by one with scheduling).",
            f"{n} hosts, three sizes (the paper: 64 GPUs, 4 MB to 16 GB); "
            f"{DIFFERS_EMULATION}.",
            {**a2a, "params": {"message_bytes": sorted({max(1000, m) for m in (
                a2a["params"]["message_bytes"] // 64, a2a["params"]["message_bytes"] // 8,
                a2a["params"]["message_bytes"])})},
             "transports": ["mrc", "roce", "roce-16"]},
            "sizes", reference=None, params={"slack": 1.05}, shape="C",
            curve=("all-to-all (Fig. 17)", "no loss")),
        Row("incast-victim", "5.2.8 (Fig. 18)",
            "A 7:1 incast does not hurt a victim flow that shares the fabric with it: "
            "trimming keeps the queues short, where RoCE's PFC spreads the congestion.",
            "MRC's victim keeps at least 90% of its throughput alone, and no less (by "
            "more than 5 points) than RoCE's with PFC and DCQCN at 1 and at 8 QPs.",
            f"{fan_in}:1 incast (the victim needs its own source and idle "
            f"destination among {n} hosts; the paper: 7:1 on 16 servers); RoCE runs on "
            f"the single-plane twin with PFC and DCQCN; {DIFFERS_EMULATION}.",
            {"workload": "incast", "params": {"message_bytes": incast_bytes, "receiver": 0,
                                              "fan_in": fan_in, "victim": victim},
             "transports": ["mrc", "roce", BASELINE], "timeout_s": timeout},
            "victim", needs=("trimming",),
            reference={"workload": "transfer",
                       "params": {"src": victim[0], "dst": victim[1],
                                  "message_bytes": incast_bytes},
                       "transports": ["mrc", "roce", BASELINE], "timeout_s": timeout},
            params={"share": 0.9, "margin": 0.05}, shape="D"),
        Row("point-to-point", "5.2.1",
            "One QP between two NICs reaches about 96% of the line rate, T0-local and "
            "cross-T1 alike.",
            "MRC's goodput, cross-T1 and T0-local, is at least 90% of the most payload "
            "a host's ports carry.",
            f"A transfer h{cross[0]} -> h{cross[1]} (cross-T1), measured against the same "
            f"from h{local[0]} to h{local[1]} (T0-local); the ceiling is the line rate "
            f"times the payload's share of a DATA frame "
            f"({fabric.spec.mtu_payload} of {fabric.spec.data_frame_bytes} "
            f"bytes; the paper's 32 KB writes at 96%); {DIFFERS_EMULATION}.",
            {**one, "transports": ["mrc"]},
            "line_rate",
            reference={**one, "params": {**one["params"], "src": local[0], "dst": local[1]},
                       "transports": ["mrc"]},
            params={"share": 0.9}),
        Row("transceiver-flap", "5.2.2 (Fig. 9b)",
            f"A NIC transceiver flap takes {len(half)} of its {planes} links down at once: "
            "MRC settles at the capacity left and recovers when they return.",
            f"While the ports are down, MRC's goodput against fault-free is at least "
            f"{1 - len(half) / planes:.2f} (the ports left) minus 5%; from 0.3 s after "
            "they return, at least 0.90.",
            f"Ports {half} of h{local[0]} go down for {0.3 * d:g} s under T0-local flows "
            f"both ways (the paper: 4 of 8 links for about 12 s); roce-8 on the twin "
            f"loses its NIC's only port; {DIFFERS_EMULATION}.",
            with_faults(local_flows, {"kind": "transceiver-flap", "host": f"h{local[0]}",
                                      "planes": half, "at_s": 0.2 * d, "down_s": 0.3 * d}),
            "transceiver", params={"lost": len(half) / planes, "slack": 0.05,
                                   "settle_s": 0.3, "recovered": 0.9}),
        Row("startup-losses", "2.4 (Fig. 4)",
            "A job starting with links down, and no denylist, loses only a few packets "
            "per QP while MRC maps the bad paths out.",
            "MRC loses at most 5 packets a connection for each broken path it sprays "
            "over (the paper: fewer than 5 lost per QP in the job's first minute).",
            f"The broken-at-start row's run: {min(planes, 4)} T0-T1 links down before "
            f"{n} cross-T1 connections start, which cuts {min(planes, 4)} of the "
            f"{planes * spec.t1_per_plane} paths of each (the paper: a few links of "
            f"thousands, a far smaller share of a QP's 100+ EVs), so losses are counted "
            f"per broken path; a packet lost is a retransmission whose original neither "
            f"arrived nor was trimmed; {DIFFERS_EMULATION}.",
            broken_start,
            "startup_losses", reference=None, params={"per_broken_path": 5}),
        Row("permutation", "appendix (Fig. 20)",
            "Racks sending to other racks one to one: single-QP RoCE flows collide on "
            "ECMP and some get a half or a third of line rate; MRC's every flow gets "
            "line rate.",
            "MRC's slowest flow gets at least 90% of its flows' mean (no collision), and "
            "at least 95% of the 1-QP RoCE's slowest flow's share of the line rate.",
            f"{n} flows, each host of a rack to the host in its place in the next (the "
            f"paper: 2 racks to 2 racks of Cluster D); RoCE with 1 and 8 QPs, with PFC "
            f"and DCQCN and with PFC alone, on the single-plane twin. Every host sends "
            f"and receives at line rate, which the agents' CPU bounds here (one flow alone "
            f"reaches 0.96 of it: point-to-point), so MRC is judged by how even its flows "
            f"are, not by their share of the line rate; {DIFFERS_EMULATION}.",
            {**cross_flows, "transports": ["mrc", "roce", "roce-pfc", BASELINE,
                                           f"{BASELINE}-pfc"]},
            "permutation", reference=None, params={"even": 0.9, "against": "roce",
                                                   "margin": 0.95}, shape="D"),
    ]
    return [row for row in table if only(row.key)]
