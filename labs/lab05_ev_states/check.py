"""Check Lab 05: the student's PathState against scripted events, then against a replay.

The scripted part asks one thing at a time (a busy path is skipped once, a loss retires,
probes wait 50, 100, 200 ... ms up to the cap, a reply reinstates). The replay runs the
project's own sender on the simulated network (hosts/simnet.py, 2tier-2plane, h0 -> h3)
while T1 spine 0 of plane 0 is down from 20 to 150 ms and spine 1 of plane 1 is busy
(ECN marks and trims), and feeds every signal the real sender acted on to one PathState
per path: each skip, retirement, probe and reinstatement it made must follow from the
student's rules at the same virtual time.
"""

from __future__ import annotations

from pathlib import Path

from hosts.config import ProtocolConfig
from hosts.evset import ASSUMED_BAD, GOOD, SKIP
from labs.course import Report, first_line, load_module

INITIAL, CAP = 0.05, 0.2  # probe waits of the scripted part: 50, 100, 200, 200 ms
OUTAGE = (0.02, 0.15)  # plane 0 spine 0 is down in this window of the replay (s)


def check(folder: Path, options=None) -> Report:
    report = Report(f"Lab 05: the EV state machine ({folder})")
    try:
        module = load_module(folder / "path_state.py", "lab05_path_state")
        make = module.PathState
    except Exception as err:  # noqa: BLE001 - a student's file may raise anything
        report.add(False, "path_state.py imports", first_line(err))
        return report
    for what, step in SCRIPTED:
        try:
            problem = step(make)
        except Exception as err:  # noqa: BLE001 - reported as the student's bug
            problem = first_line(err)
        report.add(problem is None, what, problem or "")
    try:
        problem = replay(make)
    except Exception as err:  # noqa: BLE001
        problem = first_line(err)
    report.add(problem is None, "replay of the sender on the simulated network (spine down "
               f"{OUTAGE[0] * 1000:.0f}-{OUTAGE[1] * 1000:.0f} ms, a busy path)", problem or "")
    return report


# ---------------------------------------------------------------- scripted events
def _expect(path, state: str, after: str) -> str | None:
    if path.state != state:
        return f"after {after}: state {path.state}, expected {state}"
    return None


def _skip_once(make) -> str | None:
    path = make(INITIAL, CAP)
    if path.take_turn() is not True:
        return "a GOOD path must carry data (take_turn() returned False)"
    path.on_congestion(0.0)
    if (problem := _expect(path, SKIP, "an ECN echo on a GOOD path")) is not None:
        return problem
    if path.take_turn() is not False:
        return "a SKIP path must be passed over (take_turn() returned True)"
    if (problem := _expect(path, GOOD, "passing a SKIP path over once")) is not None:
        return problem
    return None if path.take_turn() is True else "passed over twice: SKIP lasts one turn"


def _loss_retires(make) -> str | None:
    busy = make(INITIAL, CAP)
    for t in (0.1, 0.2, 0.3):  # congestion again and again: skipped, never retired
        busy.on_congestion(t)
        if busy.state == ASSUMED_BAD:
            return f"ECN echoes retired a GOOD path (state {busy.state} at {t} s)"
        busy.take_turn()
    path = make(INITIAL, CAP)
    path.on_loss(1.0)
    if (problem := _expect(path, ASSUMED_BAD, "a loss")) is not None:
        return problem
    if path.take_turn():
        return "a retired path must not carry data (take_turn() returned True)"
    path.on_congestion(1.01)
    return _expect(path, ASSUMED_BAD, "an ECN echo on a retired path")


def _probe_waits_double(make) -> str | None:
    path = make(INITIAL, CAP)
    path.on_loss(1.0)
    path.on_loss(1.02)  # in flight when it broke: must not push the first probe back
    sent, t = [], 1.0
    while t < 1.9:
        t = round(t + 0.001, 3)  # a 1 ms timer tick
        if path.probe_due(t):
            sent.append(t)
    want = [1.05, 1.15, 1.35, 1.55, 1.75]
    # A tick of slack: 1.05 + 0.1 is a hair above 1.15 in binary floating point.
    if len(sent) != len(want) or any(abs(s - w) > 0.0011 for s, w in zip(sent, want)):
        return (f"probes went out at {[round(s - 1.0, 3) for s in sent]} s after the loss; "
                f"expected {[round(s - 1.0, 3) for s in want]} (50 ms, then doubling, "
                f"at most {CAP * 1000:.0f} ms)")
    return None


def _reply_reinstates(make) -> str | None:
    path = make(INITIAL, CAP)
    path.on_probe_reply(0.5)
    if (problem := _expect(path, GOOD, "a probe reply on a GOOD path")) is not None:
        return problem
    path.on_loss(1.0)
    for t in (1.05, 1.15):
        path.probe_due(t)
    path.on_probe_reply(1.16)
    if (problem := _expect(path, GOOD, "a probe reply on a retired path")) is not None:
        return problem
    if path.probe_due(2.0):
        return "a reinstated path must not be probed any more"
    if path.take_turn() is not True:
        return "a reinstated path must carry data again"
    path.on_loss(3.0)
    if path.probe_due(3.04) or not path.probe_due(3.05):
        return "after a new loss the first probe must again come 50 ms later"
    return None


SCRIPTED = [
    ("an ECN echo skips a path for one turn", _skip_once),
    ("a loss retires a path; congestion never does, nor brings it back", _loss_retires),
    ("probes of a retired path wait 50 ms, then twice as long, up to the cap", _probe_waits_double),
    ("a probe reply reinstates, and a new loss starts the waits afresh", _reply_reinstates),
]


# ---------------------------------------------------------------- replay
def sender_trace() -> list[dict]:
    """The path events of h0's connection to h3 in a simulated run with a spine outage
    and a busy path, in time order."""
    from hosts.simnet import Chaos, Outage, SimNet
    from topologies.model import load_topology

    # The lab's path returns on one probe reply; the project's sender waits for
    # probe_successes of them in a row (hysteresis, docs/protocol.md), so the replay
    # runs it with one.
    net = SimNet(load_topology("2tier-2plane"), "mrc", Chaos(),
                 [Outage(0, spine=0, start=OUTAGE[0], end=OUTAGE[1])], seed=1,
                 protocol={"probe_successes": 1},
                 path_chaos={(1, 1): Chaos(ecn=0.05, trim=0.02)})
    net.send(0, 3, 0, 3_000_000)
    net.run(5.0, lambda: net.all_done([(0, 3, 0)]))
    return [e for e in net.events if e["host"] == 0 and e.get("peer") == 3
            and e["event"] in ("skip", "retire", "probe", "reinstate") and "plane" in e
            and e.get("reason") != "remote-plane"]


def replay(make) -> str | None:
    """Feed the real sender's signals to one PathState per path; None if every action the
    sender took follows from the student's rules."""
    from topologies.model import load_topology
    from topologies.paths import path_for_ev

    fabric = load_topology("2tier-2plane")
    config = ProtocolConfig()
    paths: dict[tuple[int, int], object] = {}
    last_probe: dict[tuple[int, int], float] = {}
    seen = dict.fromkeys(("skip", "retire", "probe", "reinstate"), 0)
    for e in sender_trace():
        # h0 and h3 are in different racks, so a path of a plane is a spine.
        via = path_for_ev(fabric, 0, 3, e["ev"])
        key = (via.plane, via.spine)
        path = paths.setdefault(key, make(config.probe_initial_s, config.probe_max_s))
        t, kind = e["t"], e["event"]
        seen[kind] += 1
        at = f"at {t * 1000:.1f} ms, plane {key[0]} path {key[1]}"
        if kind == "skip":
            path.on_congestion(t)
            if path.state != SKIP:
                return f"{at}: {e['reason']} on a GOOD path left it {path.state}, not SKIP"
        elif kind == "retire":
            before = path.state
            path.on_loss(t)
            if path.state != ASSUMED_BAD:
                return f"{at}: a loss left the path {path.state}, not ASSUMED_BAD"
            if before != ASSUMED_BAD:
                last_probe[key] = t
        elif kind == "probe":
            since = last_probe.get(key, t)
            if path.probe_due(since + (t - since) / 2):
                return (f"{at}: your path wanted a probe halfway between the last one (or the "
                        f"retirement) at {since * 1000:.1f} ms and the sender's")
            if not path.probe_due(t):
                return f"{at}: the sender probed, but your path says no probe is due yet"
            last_probe[key] = t
        else:
            path.on_probe_reply(t)
            if path.state != GOOD:
                return f"{at}: the probe came back, but the path is {path.state}, not GOOD"
            last_probe.pop(key, None)
    missing = [kind for kind, n in seen.items() if n == 0]
    if missing:
        # The simulated run must exercise every rule, or the replay proves nothing.
        raise RuntimeError(f"the simulated run had no {', '.join(missing)} event: the "
                           f"lab's scenario needs updating to the project's sender")
    return None
