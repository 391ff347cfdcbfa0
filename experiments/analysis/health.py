"""Whether the machine kept up: a run that knows when the CPU, not the network, made its
result (pure).

Two kinds of evidence, both from what a run already collects:

- the agents' event loops (hosts/looplag.py): how late their timers fired, as the
  worst 99th percentile over the agents of a transport (`loop_lag`), against the run's
  base round trip: an agent late by half a round trip makes every timer measure the
  CPU (docs/similarity.md);
- packets late against packets lost: a retransmission whose original arrived after
  all (the receivers' duplicates) was not needed, and a timeout with nothing dropped
  anywhere in the fabric's counters was a packet waiting somewhere, not lost. Many of
  either, with nothing dropped, is the machine falling behind;
- the switch ports' real queues against their model (the kernel data plane's
  `queue_dropped`, experiments/dataplanes/ebpf_switch.py): the model decides every drop
  before a packet is queued, so a real queue that drops was drained later than the
  model's clock, a loss no emulated switch made.

`emulation()` makes summary.json's `emulation` block and report.md's first line.
"""

from __future__ import annotations

# An agent whose timers fire later than this share of a round trip (99th percentile)
# is the bottleneck.
MAX_LAG_RTT = 0.5
# Retransmissions that arrived twice, as a share of the data sent, past which the
# network looks lossy to the agents while nothing was lost.
MAX_LATE_SHARE = 0.01


def loop_lag(stats: dict[int, dict]) -> dict | None:
    """The agents' loops over one transport's run: the worst 99th percentile and the
    worst maximum of their timers' lateness, and of their turns (ms); None when the
    agents did not report it.

    Only the agents that carried data count (when any did): an idle agent's timers have
    no packet to delay, and they are late by however long the scheduler takes to wake a
    sleeping process beside busy ones (1-5 ms p99 measured beside one busy pair on 2
    cores, where the pair's own agents were 0.4 ms late)."""
    reported = {h: s for h, s in stats.items() if isinstance(s.get("event_loop"), dict)}
    busy = [s for s in reported.values() if s.get("data_tx", 0) or s.get("data_rx", 0)]
    loops = [s["event_loop"] for s in (busy or reported.values())]
    if not loops:
        return None
    return {"lag_p99_ms": max(loop["lag_ms"]["p99"] for loop in loops),
            "lag_max_ms": max(loop["lag_ms"]["max"] for loop in loops),
            "turn_p99_ms": max(loop["turn_ms"]["p99"] for loop in loops),
            "agents": len(loops)}


def _dropped(block: dict) -> int:
    """Everything the fabric's ports dropped during the transport's run."""
    return sum(group.get(name, 0) for group in block.get("switch_counters", {}).values()
               for name in ("dropped", "dropped_trim_pkts", "fault_dropped"))


def _queue_dropped(block: dict) -> int:
    """What the switch ports' real queues dropped beyond the model (0 where not read)."""
    return sum(group.get("queue_dropped", 0)
               for group in block.get("switch_counters", {}).values())


def emulation(blocks: list[dict], base_rtt_ms: float) -> dict:
    """The `emulation` block of a run's transports (experiments/analysis/metrics.py blocks, each
    with `event_loop` and, where the data plane counts, `switch_counters`)."""
    per = []
    worst_lag = 0.0
    problems: list[str] = []
    for block in blocks:
        counters = block.get("agent_counters", {})
        sent = counters.get("data_tx", 0)
        late = counters.get("duplicates", 0)
        timeouts = block.get("path_events", {}).get("timeout", 0)
        dropped = _dropped(block) if "switch_counters" in block else None
        loop = block.get("event_loop")
        entry = {"transport": block["transport"], "retransmits_arrived_twice": late,
                 "timeouts": timeouts, "fabric_dropped": dropped, "event_loop": loop}
        per.append(entry)
        if loop:
            worst_lag = max(worst_lag, loop["lag_p99_ms"])
            if loop["lag_p99_ms"] > MAX_LAG_RTT * base_rtt_ms:
                problems.append(f"{block['transport']}: the agents' timers fired up to "
                                f"{loop['lag_p99_ms']:g} ms late (p99), "
                                f"{loop['lag_p99_ms'] / base_rtt_ms:.1f} round trips")
        behind = _queue_dropped(block)
        entry["queues_dropped_beyond_the_model"] = behind
        if behind:
            problems.append(f"{block['transport']}: the kernel's queues dropped {behind} "
                            "packets the switches' model had queued (drained late)")
        if sent and late > MAX_LATE_SHARE * sent and dropped == 0:
            problems.append(f"{block['transport']}: {late} retransmissions arrived twice "
                            "with nothing dropped in the fabric: packets were late, not lost")
    block = {"base_rtt_ms": base_rtt_ms, "transports": per,
             "lag_p99_rtt": round(worst_lag / base_rtt_ms, 3) if base_rtt_ms else None,
             "trustworthy": not problems, "problems": problems}
    if problems:
        block["headline"] = ("Emulation: the machine did not keep up, so this result is "
                             "not the network's alone: " + "; ".join(problems) +
                             " (lower the rate, or use fewer hosts or planes).")
    else:
        block["headline"] = ("Emulation: the machine kept up (the agents' timers at most "
                             f"{worst_lag:g} ms late, p99; no packet late for lost).")
    return block
