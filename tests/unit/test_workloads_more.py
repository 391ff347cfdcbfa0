"""The paper's workloads as phases: incast with a victim of its own, the all-to-all size
sweep, and concurrent flows between given host pairs; each bad parameter is one line."""

from __future__ import annotations

import pytest

from experiments.scenarios.workloads import MAX_SIZES, WorkloadError, phases
from tests.fabrics import hosts
from topologies.model import load_topology


def flows_of(phase):
    return [(t.src, t.dst, t.role) for t in phase]


def test_incast_victim_has_its_own_source_and_an_idle_destination():
    [phase] = phases("incast", {"receiver": 0, "victim": [7, 1]}, hosts(8))
    # Senders from the other rack (4-6) first, then the receiver's own.
    assert flows_of(phase) == [(s, 0, "data") for s in (4, 5, 6, 2, 3)] + [(7, 1, "victim")]
    senders = {t.src for t in phase if t.role == "data"}
    assert not senders & {7, 1}
    # The victim's destination receives the victim's flow and nothing else.
    assert [t.src for t in phase if t.dst == 1] == [7]


def test_incast_senders_come_from_the_other_racks_first():
    # cluster-d (4 racks of 4): the paper's 7:1 crosses the spine, the victim from
    # another rack into the receiver's.
    fabric = load_topology("cluster-d")
    [phase] = phases("incast", {"receiver": 0, "victim": "auto", "fan_in": 7}, fabric)
    senders = [t.src for t in phase if t.role == "data"]
    assert len(senders) == 7 and all(fabric.host(s).rack != 0 for s in senders)
    (victim,) = [t for t in phase if t.role == "victim"]
    assert fabric.host(victim.dst).rack == 0 and fabric.host(victim.src).rack != 0
    # The receiver's rack only when the other racks have too few idle hosts.
    [phase] = phases("incast", {"receiver": 0, "fan_in": 14}, fabric)
    assert [fabric.host(t.src).rack == 0 for t in phase][-2:] == [True, True]


def test_incast_fan_in_defaults_and_limits_with_and_without_a_victim():
    assert len(phases("incast", {"receiver": 5}, hosts(8))[0]) == 7
    assert [t.src for t in phases("incast", {"receiver": 5, "fan_in": 3}, hosts(8))[0]] == [0, 1, 2]
    [phase] = phases("incast", {"receiver": 4, "victim": [0, 7], "fan_in": 2}, hosts(8))
    assert flows_of(phase) == [(1, 4, "data"), (2, 4, "data"), (0, 7, "victim")]
    # 2tier-2plane: receiver 0, victim h3 -> h1, one sender left.
    assert flows_of(phases("incast", {"victim": [3, 1]}, hosts(4))[0]) == [(2, 0, "data"),
                                                                   (3, 1, "victim")]
    with pytest.raises(WorkloadError, match=r"^s\.yaml: params\.fan_in: must be a number of "
                                            r"senders from 1 to 5 \(got 6\)"):
        phases("incast", {"victim": [7, 1], "fan_in": 6}, hosts(8), "s.yaml")
    with pytest.raises(WorkloadError, match=r"params\.victim: leaves no host to send"):
        phases("incast", {"victim": [2, 1]}, hosts(3), "s.yaml")


def test_incast_victim_size():
    [phase] = phases("incast", {"message_bytes": 1000, "victim": [3, 1],
                                "victim_bytes": 5000}, hosts(4))
    assert [(t.role, t.size) for t in phase] == [("data", 1000), ("victim", 5000)]
    [phase] = phases("incast", {"message_bytes": 1000, "victim": [3, 1]}, hosts(4))
    assert phase[-1].size == 1000


def test_all_to_all_size_sweep_is_one_phase_per_size_smallest_first():
    sweep = phases("all-to-all", {"message_bytes": [1_000_000, 4_000, 64_000]}, hosts(4))
    assert [{t.size for t in p} for p in sweep] == [{4_000}, {64_000}, {1_000_000}]
    assert all(len(p) == 12 for p in sweep)
    # Message ids stay unique per pair across the sweep.
    assert [t.msg_id for p in sweep for t in p if (t.src, t.dst) == (2, 1)] == [0, 1, 2]
    assert [len(p) for p in phases("all-to-all", {"message_bytes": [5]}, hosts(3))] == [6]
    assert {t.size for t in phases("all-to-all", {"message_bytes": 7}, hosts(3))[0]} == {7}


def test_flows_are_one_phase_one_transfer_per_pair():
    [phase] = phases("flows", {"flows": [[0, 2], [1, 3]], "message_bytes": 9000}, hosts(4))
    assert [(t.src, t.dst, t.msg_id, t.size) for t in phase] == [(0, 2, 0, 9000),
                                                                 (1, 3, 0, 9000)]
    # Two flows into one host, and a pair and its reverse, are different flows.
    [phase] = phases("flows", {"flows": [[0, 2], [1, 2], [2, 0]]}, hosts(4))
    assert [(t.src, t.dst) for t in phase] == [(0, 2), (1, 2), (2, 0)]


def test_flows_may_each_have_their_own_size():
    """Flows that join one after another and end together: one size per flow."""
    [phase] = phases("flows", {"flows": [[1, 0], [2, 0]], "message_bytes": [9000, 3000],
                               "start_s": [0, 0.5]}, hosts(4))
    assert [(t.src, t.size, t.start_s) for t in phase] == [(1, 9000, 0.0), (2, 3000, 0.5)]


@pytest.mark.parametrize("workload,params,match", [
    ("all-to-all", {"message_bytes": []}, r"params\.message_bytes: must be a byte count, or "
                                          r"a list of 1 to 16"),
    ("all-to-all", {"message_bytes": [10, 10]}, r"params\.message_bytes: must be"),
    ("all-to-all", {"message_bytes": [10, 0]}, r"params\.message_bytes: must be"),
    ("all-to-all", {"message_bytes": [10, True]}, r"params\.message_bytes: must be"),
    ("all-to-all", {"message_bytes": [10, "1k"]}, r"params\.message_bytes: must be"),
    ("all-to-all", {"message_bytes": [[10]]}, r"params\.message_bytes: must be"),
    ("all-to-all", {"message_bytes": list(range(1, MAX_SIZES + 2))},
     r"params\.message_bytes: must be"),
    ("all-to-all", {"message_bytes": 2 ** 31}, r"params\.message_bytes: must be a byte count "
                                               r"from 1"),
    ("flows", {}, r"params\.flows: missing"),
    ("flows", {"flows": [[0, 2]], "count": 2}, r"params\.count: not a parameter of flows"),
    ("flows", {"flows": []}, r"params\.flows: must be a list of 1 to 12 "),
    ("flows", {"flows": [0, 2]}, r"params\.flows\[0\]: must be \[source, destination\]"),
    ("flows", {"flows": {"a": 1}}, r"params\.flows: must be a list"),
    ("flows", {"flows": [[0, 2], [1, 1]]}, r"params\.flows\[1\]: must be \[source, "
                                           r"destination\], two different host indexes 0\.\.3"),
    ("flows", {"flows": [[0, 4]]}, r"params\.flows\[0\]: must be"),
    ("flows", {"flows": [[0, -1]]}, r"params\.flows\[0\]: must be"),
    ("flows", {"flows": [[0, 2, 3]]}, r"params\.flows\[0\]: must be"),
    ("flows", {"flows": [[False, 2]]}, r"params\.flows\[0\]: must be"),
    ("flows", {"flows": [[0, 2], [1, 3], [0, 2]]}, r"params\.flows\[2\]: \[0, 2\] is listed "
                                                   r"twice"),
    ("flows", {"flows": [[0, 2]], "message_bytes": 0}, r"params\.message_bytes: must be"),
    ("flows", {"flows": [[0, 2], [1, 3]], "message_bytes": [10]},
     r"params\.message_bytes: must be a byte count, or a list of 2, one per flow"),
    ("flows", {"flows": [[0, 2]], "message_bytes": [0]}, r"params\.message_bytes: must be"),
    ("flows", {"flows": [[0, 2]], "message_bytes": [True]}, r"params\.message_bytes: must be"),
    ("incast", {"victim": "h3"}, r"params\.victim: must be \[source, destination\]"),
    ("incast", {"receiver": 3, "victim": [1, 3]}, r"params\.victim: must not include"),
    ("incast", {"victim": [3, 1], "victim_bytes": 0}, r"params\.victim_bytes: must be a byte"),
])
def test_bad_parameters_are_one_line(workload, params, match):
    with pytest.raises(WorkloadError, match=r"^s\.yaml: " + match) as caught:
        phases(workload, params, hosts(4), "s.yaml")
    assert "\n" not in str(caught.value) and "fix: " in str(caught.value)
