"""The congestion windows of hosts/cc.py: NSCC's four cases, quick adapt, the choice."""

from __future__ import annotations

import pytest

from hosts.cc import DelayWindow, Nscc, make_window
from hosts.config import ConfigError, ProtocolConfig

BASE = 0.001  # base RTT of these tests: the target is one base RTT of queueing


def window(cwnd: float = 20.0) -> Nscc:
    w = Nscc(cwnd, 64, target_rtts=1.0, target_min_s=0.0001)
    w.on_ack(BASE, False, 0.0)  # measures the base RTT
    w.cwnd = cwnd
    return w


def test_ecn_and_high_delay_cut_the_window_in_proportion_once_per_round_trip():
    w = window()
    w.on_ack(BASE + 3 * BASE, True, 1.0)  # 3 ms queueing against a 1 ms target
    assert w.last_case == "decrease"
    # 1 - 0.8 * (3 - 1) / 4 = 0.6
    assert w.cwnd == pytest.approx(20 * 0.6)
    w.on_ack(BASE + 3 * BASE, True, 1.0 + BASE)  # same round trip: no second cut
    assert w.cwnd == pytest.approx(12)
    w.on_ack(BASE + 20 * BASE, True, 1.1)  # huge delay: never below half
    assert w.cwnd == pytest.approx(6)


def test_ecn_without_high_delay_holds():
    w = window()
    w.on_ack(BASE + 0.5 * BASE, True, 1.0)
    assert w.last_case == "hold" and w.cwnd == 20
    w.on_ack(None, True, 1.0)  # an echo without a fresh RTT sample holds too
    assert w.last_case == "hold" and w.cwnd == 20


def test_high_delay_without_ecn_grows_by_one_packet_per_round_trip():
    w = window()
    for i in range(20):
        w.on_ack(BASE + 2 * BASE, False, 1.0 + i * 1e-5)
    assert w.last_case == "fair-increase"
    assert w.cwnd == pytest.approx(21, abs=0.05)


def test_neither_grows_in_proportion_to_the_headroom():
    empty, half = window(), window()
    empty.on_ack(BASE, False, 1.0)
    half.on_ack(BASE + 0.5 * BASE, False, 1.0)
    assert empty.last_case == half.last_case == "proportional-increase"
    assert empty.cwnd == pytest.approx(20 + 0.5 + 1 / 20)
    assert half.cwnd == pytest.approx(20 + 0.25 + 1 / 20)
    # A round trip on an empty path grows the window by about half.
    w = window()
    for i in range(20):
        w.on_ack(BASE, False, 1.0 + i * 1e-5)
    assert 29 < w.cwnd < 32
    for i in range(500):
        w.on_ack(BASE, False, 2.0 + i * 1e-5)
    assert w.cwnd == 64  # capped by the connection's window


def test_quick_adapt_drops_to_what_was_delivered_in_the_last_round_trip():
    w = window(cwnd=40)
    t = 1.0
    for i in range(10):  # ten packets acknowledged in one round trip of 2 ms
        w.on_ack(BASE, False, t + i * 1e-4)
    w.cwnd = 40
    w.on_loss(t + 0.0015)
    assert w.cwnd == pytest.approx(10)
    w.cwnd = 40
    w.on_nack(t + 0.0016)  # at most once per round trip
    assert w.cwnd == 40
    w.on_nack(t + 0.004)
    assert w.cwnd < 40


def test_delay_past_the_ceiling_quick_adapts_without_ecn():
    w = Nscc(20.0, 64, target_rtts=1.0, target_min_s=0.0001, qa_delay_s=0.008)
    w.on_ack(BASE, False, 0.0)
    w.cwnd = 40.0
    for i in range(6):  # six packets acknowledged in the round trip before
        w.on_ack(BASE + 0.5 * BASE, False, 0.0101 + i * 0.0001)
    w.on_ack(BASE + 0.009, False, 0.0125)  # 9 ms of queueing no switch marked
    assert w.last_case == "delay-quick-adapt" and w.cwnd == 6  # what was delivered
    w.on_ack(BASE + 0.009, False, 0.0126)  # once per round trip
    assert w.cwnd == 6
    w.on_ack(BASE + 0.004, False, 0.03)  # high but under the ceiling: the fair increase
    assert w.last_case == "fair-increase" and w.cwnd == pytest.approx(6 + 1 / 6)


def test_the_ceiling_is_never_below_the_target():
    w = Nscc(20.0, 64, target_rtts=4.0, target_min_s=0.0001, qa_delay_s=0.002)
    w.on_ack(BASE, False, 0.0)
    w.on_ack(BASE + 0.003, False, 1.0)  # above the ceiling, below the 4 ms target
    assert w.last_case == "proportional-increase"


def test_the_target_follows_the_base_rtt():
    w = Nscc(10, 64, target_rtts=2.0, target_min_s=0.0001)
    assert w.target == 0.0001  # nothing measured yet
    w.on_ack(0.003, False, 0.0)
    w.on_ack(0.002, False, 0.001)
    assert w.base_rtt == 0.002 and w.target == pytest.approx(0.004)


def test_cc_setting_chooses_the_window():
    assert isinstance(make_window(ProtocolConfig()), Nscc)  # the default
    assert isinstance(make_window(ProtocolConfig(cc="delay")), DelayWindow)
    assert make_window(ProtocolConfig()).qa_delay == ProtocolConfig().nscc_qa_delay_s
    off = make_window(ProtocolConfig(cc="off", window=50))
    assert off.allows(49) and not off.allows(50)
    assert ProtocolConfig(cc=False).cc == "off" and ProtocolConfig(cc=True).cc == "delay"
    with pytest.raises(ConfigError, match="protocol.cc: must be one of nscc, delay, off"):
        ProtocolConfig(cc="cubic")
    with pytest.raises(ConfigError, match="protocol.nscc_target_rtts"):
        ProtocolConfig(nscc_target_rtts=0.0)
