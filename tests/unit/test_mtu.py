"""A fabric's MTU (`mtu_payload`): its frame is the unit of its queues and thresholds on
both data planes, its ports carry a full DATA packet whole, and the agents send packets
of that size, never larger."""

from __future__ import annotations

import dataclasses

import pytest

from controller import ebpf_config
from controller.tables import switch_tables
from experiments.scenarios.scenario import ScenarioError, check_scenario
from hosts.config import ConfigError, ProtocolConfig
from hosts.endpoint import link_adjusted
from hosts.protocol import (
    DATA_FRAME_BYTES,
    DEFAULT_MTU_PAYLOAD,
    NIC_MTU_PAYLOAD,
    data_frame_bytes,
    interface_mtu,
)
from hosts.simnet import Chaos, SimNet
from topologies.bmv2 import queue_commands
from topologies.errors import UserError
from topologies.model import TopologyError, load_topology, parse_spec, with_mtu, with_rate_cap
from topologies.resolved import read_fabric, write_resolved_topology

SPEC = {"name": "t", "planes": 2, "racks": 2, "hosts_per_rack": 2, "t1_per_plane": 2,
        "links": {"host_t0": {"rate_mbit": 10, "delay_ms": 0.5, "queue_pkts": 64},
                  "t0_t1": {"rate_mbit": 10, "delay_ms": 0.5, "queue_pkts": 64}}}


def test_the_frame_and_the_ports_mtu_follow_the_payload():
    assert data_frame_bytes(DEFAULT_MTU_PAYLOAD) == DATA_FRAME_BYTES
    assert data_frame_bytes(NIC_MTU_PAYLOAD) == 4190
    assert interface_mtu(DEFAULT_MTU_PAYLOAD) == 1500  # never below Ethernet's
    assert interface_mtu(NIC_MTU_PAYLOAD) == 4176  # the frame less its Ethernet header


def test_a_topology_sets_its_mtu_and_its_thresholds_count_frames_of_that_size():
    small = parse_spec(SPEC, "t.yaml")
    nic = parse_spec({**SPEC, "mtu_payload": NIC_MTU_PAYLOAD}, "t.yaml")
    assert small.mtu_payload == DEFAULT_MTU_PAYLOAD and nic.data_frame_bytes == 4190
    # A bigger frame: a longer round trip (serialization) but fewer frames in it.
    assert nic.base_rtt_s > small.base_rtt_s and nic.bdp_frames < small.bdp_frames
    assert nic.trim_threshold_pkts < small.trim_threshold_pkts


@pytest.mark.parametrize("value, problem", [(100, "out of range"), (9001, "out of range"),
                                            ("4k", "must be an integer")])
def test_a_bad_mtu_is_one_line_naming_the_field(value, problem):
    with pytest.raises(TopologyError) as err:
        parse_spec({**SPEC, "mtu_payload": value}, "t.yaml")
    assert err.value.field == "mtu_payload" and problem in str(err.value)
    with pytest.raises(UserError, match=r"mtu_payload \(MTU=\)"):
        load_topology("2tier-2plane", 99)


@pytest.mark.parametrize("name", ["2tier-2plane", "2tier-8plane", "cluster-d", "2tier-1plane"])
@pytest.mark.parametrize("cap", [None, 1.25, 0.3])
def test_at_another_mtu_a_fabric_keeps_its_proportions_and_its_file_round_trips(
        name, cap, tmp_path):
    base = load_topology(name)
    nic = with_mtu(base, NIC_MTU_PAYLOAD)
    assert nic.spec.mtu_payload == NIC_MTU_PAYLOAD
    # The same queues in BDPs, to within a frame's rounding: fewer, larger frames.
    for tier in ("host_t0", "t0_t1"):
        before = base.link_params(tier).queue_pkts / base.spec.bdp_frames
        after = nic.link_params(tier).queue_pkts / nic.spec.bdp_frames
        assert after == pytest.approx(before, abs=0.5 / nic.spec.bdp_frames)
        assert nic.link_params(tier).queue_pkts < base.link_params(tier).queue_pkts
    built = nic if cap is None else with_rate_cap(nic, cap)
    spec = built.spec
    assert spec.ecn_threshold_pkts <= spec.ecn_kmax < spec.trim_threshold_pkts
    assert spec.trim_threshold_pkts <= spec.trim_lasthop <= spec.host_t0.queue_pkts
    write_resolved_topology(tmp_path / "topology.json", built, "kernel")
    again = read_fabric(tmp_path / "topology.json").spec
    assert dataclasses.replace(again, explicit=spec.explicit) == spec


def test_agents_send_the_fabrics_packets_and_never_larger():
    nic = load_topology("2tier-2plane", NIC_MTU_PAYLOAD)
    assert link_adjusted(ProtocolConfig(), nic).mtu_payload == NIC_MTU_PAYLOAD
    smaller = ProtocolConfig.with_overrides({"mtu_payload": 1000})
    assert link_adjusted(smaller, nic).mtu_payload == 1000
    with pytest.raises(ConfigError, match="mtu_payload"):
        link_adjusted(ProtocolConfig.with_overrides({"mtu_payload": 5000}), nic)
    with pytest.raises(ScenarioError, match="protocol.mtu_payload"):
        check_scenario({"workload": "transfer", "protocol": {"mtu_payload": 2000}},
                       "s.yaml", load_topology("2tier-2plane"))


def test_both_switches_count_their_queues_in_the_fabrics_frames():
    small, nic = load_topology("2tier-2plane"), load_topology("2tier-2plane", NIC_MTU_PAYLOAD)
    for fabric in (small, nic):
        frame = fabric.spec.data_frame_bytes
        switch = fabric.t0(0, 0)
        tables = switch_tables(fabric, switch)
        assert tables.frame_bytes == frame
        role = tables.ports[0]
        config = ebpf_config.port_config(tables, role, fabric.link_params("host_t0"))
        assert config.trim_threshold_bytes == role.trim_threshold * frame
        assert config.drop_threshold_bytes == role.queue * frame
        qdiscs = ebpf_config.qdisc_commands("x", fabric.link_params("host_t0"), None,
                                            fabric.spec.trim_size_bytes, frame)
        assert all(f"quantum {frame}" in line for line in qdiscs if " htb rate " in line)
    # BMv2 paces its data queue in frames: a third as many of the NICs' a second.
    slow = queue_commands(1, 10, 64, frame_bytes=nic.spec.data_frame_bytes)[0]
    fast = queue_commands(1, 10, 64, frame_bytes=small.spec.data_frame_bytes)[0]
    assert slow == "set_queue_rate 298 1 0" and fast == "set_queue_rate 966 1 0"


def test_a_transfer_at_the_nics_mtu_on_the_simulated_network():
    fabric = load_topology("2tier-2plane", NIC_MTU_PAYLOAD)
    net = SimNet(fabric, "mrc", Chaos(delay_s=0.002), [], seed=1,
                 protocol={"packet_events": True})
    net.send(0, 3, 0, 1_000_000)
    net.run(30.0, lambda: net.all_done([(0, 3, 0)]))
    assert net.all_done([(0, 3, 0)])
    sends = [e for e in net.events if e.get("event") == "send" and not e.get("retransmit")]
    assert len(sends) == -(-1_000_000 // NIC_MTU_PAYLOAD)


def test_a_runs_proportions_count_the_fabrics_frames():
    from experiments.analysis.similarity import proportions
    from topologies.model import without_delay

    for mtu in (DEFAULT_MTU_PAYLOAD, NIC_MTU_PAYLOAD):
        fabric = with_rate_cap(without_delay(load_topology("2tier-8plane", mtu)), 2.5)
        numbers = proportions(fabric, {}, delay_emulated=False)["numbers"]
        assert numbers["bdp_frames"]["value"] == pytest.approx(fabric.spec.bdp_frames, 1e-3)
        assert numbers["trim_bdp"]["value"] == pytest.approx(
            fabric.spec.trim_threshold_pkts / fabric.spec.bdp_frames, 1e-3)
        assert not proportions(fabric, {}, delay_emulated=False).get("out_of_band")


def test_the_default_budget_is_the_one_measured_at_no_larger_a_packet():
    from experiments.run.calibration import DEFAULT_MBIT_PER_CORE, default_mbit_per_core

    assert default_mbit_per_core(DEFAULT_MTU_PAYLOAD) == DEFAULT_MBIT_PER_CORE == 56.0
    assert default_mbit_per_core(NIC_MTU_PAYLOAD) == 113.0
    assert default_mbit_per_core(2000) == 56.0  # not measured: never more than below it
    assert default_mbit_per_core(9000) == 113.0
    # Smaller packets: the same packets a second, fewer bits.
    assert default_mbit_per_core(600) < 56.0
