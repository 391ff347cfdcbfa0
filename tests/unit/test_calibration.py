"""The calibration keeps only a quiet machine's figure, and the rate cap follows the hosts
that send.

The load probe (experiments/run/quietness.py) runs for real here: a CPU hog started
outside this process's tree, as another user's program would be, must keep a
calibration from overwriting the quiet figure already cached, whether it runs before
the measurement or during a step; without it, the figure is stored with how quiet the
machine was. The fabric's ladder is stood in for by a step that only waits inside its
window, and the cache is a file in tmp_path.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress

import pytest

from experiments.run import calibration, quietness
from experiments.run.calibration import Step, cap_for, capped
from experiments.run.quietness import Busy, Limits, Load, Proc, Sample
from hosts.protocol import DEFAULT_MTU_PAYLOAD
from topologies.model import load_topology, with_rate_cap, without_delay

MTU = DEFAULT_MTU_PAYLOAD
QUIET_FIGURE = {"mbit_per_core": 40.0, "cores": 2, "measured_at": "2024-05-01T09:00:00",
                "idle_share_before": 0.99, "others_share_during": 0.004, "steps": []}
# A busy loop that ends by itself, should the test's own cleanup never run.
HOG = ("import time; end = time.monotonic() + 30; "
       "any(time.monotonic() > end for _ in iter(int, 1))")
WINDOW_S = 0.5  # how long the stand-in step's traffic lasts


@pytest.fixture(autouse=True)
def short_before(monkeypatch):
    monkeypatch.setattr(quietness, "BEFORE_S", 0.5)


def quiet_cache(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"key": calibration.machine_key(),
                                "by_mtu": {str(MTU): QUIET_FIGURE}}, indent=2) + "\n")
    return path


def stand_in(passes_up_to: float, calls: list[float]):
    """A ladder step without a fabric: its traffic is a wait in the window."""

    def measure(per_core: float, window: quietness.Window) -> Step:
        calls.append(per_core)
        with window:
            time.sleep(WINDOW_S)
        return Step(per_core <= passes_up_to, {"rate_mbit": per_core / 32}, "stand-in")

    return measure


def start_hogs() -> list[int]:
    """Enough busy loops to take twice the limits' share of the machine. Each is
    started by a shell that ends at once, so it is re-parented out of this process's
    tree: someone else's program, as the probe sees it."""
    share = 2 * max(1 - quietness.MIN_IDLE_BEFORE, quietness.MAX_OTHERS_DURING)
    cores = os.cpu_count() or 1
    pids = []
    for _ in range(min(cores, math.ceil(share * cores))):
        out = subprocess.run(["sh", "-c", '"$0" -c "$1" >/dev/null 2>&1 & echo $!',
                              sys.executable, HOG],
                             capture_output=True, text=True, check=True, timeout=10)
        pids.append(int(out.stdout))
    time.sleep(0.2)  # past the interpreter's start, into the loop
    return pids


def stop(pids: list[int]) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------ a busy machine
def calibrate_beside_a_hog(tmp_path, **limits):
    """A calibration with a real CPU hog running and a quiet figure in its cache: what
    it found, its lines, the steps it measured, and whether the cache is unchanged."""
    cache = quiet_cache(tmp_path)
    stored = cache.read_bytes()
    lines, calls = [], []
    hogs = start_hogs()
    try:
        found = calibration.calibrate(lines.append, MTU, measure=stand_in(80, calls),
                                      cache=cache, **limits)
    finally:
        stop(hogs)
    return found, lines, calls, cache.read_bytes() == stored


def test_a_hog_before_the_measurement_keeps_the_quiet_figure(tmp_path):
    found, lines, calls, kept = calibrate_beside_a_hog(tmp_path)
    assert kept
    assert not found.stored and not calls  # nothing measured that would not be kept
    assert found.mbit_per_core == 40.0
    assert found.source == ("the last quiet calibration here, 2024-05-01T09:00:00, at "
                            "1200-byte payloads: the machine was busy when it calibrated "
                            "again")
    assert lines[-1].endswith("going on with 40 Mbit/s per core, the last quiet "
                              "calibration here, 2024-05-01T09:00:00")
    (line,) = lines
    assert line.startswith("calibration, all-to-all: not stored, the machine was busy (")
    # It names the busiest other programs: the hog, unless something else on the
    # machine was busier still.
    assert "idle before the measurement" in line and "(pid " in line


def test_a_hog_during_a_step_keeps_the_quiet_figure(tmp_path):
    # Only the steps are judged: the hog is there before them too.
    found, lines, calls, kept = calibrate_beside_a_hog(
        tmp_path, limits=Limits(min_idle_before=0.0))
    assert kept
    assert calls == [calibration.LADDER[0]]  # the first disturbed step ends the ladder
    assert not found.stored and found.mbit_per_core == 40.0
    assert "other programs used" in lines[-1] and "(pid " in lines[-1]


def test_without_a_hog_the_figure_is_stored_with_how_quiet_the_machine_was(tmp_path):
    cache = quiet_cache(tmp_path)
    for _ in range(3):  # someone else's program may be busy for a moment
        lines, calls = [], []
        found = calibration.calibrate(lines.append, MTU, measure=stand_in(28, calls),
                                      cache=cache)
        if found.stored:
            break
        assert f"(pid {os.getpid()})" not in lines[-1]  # the probe names another's
    else:
        pytest.skip(f"this machine is not quiet: {lines[-1]}")
    assert calls == [20.0, 28.0, 40.0] and found.mbit_per_core == 28.0
    figure = calibration.cached(MTU, cache)
    assert figure["mbit_per_core"] == 28.0
    assert figure["idle_share_before"] >= quietness.MIN_IDLE_BEFORE
    assert figure["others_share_during"] <= quietness.MAX_OTHERS_DURING
    assert all(s["others_share"] <= figure["others_share_during"] for s in figure["steps"])
    assert figure["measured_at"] != QUIET_FIGURE["measured_at"]
    assert calibration.budget(MTU, cache).mbit_per_core == 28.0


# ------------------------------------------------------------------ the decision alone
class FakeWindow:
    """A window on a quiet machine, given rather than read."""

    def __init__(self, root=None):
        self.load = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.load = load()


def load(idle=0.99, others=0.0) -> Load:
    return Load(1.0, idle, others, (Busy("make", 4242, 0.9),) if others or idle < 0.9 else ())


@pytest.fixture
def fake_probe(monkeypatch):
    monkeypatch.setattr(quietness, "Window", FakeWindow)
    monkeypatch.setattr(quietness, "before", lambda seconds: load())


def test_a_busy_machine_without_a_quiet_figure_goes_on_with_the_default(
        tmp_path, monkeypatch, fake_probe):
    monkeypatch.setattr(quietness, "before", lambda seconds: load(idle=0.5))
    cache = tmp_path / "calibration.json"
    lines = []
    found = calibration.calibrate(lines.append, MTU, measure=stand_in(80, []), cache=cache)
    assert not cache.exists()
    assert found.mbit_per_core == calibration.default_mbit_per_core(MTU)
    assert found.source.startswith("the default: the machine was busy")
    assert lines == ["calibration, all-to-all: not stored, the machine was busy (50% idle "
                     "before the measurement, quiet is 95% or more: make (pid 4242) 90% of a "
                     "core); "
                     f"going on with {found.mbit_per_core:g} Mbit/s per core, the default"]


def test_a_quiet_machine_adds_its_figure_beside_the_other_mtus(tmp_path, fake_probe):
    cache = quiet_cache(tmp_path)
    found = calibration.calibrate(lambda line: None, 4096, measure=stand_in(56, []),
                                  cache=cache)
    assert found.stored and found.mbit_per_core == 56.0
    assert calibration.cached(4096, cache)["steps"][-1] == {
        "mbit_per_core": 80.0, "ok": False, "rate_mbit": 2.5, "others_share": 0.0}
    assert calibration.cached(MTU, cache) == QUIET_FIGURE


def test_one_pairs_budget_is_stored_beside_the_all_to_alls(tmp_path, fake_probe):
    cache = quiet_cache(tmp_path)
    found = calibration.calibrate(lambda line: None, MTU, workload=calibration.PAIR,
                                  measure=stand_in(28, []), cache=cache)
    assert found.stored and found.mbit_per_core == 28.0
    figure = calibration.cached(MTU, cache, calibration.PAIR)
    assert (figure["workload"], figure["reference"]) == ("pair", "cluster-b")
    assert calibration.cached(MTU, cache) == QUIET_FIGURE  # the all-to-all's, untouched
    pair = calibration.budget(MTU, cache, calibration.PAIR)
    assert pair.mbit_per_core == 28.0 and "one pair sending both ways" in pair.source
    assert calibration.budget(MTU, cache).mbit_per_core == QUIET_FIGURE["mbit_per_core"]
    # Without a figure of its own, the pair's default, not the all-to-all's.
    assert calibration.budget(4096, cache, calibration.PAIR).mbit_per_core == (
        calibration.default_mbit_per_core(4096, calibration.PAIR))


def test_the_ladder_stops_once_the_reference_runs_at_its_own_rate(tmp_path, fake_probe):
    # cluster-b's links are 10 Mbit/s: two hosts on 8 planes reach them at 80 Mbit/s a
    # core on 2 cores; a step above would play the same load and pass for nothing.
    top = calibration.ladder_top(MTU, calibration.PAIR)
    assert top == 10 * 2 * 8 / (os.cpu_count() or 1)
    calls: list[float] = []
    lines: list[str] = []
    found = calibration.calibrate(lines.append, MTU, workload=calibration.PAIR,
                                  measure=stand_in(10_000, calls), cache=quiet_cache(tmp_path))
    assert found.mbit_per_core == min(s for s in calibration.LADDER if s >= top)
    assert calls[-1] == found.mbit_per_core and "at least that" in lines[-1]


def test_a_run_with_two_hosts_sending_takes_one_pairs_budget():
    assert calibration.workload_for(2) == calibration.workload_for(1) == calibration.PAIR
    assert calibration.workload_for(None) == calibration.workload_for(8) == "all-to-all"
    # The pair's default is the one measured on the reference VM, at every MTU in the
    # same proportion to the all-to-all's.
    for mtu in (MTU, 4096):
        assert calibration.default_mbit_per_core(mtu, calibration.PAIR) == pytest.approx(
            calibration.default_mbit_per_core(mtu) * calibration.DEFAULT_PAIR_MBIT_PER_CORE
            / calibration.DEFAULT_MBIT_PER_CORE, abs=0.1)


def test_nothing_passes_stores_half_the_first_step(tmp_path, fake_probe):
    found = calibration.calibrate(lambda line: None, MTU, measure=stand_in(0, []),
                                  cache=tmp_path / "calibration.json")
    assert found.stored and found.mbit_per_core == calibration.LADDER[0] / 2


def test_a_step_that_opens_no_window_is_an_error(tmp_path, fake_probe):
    def blind(per_core, window):
        return Step(True, {}, "no window")

    with pytest.raises(RuntimeError, match="no quietness window"):
        calibration.calibrate(lambda line: None, MTU, measure=blind, cache=tmp_path / "c")


def test_a_cached_figure_that_does_not_say_how_quiet_is_measured_again(tmp_path):
    cache = tmp_path / "calibration.json"
    old = {k: v for k, v in QUIET_FIGURE.items() if not k.endswith(("_before", "_during"))}
    cache.write_text(json.dumps({"key": calibration.machine_key(), "by_mtu": {str(MTU): old}}))
    assert calibration.cached(MTU, cache) is None
    assert calibration.budget(MTU, cache).source.startswith("not calibrated on this machine")


# ------------------------------------------------------------------ the probe's reading
def proc(pid, ppid, ticks, name="p", kernel=False, started=1):
    return Proc(pid, ppid, name, ticks, started, kernel)


def sample(cpu, procs, root=100, cpus=2):
    table = {p.key: p for p in procs}
    return Sample(tuple(cpu), cpus, table, quietness.tree(table, root))


def test_parse_stat_counts_from_the_last_parenthesis():
    line = ("4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 10 0 0 0 "
            "30 12 5 3 20 0 1 0 777 1000 100")
    assert quietness.parse_stat(line) == Proc(4242, 1, "my (odd) name", 50, 777, False)
    kthread = "77 (kdamond.0) S 2 0 0 0 -1 2129984 0 0 0 0 9 8 0 0 20 0 1 0 55 0 0"
    assert quietness.parse_stat(kthread).kernel


def test_parse_stat_reads_this_process():
    me = quietness.parse_stat(open(f"/proc/{os.getpid()}/stat").read())
    assert me.pid == os.getpid() and me.ppid == os.getppid() and not me.kernel


def test_between_counts_only_the_others_and_the_steal():
    # user nice system idle iowait irq softirq steal: 200 ticks on 2 CPUs, 1 s at 100 Hz
    start = sample([0] * 8, [proc(100, 1, 10, "calibrate"), proc(101, 100, 0, "agent"),
                             proc(1, 0, 0, "init"), proc(50, 2, 0, "ksoftirqd", True),
                             proc(300, 1, 40, "make"), proc(301, 300, 30, "cc", started=5)])
    end = sample([60, 0, 30, 90, 10, 0, 0, 10],
                 [proc(100, 1, 50, "calibrate"), proc(101, 100, 70, "agent"),
                  proc(1, 0, 1, "init"), proc(50, 2, 60, "ksoftirqd", True),
                  # cc ended and make reaped it: its 30 ticks before and 20 in the window
                  # are make's now, beside make's own 10.
                  proc(300, 1, 100, "make"), proc(302, 1, 9, "editor", started=90)])
    found = quietness.between(start, end)
    assert found.idle_share == pytest.approx(0.5)
    # make 10 + cc 20 + editor 9 + init 1, and 10 of steal: 50 of 200 ticks
    assert found.others_share == pytest.approx(0.25)
    # Each named for its time in the window: make for its 10 and cc's 20.
    assert [(b.name, round(b.core_share, 2)) for b in found.busiest] == [
        ("make", 0.3), ("the hypervisor (steal)", 0.1), ("editor", 0.09), ("init", 0.01)]
    assert found.describe() == ("make (pid 300) 30% of a core, the hypervisor (steal) 10% "
                                "of a core, editor (pid 302) 9% of a core")


def test_a_process_that_was_the_measurements_once_is_never_anothers():
    start = sample([0] * 8, [proc(100, 1, 0), proc(101, 100, 0, "shell"),
                             proc(102, 101, 0, "daemon")])
    # The shell ended: its child is init's now, still the measurement's.
    end = sample([100, 0, 0, 100, 0, 0, 0, 0], [proc(100, 1, 0), proc(102, 1, 100, "daemon")])
    assert quietness.between(start, end).others_share == 0.0


# ------------------------------------------------------------------ the cap
def test_the_cap_follows_the_hosts_that_send():
    eight = load_topology("2tier-8plane")  # 8 hosts, 8 planes
    assert cap_for(eight, 80, cores=2) == cap_for(eight, 80, cores=2, active_hosts=8) == 2.5
    assert cap_for(eight, 80, cores=2, active_hosts=2) == 10.0
    assert cap_for(eight, 80, cores=2, active_hosts=1) == 20.0
    one_pair = capped(eight, 80, cores=2, active_hosts=2)
    assert one_pair.spec.host_t0.rate_mbit == one_pair.spec.t0_t1.rate_mbit == 10.0
    assert capped(eight, 80, cores=2).spec.host_t0.rate_mbit == 2.5
    # Within the topology's own rate, the fabric is left as it is.
    assert capped(eight, 80_000, cores=2, active_hosts=1) is eight


def test_a_fabric_with_a_shorter_round_trip_runs_slower_than_the_budget_gives():
    # One plane under one pair: the pair's budget gives cluster-d's links 40 Mbit/s, a
    # round trip an eighth of cluster-b's at its 5; the floor keeps cluster-b's.
    d = without_delay(load_topology("cluster-d"))
    b = without_delay(load_topology("cluster-b"))
    pair = calibration.PAIR
    assert cap_for(d, 40, cores=2, active_hosts=2) == 40.0
    floor = calibration.rtt_floor_rate(d, 40, pair, cores=2)
    assert floor == pytest.approx(5.0, abs=0.01)
    reference = capped(b, 40, cores=2, active_hosts=2).spec.base_rtt_s
    assert with_rate_cap(d, floor).spec.base_rtt_s == pytest.approx(reference, rel=1e-3)
    # The calibration's own fabric meets its floor; 64 hosts sharing the budget run
    # slower than the floor, which then changes nothing; a fabric whose round trip is
    # long at its own rate has no floor.
    assert calibration.rtt_floor_rate(b, 40, pair, cores=2) == pytest.approx(5.0, abs=0.01)
    c = without_delay(load_topology("cluster-c"))
    assert cap_for(c, 56, cores=2) < calibration.rtt_floor_rate(c, 56, cores=2)
    slow = with_rate_cap(d, 1.0)
    assert calibration.rtt_floor_rate(slow, 40, pair, cores=2) is None
    # A run takes the slower of the two; the reference fabric its budget's own rate.
    rate, budget_rate = calibration.link_rate(d, 40, pair, active_hosts=2)
    assert budget_rate == cap_for(d, 40, active_hosts=2)
    assert rate == min(budget_rate, calibration.rtt_floor_rate(d, 40, pair))
    assert calibration.link_rate(b, 40, pair, active_hosts=2) == (
        cap_for(b, 40, active_hosts=2),) * 2


@pytest.mark.parametrize("active", [0, -1, 9])
def test_the_hosts_that_send_are_some_of_the_fabrics(active):
    with pytest.raises(ValueError, match=f"active_hosts={active}: 2tier-8plane has 8 hosts"):
        cap_for(load_topology("2tier-8plane"), 80, cores=2, active_hosts=active)


def test_the_fabric_ladder_needs_the_fabric_lock(tmp_path):
    with pytest.raises(RuntimeError, match="needs the machine's fabric lock"):
        calibration.calibrate(lambda line: None, MTU, cache=tmp_path / "calibration.json")
    assert not (tmp_path / "calibration.json").exists()


def test_bmv2s_budget_climbs_its_own_ladder_and_is_stored_beside_the_kernels(
        tmp_path, fake_probe):
    cache = quiet_cache(tmp_path)
    calls: list[float] = []
    lines: list[str] = []
    found = calibration.calibrate(lines.append, MTU, dataplane=calibration.BMV2,
                                  measure=stand_in(5.0, calls), cache=cache)
    assert found.stored and found.mbit_per_core == 5.0
    assert calls == [s for s in calibration.BMV2_LADDER if s <= 7.1]
    assert lines[0].startswith("calibration, all-to-all on bmv2: 2.5 Mbit/s per core")
    figure = calibration.cached(MTU, cache, dataplane=calibration.BMV2)
    assert figure["dataplane"] == "bmv2" and figure["mbit_per_core"] == 5.0
    assert calibration.cached(MTU, cache) == QUIET_FIGURE  # the kernel's, untouched
    assert json.loads(cache.read_text())["by_mtu"].keys() == {str(MTU), f"{MTU} bmv2"}


def test_bmv2s_budget_is_stale_once_the_p4_program_changes(tmp_path, fake_probe,
                                                             monkeypatch):
    cache = quiet_cache(tmp_path)
    calibration.calibrate(lambda line: None, MTU, dataplane=calibration.BMV2,
                          measure=stand_in(5.0, []), cache=cache)
    assert calibration.cached(MTU, cache, dataplane=calibration.BMV2) is not None
    program = tmp_path / "p4src" / "mrc_switch.p4"
    program.parent.mkdir()
    program.write_text("// another program\n")
    monkeypatch.setattr(calibration, "REPO", tmp_path)
    assert calibration.cached(MTU, cache, dataplane=calibration.BMV2) is None
    # The kernel's budget does not depend on the P4 program.
    monkeypatch.setattr(calibration, "machine_key", lambda: json.loads(cache.read_text())["key"])
    assert calibration.cached(MTU, cache) == QUIET_FIGURE


def test_bmv2_has_no_default_budget_when_the_machine_is_busy(tmp_path):
    lines: list[str] = []
    hogs = start_hogs()
    try:
        found = calibration.calibrate(lines.append, MTU, dataplane=calibration.BMV2,
                                      measure=stand_in(80, []), cache=quiet_cache(tmp_path))
    finally:
        stop(hogs)
    assert not found.stored and found.mbit_per_core == 0.0
    assert lines[-1].endswith("going on with a share of what BMv2's switches forward alone")


def test_a_step_passes_only_if_the_fabric_carried_it_in_time():
    rtt = 51.6
    top = calibration.MAX_STEP_STRETCH * calibration.STEP_S + 2 * rtt / 1000
    assert calibration.step_time_s(rtt) == pytest.approx(top)
    assert calibration.step_passes(1.1, rtt, False, 4.0)  # the kernel's all-to-all
    assert calibration.step_passes(1.1, rtt, False, top)
    # BMv2's switches behind at 28 Mbit/s a core: 11.4 s for 3 s, timers on time.
    assert not calibration.step_passes(1.1, rtt, False, 11.375)
    assert not calibration.step_passes(1.1, rtt, False, top + 0.01)
    # At BMv2's first step a round trip is 0.58 s: its 4.58 s carry the step in time.
    assert calibration.step_passes(0.5, 579.3, False, 4.579)
    assert not calibration.step_passes(0.5 * rtt + 0.01, rtt, False, 4.0)  # timers late
    assert calibration.step_passes(0.5 * rtt, rtt, False, 4.0)
    assert not calibration.step_passes(1.1, rtt, True, 4.0)  # packets arrived twice
