"""NSCC against the delay window on a simulated incast whose receiving agent falls behind.

The 5:1 incast of experiments/scenarios/incast.yaml (h2..h6 send 1 MB each to h0; a
victim h7 -> h1 sends 4 MB) on 2tier-8plane, with the fabric's output queues modelled
and every host's agent taking in at most 12,000 packets a second: h0's agent then falls
behind (8 planes of data plus the reverse-EV probe replies of five peers), as the
Python agents do on a two-core machine. Its socket buffers queue what no switch marks.

NSCC without its delay ceiling keeps growing in the "high delay, no ECN" case until the
queue passes the retransmission timeout: spurious timeouts and resends, as seen on the
kernel data plane. They come while the receiver acknowledges nothing sent later, so
they retire no path (hosts/loss_detection.py `_silent_timeout`), but for one path at
most, whose packet a plane's queue held past its timeout while later ones came back on
other planes; before that rule they retired hundreds of EVs. With the ceiling, nscc
finishes no later than the delay window (within 10%), with no timeout and no more
retirements.
"""

from __future__ import annotations

from collections import Counter

import pytest

from hosts.simnet import Chaos, SimNet
from tests.fabrics import with_thresholds
from topologies.model import load_topology

FABRIC = with_thresholds(load_topology("2tier-8plane"))
INCAST = [(s, 0, 0) for s in range(2, 7)]
VICTIM = (7, 1, 0)


def incast(protocol: dict, host_rx_pps: float | None = 12_000, size: int = 1_000_000):
    """(incast completion time, EVs retired, timeouts, paths retired)."""
    sim = SimNet(FABRIC, protocol={"ev_seed": 2, **protocol}, seed=2, queues=True,
                 chaos=Chaos(delay_s=0.001), host_rx_pps=host_rx_pps)
    for src, dst, msg in INCAST:
        sim.send(src, dst, msg, size)
    sim.send(*VICTIM, 4 * size)
    done = None
    t = 0.0
    while t < 6.0 and not sim.all_done([*INCAST, VICTIM]):
        t += 0.01
        sim.run(t)
        if done is None and sim.all_done(INCAST):
            done = sim.now
    assert sim.all_done([*INCAST, VICTIM]), protocol
    events = Counter(e["event"] for e in sim.events)
    paths = {(e["host"], e["peer"], e["plane"], e["path"]) for e in sim.events
             if e["event"] == "retire"}
    return done, events["retire"], events["timeout"], len(paths)


@pytest.fixture(scope="module")
def delay():
    return incast({"cc": "delay"})


def test_nscc_without_its_delay_ceiling_times_out_spuriously(delay):
    # Reverse-EV probes every 5 ms (50 ms by default) load h0's agent with replies until
    # it falls behind by more than a retransmission timeout.
    done, _, timeouts, paths = incast({"cc": "nscc", "nscc_qa_delay_s": 100.0,
                                       "reverse_probe_s": 0.005})
    assert timeouts >= 20 and done > 1.3 * delay[0]
    # The receiver fell behind: no path is to blame. One may still be: a packet that a
    # plane's queue held past its timeout while packets sent after it on other planes
    # were answered (a timeout that is not silent). Seeds 1-6 retire one path's EVs in
    # one seed each, before and after probes about late packets stopped marking reverse
    # paths suspect (seed 5 before, seed 2, this one, after), and none in the others.
    assert paths <= 1


def test_nscc_is_no_worse_than_the_delay_window(delay):
    done, retired, timeouts, _ = incast({})  # the default: nscc
    print(f"incast done: nscc {done:.3f} s ({retired} retired), "
          f"delay {delay[0]:.3f} s ({delay[1]} retired)")
    assert timeouts == 0 == delay[2]
    assert done <= 1.1 * delay[0]
    assert retired <= delay[1]
