"""What this machine's agents can drive: a calibrated budget, cached, and the rate cap
every run takes from it.

The agents are Python processes sharing the machine's cores with the kernel's
forwarding: past some packet rate their event loops fall behind, their timers measure
the CPU rather than the network, and a run's result is the machine's
(experiments/analysis/health.py). The budget is the traffic, in Mbit/s per core, that the
hosts of a fabric may send at once with the agents still keeping up: measured with the
workload's hosts sending on every plane at line rate, and applied to as many hosts as a
run has sending at once (`cap_for`).

It depends on the workload (`WORKLOADS`), so it is measured for two:
- `all-to-all`: a fault-free all-to-all on 2tier-8plane, the shipped workload with the
  most connections per agent, the heaviest per packet; every run that does not say
  otherwise;
- `pair`: write bandwidth both ways between one cross-T1 pair on cluster-b, the fault
  rows of `make paper` (two hosts sending: `workload_for`). Sharing the all-to-all's
  budget between two hosts ran their links four times faster, where a round trip is a
  quarter as long, while the agents' timers were late by as much as before: the pair
  rows' agents were late by 0.53-1.07 round trips (p99) at 56 Mbit/s a core, where
  the all-to-all kept up.

`calibrate()` measures a workload's budget at rising budgets (`LADDER`), each step
keeping the fabric busy for about STEP_S; a step passes when the agents' timers fire
within half a round trip (p99), fewer than 1% of the packets arrive twice with
nothing dropped, and the fabric carried the step's traffic in at most MAX_STEP_STRETCH
times STEP_S and STEP_SLACK_RTTS round trips (`step_passes`); the budget is the last
step that passed. The agents' work is per
packet, so the budget depends on the fabric's MTU (topologies/model.py `mtu_payload`):
it is measured, and cached, for each MTU and workload a run uses. A calibration takes
about a minute and is cached in build/calibration.json under a key of the agents' code
and the machine (CPU model and cores): `budget()` reads it, or gives the figure
measured the same way on a 2-core VM (`default_mbit_per_core`), and says so.
`make calibrate` measures both again; `experiments run` and `make paper` measure the
one they need when the cache is missing or stale and their fabric would be capped
(`cap_for`).

The figure is the machine's only if nothing else ran on it (experiments/run/quietness.py):
a calibration beside another program measures what the agents keep up with in the CPU
that program left them. So the machine is watched for a second before the ladder, and
the other programs' CPU during each step's traffic; when either is past its limit
(quietness.Limits) nothing is stored, one line names what was busy, and the run goes on
with the last quiet figure in the cache, else the default. A stored figure carries when
it was measured and how quiet the machine was (`idle_share_before`,
`others_share_during`); a cached figure without them is not known to be quiet and is
measured again.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from experiments.run import quietness
from experiments.run.agents import AGENT_PROCESSES
from hosts.protocol import DEFAULT_MTU_PAYLOAD, NIC_MTU_PAYLOAD, data_frame_bytes
from topologies import scale
from topologies.model import Fabric, load_topology, with_mtu, with_rate_cap, without_delay

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "build" / "calibration.json"
# Measured by calibrate() on a 2-core VM (Debian 12, no netem): the all-to-all's agents
# kept their timers within half a round trip up to 56 Mbit/s per core, not at 80.
DEFAULT_MBIT_PER_CORE = 56.0
# One pair's, measured the same way on cluster-b: 40 (5 Mbit/s links, timers 2.0 ms late
# p99 against a 9.0 ms round trip), not 56 (5.3 ms against 6.45).
DEFAULT_PAIR_MBIT_PER_CORE = 40.0
# The same at the NICs' 4 KiB payloads (three calibrations: 113, 80, 113): about twice
# the figure at 1,200 bytes, not the 3.2 times the frames' sizes would give.
MEASURED_MBIT_PER_CORE = {DEFAULT_MTU_PAYLOAD: DEFAULT_MBIT_PER_CORE, NIC_MTU_PAYLOAD: 113.0}
# Mbit/s per core, tried in order: steps of sqrt(2), so that the budget chosen is
# within 30% of the most the machine sustains.
LADDER = (20.0, 28.0, 40.0, 56.0, 80.0, 113.0, 160.0, 226.0, 320.0, 453.0, 640.0)
# On BMv2 every packet also costs each of its switches' processes a pipeline pass on the
# same cores, and 48 processes stand by for 2tier-8plane: the same steps, from far lower.
BMV2_LADDER = (2.5, 3.5, 5.0, 7.1, 10.0, 14.0, 20.0, 28.0, 40.0, 56.0)
# The data planes a budget is measured on, and their ladders. The kernel's budget caps
# every run's links (experiments/run/lifecycle.py); BMv2's caps a BMv2 fabric's before
# (experiments/dataplanes/bmv2_target.py), measured with the all-to-all only.
KERNEL, BMV2 = "kernel", "bmv2"
LADDERS = {KERNEL: LADDER, BMV2: BMV2_LADDER}


@dataclass(frozen=True)
class Workload:
    """A workload the budget is measured on: its fabric, and its traffic there."""

    name: str
    reference: str  # the topology it runs on
    description: str  # for the run's note: whose budget it is
    one_pair: bool  # one cross-T1 pair sending both ways, else every host to every other

    def pair(self, fabric: Fabric) -> list[int] | None:
        """The pair that sends both ways, or None: every host sends."""
        return [0, len(fabric.hosts) - 1] if self.one_pair else None

    def plan(self, fabric: Fabric, seconds: float) -> list[list]:
        """The phases that keep the workload's hosts sending at line rate for about
        `seconds`."""
        from experiments.scenarios.workloads import phases

        pair = self.pair(fabric)
        if pair is None:  # each host sends to every other at its line rate shared among them
            message = fabric.spec.host_bytes_in(seconds) // (len(fabric.hosts) - 1)
            return [list(p) for p in phases(ALL_TO_ALL, {"message_bytes": message}, fabric)]
        return [list(p) for p in phases("flows", {
            "flows": [pair, pair[::-1]], "message_bytes": fabric.spec.host_bytes_in(seconds)},
            fabric)]


# The all-to-all, not a ring all-reduce (one peer per host): the ring kept up at twice
# the budget at which the shipped all-to-all scenarios' agents fell half a round trip
# behind.
ALL_TO_ALL = "all-to-all"
PAIR = "pair"
WORKLOADS = {
    ALL_TO_ALL: Workload(ALL_TO_ALL, "2tier-8plane", "every host sending to every other",
                         one_pair=False),
    PAIR: Workload(PAIR, "cluster-b", "one pair sending both ways", one_pair=True),
}
# How long each step keeps the fabric busy: long enough that the agents' start (all
# of them at once) is not the step's worst hundredth of timers.
STEP_S = 3.0
# How much longer than STEP_S the fabric may take to carry a step: half again, and two
# round trips for the last packets and their answers (a round trip is 0.58 s at BMv2's
# first step). On the kernel data plane the all-to-all's passing steps took 1.21-1.42
# times STEP_S (its hosts share their receivers); BMv2's switches, sharing the cores
# with the agents, took 1.86 times at 20 Mbit/s a core and 3.8 at 28 while the agents'
# timers were on time: switches that fall behind hold packets in their own buffers,
# and no timer of the agents shows it.
MAX_STEP_STRETCH = 1.5
STEP_SLACK_RTTS = 2


@dataclass(frozen=True)
class Budget:
    mbit_per_core: float  # 0 on BMv2 with no quiet figure: its target's own stands in
    source: str  # where the figure comes from, for the run's summary
    stored: bool = False  # measured by this call on a quiet machine, and cached


@dataclass(frozen=True)
class Step:
    """One step of the ladder as its measurement saw it."""

    ok: bool  # the agents kept up
    record: dict  # what the cache keeps of the step, beside its budget and verdict
    detail: str  # its account in the progress line


# A step's measurement: the budget in Mbit/s per core, and the quietness window it opens
# around its traffic (not around the fabric's bring-up and teardown, whose interfaces
# keep the machine's own daemons busy).
Measure = Callable[[float, quietness.Window], Step]


def _sources_digest(patterns: tuple[str, ...]) -> str:
    """One digest of the project's files matching `patterns` (globs under REPO)."""
    digest = hashlib.sha256()
    for pattern in patterns:
        for path in sorted(REPO.glob(pattern)):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# What a data plane's switches run, beside the agents: a budget measured with other
# switches is stale. The kernel's eBPF switch program is in every calibration's key
# (machine_key); BMv2's P4 program in its own calibrations' (`program` in their slot).
EBPF_SOURCES = ("ebpf/*.c", "ebpf/*.h")
P4_SOURCES = ("p4src/*.p4", "p4src/include/*.p4")


def machine_key() -> str:
    """The agents' code, the kernel data plane's switch program, how many processes
    run the agents, and the machine: a budget measured under another is stale."""
    digest = hashlib.sha256()
    for folder in ("hosts", "topologies"):
        for path in sorted((REPO / folder).glob("*.py")):
            digest.update(path.read_bytes())
    digest.update(_sources_digest(EBPF_SOURCES).encode())
    cpu = ""
    try:
        cpu = next((line for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    except OSError:
        pass
    digest.update(f"{cpu}|{os.cpu_count()}|{platform.machine()}|{','.join(WORKLOADS)}|"
                  f"{STEP_S}|{MAX_STEP_STRETCH}|{STEP_SLACK_RTTS}|{AGENT_PROCESSES}"
                  .encode())
    return digest.hexdigest()[:16]


def _cache(path: Path | None = None) -> dict:
    """The cache of this code on this machine: MTU payload (text) -> calibration."""
    try:
        data = json.loads((path or CACHE).read_text())
    except (OSError, ValueError):
        return {}
    if data.get("key") != machine_key() or not isinstance(data.get("by_mtu"), dict):
        return {}
    return data["by_mtu"]


def _slot(mtu_payload: int, workload: str, dataplane: str = KERNEL) -> str:
    """A calibration's place in the cache: its MTU payload, the workload unless it is
    the all-to-all, the data plane unless it is the kernel's ("1200", "1200 pair",
    "1200 bmv2")."""
    return " ".join([str(mtu_payload)] + ([workload] if workload != ALL_TO_ALL else [])
                    + ([dataplane] if dataplane != KERNEL else []))


def _whose(workload: str, dataplane: str) -> str:
    """A calibration's name in its progress lines: "all-to-all", "all-to-all on bmv2"."""
    return workload if dataplane == KERNEL else f"{workload} on {dataplane}"


def workload_for(active_hosts: int | None) -> str:
    """The calibrated workload whose budget a run with `active_hosts` hosts sending at
    once takes (all of the fabric's when None): one pair's for two or fewer."""
    return PAIR if active_hosts is not None and active_hosts <= 2 else ALL_TO_ALL


def cached(mtu_payload: int = DEFAULT_MTU_PAYLOAD, cache: Path | None = None,
           workload: str = ALL_TO_ALL, dataplane: str = KERNEL) -> dict | None:
    """The cached calibration of this code on this machine at this MTU for `workload`
    on `dataplane`, if it was measured on a quiet machine (a figure that does not say so
    is not known to be)."""
    found = _cache(cache).get(_slot(mtu_payload, workload, dataplane))
    if not isinstance(found, dict) or "idle_share_before" not in found:
        return None
    if dataplane == BMV2 and found.get("program") != _sources_digest(P4_SOURCES):
        return None  # measured with another P4 program
    return found


def budget(mtu_payload: int = DEFAULT_MTU_PAYLOAD, cache: Path | None = None,
           workload: str = ALL_TO_ALL) -> Budget:
    data = cached(mtu_payload, cache, workload)
    whose = WORKLOADS[workload].description
    if data is not None:
        return Budget(data["mbit_per_core"], f"calibrated here {data['measured_at']} at "
                      f"{mtu_payload}-byte payloads, {whose} (make calibrate measures "
                      "again)")
    return Budget(default_mbit_per_core(mtu_payload, workload), f"not calibrated on this "
                  f"machine: the default for {whose} (make calibrate measures it)")


def default_mbit_per_core(mtu_payload: int, workload: str = ALL_TO_ALL) -> float:
    """The budget measured on a 2-core VM at the largest payload size not above
    `mtu_payload` (a larger packet never costs the agents less); below the default
    size, the default's scaled by the frame (the agents' work is per packet). One
    pair's is scaled from the all-to-all's by the two measured at the default size."""
    below = [m for m in MEASURED_MBIT_PER_CORE if m <= mtu_payload]
    if below:
        found = MEASURED_MBIT_PER_CORE[max(below)]
    else:
        found = round(DEFAULT_MBIT_PER_CORE * data_frame_bytes(mtu_payload)
                      / data_frame_bytes(DEFAULT_MTU_PAYLOAD), 1)
    if workload == PAIR:
        found = round(found * DEFAULT_PAIR_MBIT_PER_CORE / DEFAULT_MBIT_PER_CORE, 1)
    return found


def cap_for(fabric: Fabric, mbit_per_core: float, cores: int | None = None,
            active_hosts: int | None = None) -> float:
    """The link rate at which `active_hosts` hosts (all of the fabric's unless given),
    each sending on every plane at line rate, ask the agents for no more than the budget.

    The budget is the one of the workload the run resembles (`workload_for`): shared
    among the hosts that send, the all-to-all's ran one pair's links so fast that its
    round trip fell below twice the agents' lateness (module docstring)."""
    hosts = len(fabric.hosts)
    if active_hosts is None:
        active_hosts = hosts
    if not 1 <= active_hosts <= hosts:
        raise ValueError(f"active_hosts={active_hosts}: {fabric.spec.name} has {hosts} hosts; "
                         f"give 1 to {hosts} (the hosts that send at once)")
    cores = cores or os.cpu_count() or 1
    return round(mbit_per_core * cores / (active_hosts * fabric.spec.planes), 3)


def _reference(workload: str, mtu_payload: int) -> Fabric:
    """The workload's reference fabric at this MTU, as the ladder runs it (no delay)."""
    return without_delay(with_mtu(load_topology(WORKLOADS[workload].reference), mtu_payload))


def ladder_top(mtu_payload: int, workload: str) -> float:
    """The budget (Mbit/s per core) at which the workload's reference fabric runs at
    its topology's own link rate, past which the ladder cannot load it more."""
    reference = _reference(workload, mtu_payload)
    pair = WORKLOADS[workload].pair(reference)
    cores = os.cpu_count() or 1
    senders = len(pair) if pair else len(reference.hosts)
    return reference.spec.host_t0.rate_mbit * senders * reference.spec.planes / cores


def rtt_floor_rate(fabric: Fabric, mbit_per_core: float, workload: str = ALL_TO_ALL,
                   cores: int | None = None) -> float | None:
    """The fastest link rate (as `with_rate_cap` applies it) at which `fabric`'s base
    round trip is still as long as the workload's reference fabric's at its cap, or None
    when every rate keeps it. The budget says the agents keep up there, where their
    lateness was judged against that round trip: a fabric whose round trip is shorter
    at the same rate per host (cluster-d's one plane against cluster-b's eight: a
    quarter of a millisecond a hop instead of two) would find the same lateness a
    larger share of it. Measured on cluster-d's pair at 40 Mbit/s links: a round trip
    of 1.1 ms, the busy agents 0.4-1.1 ms late (p99), and a fault-free pass that
    retired paths on timeouts."""
    reference = _reference(workload, fabric.spec.mtu_payload)
    pair = WORKLOADS[workload].pair(reference)
    floor = with_rate_cap(reference, cap_for(reference, mbit_per_core, cores,
                                             pair and len(pair))).spec.base_rtt_s
    spec = fabric.spec

    def rtt(rate: float) -> float:
        return scale.base_rtt_s(min(rate, spec.host_t0.rate_mbit),
                                min(rate, spec.t0_t1.rate_mbit), spec.host_t0.delay_ms,
                                spec.t0_t1.delay_ms, spec.data_frame_bytes)

    fastest = max(spec.host_t0.rate_mbit, spec.t0_t1.rate_mbit)
    if rtt(fastest) >= floor:
        return None
    low, high = 0.0, fastest  # rtt(low) >= floor > rtt(high); the round trip falls with rate
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (middle, high) if middle > 0 and rtt(middle) >= floor else (low, middle)
    return round(low, 3) if low > 0 else None


def link_rate(fabric: Fabric, mbit_per_core: float, workload: str,
              active_hosts: int | None = None) -> tuple[float, float]:
    """The link rate a run of `fabric` takes from the budget, and the budget's own
    (`cap_for`): the budget's, or the round trip's floor (`rtt_floor_rate`) where that
    is slower by more than its rounding (the reference fabric meets its floor exactly)."""
    budget_rate = cap_for(fabric, mbit_per_core, active_hosts=active_hosts)
    floor = rtt_floor_rate(fabric, mbit_per_core, workload)
    if floor is None or floor >= budget_rate * (1 - 1e-3):
        return budget_rate, budget_rate
    return floor, budget_rate


def capped(fabric: Fabric, mbit_per_core: float, cores: int | None = None,
           active_hosts: int | None = None) -> Fabric:
    """`fabric` with its links capped to `cap_for` (same arguments)."""
    return with_rate_cap(fabric, cap_for(fabric, mbit_per_core, cores, active_hosts))


def no_faults(step) -> None:
    raise AssertionError("the calibration plays no fault")


def fabric_step(mtu_payload: int, lock, workload: str = ALL_TO_ALL,
                dataplane: str = KERNEL) -> Measure:
    """The ladder's step of `workload` on its reference fabric at this MTU (module
    docstring), on `dataplane`, its fabrics built under `lock`, the machine's fabric
    lock held by the caller. Needs root and Mininet (and BMv2 for bmv2)."""
    import tempfile

    from experiments.analysis.health import MAX_LATE_SHARE
    from experiments.analysis.metrics import read_events, summarize
    from experiments.analysis.similarity import delay_emulated
    from experiments.dataplanes.targets import make_target
    from experiments.run.fabric import RunningFabric
    from experiments.run.workload_run import run_transport

    chosen = WORKLOADS[workload]
    reference = _reference(workload, mtu_payload)
    pair = chosen.pair(reference)

    def measure(per_core: float, window: quietness.Window) -> Step:
        fabric = capped(reference, per_core, active_hosts=pair and len(pair))
        plan = chosen.plan(fabric, STEP_S)
        with RunningFabric(fabric, make_target(dataplane), lock) as network, \
                tempfile.TemporaryDirectory() as folder:
            with window:
                run = run_transport(network, "mrc", plan, [], no_faults,
                                    Path(folder), 60.0, {}, lambda line: None)
            block = summarize(run, read_events(run.event_files))
            netem = network.features.netem
        rtt_ms = fabric.spec.base_rtt_s * 1000
        lag = (block.get("event_loop") or {}).get("lag_p99_ms", float("inf"))
        counters = block["agent_counters"]
        data = max(1, counters.get("data_tx", 0))
        late = counters.get("duplicates", 0) > MAX_LATE_SHARE * data
        # The machine's signals only: paths the transport retires are its own outcome
        # (a fault-free all-to-all retires a few even at a tenth of the budget, with
        # timers on time), reported with every step and every run.
        ok = (block["ok"] and delay_emulated(fabric, netem)
              and step_passes(lag, rtt_ms, late, block["workload_s"]))
        retired = block["path_events"].get("retire", 0)
        rate = fabric.spec.host_t0.rate_mbit
        # The agents' CPU (their start included) per DATA packet sent: what a packet
        # costs them, the figure the budget is the inverse of.
        cpu_us = round(counters.get("cpu_s", 0.0) / data * 1e6, 1)
        return Step(ok, {"rate_mbit": rate, "lag_p99_ms": lag, "rtt_ms": round(rtt_ms, 3),
                         "retired": retired, "workload_s": block["workload_s"],
                         "agent_cpu_us_per_packet": cpu_us},
                    f"{rate:g} Mbit/s links, {mtu_payload}-byte payloads: timers {lag:g} ms "
                    f"late p99, round trip {rtt_ms:.2f} ms, carried in "
                    f"{block['workload_s']:g} s (at most {step_time_s(rtt_ms):.3g}), "
                    f"{retired} paths retired, agents' CPU {cpu_us:g} us a DATA packet")

    return measure


def step_time_s(rtt_ms: float) -> float:
    """The longest a fabric whose round trip is `rtt_ms` may take to carry a step."""
    return MAX_STEP_STRETCH * STEP_S + STEP_SLACK_RTTS * rtt_ms / 1000


def step_passes(lag_p99_ms: float, rtt_ms: float, late: bool, workload_s: float) -> bool:
    """Whether a step the transport finished shows a machine that kept up: the agents'
    timers within half a round trip (p99), not too many packets arriving twice, and
    the fabric carrying the step's STEP_S of traffic in at most step_time_s()."""
    return (lag_p99_ms <= 0.5 * rtt_ms and not late
            and workload_s <= step_time_s(rtt_ms))


def calibrate(progress=print, mtu_payload: int = DEFAULT_MTU_PAYLOAD, lock=None, *,
              workload: str = ALL_TO_ALL, dataplane: str = KERNEL,
              measure: Measure | None = None, cache: Path | None = None,
              limits: quietness.Limits = quietness.LIMITS) -> Budget:
    """Measure `workload`'s budget at this MTU on `dataplane` (module docstring) and
    cache it, if the machine was quiet before and during the measurement; else keep the
    cache as it is and give its last quiet figure, or the default. `measure` is one step
    of the ladder (unless given, `fabric_step`, which needs root, Mininet and `lock`, the
    machine's fabric lock held by the caller); `cache` is the cache file
    (build/calibration.json unless given)."""
    if measure is None and lock is None:
        raise RuntimeError("a calibration builds fabrics: it needs the machine's fabric "
                           "lock held by its caller (experiments/run/fabric_lock.py)")
    path = cache or CACHE
    whose = _whose(workload, dataplane)
    before = quietness.before(quietness.BEFORE_S)
    busy = quietness.busy_before(before, limits)
    if busy:  # a figure measured now would not be stored: save the minute
        return _disturbed(progress, mtu_payload, path, busy, workload, dataplane)
    measure = measure or fabric_step(mtu_payload, lock, workload, dataplane)
    steps, passed, others = [], None, 0.0
    top = ladder_top(mtu_payload, workload)
    for per_core in LADDERS[dataplane]:
        if passed is not None and passed >= top:
            # The reference runs at its topology's own rates from here on: a higher
            # step would play the same load again and pass for what it never measured.
            progress(f"calibration, {whose}: {passed:g} Mbit/s per core already runs "
                     f"{WORKLOADS[workload].reference} at its own link rate: the budget "
                     "is at least that")
            break
        window = quietness.Window()
        step = measure(per_core, window)
        if window.load is None:
            raise RuntimeError("a calibration step opened no quietness window around its "
                               "traffic")
        share = window.load.others_share
        others = max(others, share)
        steps.append({"mbit_per_core": per_core, "ok": step.ok, **step.record,
                      "others_share": round(share, 3)})
        progress(f"calibration, {whose}: {per_core:g} Mbit/s per core ({step.detail}): "
                 f"{'ok' if step.ok else 'too much'}; other programs {share:.0%} of the CPU")
        busy = quietness.busy_during(window.load, limits)
        if busy:
            return _disturbed(progress, mtu_payload, path, busy, workload, dataplane)
        if not step.ok:
            break
        passed = per_core
    chosen = passed or LADDERS[dataplane][0] / 2
    by_mtu = _cache(path)
    by_mtu[_slot(mtu_payload, workload, dataplane)] = {
        "mbit_per_core": chosen, "cores": os.cpu_count(),
        "measured_at": datetime.now().isoformat(timespec="seconds"),
        "idle_share_before": round(before.idle_share, 3),
        "others_share_during": round(others, 3),
        "reference": WORKLOADS[workload].reference, "workload": workload,
        "dataplane": dataplane,
        **({"program": _sources_digest(P4_SOURCES)} if dataplane == BMV2 else {}),
        "frame_bytes": data_frame_bytes(mtu_payload), "steps": steps}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": machine_key(), "by_mtu": by_mtu}, indent=2) + "\n")
    return Budget(chosen, f"calibrated here now ({len(steps)} steps, the machine "
                  f"{before.idle_share:.0%} idle before, other programs at most "
                  f"{others:.0%} of the CPU during)", stored=True)


def _disturbed(progress, mtu_payload: int, path: Path, busy: str,
               workload: str = ALL_TO_ALL, dataplane: str = KERNEL) -> Budget:
    """The budget a run goes on with when the machine was busy, and a line saying so:
    the last quiet one, else the default; BMv2 has no default budget here (0: its target
    takes a share of what its switches forward alone instead)."""
    last = cached(mtu_payload, path, workload, dataplane)
    if last is not None:
        where = f"the last quiet calibration here, {last['measured_at']},"
        found = Budget(last["mbit_per_core"], f"{where} at {mtu_payload}-byte payloads: the "
                       "machine was busy when it calibrated again")
    elif dataplane == BMV2:
        where = "a share of what BMv2's switches forward alone"
        found = Budget(0.0, where)
    else:
        where = "the default"
        found = Budget(default_mbit_per_core(mtu_payload, workload), "the default: the "
                       "machine was busy when it calibrated (make calibrate on a quiet "
                       "machine measures it)")
    figure = f"{found.mbit_per_core:g} Mbit/s per core, " if found.mbit_per_core else ""
    progress(f"calibration, {_whose(workload, dataplane)}: not stored, the machine was "
             f"busy ({busy}); going on with {figure}{where.rstrip(',')}")
    return found


def main(argv: list[str] | None = None) -> int:
    """`make calibrate` (MTU=4096: at that payload size; WORKLOAD=pair: that one only;
    DATAPLANE=bmv2: BMv2's budget, the all-to-all's). Exits 1 when the machine was too
    busy to store a figure."""
    import argparse
    import sys

    from experiments.run.fabric_lock import FabricBusy, FabricLock

    parser = argparse.ArgumentParser(prog="python3 -m experiments.run.calibration")
    parser.add_argument("--mtu", type=int, default=DEFAULT_MTU_PAYLOAD,
                        help="payload bytes per DATA packet (a topology's mtu_payload)")
    parser.add_argument("--workload", choices=list(WORKLOADS),
                        help="measure this workload's budget only (default: each; BMv2: "
                             "the all-to-all)")
    parser.add_argument("--dataplane", choices=list(LADDERS), default=KERNEL,
                        help="the data plane whose budget is measured (default: kernel)")
    args = parser.parse_args(argv)
    if args.dataplane == BMV2 and args.workload not in (None, ALL_TO_ALL):
        print(f"error: WORKLOAD={args.workload}: BMv2's budget is the all-to-all's "
              "(one pair on cluster-b would start hundreds of switches); leave WORKLOAD "
              "out", file=sys.stderr)
        return 2
    workloads = ([args.workload] if args.workload
                 else [ALL_TO_ALL] if args.dataplane == BMV2 else list(WORKLOADS))
    status = 0
    try:
        with FabricLock("calibrate") as lock:
            for workload in workloads:
                whose = _whose(workload, args.dataplane)
                found = calibrate(mtu_payload=args.mtu, lock=lock, workload=workload,
                                  dataplane=args.dataplane)
                if not found.stored:
                    print(f"calibration, {whose}: nothing stored at {args.mtu}-byte "
                          "payloads; make calibrate again once the machine is quiet")
                    status = 1
                    continue
                print(f"calibration, {whose}: {found.mbit_per_core:g} Mbit/s per core at "
                      f"{args.mtu}-byte payloads ({CACHE})")
    except FabricBusy as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    raise SystemExit(main())
