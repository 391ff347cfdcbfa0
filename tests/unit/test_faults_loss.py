"""The loss faults (`loss`, `gray-loss`): parsing, the ports and addresses they act on,
and the summary figures of the eBPF switch ports. Pure: no network, no root."""

from __future__ import annotations

import pytest

from controller import ebpf_config as cfg
from experiments.analysis.report import write_report
from experiments.dataplanes.bmv2_target import Bmv2Target
from experiments.dataplanes.ebpf_switch import EbpfStatus
from experiments.dataplanes.kernel_target import KernelTarget
from experiments.dataplanes.switch_counters import counter_totals
from experiments.faults import FaultError, FaultInjector, parse_faults
from experiments.run.fabric import RunningFabric
from tests.steps import step
from topologies.addressing import parse_usids
from topologies.shaping import ShapingFeatures


def test_loss_on_a_link_acts_on_both_sending_ends_until_cleared(fabric):
    down, up = parse_faults([{"kind": "loss", "link": ["p0t0r0", "p0t1s1"],
                              "probability": 0.01, "at_s": 1, "down_s": 2}], fabric)
    assert (down.t, down.up, down.probability) == (1, False, 0.01)
    assert (up.t, up.up, up.probability) == (3, True, None)
    assert down.target == ("p0t0r0>p0t1s1", "p0t1s1>p0t0r0")
    # T0 ports: 2 hosts, then one uplink per T1; T1 port r faces rack r.
    assert down.fault.ports(fabric) == [("p0t0r0", "p0t0r0-eth3"),
                                               ("p0t1s1", "p0t1s1-eth0")]
    assert down.describe() == "loss p0t0r0>p0t1s1 p0t1s1>p0t0r0 on (0.01)"
    assert up.describe() == "loss p0t0r0>p0t1s1 p0t1s1>p0t0r0 off"


def test_loss_in_one_direction_and_on_every_host_link_for_the_rest_of_the_run(fabric):
    (one,) = parse_faults([{"kind": "loss", "link": ["h1", "p1t0r0"], "from": "p1t0r0",
                            "probability": 0.5, "at_s": 0}], fabric)
    assert one.fault.ports(fabric) == [("p1t0r0", "p1t0r0-eth1")]
    (every,) = parse_faults([{"kind": "loss", "link": "hosts", "probability": 1,
                              "at_s": 0}], fabric)
    ports = every.fault.ports(fabric)
    host_links = [lk for lk in fabric.links if lk.tier == "host_t0"]
    assert len(ports) == 2 * len(host_links) == 16
    assert ("h3", "h3-eth1") in ports and ("p1t0r1", "p1t0r1-eth1") in ports


def test_gray_loss_of_one_path_is_its_full_address_on_the_source_port(fabric):
    (action,) = parse_faults([{"kind": "gray-loss", "path": ["h0", "h3"], "plane": 1,
                               "spine": 0, "probability": 0.2, "at_s": 0.5}], fabric)
    assert action.target == ("h0", "h3", 1, 0)
    ((node, intf, address, prefix_len),) = action.fault.entries(fabric)
    assert (node, intf, prefix_len) == ("h0", "h0-eth1", 128)
    # T0 plane 1 rack 0, T1 plane 1 spine 0, T0 plane 1 rack 1, host 3.
    assert parse_usids(address) == [0x1100, 0x2100, 0x1101, 0x8003]


def test_gray_loss_of_a_t1_names_every_hosts_paths_through_it(fabric):
    (action,) = parse_faults([{"kind": "gray-loss", "switch": "p0t1s1", "probability": 0.2,
                               "at_s": 0}], fabric)
    entries = action.fault.entries(fabric)
    assert [(n, i, p) for n, i, _, p in entries] == [(f"h{i}", f"h{i}-eth0", 64)
                                                     for i in range(4)]
    # The host's own T0, then the T1: the first 64 bits of each of its paths through it.
    assert [parse_usids(a) for _, _, a, _ in entries] == [[0x1000, 0x2001]] * 2 + [
        [0x1001, 0x2001]] * 2


@pytest.mark.parametrize("entry,match", [
    ({"kind": "loss", "link": ["p0t0r0", "p0t1s0"], "at_s": 0},
     r"\.probability: must be a number above 0 up to 1 \(got None\)"),
    ({"kind": "loss", "link": ["p0t0r0", "p0t1s0"], "probability": 1.5, "at_s": 0},
     r"\.probability: must be a number above 0 up to 1"),
    ({"kind": "loss", "link": ["p0t0r0", "p0t1s0"], "probability": float("nan"), "at_s": 0},
     r"\.probability: must be"),
    ({"kind": "loss", "link": ["p0t0r0", "p0t1s0"], "probability": True, "at_s": 0},
     r"\.probability: must be"),
    ({"kind": "link-rate", "link": ["p0t0r0", "p0t1s0"], "share": 0, "at_s": 0},
     r"\.share: must be a number above 0 up to 1 \(got 0\)"),
    ({"kind": "link-rate", "link": ["p0t0r0", "p0t1s0"], "at_s": 0},
     r"\.share: must be a number above 0 up to 1 \(got None\)"),
    ({"kind": "loss", "link": ["h0", "h1"], "probability": 0.1, "at_s": 0},
     r"\.link: must name two linked nodes of 2tier-2plane, or be hosts"),
    ({"kind": "loss", "link": ["h0", "p0t0r0"], "from": "h1", "probability": 0.1, "at_s": 0},
     r"\.from: must be one end of the link, h0 or p0t0r0 \(got 'h1'\)"),
    ({"kind": "loss", "link": "hosts", "from": "h1", "probability": 0.1, "at_s": 0},
     r"\.from: takes one link"),
    ({"kind": "loss", "link": ["h0", "p0t0r0"], "probability": 0.1, "at_s": 0, "count": 2},
     r"\.count: a fault that lasts for the rest of the run"),
    ({"kind": "gray-loss", "probability": 0.2, "at_s": 0},
     r"faults\[0\]: needs either path \(with plane and spine\) or switch"),
    ({"kind": "gray-loss", "path": ["h0", "h3"], "switch": "p0t1s0", "probability": 0.2,
      "at_s": 0}, r"faults\[0\]: needs either path"),
    ({"kind": "gray-loss", "path": ["h0", "h0"], "plane": 0, "spine": 0, "probability": 0.2,
      "at_s": 0}, r"\.path: must be \[source, destination\], two different hosts"),
    ({"kind": "gray-loss", "path": ["h0", "h9"], "plane": 0, "spine": 0, "probability": 0.2,
      "at_s": 0}, r"\.path: must be"),
    ({"kind": "gray-loss", "path": ["h0", "h3"], "plane": 2, "spine": 0, "probability": 0.2,
      "at_s": 0}, r"\.plane: must be a plane 0\.\.1 \(got 2\)"),
    ({"kind": "gray-loss", "path": ["h0", "h3"], "plane": 0, "spine": "s1",
      "probability": 0.2, "at_s": 0}, r"\.spine: must be a T1 index 0\.\.1"),
    ({"kind": "gray-loss", "switch": "p0t0r0", "probability": 0.2, "at_s": 0},
     r"\.switch: 'p0t0r0' is not a T1 of 2tier-2plane"),
    ({"kind": "gray-loss", "switch": "p0t1s0", "plane": 0, "probability": 0.2, "at_s": 0},
     r"\.plane: belongs to a path, not to switch"),
    ({"kind": "gray-loss", "switch": "p0t1s0", "probability": 0.2, "at_s": 0, "link": 1},
     r"\.link: not a field of gray-loss"),
])
def test_bad_loss_faults_are_one_line_naming_the_field(fabric, entry, match):
    where = "" if match.startswith("faults") else r"faults\[0\]"
    with pytest.raises(FaultError, match=r"^s\.yaml: " + where + match) as caught:
        parse_faults([entry], fabric, "s.yaml", horizon_s=30)
    assert "\n" not in str(caught.value)


def test_the_injector_logs_the_probability_and_clears_what_is_still_on():
    applied, restored = [], []
    action = step(0.0, False, "gray-loss", ("h0", "h3", 0, 1), 0.2)
    injector = FaultInjector([action], applied.append, clock=lambda: 0.0)
    injector.start(0.0)
    injector.stop(restore=restored.append)
    assert applied == [action]
    assert injector.log[0]["probability"] == 0.2
    assert restored == [step(0, True, "gray-loss", ("h0", "h3", 0, 1), 0.2)]
    assert restored[0].probability is None


def _counters(fabric, value):
    return {s.name: {p.intf: dict.fromkeys(cfg.COUNTERS, value)
                     for p in fabric.ports(s.name)} for s in fabric.switches}


def test_counter_totals_split_host_facing_from_fabric_ports_and_host_nics(fabric):
    before, after = _counters(fabric, 1), _counters(fabric, 4)
    after["h0"] = {"h0-eth0": dict.fromkeys(cfg.COUNTERS, 100)}  # a faults-only host port
    after["p0t0r0"]["p0t0r0-eth0"]["ecn_marked"] = 1  # unchanged on a host-facing port
    totals = counter_totals(fabric, before, after)
    # 8 switches: 4 T0 with 2 host ports and 2 uplinks, 4 T1 with 2 downlinks.
    assert totals["host_ports"]["trim_pkts"] == 8 * 3
    assert totals["fabric_ports"]["trim_pkts"] == 16 * 3
    assert totals["host_ports"]["ecn_marked"] == 7 * 3
    assert totals["host_nics"]["fault_dropped"] == 100
    assert "host_nics" not in counter_totals(fabric, before, _counters(fabric, 2))


def _network(target, ebpf_ok, on_switches, red=False):
    status = EbpfStatus(ebpf_ok, "eBPF switch program on every switch port" if ebpf_ok
                        else "no eBPF switch program: bpftool is not installed")
    network = RunningFabric(None, target, None)
    network.features = ShapingFeatures(netem=False, red=red)
    network.tc_commands, network.ebpf, network.ebpf_switch_ports = 10, status, on_switches
    return network


def test_link_emulation_says_what_emulates_ecn_trimming_and_faults():
    kernel = KernelTarget()
    on = _network(kernel, True, True).link_emulation()
    assert (on["ecn"], on["trimming"], on["faults"]) == ("eBPF virtual queue", "eBPF",
                                                         "eBPF maps")
    assert not any("ECN" in note for note in on["notes"])
    off = _network(kernel, False, False).link_emulation()
    assert (off["ecn"], off["trimming"], off["faults"]) == (False, False, False)
    assert off["ebpf"] == {"available": False,
                           "reason": "no eBPF switch program: bpftool is not installed"}
    assert ("no eBPF switch program: bpftool is not installed: no trimming, and loss, "
            "gray-loss and one-way link-down faults" in off["notes"])
    assert _network(kernel, False, False, red=True).link_emulation()["ecn"] == "RED qdisc"
    # How far PFC is carried out, by data plane (docs/protocol.md).
    assert on["pfc"].startswith("decided hop by hop") and "carried out" in on["pfc"]
    assert "switch port's lossless queue is held" in on["pfc"]
    assert Bmv2Target.pfc.startswith("counted only")


def test_the_report_shows_the_switch_counters_of_each_transport(tmp_path):
    counters = {"host_ports": dict.fromkeys(cfg.COUNTERS, 0),
                "fabric_ports": dict.fromkeys(cfg.COUNTERS, 0)}
    counters["host_ports"]["trim_pkts"], counters["fabric_ports"]["ecn_marked"] = 120, 45
    block = {"transport": "mrc", "transfers_done": 3, "transfers": 3, "workload_s": 1.0,
             "goodput_mbps": 24.0, "peak_goodput_mbps": 30.0, "fct_p50_s": 0.5,
             "fct_p99_s": 0.9, "victim_fct_s": None, "timed_out": False,
             "path_events": {"nack": 120}, "fault_errors": [], "switch_counters": counters}
    summary = {"scenario": "incast-trim", "topology": "2tier-2plane", "dataplane": "kernel",
               "hosts": 4, "switches": 8, "planes": 2, "transports": [block]}
    write_report(tmp_path / "report.md", summary)
    text = (tmp_path / "report.md").read_text()
    assert "| switch ports: TRIM_PKTS (host / fabric) | 120 / 0 |" in text
    assert "| switch ports: ECN marked (host / fabric) | 0 / 45 |" in text
    assert "PFC paused" not in text  # a counter no port counted (BMv2 has none)
    assert "host ports: fault dropped" not in text
    counters["host_nics"] = dict(counters["host_ports"], fault_dropped=7)
    write_report(tmp_path / "report.md", summary)
    assert "| host ports: fault dropped | 7 |" in (tmp_path / "report.md").read_text()


def test_a_program_that_cannot_be_built_is_a_reason_not_an_error(tmp_path, monkeypatch):
    from experiments.dataplanes import ebpf_switch

    source = tmp_path / "mrc_switch.bpf.c"
    source.write_text("")
    monkeypatch.setattr(ebpf_switch.cfg, "OBJECT", tmp_path / "out.o")
    monkeypatch.setattr(ebpf_switch.cfg, "BUILD_INPUTS", (source,))
    monkeypatch.setattr(ebpf_switch.cfg, "compile_command",
                        lambda: ["no-such-clang", "-c", str(source)])
    status = ebpf_switch.prepare(None)  # never tried: nothing was built
    assert status == EbpfStatus(False, "no eBPF switch program: no-such-clang not found: "
                                       "the eBPF switch needs clang and libbpf-dev (make deps)")
    monkeypatch.setattr(ebpf_switch.cfg, "compile_command",
                        lambda: ["sh", "-c", "echo 'x.c:1:1: error: nope' >&2; echo more >&2; "
                                             "exit 1"])
    status = ebpf_switch.prepare(None)  # never tried: nothing was built
    assert status == EbpfStatus(False, "no eBPF switch program: compiling out.o failed: "
                                       "x.c:1:1: error: nope")
