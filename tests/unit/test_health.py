"""Whether the machine kept up: the emulation block from the agents' loop lag and from
packets late against lost (pure)."""

from __future__ import annotations

from experiments.analysis.health import emulation, loop_lag


def loop(p99: float, worst: float = 50.0) -> dict:
    return {"lag_ms": {"p50": 0.1, "p99": p99, "max": worst, "samples": 1000},
            "turn_ms": {"p50": 0.2, "p99": 0.9, "max": 3.0, "samples": 1000}}


def block(transport="mrc", p99=0.4, data_tx=10_000, duplicates=0, dropped=0, timeouts=0):
    return {"transport": transport, "event_loop": loop_lag({0: {"event_loop": loop(p99)},
                                                            1: {"event_loop": loop(p99 / 2)}}),
            "agent_counters": {"data_tx": data_tx, "duplicates": duplicates},
            "path_events": {"timeout": timeouts},
            "switch_counters": {"host_ports": {"dropped": dropped, "fault_dropped": 0},
                                "fabric_ports": {"dropped": 0}}}


def test_agents_that_kept_up_make_a_trustworthy_run():
    out = emulation([block(), block("roce-8")], base_rtt_ms=4.5)
    assert out["trustworthy"] and out["problems"] == []
    assert out["transports"][0]["event_loop"] == {"lag_p99_ms": 0.4, "lag_max_ms": 50.0,
                                                  "turn_p99_ms": 0.9, "agents": 2}
    assert out["headline"].startswith("Emulation: the machine kept up")


def test_late_agents_and_packets_late_for_lost_are_flagged():
    out = emulation([block(p99=12.0), block("roce-8", duplicates=226, timeouts=236)],
                    base_rtt_ms=4.5)
    assert not out["trustworthy"]
    assert out["problems"] == [
        "mrc: the agents' timers fired up to 12 ms late (p99), 2.7 round trips",
        "roce-8: 226 retransmissions arrived twice with nothing dropped in the fabric: "
        "packets were late, not lost"]
    assert "did not keep up" in out["headline"]
    # Retransmissions that arrived twice beside real drops are the loss's, not the CPU's.
    assert emulation([block(duplicates=226, dropped=300)], 4.5)["trustworthy"]


def test_idle_agents_do_not_count_when_some_carried_data():
    busy, idle = {"event_loop": loop(0.4), "data_tx": 900}, {"event_loop": loop(4.0)}
    assert loop_lag({0: busy, 1: idle, 2: {**idle, "data_rx": 0}})["lag_p99_ms"] == 0.4
    assert loop_lag({0: busy, 1: {**idle, "data_rx": 3}})["lag_p99_ms"] == 4.0
    assert loop_lag({1: idle, 2: {"event_loop": loop(2.0)}})["lag_p99_ms"] == 4.0


def test_agents_that_did_not_say_leave_the_lag_unknown():
    assert loop_lag({0: {"data_tx": 5}}) is None


def test_real_queues_that_drop_what_the_model_held_are_flagged():
    dropped_late = block()
    dropped_late["switch_counters"]["host_ports"]["queue_dropped"] = 3
    out = emulation([dropped_late, block("roce-8")], base_rtt_ms=4.5)
    assert not out["trustworthy"]
    assert out["problems"] == ["mrc: the kernel's queues dropped 3 packets the switches' "
                               "model had queued (drained late)"]
    assert [t["queues_dropped_beyond_the_model"] for t in out["transports"]] == [3, 0]
