"""The MRC paper's section-5 experiments as rows (pure): a scenario, a claim, a criterion.

Each `Row` says which experiment of "Resilient AI Supercomputer Networking using MRC
and SRv6" (2026) it reproduces (the section and the paper's claim in its words), the
scenario that runs it on the fabric at hand (the same fields as a scenario file,
checked by experiments/scenarios/scenario.py), the pass it is measured against (the
same workload without the faults, unless a row says otherwise), and the criterion that
gives the verdict, in words and as a function of the measured figures
(experiments/paper/judge.py). `differs` says what differs from the paper's set-up, and
why; a FAIL is read against it.

The rows of the paper's fault experiments (sections 5.2.1-5.2.5, on its Cluster B) run
as the paper ran them: bidirectional write bandwidth between one pair of NICs (two
pairs for the ECN experiment), each connection spraying over up to 128 paths of a wide
fabric whose core the pair does not fill (topologies/cluster-b.yaml), MRC alone. They
are judged on throughput in windows (`window_rtts`: the paper reports bandwidth every
200 ms) against the same windows of the fault-free pass, with one threshold (`HELD`),
and their timelines are counted in windows, that is in round trips of the fabric
(topologies/scale.py), so they are the same on every data plane and at every rate. The
paper's production observations (sections 2, 5.1, its Cluster A) that a pair can show
run the same way. Each row names the paper's cluster it was measured on (`shape`);
experiments/paper/replay.py plays the rows of A and B on their fabric (`SHAPES`), the
others on the one given, or every row on its cluster's shape (`SHAPES=paper`).

The rows of the other experiments (5.2.7, 5.2.8, the appendix) are sized to take
`WORKLOAD_S` seconds at the hosts' line rate. The fault rows as they were first written,
with every host of a full-bisection fabric sending and receiving across the T1s, stay as
`-loaded` variants (`loaded`): there every fault costs throughput by construction, so
they are judged against what equal plane loading allows, not against the paper's
claims, and they are played only when asked for. A row with a `curve` gives one curve
of a figure drawn over message size (Fig. 16, 17). Nothing here runs anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from experiments.faults.kinds.link import max_links_fail
from experiments.run.workload_run import PROGRESS_S
from experiments.scenarios.workloads import incast_senders
from hosts.protocol import data_frame_bytes
from topologies.model import Fabric

WORKLOAD_S = 3.0  # a workload's duration at the hosts' line rate (the rows of 5.2.7-)
BASELINE = "roce-8"  # the RoCE-like baseline of the loaded variants: one QP per plane
# The RoCE queue pairs per connection of the QP-scaling sweep (Fig. 16's "QP scaling
# helps, little beyond 8").
QP_SWEEP = ("roce", "roce-2", "roce-4", "roce-8", "roce-16")
MIN_TIMEOUT_S = 30.0
# The ring rows' timeout: this many times the ring's time on one path (`one_path_ring_s`),
# what the 1-QP baseline has. On cluster-c at 0.438 Mbit/s that time is 36 s and RoCE's
# 1 QP took 30-36 s: a timeout of 36 s let it finish or not from run to run. Not more:
# the loss rows' baseline does not finish, and waits out the whole timeout.
RING_SLACK = 1.5
TIMEOUT_FACTOR = 12  # a row's timeout: this many times WORKLOAD_S (the baseline may stall)
MAX_LINKS_FAILING = 20  # the paper's sequence of T0-T1 links taken down (section 5.2.2)
# The topology every row runs on unless its shape has a fabric of its own (--topo).
DEFAULT_TOPO = "2tier-8plane"
# The paper's clusters (its Table 1) and the topology of this testbed in their shape:
# A (production, 4 x 200G planes) and B (8 x 100G planes, the testbed's fault
# experiments) on cluster-b, a wide fabric that one NIC pair sprays over without filling;
# C (64 GPUs, 4 x 100G planes against RoCE on one 400G plane) and D (16 servers, 4
# racks of 4, 4 spines, one 400G plane) on files of their own.
SHAPES = {"A": "cluster-b", "B": "cluster-b", "C": "cluster-c", "D": "cluster-d"}
# Shapes whose rows run on their own fabric even when every other row runs on --topo.
WIDE = ("A", "B")
DIFFERS_EMULATION = ("Python agents on a shared CPU, milliseconds of RTT instead of "
                     "microseconds, link rates in Mbit/s")

# ---------------------------------------------------------------- the fault rows' rules
# EVs per connection: the paper's QPs spray over 100 to 256; on cluster-b 128 are as many
# as a cross-T1 pair has paths.
EV_COUNT = 128
# A window holds at least WINDOW_FRAMES full DATA frames of the flows at line rate (a
# frame more or less is a percent of it) and WINDOW_SAMPLES of the agents' progress
# samples (bytes between two samples are spread evenly over the time between them):
# the fewest whole base round trips that do both (`window_rtts`). About 200 ms at the
# calibrated rates, as the paper's bandwidth reports.
WINDOW_FRAMES = 100
WINDOW_SAMPLES = 4
# The one threshold: throughput held is at least HELD of the fault-free pass's in the
# same windows; "proportional" is within BAND of the remaining-capacity line.
HELD = 0.95
BAND = round(1 - HELD, 4)
# A brief interruption: throughput is back within BAND of where it should be at most
# this many base round trips after a fault (or a restore: recovered). A few
# retransmission timeouts at their floor, one queue's drain (hosts/endpoint.py
# `link_adjusted`), which is about 8 round trips.
SETTLE_RTTS = 40
RETIRE_RTTS = 10  # "immediately": a lossy EV out of use within this many round trips
MIGRATE_RTTS = 10  # ECN load balancing: a flow moves within this many round trips
LOST_PER_CONNECTION = 5  # the paper: fewer than 5 packets lost per QP at a job's start
# Timelines, in windows.
WARMUP = 5  # before the first fault
AFTER = 10  # judged after the last event of the longest sequence
MARGIN = 5  # bytes for this many more windows, so the fault-free pass runs to the end
STEP = 6  # one step of links going down or coming back (Fig. 9a)
FLAP = 15  # the eight T0-T1 links' flap (Fig. 9d: "restored after a few seconds")
SWITCH_DOWN = 25  # a T1 down, or silent (Fig. 11, 8)
TRANSCEIVER_DOWN = 18  # four NIC links down together (Fig. 9b: 12 s of a 25 s run)
T0_DOWN = 30  # a T0 down (Fig. 10)
LINK_EVERY = 2  # between two of the twenty T0-T1 links failing (Fig. 9c)
ALLOW = 2  # the EV experiment: its backup path allowed, before the loss at WARMUP
ECN_ALONE = 8  # the ECN experiment: the first flow alone before the second joins
ECN_TOGETHER = 16
LOSSY_LINK = 20  # a NIC link losing packets before the denylist entry (section 4)
# Its loss rate: "unacceptably high" (the paper gives no figure), 50 times the random-loss
# rows' 0.1%.
LOSSY_LINK_P = 0.05
# A T0's transceiver glitch (Figs. 6, 7): each of its host links flaps GLITCH_FLAPS times,
# down GLITCH_DOWN windows every GLITCH_EVERY, one link GLITCH_STAGGER after the other
# ("in rapid succession").
GLITCH_FLAPS = 4
GLITCH_DOWN = 1
GLITCH_EVERY = 3
GLITCH_STAGGER = 0.5
# The appendix's Cluster D failures (Fig. 19): uplinks of the sender's T0 fail STEP
# windows apart; UPLINKS_FAILING of them (three of four), and UPLINKS_AT_ONCE together.
UPLINKS_FAILING = 3
UPLINKS_AT_ONCE = 2
# The appendix's Fig. 22: a 15:1 incast whose flows arrive one after another (the
# paper: 5 s apart; here ARRIVAL_EVERY_S, hundreds of frame times at the capped rates),
# 1-QP RoCE under three DCQCN profiles, the receiving ToR's queue sampled. The paper
# names no profile's settings. Here: the testbed's DCQCN (hosts/config.py), then alpha's
# gain 4 and 8 times as high (each mark cuts deeper, sooner) with the additive increase
# 2.5 and 5 times as slow: set before any run, never tuned to the paper's outcome.
DCQCN_FAN_IN = 15
ARRIVAL_EVERY_S = 0.4
DCQCN_PROFILES = (
    ("default", {}),
    ("aggressive", {"dcqcn_g": 0.25, "dcqcn_ai": 0.02}),
    ("most-aggressive", {"dcqcn_g": 0.5, "dcqcn_ai": 0.01}),
)
# The default profile's "controlled with a small number of flows": no pause before this
# many have arrived. The aggressive profiles' "controlled" queue: the ToR pauses a
# sender in at most CONTROLLED_PAUSED of the samples; "sometimes empty": empty in at
# least SOMETIMES_EMPTY; and the bottleneck's share of line rate for "around 10% loss"
# and "20% slower" (LOSSES).
PFC_AFTER_FLOWS = 2
CONTROLLED_PAUSED = 0.05
SOMETIMES_EMPTY = 0.05
LOSSES = {"aggressive": (0.8, HELD), "most-aggressive": (0.7, 0.9)}


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
    # A variant on a fabric every host loads: not the paper's experiment, played when asked.
    loaded: bool = False
    # Played on its shape's fabric even when `--shapes default` plays the other rows of
    # its shape on --topo: an experiment that fabric defines (the appendix's one pair on
    # Cluster D's single plane, as the one-pair rows of WIDE shapes).
    own_fabric: bool = False
    # A switch port whose queue the row's pass samples: (switch, the peer its port
    # faces), as experiments/run/play.py `play_pass` takes it.
    queue: tuple[str, str] | None = None

    @property
    def fault_free_reference(self) -> bool:
        """Whether the row is measured against a pass without faults: the fault-free
        pass, or another scenario whose only faults are a controller's denials (they set
        up the row's paths; judge.py `judge` holds such a pass to retiring none)."""
        if self.reference == "fault-free":
            return True
        return (isinstance(self.reference, dict)
                and all(f.get("kind") == "deny" for f in self.reference.get("faults", [])))


def one_path_ring_s(fabric: Fabric, sizes: list[int]) -> float:
    """How long a ring all-reduce of each of `sizes` (one after the other) takes on one
    path of 1/planes of a host, as the 1-QP baseline has: each of its 2(n-1) steps moves
    a chunk (size/n) at that rate and waits half a base round trip for it to arrive."""
    spec = fabric.spec
    n = len(fabric.hosts)
    path_bytes_per_s = spec.host_bytes_in(1) / spec.planes
    step_s = [size / n / path_bytes_per_s + spec.base_rtt_s / 2 for size in sizes]
    return 2 * (n - 1) * sum(step_s)


def payload_rate_mbit(fabric: Fabric, mtu_payload: int | None = None) -> float:
    """The most payload a host can send: its line rate times the payload's share of a
    full DATA frame (headers, as on the wire), of the fabric's MTU unless a scenario
    sends smaller packets."""
    mtu_payload = mtu_payload or fabric.spec.mtu_payload
    return fabric.spec.host_line_rate_mbit * mtu_payload / data_frame_bytes(mtu_payload)


def window_rtts(fabric: Fabric, planes: int | None = None) -> int:
    """The rule of the fault rows' windows, in base round trips: the fewest whole round
    trips holding WINDOW_FRAMES full frames of a flow over `planes` planes (all of the
    fabric's by default) at line rate, and WINDOW_SAMPLES progress samples."""
    spec = fabric.spec
    frames_per_rtt = spec.bdp_frames * (planes or spec.planes)
    return max(math.ceil(WINDOW_FRAMES / frames_per_rtt - 1e-9),
               math.ceil(WINDOW_SAMPLES * PROGRESS_S / spec.base_rtt_s - 1e-9))


def _link(fabric: Fabric, plane: int, rack: int, spine: int) -> list[str]:
    spec = fabric.spec
    plane, rack, spine = plane % spec.planes, rack % spec.racks, spine % spec.t1_per_plane
    return [f"p{plane}t0r{rack}", f"p{plane}t1s{spine}"]


def criteria_table(table: list[Row]) -> list[str]:
    """The rows' claims and criteria as a markdown table (docs/paper.md shows it, a test
    keeps it equal to the code)."""
    lines = ["| row | section | the paper's claim | criterion |", "|---|---|---|---|"]
    lines += [f"| {r.key} | {r.section} | {r.claim} | {r.criterion} |" for r in table]
    return lines


def loaded_table(table: list[Row]) -> list[str]:
    """The loaded variants as a markdown table: what each asks, and its criterion, which
    is a bound of the loaded fabric, not the paper's claim."""
    lines = ["| row | section | what the variant asks | criterion (a bound of the loaded "
             "fabric) |", "|---|---|---|---|"]
    lines += [f"| {r.key} | {r.section} | {r.claim} | {r.criterion} |" for r in table]
    return lines


def rows(fabric: Fabric, only: Callable[[str], bool] = lambda key: True) -> list[Row]:
    """Every row, scaled to `fabric`; `only` picks rows by key."""
    table = (_paper_rows(fabric) + _appendix_rows(fabric) + _other_rows(fabric)
             + _loaded_rows(fabric))
    return [row for row in table if only(row.key)]


class _Timeline:
    """Windows of one row's fabric and flows, as seconds (at_s, spans) and as text."""

    def __init__(self, fabric: Fabric, planes: int | None = None):
        self.rtts = window_rtts(fabric, planes)
        self.rtt = fabric.spec.base_rtt_s
        self.window = round(self.rtts * self.rtt, 6)
        self.settle = SETTLE_RTTS * self.rtt

    def t(self, windows: float) -> float:
        return round(windows * self.window, 4)

    def params(self, horizon: int, **more) -> dict:
        return {"window_s": self.window, "horizon_s": self.t(horizon), **more}

    def levels(self, horizon: float, flows: list,
               levels: list[tuple[float, float, float, str]]) -> dict:
        """The `capacity` judge's parameters: each level (from, to in windows, share of
        the capacity left, label) in seconds."""
        return self.params(horizon, flows=flows, levels=[
            [self.t(a), self.t(b), round(share, 6), label] for a, b, share, label in levels])


def _down_one_by_one(line: _Timeline, count: int, horizon: float,
                     entry: Callable[[int], dict], share: Callable[[int], float],
                     left: Callable[[int], str]) -> tuple[list[dict], list[tuple]]:
    """`count` elements taken down STEP windows apart from WARMUP, the i-th by the fault
    `entry(i)`, and brought back in the reverse order; and the levels of the capacity
    left in between (`share(out)` and `left(out)` with `out` of them down), then
    restored to `horizon`."""
    faults, levels = [], []
    for i in range(count):
        down, up = WARMUP + i * STEP, WARMUP + (2 * count - 1 - i) * STEP
        faults.append({**entry(i), "at_s": line.t(down), "down_s": line.t(up - down)})
    for j in range(2 * count - 1):  # each step, from the first one down
        out = min(j + 1, 2 * count - 1 - j)
        levels.append((WARMUP + j * STEP, WARMUP + (j + 1) * STEP, share(out),
                       f"step {j + 1}, {left(out)}"))
    levels.append((WARMUP + (2 * count - 1) * STEP, horizon, 1.0, "restored"))
    return faults, levels


def _pair_workload(fabric: Fabric, pair: list[int], windows: int,
                   both_ways: bool = True, **protocol) -> dict:
    """Write bandwidth between two hosts (both ways unless told), sized to last
    `windows` + MARGIN windows at line rate, MRC alone, EV_COUNT EVs a connection."""
    line = _Timeline(fabric)
    seconds = (windows + MARGIN) * line.window
    flows = [pair, pair[::-1]] if both_ways else [pair]
    return {"workload": "flows",
            "params": {"flows": flows, "message_bytes": fabric.spec.host_bytes_in(seconds)},
            "transports": ["mrc"], "timeout_s": round(max(MIN_TIMEOUT_S, 3 * seconds), 1),
            "protocol": {"ev_count": EV_COUNT, **protocol}}


def _paper_rows(fabric: Fabric) -> list[Row]:
    """The paper's testbed fault experiments (5.2.1-5.2.5) and the production
    observations a pair can show (2.2, 2.4, 5.1), one NIC pair each."""
    spec = fabric.spec
    n, planes, spines = len(fabric.hosts), spec.planes, spec.t1_per_plane
    line = _Timeline(fabric)
    rtt_ms = line.rtt * 1000
    cross = [0, n - 1] if spec.racks > 1 else [0, 1]  # a cross-T1 pair
    local = [0, 1] if spec.hosts_per_rack > 1 else cross  # a T0-local pair
    rack = fabric.host(cross[0]).rack
    shown = (f"windows of {line.rtts} round trips ({line.window * 1000:.0f} ms at "
             f"{spec.host_t0.rate_mbit:g} Mbit/s a link, round trip {rtt_ms:.1f} ms)")

    # Cross-T1: one timeline long enough for the twenty links, shared by every row of
    # the pair, so that they share one fault-free pass.
    failing = min(MAX_LINKS_FAILING, max_links_fail(fabric))
    failing_end = WARMUP + failing * LINK_EVERY
    cross_end = failing_end + AFTER
    cross_flows = _pair_workload(fabric, cross, cross_end)
    flows = cross_flows["params"]["flows"]

    def held(spans: list[tuple[str, float, float]], retire: bool = True) -> dict:
        return line.params(cross_end, flows=flows, retired=retire,
                           spans=[[name, line.t(a), line.t(b)] for name, a, b in spans])

    settle_w = line.settle / line.window  # the allowance, in windows
    flap_links = [_link(fabric, 0, rack, s) for s in range(max(1, min(8, spines // 2)))]
    t1_down = f"p{1 % planes}t1s0"
    silent = f"p{2 % planes}t1s{1 % spines}"
    broken = [_link(fabric, p, rack, 1) for p in range(min(2, planes))]
    broken_names = ", ".join("-".join(link) for link in broken)
    denominator = f"{planes * spines}"

    # T0-local: NIC links of one host one after another (half of them), then back in
    # the reverse order; four together; a T0.
    half = max(1, planes // 2)
    local_end = WARMUP + (2 * half - 1) * STEP + AFTER
    local_flows = _pair_workload(fabric, local, local_end)
    host = f"h{local[0]}"

    def capacity(levels: list[tuple[float, float, float, str]]) -> dict:
        return line.levels(local_end, local_flows["params"]["flows"], levels)

    sequential, levels = _down_one_by_one(
        line, half, local_end,
        lambda i: {"kind": "nic-port-down", "host": host, "plane": i},
        lambda out: (planes - out) / planes, lambda out: f"{planes - out} of {planes} links")

    # The EV experiment: the lossy connection restricted to two paths a plane, its EV-A
    # alone in plane 0 until its EV-B (the other path) is allowed as a backup.
    src, dst = cross
    a, b = 0, 1 % spines
    ev_end = WARMUP + 25
    ev_flows = _pair_workload(fabric, cross, ev_end, ev_count=planes, ev_min_active=1,
                              packet_events=True)
    restrict = [{"kind": "deny", "host": f"h{src}", "peer": f"h{dst}", "plane": p,
                 "spine": s, "at_s": 0}
                for p in range(planes) for s in range(spines) if s not in (a, b)]
    if b != a:
        restrict.append({"kind": "deny", "host": f"h{src}", "peer": f"h{dst}", "plane": 0,
                         "spine": b, "at_s": 0, "down_s": line.t(ALLOW)})
    lossy = {"kind": "gray-loss", "path": [f"h{src}", f"h{dst}"], "plane": 0, "spine": a,
             "probability": 0.2, "at_s": line.t(WARMUP)}

    # The ECN experiment: two pairs across the T1s, every EV of both on one path of
    # plane 0; the second flow joins the first.
    ecn = _Timeline(fabric, planes=1)
    pair2 = [1 % n, (cross[1] - 1) % n]
    ecn_end = ECN_ALONE + ECN_TOGETHER
    ecn_bytes = fabric.spec.host_bytes_in((ecn_end + MARGIN) * ecn.window) // planes
    pinned = {"workload": "flows",
              "params": {"flows": [cross, pair2], "message_bytes": ecn_bytes,
                         "start_s": [0.0, ecn.t(ECN_ALONE)]},
              "transports": ["mrc"],
              "timeout_s": round(max(MIN_TIMEOUT_S, 3 * (ecn_end + MARGIN) * ecn.window), 1)}

    one_ev = {"ev_count": planes, "ev_min_active": 1}

    # Section 4: the cross-T1 pair's NIC link in plane 0 at h{src} loses packets, then
    # a denylist entry at both ends takes the plane out of both connections.
    lossy_end = WARMUP + LOSSY_LINK + AFTER
    lossy_flows = _pair_workload(fabric, cross, lossy_end, packet_events=True)
    lossy_t0 = fabric.t0(0, fabric.host(src).rack).name
    entry_at = line.t(WARMUP + LOSSY_LINK)

    # Sections 5.1's transceiver glitch: every host link of the cross pair's first T0
    # in plane 0 flaps, one after the other; the pair's first host is one of those
    # hosts, its peer the remote sender.
    glitch_t0 = fabric.t0(0, fabric.host(src).rack)
    under = [h.index for h in fabric.hosts if h.rack == glitch_t0.index]
    glitch_end = WARMUP + (GLITCH_FLAPS - 1) * GLITCH_EVERY + GLITCH_DOWN \
        + GLITCH_STAGGER * (len(under) - 1)
    glitch = [{"kind": "link-flap", "link": [f"h{h}", glitch_t0.name],
               "at_s": line.t(WARMUP + GLITCH_STAGGER * i), "down_s": line.t(GLITCH_DOWN),
               "every_s": line.t(GLITCH_EVERY), "count": GLITCH_FLAPS}
              for i, h in enumerate(under)]

    # Point to point: one way, cross-T1 against T0-local.
    p2p_end = WARMUP + 20
    one = _pair_workload(fabric, cross, p2p_end, both_ways=False)
    one_local = _pair_workload(fabric, local, p2p_end, both_ways=False)

    b_pct, held_s = f"{BAND:.0%}", f"{HELD:g}"
    return [
        Row("point-to-point", "5.2.1",
            "Between a single client and a single server, T0-local and cross-T1 both "
            "reach about 770 Gb/s, 96% of the theoretical peak: steady-state throughput "
            "is not constrained by whether traffic stays within one T0 or crosses T1s.",
            f"Every byte delivered, and MRC's throughput from the end of the warm-up "
            f"({WARMUP} windows) to the end of the judged time, cross-T1 and T0-local each, "
            f"is at least {held_s} of the most payload a host's ports carry.",
            f"One way, h{cross[0]} -> h{cross[1]} (cross-T1) and h{local[0]} -> h{local[1]} "
            f"(T0-local), one connection each (the paper: 4 QPs of 32 KB writes; the "
            f"agents hold one connection per pair), {EV_COUNT} EVs; the ceiling is the "
            f"line rate times the payload's share of a DATA frame ({spec.mtu_payload} of "
            f"{spec.data_frame_bytes} bytes), where the paper's 96% is of the line rate "
            f"with headers; bandwidth only: the 2-byte latency would measure the agents' "
            f"event loop and the runner's command path, milliseconds, not the network's "
            f"microseconds; {shown}; {DIFFERS_EMULATION}.",
            one, "line_rate", reference=one_local,
            params=line.params(p2p_end, warmup_s=line.t(WARMUP), cross=cross, local=local)),
        Row("nic-links-down", "5.2.2 (Fig. 9a)",
            "NIC-T0 links taken down one at a time, then restored: throughput decreases as "
            "links go and recovers as they return; each change costs a brief interruption "
            "(less than a second), after which both directions stabilize over the "
            "remaining links.",
            f"Every byte delivered; after each step MRC's throughput is back within "
            f"{b_pct} of the remaining-capacity line (the fault-free pass's same windows "
            f"times the share of the NIC's links up) within {SETTLE_RTTS} round trips, "
            f"and from then to the next step its mean is within {b_pct} of that line.",
            f"Ports 0 to {half - 1} of {host} go down {STEP} windows apart and come back "
            f"in the reverse order (the paper: one NIC's links over minutes), under "
            f"T0-local write bandwidth both ways between h{local[0]} and h{local[1]}, one "
            f"connection each way (the paper: 4 QPs), {EV_COUNT} EVs; {shown}; "
            f"{DIFFERS_EMULATION}.",
            {**local_flows, "faults": sequential}, "capacity",
            params=capacity(levels)),
        Row("transceiver-flap", "5.2.2 (Fig. 9b)",
            f"{half} of a NIC's {planes} links flap together (a shared transceiver): MRC "
            "quickly stabilizes at about half the nominal bandwidth, and rapidly recovers "
            "once the links are restored.",
            f"Every byte delivered; after the links go, and after they return, MRC's "
            f"throughput is back within {b_pct} of the remaining-capacity line within "
            f"{SETTLE_RTTS} round trips, and from then on its mean is within {b_pct} of "
            "that line.",
            f"Ports 0 to {half - 1} of {host} down together for {TRANSCEIVER_DOWN} windows "
            f"(the paper: about 12 s of a 25 s run), T0-local both ways as nic-links-down; "
            f"{shown}; {DIFFERS_EMULATION}.",
            {**local_flows, "faults": [{"kind": "transceiver-flap", "host": host,
                                        "planes": list(range(half)),
                                        "at_s": line.t(WARMUP),
                                        "down_s": line.t(TRANSCEIVER_DOWN)}]},
            "capacity", params=capacity([
                (WARMUP, WARMUP + TRANSCEIVER_DOWN, (planes - half) / planes,
                 f"{planes - half} of {planes} links"),
                (WARMUP + TRANSCEIVER_DOWN, local_end, 1.0, "restored")])),
        Row("links-failing", "5.2.2 (Fig. 9c)",
            "Twenty T0-T1 links, most of them carrying traffic, are taken down one after "
            "another: MRC maps out the affected EVs and retransmits over other paths, "
            "with minimal impact on overall throughput even as active links are removed.",
            f"Every byte delivered; MRC's throughput while the links fail (from the first "
            f"to {LINK_EVERY} windows after the last) and after, each against the "
            f"fault-free pass's same windows, is at least {held_s}. INCONCLUSIVE if no "
            "path of the pair's was retired (the links carried none of its traffic).",
            f"{failing} of {sum(lk.tier == 't0_t1' for lk in fabric.links)} T0-T1 links, "
            f"drawn at random, fail {LINK_EVERY} windows apart (the paper: 1 s apart, five "
            f"of its 200 ms reports), under cross-T1 write bandwidth both ways between "
            f"h{cross[0]} and h{cross[1]}, one connection each way (the paper: 4 QPs), "
            f"{EV_COUNT} EVs of {denominator} paths; {shown}; {DIFFERS_EMULATION}.",
            {**cross_flows, "faults": [{"kind": "links-fail", "count": failing,
                                        "at_s": line.t(WARMUP),
                                        "every_s": line.t(LINK_EVERY), "seed": 1}]},
            "held", params=held([("failing", WARMUP, failing_end),
                                 ("after", failing_end, cross_end)])),
        Row("t0-t1-link-flaps", "5.2.2 (Fig. 9d)",
            "Eight T0-T1 links carrying traffic go down together and are restored a few "
            "seconds later (a switch transceiver flap): MRC reroutes and recovers "
            "rapidly, with negligible impact on workload-level performance.",
            f"Every byte delivered; MRC's throughput while the links are down and after "
            f"they return, each against the fault-free pass's same windows, is at least "
            f"{held_s}. INCONCLUSIVE if no path of the pair's was retired.",
            f"{len(flap_links)} uplinks of {flap_links[0][0]} (of its {spines}) down for "
            f"{FLAP} windows, cross-T1 both ways as links-failing; {shown}; "
            f"{DIFFERS_EMULATION}.",
            {**cross_flows, "faults": [{"kind": "link-down", "link": link,
                                        "at_s": line.t(WARMUP), "down_s": line.t(FLAP)}
                                       for link in flap_links]},
            "held", params=held([("down", WARMUP, WARMUP + FLAP),
                                 ("after", WARMUP + FLAP, cross_end)])),
        Row("t0-down", "5.2.3 (Fig. 10)",
            "A T0 switch taken down: after EV remapping, throughput stabilizes at a level "
            "proportional to the remaining available network capacity.",
            f"Every byte delivered; after the T0 goes, and after it returns, MRC's "
            f"throughput is back within {b_pct} of the remaining-capacity line within "
            f"{SETTLE_RTTS} round trips, and from then on its mean is within {b_pct} of "
            "that line.",
            f"p0t0r{fabric.host(local[0]).rack}, the T0 of both hosts of the T0-local pair "
            f"in plane 0, down for {T0_DOWN} windows, then back as from a reboot; "
            f"T0-local both ways as nic-links-down; {shown}; {DIFFERS_EMULATION}.",
            {**local_flows, "faults": [{"kind": "switch-down",
                                        "switch": f"p0t0r{fabric.host(local[0]).rack}",
                                        "at_s": line.t(WARMUP), "down_s": line.t(T0_DOWN)}]},
            "capacity", params=capacity([
                (WARMUP, WARMUP + T0_DOWN, (planes - 1) / planes,
                 f"{planes - 1} of {planes} planes"),
                (WARMUP + T0_DOWN, local_end, 1.0, "restored")])),
        Row("t1-down", "5.2.3 (Fig. 11)",
            "A T1 switch taken down under cross-T1 traffic: each QP keeps enough EVs, so "
            "no steady-state bandwidth degradation; once the T1 is restored, transient "
            "fluctuations subside and bandwidth returns to a stable level.",
            f"Every byte delivered; MRC's throughput with the T1 down (from {SETTLE_RTTS} "
            f"round trips after the failure to the restore) and after (from {SETTLE_RTTS} "
            f"round trips after the restore) is at least {held_s} of the fault-free pass's "
            "same windows. INCONCLUSIVE if no path of the pair's was retired.",
            f"{t1_down}, one of {spines} T1 in its plane, down for {SWITCH_DOWN} windows "
            f"(the paper: one of many, for minutes), cross-T1 both ways as "
            f"links-failing; {shown}; {DIFFERS_EMULATION}.",
            {**cross_flows, "faults": [{"kind": "switch-down", "switch": t1_down,
                                        "at_s": line.t(WARMUP),
                                        "down_s": line.t(SWITCH_DOWN)}]},
            "held", params=held([
                ("down", WARMUP + settle_w, WARMUP + SWITCH_DOWN),
                ("after", WARMUP + SWITCH_DOWN + settle_w, cross_end)])),
        Row("ev-20pct-loss", "5.2.4 (Fig. 12, 13)",
            "One EV of a connection restricted to 16 paths, two per plane, drops 20% of "
            "its packets: its status turns inactive immediately, a backup EV is activated "
            "in its place, and bandwidth stays at line rate.",
            f"Every byte delivered; the lossy EV carries no data from {RETIRE_RTTS} round "
            f"trips after its first lost packet to the end, and its path is never "
            f"reinstated while it drops; the backup EV, idle before, carries data in every "
            f"window from then on; MRC's throughput from the loss on is at least {held_s} "
            "of the same windows without it. INCONCLUSIVE if the lossy EV carried nothing "
            "before the loss, or lost no packet.",
            f"h{src} -> h{dst}'s connection: {planes} active EVs, one a plane, and paths "
            f"through T1 {a} and {b} only (a controller's denials of the others: deny), the "
            f"path through T1 {b} of plane 0 allowed {ALLOW} windows in, as the backup of "
            f"EV-A (plane 0, T1 {a}), which loses 20% of what it carries from window "
            f"{WARMUP} (gray-loss on the path; the paper: the NIC's debug drops). The "
            f"reference plays the same restriction without the loss. Cross-T1 both ways, "
            f"the other connection unrestricted; per-packet events on; {shown}; "
            f"{DIFFERS_EMULATION}.",
            {**ev_flows, "faults": [*restrict, lossy]}, "ev_loss", needs=("faults",),
            reference={**ev_flows, "faults": restrict},
            params=line.params(ev_end, flows=ev_flows["params"]["flows"], src=src, dst=dst,
                               plane=0, spine_a=a, spine_b=b, allowed_s=line.t(ALLOW),
                               loss_s=line.t(WARMUP))),
        Row("lossy-nic-link", "4, 5.2.7",
            "A NIC-T0 link that does not fail completely but has an unacceptably high "
            "packet loss rate: MRC cannot rebalance to avoid the bad plane, because it "
            "cannot reliably tell whether the problem is at its end or the remote end; "
            "the bad plane can then be avoided by specifying a matching denylist entry, "
            "limiting the performance degradation to just the fraction of bandwidth lost "
            "by dropping one plane.",
            f"Every byte delivered; before the entry MRC keeps the lossy plane in use: a "
            f"path of it mapped out is reinstated by its probes and lost on again; from "
            f"the entry on no packet is sent on the plane, and from {SETTLE_RTTS} round "
            f"trips after it MRC's throughput is within {b_pct} of the remaining-capacity "
            f"line ({planes - 1}/{planes} of the fault-free pass's same windows). "
            "INCONCLUSIVE if no packet was lost on the plane.",
            f"h{src}'s plane-0 NIC link (to {lossy_t0}) loses {LOSSY_LINK_P:.0%} of the "
            f"packets both ways from window {WARMUP} (loss on the link; the paper gives no "
            f"rate); at window {WARMUP + LOSSY_LINK} the entries a Clustermapper policy "
            f"would set: h{src} denies its plane 0 toward every peer, h{dst} its plane 0 "
            f"toward h{src} (deny). Cross-T1 both ways, one connection each way, "
            f"{EV_COUNT} EVs, per-packet events. Both connections fill every port, so no "
            f"plane could take the lossy plane's share whatever MRC did: the row shows "
            f"MRC returning to the plane, not what a rebalancing would give; {shown}; "
            f"{DIFFERS_EMULATION}.",
            {**lossy_flows, "faults": [
                {"kind": "loss", "link": [f"h{src}", lossy_t0],
                 "probability": LOSSY_LINK_P, "at_s": line.t(WARMUP)},
                {"kind": "deny", "host": f"h{src}", "plane": 0, "at_s": entry_at},
                {"kind": "deny", "host": f"h{dst}", "peer": f"h{src}", "plane": 0,
                 "at_s": entry_at}]},
            "lossy_plane", needs=("faults",), shape="A",
            params=line.params(lossy_end, flows=lossy_flows["params"]["flows"], plane=0,
                               loss_s=line.t(WARMUP), entry_s=entry_at,
                               share=round((planes - 1) / planes, 6))),
        Row("ecn-migration", "5.2.5 (Fig. 14)",
            "A second flow forced onto the EV of a first flow: on ECN, MRC moves the first "
            "flow to another EV while the second keeps the first EV, and both flows "
            "sustain near-peak bandwidth throughout the transition.",
            f"A flow moves its EV off the shared path within {MIGRATE_RTTS} round trips of "
            f"the second flow's start, after which the two flows share no path; each "
            f"flow's throughput from the second flow's start on is at least {held_s} of "
            "the same windows of the same sequence with the EVs spread over the plane. "
            "INCONCLUSIVE if no ECN mark came.",
            f"Flow 1 (h{cross[0]} -> h{cross[1]}) starts alone, flow 2 (h{pair2[0]} -> "
            f"h{pair2[1]}) joins {ECN_ALONE} windows later; one EV a plane (ev_count "
            f"{planes}), every one on path 0 of plane 0 (protocol pin_path), so each flow "
            f"has one EV, as the paper's EV-A and EV-B of one plane. The reference plays "
            f"the same sequence with the EVs drawn on plane 0's paths (pin_path [0, "
            f"null]). Windows of {ecn.rtts} round trips (a flow on one plane); "
            f"{DIFFERS_EMULATION}.",
            {**pinned, "protocol": {**one_ev, "pin_path": [0, 0]}},
            "ecn_separation", needs=("ecn",),
            reference={**pinned, "protocol": {**one_ev, "pin_path": [0, None]}},
            params=ecn.params(ecn_end, flows=[cross, pair2], join_s=ecn.t(ECN_ALONE),
                              pinned=0)),
        Row("t0-transceiver-glitch", "5.1 (Figs. 6, 7)",
            "A transceiver on a T0 glitches and flaps its host links in rapid succession: "
            "throughput suffers about the plane's share (25% of four planes) over the "
            "flaps and recovers to full speed immediately afterwards; no QP fails; the "
            "nodes whose ports flapped and those sending to them both lose packets, and "
            "MRC recovers the losses quickly.",
            f"Every byte delivered and no connection in error; MRC's throughput while the "
            f"links flap is at least {(planes - 1) / planes - BAND:.2f} of the fault-free "
            f"pass's same windows (the plane lost, less {b_pct}), and from {SETTLE_RTTS} "
            f"round trips after the last flap at least {held_s}; the flapping host and "
            f"the remote sender both lost packets. INCONCLUSIVE if one of them lost "
            "none.",
            f"The {len(under)} host links of {glitch_t0.name} (of h"
            + ", h".join(map(str, under)) + f") each flap {GLITCH_FLAPS} times, down "
            f"{GLITCH_DOWN} window every {GLITCH_EVERY}, {GLITCH_STAGGER:g} window apart "
            f"(the paper: four links of a T0 over a minute, 3 of their nodes in the job; "
            f"here the T0 has {len(under)}); cross-T1 both ways as links-failing, so "
            f"h{src} is a flapping node and h{dst} the remote sender; both ends of a link "
            f"see it go down at once (the paper's NIC and switch disagree by moments); "
            f"{shown}; {DIFFERS_EMULATION}.",
            {**cross_flows, "faults": glitch}, "glitch", shape="A",
            params=line.params(cross_end, flows=flows, flapping=[src], remote=[dst],
                               floor=round((planes - 1) / planes - BAND, 6),
                               spans=[["flapping", line.t(WARMUP), line.t(glitch_end)],
                                      ["after", line.t(glitch_end + settle_w),
                                       line.t(cross_end)]])),
        Row("silent-t1", "5.1 (Fig. 8)",
            "A T1 that stops forwarding but stays up: throughput dips as QPs lose packets, "
            "they quickly map out the bad path and throughput is largely unaffected "
            "afterwards; the switch's reboot has no impact.",
            f"Every byte delivered; MRC's throughput while the T1 is silent (from "
            f"{SETTLE_RTTS} round trips after it falls silent to its reboot) and from its "
            f"reboot on (no allowance) is at least {held_s} of the fault-free pass's same "
            "windows. INCONCLUSIVE if no path of the pair's was retired.",
            f"{silent} drops what it should forward for {SWITCH_DOWN} windows, then is "
            f"rebooted (the paper: minutes in a production job, until automation rebooted "
            f"it); cross-T1 both ways as links-failing (the paper: a 75K-GPU job); {shown}; "
            f"{DIFFERS_EMULATION}.",
            {**cross_flows, "faults": [{"kind": "blackhole", "switch": silent,
                                        "at_s": line.t(WARMUP),
                                        "down_s": line.t(SWITCH_DOWN)}]},
            "held", shape="A", params=held([
                ("silent", WARMUP + settle_w, WARMUP + SWITCH_DOWN),
                ("rebooted", WARMUP + SWITCH_DOWN, cross_end)])),
        Row("broken-at-start", "2.2, 2.4",
            "With links down when a job starts and no denylist, MRC maps out the bad "
            "paths quickly enough that the slight startup performance loss is not a "
            "problem.",
            f"Every byte delivered; MRC's throughput from the start to the end of the "
            f"judged time is at least {held_s} of the fault-free pass's same windows. "
            "INCONCLUSIVE if no path of the pair's was retired.",
            f"{len(broken)} T0-T1 links down before the start ({broken_names}), "
            f"cutting {len(broken)} of each connection's {denominator} paths (the paper: a "
            f"few links of thousands); cross-T1 both ways as links-failing; {shown}; "
            f"{DIFFERS_EMULATION}.",
            {**cross_flows, "faults": [{"kind": "link-down", "link": link,
                                        "before_start": True} for link in broken]},
            "held", shape="A", params=held([("run", 0, cross_end)])),
        Row("startup-losses", "2.4 (Fig. 4)",
            "A job starting without a denylist while some paths are down loses fewer than "
            "5 packets per QP in its first minute.",
            f"MRC loses fewer than {LOST_PER_CONNECTION} packets a connection over the "
            "run, a packet lost being a retransmission whose original neither arrived nor "
            "was trimmed. INCONCLUSIVE if the links down cut no path of the connections.",
            f"broken-at-start's run: {len(broken)} of each connection's {denominator} "
            f"paths cut from the start; {shown}; {DIFFERS_EMULATION}.",
            {**cross_flows, "faults": [{"kind": "link-down", "link": link,
                                        "before_start": True} for link in broken]},
            "lost_per_connection", reference=None, shape="A",
            params={"limit": LOST_PER_CONNECTION}),
    ]


def _appendix_rows(fabric: Fabric) -> list[Row]:
    """The appendix's failures on Cluster D (Fig. 19): one pair in different racks,
    the uplinks of the sender's T0 failing, at the NIC's rate (a), then slowed so that
    together they carry just one NIC's rate (b, c). One timeline for the three, so that
    they share one fault-free pass."""
    spec = fabric.spec
    n, planes, spines = len(fabric.hosts), spec.planes, spec.t1_per_plane
    line = _Timeline(fabric)
    pair = [0, n - 1] if spec.racks > 1 else [0, 1]
    rack = fabric.host(pair[0]).rack
    t0 = fabric.t0(0, rack).name
    failing = max(1, min(UPLINKS_FAILING, spines - 1))
    at_once = max(1, min(UPLINKS_AT_ONCE, spines - 1))
    end = WARMUP + (2 * failing - 1) * STEP + AFTER
    flows = _pair_workload(fabric, pair, end)
    uplinks = [_link(fabric, 0, rack, s) for s in range(spines)]
    # Each T0-T1 link of plane 0 at the share of its rate that makes a T0's uplinks
    # together one host port's rate (the paper: 100G links under 400G NICs).
    slow = min(1.0, spec.host_t0.rate_mbit / (spines * spec.t0_t1.rate_mbit))
    slowed = [{"kind": "link-rate", "link": [lk.a, lk.b], "share": round(slow, 6),
               "before_start": True}
              for lk in fabric.links if lk.tier == "t0_t1" and lk.plane == 0]

    def level(up: int) -> float:
        """The pair's capacity, as a share of its NICs', with `up` of plane 0's uplinks
        at the sender's T0 up and slowed: the other planes whole, plane 0 what its
        uplinks carry, at most a port."""
        return round((planes - 1 + min(1.0, up * slow * spec.t0_t1.rate_mbit
                                       / spec.host_t0.rate_mbit)) / planes, 6)

    sequential, levels = _down_one_by_one(
        line, failing, end, lambda i: {"kind": "link-down", "link": uplinks[i]},
        lambda out: level(spines - out), lambda out: f"{spines - out} of {spines} uplinks")
    together_end = WARMUP + (2 * failing - 1) * STEP
    together = [{"kind": "link-down", "link": uplinks[i], "at_s": line.t(WARMUP),
                 "down_s": line.t(together_end - WARMUP)} for i in range(at_once)]

    def capacity(spans: list[tuple[float, float, float, str]]) -> dict:
        return line.levels(end, flows["params"]["flows"], spans)

    shown = (f"windows of {line.rtts} round trips ({line.window * 1000:.0f} ms at "
             f"{spec.host_t0.rate_mbit:g} Mbit/s a host link)")
    workload = (f"write bandwidth both ways between h{pair[0]} and h{pair[1]} in different "
                f"racks (the paper: ib_write_bw between two servers), MRC alone")
    slowed_text = (f"every T0-T1 link of plane 0 at {slow:.2g} of its rate from the start "
                   f"(link-rate), so that {t0}'s {spines} uplinks together carry one host "
                   f"port (the paper: 100G links under 400G NICs)")
    b_pct = f"{BAND:.0%}"
    tracks = (f"Every byte delivered; after each change MRC's throughput is back within "
              f"{b_pct} of the remaining-capacity line (the fault-free pass's same windows "
              f"times the share of the capacity the uplinks up carry) within {SETTLE_RTTS} "
              f"round trips, and from then to the next change its mean is within {b_pct} of "
              "that line.")
    return [
        Row("uplinks-failing-d", "appendix (Fig. 19a)",
            "Three of the four T0-T1 links progressively failed, with enough capacity on "
            "the remaining link: MRC quickly recovers from the failed links with no "
            "discernible impact on end-to-end throughput.",
            f"Every byte delivered; MRC's throughput while the links fail and after, each "
            f"against the fault-free pass's same windows, is at least {HELD:g}. "
            "INCONCLUSIVE if no path of the pair's was retired.",
            f"{failing} of {t0}'s {spines} uplinks fail {STEP} windows apart and stay down, "
            f"every link at a host port's rate; {workload}; {shown}; {DIFFERS_EMULATION}.",
            {**flows, "faults": [{k: v for k, v in f.items() if k != "down_s"}
                                 for f in sequential]},
            "held", shape="D", own_fabric=True, params=line.params(
                end, flows=flows["params"]["flows"], retired=True, spans=[
                    ["failing", line.t(WARMUP), line.t(WARMUP + failing * STEP)],
                    ["after", line.t(WARMUP + failing * STEP), line.t(end)]])),
        Row("uplinks-bottleneck-d", "appendix (Fig. 19b)",
            "With T0-T1 links of a quarter of a NIC's speed, so that failures create a "
            "bottleneck, three of four are disabled one after another and added back: MRC "
            "fails onto the remaining paths while giving throughput that tracks the "
            "remaining available capacity.",
            tracks,
            f"{slowed_text}; {failing} of {t0}'s uplinks go down {STEP} windows apart and "
            f"come back in the reverse order; {workload}; {shown}; {DIFFERS_EMULATION}.",
            {**flows, "faults": [*slowed, *sequential]}, "capacity",
            shape="D", own_fabric=True, params=capacity(levels)),
        Row("uplinks-two-at-once-d", "appendix (Fig. 19c)",
            "The same slow T0-T1 links, two dropped at once and brought back: MRC tracks "
            "the available capacity closely.",
            tracks,
            f"{slowed_text}; {at_once} of {t0}'s uplinks down together for "
            f"{together_end - WARMUP} windows; {workload}; {shown}; {DIFFERS_EMULATION}.",
            {**flows, "faults": [*slowed, *together]}, "capacity",
            shape="D", own_fabric=True, params=capacity([
                (WARMUP, together_end, level(spines - at_once),
                 f"{spines - at_once} of {spines} uplinks"),
                (together_end, end, 1.0, "restored")])),
    ]


def _other_rows(fabric: Fabric) -> list[Row]:
    """The collectives against RoCE (5.2.7), the incast (5.2.8) and the permutation
    (appendix), sized to take WORKLOAD_S at the hosts' line rate."""
    spec = fabric.spec
    n, planes = len(fabric.hosts), spec.planes
    d = WORKLOAD_S
    timeout = max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * d)
    # all-to-all: every host sends to n-1 others; sized to take d at line rate.
    a2a = {"workload": "all-to-all", "params": {"message_bytes": spec.host_bytes_in(d) // (n - 1)},
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
    def ring_timeout(sizes: list[int]) -> tuple[float, str]:
        """The ring's timeout at these sizes, and the row's words for it."""
        # At least three times the largest size's bytes on one path (ECMP collisions
        # may halve it), and RING_SLACK times the ring's time there with its steps'
        # latency, which rules where the steps are a few frames (cluster-c).
        seconds = round(max(timeout, 3 * planes * d,
                            RING_SLACK * one_path_ring_s(fabric, sizes)), 1)
        return seconds, (f"a transport not done within {seconds:g} s (at least "
                         f"{RING_SLACK:g} x the time the ring takes on one path, 1/planes "
                         "of a host, each step its bytes and half a base round trip) did "
                         "not finish")

    ring_sizes = sorted({max(n, ring_total // k) for k in (16, 4, 1)})
    ring_s, unfinished = ring_timeout(ring_sizes)
    largest_s, largest_unfinished = ring_timeout([ring_total])
    ring = {"workload": "all-reduce",
            "params": {"data_bytes": ring_sizes, "order": "across-racks"},
            "transports": ["mrc", "roce-16", "roce"], "timeout_s": ring_s}
    pairs = [[h, (h + spec.hosts_per_rack) % n] for h in range(n)]
    cross_flows = {"workload": "flows",
                   "params": {"flows": pairs, "message_bytes": spec.host_bytes_in(d)},
                   "transports": ["mrc", BASELINE], "timeout_s": timeout}
    victim = [n - 1, 1]
    fan_in = max(1, min(7, n - 3))  # the paper's 7:1, where the hosts allow it
    incast_bytes = spec.host_bytes_in(d) // fan_in
    across = sum(1 for h in incast_senders(fabric, 0, {0, *victim}, fan_in)
                 if fabric.host(h).rack != fabric.host(0).rack)

    # Every receiver of the all-to-all has n - 1 senders at once, and a window is at
    # least a packet: where they outnumber what its last hop holds before trimming,
    # MRC trims and resends the same packets (docs/paper.md, cluster-c's all-to-all).
    holds = spec.trim_lasthop * planes
    crowded = (f"; every host receives from {n - 1} senders at once, more than the "
               f"{holds} frames its last hop holds before trimming ({spec.trim_lasthop} "
               "a plane): windows of at least a packet each overfill it, and MRC trims "
               "and resends the same packets (docs/paper.md)"
               if n - 1 > holds else "")

    # All-to-all over three sizes (a curve, as Fig. 17).
    a2a_sizes = {**a2a, "params": {"message_bytes": sorted({max(1000, m) for m in (
        a2a["params"]["message_bytes"] // 64, a2a["params"]["message_bytes"] // 8,
        a2a["params"]["message_bytes"])})}, "transports": ["mrc", "roce", "roce-16"]}

    incast_set_up = (
        f"{fan_in}:1 incast, {across} of its senders across the spine (the victim needs "
        f"its own source and idle destination among {n} hosts; the paper: 7:1 across the "
        f"spine on 16 servers); RoCE runs on the single-plane twin")
    pauses = (", whose pauses hold the lossless class at the switch ports and NICs they "
              "reach, each after one frame and the pause's trip through user space (on "
              "BMv2, counted only: docs/protocol.md, PFC by data plane)")

    def incast_of(*baselines: str) -> dict:
        return {"workload": "incast", "params": {"message_bytes": incast_bytes,
                                                 "receiver": 0, "fan_in": fan_in,
                                                 "victim": victim},
                "transports": ["mrc", *baselines], "timeout_s": timeout}

    def alone_of(*baselines: str) -> dict:
        """The victim's flow alone, the incast rows' reference."""
        return {"workload": "transfer", "params": {"src": victim[0], "dst": victim[1],
                                                   "message_bytes": incast_bytes},
                "transports": ["mrc", *baselines], "timeout_s": timeout}

    def with_faults(base: dict, *faults: dict) -> dict:
        return {**base, "faults": list(faults)}

    # Fig. 22: each flow sized to end with the others one interval after the last
    # arrives, if the receiver's link is shared evenly (flow i shares it with k + 1
    # flows in the k-th interval, from its own arrival on).
    arrivals = incast_senders(fabric, 0, {0}, max(1, min(DCQCN_FAN_IN, n - 1)))
    fan = len(arrivals)
    every = ARRIVAL_EVERY_S
    payload_per_s = payload_rate_mbit(fabric) * 1e6 / 8
    staggered = {"workload": "flows", "params": {
        "flows": [[h, 0] for h in arrivals],
        "message_bytes": [int(payload_per_s * every * sum(1 / (k + 1) for k in range(i, fan)))
                          for i in range(fan)],
        "start_s": [round(i * every, 4) for i in range(fan)]},
        "transports": ["roce"], "timeout_s": max(timeout, 4 * (fan + 1) * every)}
    receiver_t0 = fabric.t0(0, fabric.host(0).rack).name
    settings = "; ".join(f"{name}: " + (", ".join(f"{k} {v:g}" for k, v in changed.items())
                                        or "the testbed's DCQCN (hosts/config.py)")
                         for name, changed in DCQCN_PROFILES)
    dcqcn_differs = (
        f"{fan}:1 incast into h0, the senders (other racks first) arriving {every:g} s apart "
        f"(the paper: 15:1, 5 s apart), 1-QP RoCE with PFC and DCQCN; the paper names no "
        f"profile's settings, here ({settings}); every profile meets the fabric's own ECN "
        f"thresholds (topologies/scale.py), where a vendor's profile may move them too; "
        f"the ToR's queue to h0 ({receiver_t0}) is the eBPF switch program's virtual queue, "
        f"sampled through the run (experiments/dataplanes/queue_sampler.py); a pause the "
        f"ToR sends a host stops that NIC, one it sends a T1 is counted, not carried out "
        f"(docs/protocol.md, PFC by data plane); "
        f"{DIFFERS_EMULATION}")
    judged_from = ("from the second arrival to one interval after the last, the incast's "
                   "throughput at h0 against its link's payload rate")

    def dcqcn_row(key: str, profile: str, claim: str, criterion: str, **expect) -> Row:
        return Row(key, "appendix (Fig. 22)", claim, criterion, dcqcn_differs + ".",
                   {**staggered, "protocol": dict(dict(DCQCN_PROFILES)[profile])},
                   "dcqcn_queue", reference=None, needs=("queue_sampling",),
                   params={"transport": "roce", "every_s": every,
                           "flows": staggered["params"]["flows"], **expect},
                   shape="D", queue=(receiver_t0, "h0"))

    def losing(key: str, profile: str, claim: str, criterion: str) -> Row:
        """A row of a profile the paper finds loses throughput: LOSSES's band."""
        low, high = LOSSES[profile]
        return dcqcn_row(key, profile, claim, criterion.format(low=low, high=high),
                         expect="loses", low=low, high=high, paused=CONTROLLED_PAUSED,
                         empty=SOMETIMES_EMPTY)

    return [
        Row("ring-allreduce-qps", "5.2.7 (Fig. 16)",
            "One MRC QP spraying over all paths beats RoCE with 16 QPs, which beats RoCE "
            "with 1 QP (ECMP collisions).",
            "At the largest size: goodput MRC >= 0.95 x roce-16, and roce-16 > roce "
            "(1 QP).",
            f"{n}-host ring across racks at three sizes (the paper: 64 GPUs, 4 MB to "
            f"16 GB, 4 x 100G planes against RoCE on one 400G plane); RoCE runs on the "
            f"single-plane twin; {unfinished}; {DIFFERS_EMULATION}.",
            ring, "qp_order", reference=None, params={"slack": 0.95}, shape="C",
            curve=("ring all-reduce (Fig. 16)", "no loss")),
        Row("ring-qp-scaling", "5.2.7 (Fig. 16)",
            "For RoCE, QP scaling does indeed help, but there is very little gain beyond "
            "8 QPs.",
            "At the ring's largest size, RoCE's per-host throughput with 8 QPs is at "
            "least 1.1 x its 1-QP throughput (helps), and with 16 QPs at most 1.1 x its "
            "8-QP throughput (little beyond); 1, 2, 4, 8 and 16 QPs measured.",
            f"{n}-host ring across racks at its largest size only (the paper: 64 GPUs, "
            f"up to 16 GB); RoCE with PFC and DCQCN on the single-plane twin, MRC beside "
            f"it for scale; {largest_unfinished}; {DIFFERS_EMULATION}.",
            {**ring, "params": {**ring["params"], "data_bytes": [ring_total]},
             "transports": ["mrc", *QP_SWEEP], "timeout_s": largest_s},
            "qp_scaling", reference=None, params={"helps": 1.1, "beyond": 1.1},
            shape="C"),
        Row("random-loss-0p1pct", "5.2.7 (Fig. 16)",
            "With 0.1% random loss MRC retransmits fast enough that large transfers barely "
            "notice.",
            "MRC's goodput is at least 90% of its loss-free run.",
            "0.1% loss on every host link, both ways (each packet crosses two: about 0.2% "
            f"a path; the paper: on NIC receive); {tail}; {unfinished}; "
            f"{DIFFERS_EMULATION}.",
            with_faults(ring, {"kind": "loss", "link": "hosts", "probability": 0.001,
                               "at_s": 0}),
            "loss_ratio", needs=("faults",), params={"mrc": 0.9}, shape="C",
            curve=("ring all-reduce (Fig. 16)", "0.1% loss")),
        Row("random-loss-1pct", "5.2.7 (Fig. 16)",
            "At 1% loss RoCE is unusable and MRC keeps about a third of its throughput.",
            "MRC's goodput is at least 1/4 of its loss-free run, and the 1-QP go-back-N "
            "baseline's ratio is at most half of MRC's.",
            f"1% loss on every host link, both ways (about 2% a path); {tail}; "
            f"{unfinished}; {DIFFERS_EMULATION}.",
            with_faults(ring, {"kind": "loss", "link": "hosts", "probability": 0.01,
                               "at_s": 0}),
            "loss_ratio", needs=("faults",), params={"mrc": 0.25, "baseline": "roce",
                                                     "baseline_factor": 0.5}, shape="C",
            curve=("ring all-reduce (Fig. 16)", "1% loss")),
        Row("all-to-all-sizes", "5.2.7 (Fig. 17)",
            "In all-to-all MRC outperforms RoCE at every message size.",
            "At every size, MRC's phase time is at most 1.05 x the best baseline's plus "
            "one round trip (a phase of a few round trips varies by one with scheduling); "
            "at the largest size RoCE's 16 QPs take at least 0.95 x the time of its 1 QP "
            "(QP scaling does not help: the paper's 16 QPs are slightly worse).",
            f"{n} hosts, three sizes (the paper: 64 GPUs, 4 MB to 16 GB){crowded}; "
            f"{DIFFERS_EMULATION}.",
            a2a_sizes, "sizes", reference=None, params={"slack": 1.05, "qps_no_help": 0.95},
            shape="C",
            curve=("all-to-all (Fig. 17)", "no loss")),
        *(Row(f"all-to-all-loss-{name}", "5.2.7 (Fig. 17)",
              "With loss, RoCE suffers worse than MRC, as expected, but the difference is "
              "much greater at smaller message sizes" + (
                  ": at large message sizes and 0.1% loss RoCE barely sees any "
                  "degradation, at small ones it does very poorly; MRC's SACK-based "
                  "retransmission helps greatly there." if barely else "."),
              "At every size MRC's phase time is at most 1.05 x the best baseline's plus "
              "one round trip (as without loss); at the smallest size the loss slows "
              "RoCE (1 QP) down more than MRC (each one's phase time against its own "
              "without the loss), and by more than at the largest size"
              + (f"; at the largest size RoCE's time is at most {barely:g} x its time "
                 f"without the loss (barely any degradation)." if barely else "."),
              f"all-to-all-sizes with {pct} loss on every host link, both ways (the "
              f"paper: on NIC receive), against the same sizes without it{crowded}; "
              f"{DIFFERS_EMULATION}.",
              with_faults(a2a_sizes, {"kind": "loss", "link": "hosts",
                                      "probability": probability, "at_s": 0}),
              "loss_sizes", needs=("faults",),
              params={"slack": 1.05, "baseline": "roce", **({"barely": barely}
                                                              if barely else {})},
              shape="C", curve=("all-to-all (Fig. 17)", f"{pct} loss"))
          for name, pct, probability, barely in (("0p1pct", "0.1%", 0.001, 1.1),
                                                  ("1pct", "1%", 0.01, None))),
        Row("incast-victim", "5.2.8 (Fig. 18)",
            "A 7:1 incast does not hurt a victim flow that shares the fabric with it: "
            "trimming keeps the queues short, where RoCE's PFC spreads the congestion.",
            "MRC's victim keeps at least 90% of its throughput alone; RoCE's victim, "
            "with PFC and DCQCN, keeps less than 90% of it at 1 and at 8 QPs (the "
            "paper: about 75% with 1 QP, dips to 25% with 8).",
            f"{incast_set_up}, with PFC and DCQCN{pauses}; {DIFFERS_EMULATION}.",
            incast_of("roce", BASELINE), "victim", needs=("trimming",),
            reference=alone_of("roce", BASELINE),
            params={"share": 0.9, "suffers": 0.9}, shape="D"),
        Row("incast-victim-pfc", "appendix (Fig. 21)",
            "The same incast with RoCE relying on PFC alone: the effect on the victim flow "
            "is dire, the victim only achieving 30 to 100 Gbps (of 400) depending on ECMP "
            "path choice and fairness; MRC has no impact on the victim flow.",
            "MRC's victim keeps at least 90% of its throughput alone; RoCE's victim, with "
            "PFC alone, keeps less than 25% of it at 1 and at 8 QPs (the paper: 30 to 100 "
            "of 400 Gbit/s).",
            f"{incast_set_up}, with PFC alone{pauses}; MRC's passes are incast-victim's; "
            f"{DIFFERS_EMULATION}.",
            incast_of("roce-pfc", "roce-8-pfc"), "victim", needs=("trimming",),
            reference=alone_of("roce-pfc", "roce-8-pfc"),
            params={"share": 0.9, "suffers": 0.25}, shape="D"),
        Row("permutation", "appendix (Fig. 20)",
            "Racks sending to other racks one to one: single-QP RoCE flows collide on "
            "ECMP and some get a half or a third of line rate; MRC's every flow gets "
            "line rate.",
            "MRC's slowest flow gets at least 90% of its flows' mean (no collision), and "
            "at least 95% of the 1-QP RoCE's slowest flow's share of the line rate; the "
            "1-QP RoCE's slowest flow gets at most 55% of the line rate (a half or a "
            "third, and 5 points).",
            f"{n} flows, each host of a rack to the host in its place in the next (the "
            f"paper: 2 racks to 2 racks of Cluster D); RoCE with 1 and 8 QPs, with PFC "
            f"and DCQCN and with PFC alone, on the single-plane twin. Every host sends "
            f"and receives at line rate, which the agents' CPU bounds here (one flow alone "
            f"reaches 0.96 of it: point-to-point), so MRC is judged by how even its flows "
            f"are, not by their share of the line rate; {DIFFERS_EMULATION}.",
            {**cross_flows, "transports": ["mrc", "roce", "roce-pfc", BASELINE,
                                           f"{BASELINE}-pfc"]},
            "permutation", reference=None, params={"even": 0.9, "against": "roce",
                                                   "margin": 0.95, "collided": 0.55},
            shape="D"),
        dcqcn_row(
            "dcqcn-default-incast", "default",
            "Configuring DCQCN properly is very hard because it is traffic-pattern "
            "specific. With the default profile, under a 15:1 incast whose flows arrive "
            "one after another, the queue is controlled with a small number of flows (less "
            "than 10) and then goes into PFC mode, but the bottleneck throughput is line "
            "rate.",
            f"The receiving ToR's first PFC pause comes once at least {PFC_AFTER_FLOWS} flows "
            f"have arrived, and before the last interval ends; {judged_from} is at least "
            f"{HELD:g}.",
            expect="pfc", controlled=PFC_AFTER_FLOWS, line=HELD),
        losing(
            "dcqcn-aggressive-incast", "aggressive",
            "With a more aggressive profile the queue is controlled (with some wild dynamic "
            "range) but the queue is sometimes empty, and this leads to around 10% loss in "
            "bottleneck throughput.",
            f"Over the same time the ToR pauses a sender in at most {CONTROLLED_PAUSED:.0%} "
            f"of the queue samples (controlled), the queue is empty (less than a frame) in "
            f"at least {SOMETIMES_EMPTY:.0%} of them, and {judged_from} is {{low:.2f}} to "
            "{high:g} (around 10% lost)."),
        losing(
            "dcqcn-most-aggressive-incast", "most-aggressive",
            "With the most aggressive setting the queue usage spikes are similar but "
            "average utilization is lower, and the total throughput is 20% slower than "
            "line rate.",
            f"Over the same time the ToR pauses a sender in at most {CONTROLLED_PAUSED:.0%} "
            f"of the queue samples, the queue is empty in at least {SOMETIMES_EMPTY:.0%} of "
            f"them, and {judged_from} is {{low:.2f}} to {{high:.2f}} (20% slower); its mean "
            "queue is reported beside the aggressive profile's."),
    ]


def _loaded_rows(fabric: Fabric) -> list[Row]:
    """The fault rows on a loaded fabric: bidirectional cross-T1 flows out of and into
    every host (each host with the host in its place in the next rack), MRC against
    the RoCE-like baseline. Every T0-T1 fault lies on their paths and each agent serves
    one peer, so its CPU measures the network, not itself; but on a full-bisection
    fabric a T0-T1 link is a share of a plane's core, so every fault costs throughput
    by construction, and the criteria are what equal plane loading allows."""
    spec = fabric.spec
    n, planes = len(fabric.hosts), spec.planes
    d = WORKLOAD_S
    timeout = max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * d)
    pairs = [[h, (h + spec.hosts_per_rack) % n] for h in range(n)]
    cross_flows = {"workload": "flows",
                   "params": {"flows": pairs, "message_bytes": spec.host_bytes_in(d)},
                   "transports": ["mrc", BASELINE], "timeout_s": timeout}
    flaps = [_link(fabric, p, p, p) for p in range(min(4, planes * spec.racks))]
    flap_every = 0.3
    links_total = sum(1 for lk in fabric.links if lk.tier == "t0_t1")
    failing = min(MAX_LINKS_FAILING, links_total // 3)
    local = [0, 1] if spec.hosts_per_rack > 1 else [0, n - 1]
    local_flows = {"workload": "flows",
                   "params": {"flows": [local, local[::-1]],
                              "message_bytes": spec.host_bytes_in(d)},
                   "transports": ["mrc", BASELINE], "timeout_s": timeout}
    half = list(range(max(1, planes // 2)))
    loaded = (f"while {n} hosts each send to, and receive from, the host in its place in "
              f"the next rack ({d:g} s at line rate, MRC and {BASELINE})")

    def with_faults(base: dict, *faults: dict) -> dict:
        return {**base, "faults": list(faults)}

    # One T0-T1 uplink of rack 0's T0 down in each of up to four planes before the
    # start: broken-at-start-loaded judges the run's goodput, startup-losses-loaded its
    # losses.
    broken_start = with_faults(cross_flows, *({"kind": "link-down",
                                               "link": _link(fabric, p, 0, p + 1),
                                               "before_start": True}
                                              for p in range(min(planes, 4))))

    def row(key: str, section: str, asks: str, criterion: str, differs: str, scenario: dict,
            judge: str, **extra) -> Row:
        return Row(key, section, asks, criterion, f"{differs}; {DIFFERS_EMULATION}.",
                   scenario, judge, loaded=True, **extra)

    return [
        row("t0-t1-link-flaps-loaded", "5.1, 5.2.2 (Fig. 5, 9d)",
            f"T0-T1 links flapping several times a second {loaded}: MRC maps the paths out "
            "and back in.",
            "MRC's slowdown against its own fault-free run is at most 5%.",
            f"{len(flaps)} links flap under the load (the paper: a constant rate of flaps "
            "over days)",
            with_faults(cross_flows, *({"kind": "link-flap", "link": link,
                                        "at_s": 0.1 * d + 0.05 * i, "down_s": 0.1,
                                        "every_s": flap_every,
                                        "count": max(1, int(0.7 * d / flap_every))}
                                       for i, link in enumerate(flaps))),
            "slowdown_at_most", params={"limit": 0.05}),
        row("silent-t1-loaded", "5.1 (Fig. 8)",
            f"A T1 that stops forwarding but stays up {loaded}: MRC maps the bad paths out; "
            "routing never moves the baseline off it until it is rebooted.",
            "MRC finishes with goodput against its fault-free run at least the capacity "
            "left in the plane that lost most uplinks at one T0, minus 5% (the links "
            "rows' rule), while the baseline's last transfer waits for the reboot.",
            f"The T1 is silent for {0.5 * d:g} s, then rebooted; it is one of "
            f"{spec.t1_per_plane} in its plane, so while it is silent a T0 of its plane "
            f"has {1 - 1 / spec.t1_per_plane:.0%} of its uplinks, and MRC, keeping its "
            f"planes equally loaded, is bounded by that plane; the baseline's routing is "
            f"BGP with ECMP",
            with_faults(cross_flows, {"kind": "blackhole", "switch": f"p{2 % planes}t1s"
                              f"{1 % spec.t1_per_plane}", "at_s": 0.2 * d, "down_s": 0.5 * d}),
            "silent_t1", params={"slack": 0.05}),
        row("t1-down-loaded", "5.2.3 (Fig. 11)",
            f"A T1 switch down {loaded}.",
            "From 0.5 s after the failure to the end, MRC's goodput against its "
            "fault-free goodput is at least the capacity left in the plane that lost "
            "most uplinks at one T0, minus 5% (the links rows' rule).",
            f"The T1 is one of {spec.t1_per_plane} in its plane: a T0 of its plane keeps "
            f"{1 - 1 / spec.t1_per_plane:.0%} of its uplinks, and MRC, keeping its planes "
            f"equally loaded (section 4), is bounded by that plane",
            with_faults(cross_flows, {"kind": "switch-down", "switch": f"p{1 % planes}t1s0",
                              "at_s": 0.3 * d}),
            "steady_state", params={"settle_s": 0.5, "slack": 0.05}),
        row("t0-down-loaded", "5.2.3 (Fig. 10)",
            f"A T0 switch down {loaded}.",
            f"MRC's goodput against its fault-free run drops by at most the 1/{planes} of "
            "capacity the hosts under the T0 lose, plus 5%.",
            f"The T0 takes one plane from {spec.hosts_per_rack} hosts, each with a flow "
            f"out and one in",
            with_faults(cross_flows, {"kind": "switch-down", "switch": "p0t0r0", "at_s": 0.3 * d}),
            "proportional", params={"lost": 1 / planes, "slack": 0.05}),
        row("nic-port-loss-loaded", "5.2.2 (Fig. 9a), 3",
            f"One NIC port of one host lost for good {loaded}.",
            f"MRC's slowdown is at most 1/{planes} + 5%.",
            "One port of one host goes down for good",
            with_faults(cross_flows, {"kind": "nic-port-down", "host": "h1", "plane": planes - 1,
                              "at_s": 0.3 * d}),
            "slowdown_at_most", params={"limit": 1 / planes + 0.05}),
        row("links-failing-loaded", "5.2.2 (Fig. 9c)",
            f"T0-T1 links taken down one after another {loaded}.",
            "MRC finishes, and its goodput against its fault-free run is at least the "
            "capacity left in the plane that lost most uplinks at one T0, minus 5% (MRC "
            "loads its planes equally, section 4).",
            f"{failing} of {links_total} T0-T1 links fail, {0.6 * d / failing:.2f} s apart, "
            f"so a T0 may keep one uplink of {spec.t1_per_plane} in a plane; MRC keeps its "
            f"planes equally loaded (section 4), so the plane that lost most sets the pace "
            f"of every flow",
            with_faults(cross_flows, {"kind": "links-fail", "count": failing, "at_s": 0.1 * d,
                              "every_s": round(0.6 * d / failing, 3), "seed": 1}),
            "plane_bound", params={"slack": 0.05}),
        row("broken-at-start-loaded", "2.2",
            f"T0-T1 links down from the start {loaded}: MRC finds and avoids them by itself.",
            "MRC finishes, and its goodput against its fault-free run is at least the "
            "capacity left in the plane that lost most uplinks at one T0, minus 5% (MRC "
            "loads its planes equally, section 4).",
            f"{min(planes, 4)} T0-T1 links are down before the job starts, one of "
            f"{spec.t1_per_plane} uplinks of a T0 in each of {min(planes, 4)} planes",
            broken_start, "plane_bound", params={"slack": 0.05}),
        row("transceiver-flap-loaded", "5.2.2 (Fig. 9b)",
            f"{len(half)} of a NIC's {planes} links down at once under T0-local flows both "
            f"ways, MRC and {BASELINE}.",
            f"While the ports are down, MRC's goodput against fault-free is at least "
            f"{1 - len(half) / planes:.2f} (the ports left) minus 5%; from 0.3 s after "
            "they return, at least 0.90.",
            f"Ports {half} of h{local[0]} go down for {0.3 * d:g} s; roce-8 on the twin "
            f"keeps {1 - len(half) / planes:.2f} of its NIC's one port's rate",
            with_faults(local_flows, {"kind": "transceiver-flap", "host": f"h{local[0]}",
                                      "planes": half, "at_s": 0.2 * d, "down_s": 0.3 * d}),
            "transceiver", params={"lost": len(half) / planes, "slack": 0.05,
                                   "settle_s": 0.3, "recovered": 0.9}),
        row("startup-losses-loaded", "2.4 (Fig. 4)",
            f"Packets lost while MRC maps out links down from the start {loaded}.",
            "MRC loses at most 5 packets a connection for each broken path it sprays "
            "over.",
            f"broken-at-start-loaded's run: {min(planes, 4)} T0-T1 links down before {n} "
            f"cross-T1 connections start, which cuts {min(planes, 4)} of the "
            f"{planes * spec.t1_per_plane} paths of each, so losses are counted per broken "
            f"path; a packet lost is a retransmission whose original neither arrived nor "
            f"was trimmed",
            broken_start, "startup_losses", reference=None, params={"per_broken_path": 5}),
    ]
