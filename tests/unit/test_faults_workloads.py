"""Fault schedules and workloads: pure expansions, validated against the fabric."""

from __future__ import annotations

import os
import random

import pytest

from experiments.faults import FaultError, FaultInjector, parse_faults
from experiments.scenarios.workloads import WorkloadError, phases
from hosts.payload import (
    BLOCK,
    CHUNK,
    MAPPED_BYTES,
    build,
    check,
    message_bytes,
    message_seed,
    verify,
    zeroed,
)
from tests.fabrics import hosts
from tests.steps import step


def test_link_flaps_expand_to_down_up_pairs(fabric):
    actions = parse_faults([{"kind": "link-flap", "link": ["p0t0r0", "p0t1s1"], "at_s": 1,
                             "down_s": 0.5, "count": 3, "every_s": 2}], fabric)
    assert [(a.t, a.up) for a in actions] == [(1, False), (1.5, True), (3, False), (3.5, True),
                                              (5, False), (5.5, True)]
    assert actions[0].target == ("p0t0r0", "p0t1s1")


def test_faults_sorted_across_entries_and_port_loss_may_stay_down(fabric):
    actions = parse_faults([
        {"kind": "switch-reboot", "switch": "p1t1s0", "at_s": 2, "down_s": 1},
        {"kind": "nic-port-down", "host": "h3", "plane": 1, "at_s": 0.5},
    ], fabric)
    assert [(a.kind, a.t, a.up) for a in actions] == [
        ("nic-port-down", 0.5, False), ("switch-reboot", 2, False), ("switch-reboot", 3, True)]


@pytest.mark.parametrize("entry,match", [
    ({"kind": "meteor", "at_s": 1}, r"faults\[0\]\.kind: unknown fault kind 'meteor'"),
    ({"kind": "link-flap", "link": ["h0", "h1"], "at_s": 1, "down_s": 1}, r"\.link: must name"),
    ({"kind": "switch-reboot", "switch": "p9t1s0", "at_s": 1, "down_s": 1}, r"\.switch: 'p9t1s0'"),
    ({"kind": "nic-port-down", "host": "h0", "plane": 2, "at_s": 1}, r"\.plane: must be a plane "
                                                                      r"0\.\.1"),
    ({"kind": "blackhole", "switch": "p0t1s0", "at_s": -1, "down_s": 1}, r"\.at_s: must be"),
    ({"kind": "blackhole", "switch": "p0t1s0", "at_s": 1, "down_s": 0}, r"\.down_s: must be"),
    ({"kind": "link-flap", "link": ["h0", "p0t0r0"], "at_s": 0, "down_s": 2, "count": 2,
      "every_s": 1}, r"\.every_s: must be longer"),
    ({"kind": "link-flap", "link": ["h0", "p0t0r0"], "at_s": 0, "down_s": 1, "count": 3.7},
     r"\.count: must be a whole number"),
    ({"kind": "link-flap", "link": ["h0", "p0t0r0"], "at_s": 0, "down_s": 1,
      "count": 100_000_000}, r"\.count: must be a whole number from 1 to 1000"),
    ({"kind": "nic-port-down", "host": "h0", "plane": 0, "at_s": 1, "count": 2},
     r"\.count: a fault that lasts for the rest of the run"),
    ({"kind": "blackhole", "switch": "p0t1s0", "at_s": 1, "down_s": 1, "color": "red"},
     r"faults\[0\]\.color: not a field of blackhole"),
    ({"kind": "blackhole", "switch": "p0t1s0", "at_s": float("inf"), "down_s": 1},
     r"\.at_s: must be a number of seconds"),
    ({"kind": "blackhole", "switch": "p0t1s0", "at_s": float("nan"), "down_s": 1},
     r"\.at_s: must be a number of seconds"),
    ({"kind": "blackhole", "switch": "p0t1s0", "at_s": 50, "down_s": 1},
     r"\.at_s: it starts at 50 s, not before timeout_s \(30 s\)"),
    ({"kind": "link-flap", "link": ["h0", "p0t0r0"], "at_s": 0, "down_s": 1, "count": 20},
     r"\.count: its last repetition starts at 38 s"),
    ("link-flap", r"faults\[0\]: must be a mapping"),
])
def test_bad_fault_entries(fabric, entry, match):
    where = "" if match.startswith("faults") else r"faults\[0\]"
    with pytest.raises(FaultError, match=r"^s\.yaml: " + where + match):
        parse_faults([entry], fabric, "s.yaml", horizon_s=30)


def test_the_fault_timeline_is_bounded(fabric):
    entry = {"kind": "link-flap", "link": ["h0", "p0t0r0"], "at_s": 0, "down_s": 0.1,
             "count": 1000, "every_s": 0.2}
    assert len(parse_faults([entry] * 5, fabric)) == 10_000
    with pytest.raises(FaultError, match=r"faults\[5\]\.count: the timeline would exceed"):
        parse_faults([entry] * 6, fabric)


def test_injector_plays_and_restores_what_stayed_down():
    applied, restored = [], []
    now = [0.0]
    actions = [step(0.0, False, "nic-port-down", ("h1", 0)),
               step(0.0, False, "link-flap", ("a", "b")),
               step(0.0, True, "link-flap", ("a", "b"))]
    injector = FaultInjector(actions, applied.append, clock=lambda: now[0])
    injector.start(0.0)
    injector.stop(restore=restored.append)
    assert applied == actions
    assert restored == [step(0, True, "nic-port-down", ("h1", 0))]


def test_workloads():
    ring = phases("all-reduce", {"data_bytes": 800}, hosts(4))
    assert len(ring) == 6 and [t.dst for t in ring[0]] == [1, 2, 3, 0]
    assert all(t.size == 200 for p in ring for t in p)
    assert [t.msg_id for p in ring for t in p if t.src == 0] == list(range(6))
    assert len(phases("all-to-all", {}, hosts(4))[0]) == 12
    # The victim has hosts of its own: the incast senders are the others.
    incast = phases("incast", {"receiver": 0, "victim": [3, 1]}, hosts(4))[0]
    assert [(t.src, t.dst, t.role) for t in incast] == [(2, 0, "data"), (3, 1, "victim")]
    assert [t.src for t in phases("incast", {"receiver": 2, "fan_in": 2}, hosts(4))[0]] == [0, 1]
    assert len(phases("transfer", {"count": 3}, hosts(4))[0]) == 3


@pytest.mark.parametrize("workload,params,match", [
    ("incast", {"victim": [1, 1]}, r"params\.victim: must be \[source, destination\]"),
    ("incast", {"victim": [True, 1]}, r"params\.victim: must be"),
    ("gossip", {}, r"workload: unknown workload 'gossip'"),
    ("incast", {"fan_in": "three"}, r"params\.fan_in: must be a number of senders from 1 to 3 "
                                    r"\(got 'three'\)"),
    ("incast", {"fan_in": -3}, r"params\.fan_in: must be"),
    ("incast", {"fan_in": 4}, r"params\.fan_in: must be"),
    ("incast", {"victim": [3, 1], "fan_in": 2},
     r"params\.fan_in: must be a number of senders from 1 to 1 \(got 2\)"),
    ("incast", {"victim": [0, 1]}, r"params\.victim: must not include the incast receiver"),
    ("incast", {"victim": [2, 0]}, r"params\.victim: must not include the incast receiver"),
    ("incast", {"victim_bytes": 10}, r"params\.victim_bytes: needs params\.victim"),
    ("transfer", {"count": "two"}, r"params\.count: must be a number of messages"),
    ("transfer", {"count": 3.7}, r"params\.count: must be"),
    ("transfer", {"count": 100_000_000}, r"params\.count: must be .* to 1000"),
    ("transfer", {"src": 2, "dst": 2}, r"params\.dst: must differ"),
    ("all-to-all", {"message_bytes": 0}, r"params\.message_bytes: must be a byte count"),
    ("all-reduce", {"message_bytes": 10}, r"params\.message_bytes: not a parameter of all-reduce"),
])
def test_bad_workload_parameters(workload, params, match):
    with pytest.raises(WorkloadError, match=r"^s\.yaml: " + match):
        phases(workload, params, hosts(4), "s.yaml")


def test_payload_is_deterministic_and_verifiable():
    data = message_bytes(1, 2, 3, 10_000)
    assert data == message_bytes(1, 2, 3, 10_000) != message_bytes(2, 1, 3, 10_000)
    assert verify(1, 2, 3, data)
    broken = bytearray(data)
    broken[5000] ^= 1
    assert not verify(1, 2, 3, broken)


def test_payload_is_made_and_checked_a_chunk_at_a_time():
    size = 3 * CHUNK + 10
    steps = build(4, 5, 6, size)
    assert sum(1 for _ in steps) == 4  # one step per chunk, then the bytes
    data = message_bytes(4, 5, 6, size)
    # One random block drawn from the seed; each chunk is it rotated by a drawn amount.
    rng = random.Random(message_seed(4, 5, 6))
    block = rng.randbytes(CHUNK)
    turns = [rng.randrange(CHUNK) for _ in range(4)]
    assert data == b"".join(block[t:] + block[:t] for t in turns)[:size]
    # A packet moved within its chunk, or to another chunk, fails the check.
    for where in (1200, CHUNK + 7):
        moved = bytearray(data)
        moved[where:where + 1200] = data[:1200]
        assert not verify(4, 5, 6, moved)
    checking = check(4, 5, 6, data)
    assert sum(1 for _ in checking) == 4
    late = bytearray(data)
    late[-1] ^= 0x80  # a wrong byte in the last chunk only
    assert not verify(4, 5, 6, late) and not verify(4, 5, 6, data[:-1] + b"?")


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_large_message_s_buffer_costs_memory_only_where_it_is_written():
    # A bytearray of 126 MB is zeroed at once (80 ms): a receiver doing that at a
    # message's first packet stalls, and its peer's first timeouts fire.
    size = 64 << 20
    before = resident_bytes()
    data = zeroed(size)
    assert len(data) == size and resident_bytes() - before < 8 << 20
    data[size - 3:] = b"end"
    assert data[:4] == bytes(4) and data[size - 3:] == b"end"
    # A large message is made and checked the same way as a small one.
    big = message_bytes(1, 2, 3, MAPPED_BYTES + 7)
    assert len(big) == MAPPED_BYTES + 7 and verify(1, 2, 3, big)
    # Its first chunk is the seed's random block, rotated by the seed's first draw.
    rng = random.Random(message_seed(1, 2, 3))
    block = rng.randbytes(BLOCK)
    turn = rng.randrange(BLOCK)
    assert big[:BLOCK] == block[turn:] + block[:turn]
    big[MAPPED_BYTES] ^= 1
    assert not verify(1, 2, 3, big)


def test_injector_records_steps_that_fail_also_when_restoring():
    def apply(action):
        raise OSError("no such device")

    injector = FaultInjector([step(0.0, False, "nic-port-down", ("h1", 0))], apply,
                             clock=lambda: 0.0)
    injector.start(0.0)
    injector.stop(restore=apply)
    assert injector.errors == ["nic-port-down h1 0 down: no such device"]

    restored = FaultInjector([step(0.0, False, "blackhole", ("s",))], lambda action: None,
                             clock=lambda: 0.0)
    restored.start(0.0)
    restored.stop(restore=apply)
    assert restored.errors == ["restoring blackhole s up: no such device"]
