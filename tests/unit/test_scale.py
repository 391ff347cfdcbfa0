"""A fabric's proportions (topologies/scale.py), worked by hand, and capping that keeps them."""

from __future__ import annotations

import dataclasses

import pytest

from hosts.protocol import DATA_FRAME_BYTES
from topologies import scale
from topologies.model import LinkParams, build_fabric, load_topology, with_rate_cap


def small(rate_mbit: float = 8, delay_ms: float = 1.0, queue: int = 64):
    spec = load_topology("2tier-2plane").spec
    link = LinkParams(rate_mbit, delay_ms, queue)
    return build_fabric(dataclasses.replace(spec, host_t0=link, t0_t1=link,
                                            ecn_threshold_pkts=3, ecn_kmax_pkts=8,
                                            trim_threshold_pkts=11, trim_lasthop_pkts=16))


def test_rtt_and_bdp_by_hand():
    # 8 Mbit/s, 1 ms a link: 8 links of propagation (8 ms); out, a 1,294-byte frame
    # serialised on 4 links (4 x 1.294 ms); back, a 118-byte control frame on 4 links
    # (4 x 0.118 ms): 13.648 ms. One port sends 1 MB/s: 13,648 bytes = 10.547 frames.
    spec = small().spec
    assert spec.base_rtt_s == pytest.approx(0.013648)
    assert spec.bdp_frames == pytest.approx(13_648 / DATA_FRAME_BYTES)
    # The rule: Kmin 1/4 BDP, Kmax 3/4, trim 1 BDP, 1.5 on the last hop.
    assert scale.thresholds(spec.bdp_frames) == scale.Thresholds(3, 8, 11, 16)
    # Too small a BDP still leaves a ramp and room: each one more than the one before.
    assert scale.thresholds(1.0) == scale.Thresholds(1, 2, 3, 3)


def test_a_capped_fabric_keeps_its_queues_in_bdps():
    fabric = small()
    capped = with_rate_cap(fabric, 8 / 25)
    ratio = capped.spec.bdp_frames / fabric.spec.bdp_frames
    assert 0 < ratio < 1
    for name in ("host_t0", "t0_t1"):
        before = getattr(fabric.spec, name).queue_pkts / fabric.spec.bdp_frames
        after = getattr(capped.spec, name).queue_pkts / capped.spec.bdp_frames
        assert after == pytest.approx(before, abs=1 / capped.spec.bdp_frames)
    for old, new in ((fabric.spec.ecn_threshold_pkts, capped.spec.ecn_threshold_pkts),
                     (fabric.spec.trim_lasthop, capped.spec.trim_lasthop)):
        assert new == scale.scaled(old, ratio)
    # A queue never shrinks below its own thresholds.
    assert capped.spec.host_t0.queue_pkts > capped.spec.trim_lasthop


def test_a_topology_without_thresholds_takes_them_from_its_bdp():
    spec = load_topology("2tier-2plane").spec  # 20 Mbit/s, 0.5 ms: 12.1 frames
    assert spec.bdp_frames == pytest.approx(12.09, abs=0.01)
    assert (spec.ecn_threshold_pkts, spec.ecn_kmax, spec.trim_threshold_pkts,
            spec.trim_lasthop) == (3, 9, 12, 18)
    assert spec.explicit == frozenset()
