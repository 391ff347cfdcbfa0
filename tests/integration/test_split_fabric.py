"""A fabric split across three namespace servers (topologies/placement.py, tunnels.py):
the hosts on one, plane 0 on another, plane 1 on a third, so every host-NIC link is a
VXLAN tunnel between two servers. Every SRv6 uSID path crosses tunnels and delivers; a
link flap takes both tunnel ends down and up; a server's path too short for the
fabric's frames is refused in one line naming a link; a tunnel end a dead run left on a
server is found and removed; the resolved topology records where each node ran.

The eBPF switch program runs on every server: an incast's last hops (on the planes'
servers) trim MRC's data and the receiver (on the hosts' server) NACKs each trimmed
header once, as many NACKs as the switches counted trims (test_split_pfc.py: PFC); a
fault's map write reaches its port's server alone, in milliseconds. Captured on its
two servers, the two ends of one tunnel count the same packets of every EV. A second
run is refused on every server, in one line naming the first.
Skipped with the reason where the program cannot run (clang, bpftool, cls_bpf)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from controller import ebpf_config as cfg
from experiments.analysis.metrics import read_events, summarize
from experiments.dataplanes import ebpf_switch
from experiments.dataplanes.switch_counters import counter_totals
from experiments.dataplanes.targets import KernelTarget, apply_fault
from experiments.run.capture import Capture, parse_spec
from experiments.run.checks import check_paths
from experiments.run.cleanup import find_leftovers
from experiments.run.fabric import RunningFabric
from experiments.run.fabric_lock import FabricLock, ServerBusy
from experiments.run.workload_run import run_transport
from experiments.scenarios.scenario import load_scenario
from experiments.scenarios.workloads import phases
from topologies.model import load_topology
from topologies.network import remove_leftovers, set_link
from topologies.nsserver import SSHD, NamespaceServers
from topologies.paths import all_paths
from topologies.placement import load_placement
from topologies.remote import is_remote
from topologies.resolved import resolved_topology
from topologies.tunnels import TunnelError, check_mtu

REPO = Path(__file__).resolve().parents[2]
DISSECTOR = REPO / "tools" / "wireshark" / "mrc.lua"
pytestmark = pytest.mark.skipif(not os.access(SSHD, os.X_OK),
                                reason=f"{SSHD} is missing (openssh-server: make deps)")
CLUSTER = """servers:
  hosts: {namespace: true, hosts: all}
  plane0: {namespace: true, planes: [0]}
  plane1: {namespace: true, planes: [1]}
"""


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Three namespace servers and the cluster file that places 2tier-2plane on them:
    (harness, cluster file)."""
    folder = tmp_path_factory.mktemp("split")
    harness = NamespaceServers(folder / "servers")
    try:
        harness.start(["hosts", "plane0", "plane1"])
        (folder / "cluster.yaml").write_text(CLUSTER)
        yield harness, folder / "cluster.yaml"
    finally:
        harness.stop()
    assert not find_leftovers()


@pytest.fixture(scope="module")
def split(servers):
    """2tier-2plane up on the three servers: (running fabric, placement, harness)."""
    harness, cluster = servers
    fabric = load_topology("2tier-2plane")
    placement = load_placement(cluster, fabric, harness)
    with FabricLock("pytest: split fabric") as lock, \
            RunningFabric(fabric, KernelTarget(), lock, placement=placement) as network:
        yield network, placement, harness


def _server_of(node) -> str:
    return node.server if is_remote(node) else "head"


def test_every_node_runs_on_its_server_and_every_host_port_is_a_tunnel(split):
    network, placement, _ = split
    net = network.net
    for host in network.fabric.hosts:
        node = net.get(host.name)
        assert _server_of(node) == "hosts"
        # its shell is a process of that server, its port 0 a VXLAN device there
        assert node.rcmd(f"cat /proc/{node.pid}/comm").strip() == "bash"
        assert "vxlan id" in node.cmd(f"ip -d link show {host.name}-eth0")
    for switch in network.fabric.switches:
        assert _server_of(net.get(switch.name)) == f"plane{switch.plane}"
    record = resolved_topology(network.fabric, "kernel", placement.as_dict(network.fabric))
    assert record["nodes"]["p1t1s0"]["server"] == "plane1"
    assert json.dumps(record["placement"]["servers"]["hosts"]["hosts"]) == '"all"'


def test_every_srv6_path_delivers_across_the_tunnels(split):
    network, _, _ = split
    result = check_paths(network.net, network.fabric)
    assert result.all_ok, [str(p) for p in result.failed[:5]]
    assert result.checked == len(all_paths(network.fabric))


def test_a_link_flap_takes_both_tunnel_ends_down_and_up(split):
    network, _, _ = split
    net = network.net

    def flags(node: str, intf: str) -> str:
        return net.get(node).cmd(f"ip -o link show {intf}").split("<")[1].split(">")[0]

    set_link(net, "h0", "p0t0r0", False)
    try:
        assert "UP" not in flags("h0", "h0-eth0").split(",")
        assert "UP" not in flags("p0t0r0", "p0t0r0-eth0").split(",")
    finally:
        set_link(net, "h0", "p0t0r0", True)
    assert "UP" in flags("h0", "h0-eth0").split(",")
    result = check_paths(net, network.fabric)
    assert result.all_ok, [str(p) for p in result.failed[:5]]


def test_a_path_too_short_for_the_frames_is_refused_in_one_line(split):
    network, placement, harness = split
    harness.ssh("plane1", "ip link set eth0 mtu 1500").check_returncode()
    try:
        with pytest.raises(TunnelError) as err:
            check_mtu(placement, network.fabric)
    finally:
        harness.ssh("plane1", "ip link set eth0 mtu 9100").check_returncode()
    said = str(err.value)
    assert "\n" not in said and "link h0 - p1t0r0" in said and "eth0 on plane1 has 1500" in said
    check_mtu(placement, network.fabric)


def test_a_tunnel_end_left_on_a_server_is_removed(split):
    network, placement, harness = split
    # A tunnel end under one of the fabric's port names in the server's own namespace
    # (where a dead run's BMv2 switch left its ports), beside another tool's device.
    for name, vni in (("p0t1s0-eth0", 999), ("other-vx", 998)):
        harness.ssh("plane0", f"ip link add {name} type vxlan id {vni} local 10.250.0.11 "
                    "dstport 4789 dev eth0").check_returncode()
    assert remove_leftovers(placement, network.fabric) == ["p0t1s0-eth0"]
    left = harness.ssh("plane0", "ip -o link show; ip link del other-vx").stdout
    assert "p0t1s0-eth0" not in left and "other-vx" in left
    # the fabric's own ends, in its nodes, are not leftovers
    assert check_paths(network.net, network.fabric).all_ok


def test_a_second_run_is_refused_on_every_server_naming_the_first(split, tmp_path):
    network, placement, harness = split
    other = FabricLock("a second head", path=tmp_path / "other.lock").acquire()
    try:
        with pytest.raises(ServerBusy) as err:
            other.hold_servers(placement.servers)
    finally:
        other.release()
    said = str(err.value)
    assert "\n" not in said and said.startswith("server hosts: active run: a fabric is "
                                                "already running there: pid ")
    assert f"pid {os.getpid()}: pytest: split fabric" in said
    # A run started on a server itself is refused by the same lock, in one line.
    done = harness.ssh("plane0", f"cd {REPO} && {sys.executable} -m experiments run "
                       "--topo 2tier-2plane --dataplane kernel --scenario pathcheck")
    assert done.returncode == 2, done
    (line,) = done.stderr.strip().splitlines()
    assert "a fabric is already running on this machine" in line and "held for" in line


def test_a_fault_reaches_its_servers_maps_through_the_servers_writer(split, monkeypatch):
    network, _, _ = split
    ebpf = network.ebpf_ports
    if not ebpf.ports:
        pytest.skip(network.ebpf.reason)
    port = ("p0t0r0", "p0t0r0-eth2")
    ifindex = ebpf.ports[port]

    def no_command(*_args):
        raise AssertionError("a fault ran a command on a server (a bpftool over ssh each)")

    for program in ebpf.servers.values():  # the writer's session, not a new command
        monkeypatch.setattr(program, "run", no_command)
    ebpf_switch.set_loss(network, [port], 0.5)
    monkeypatch.undo()
    try:
        loss = dict(ebpf.servers["plane0"].dump(cfg.LOSS_MAP))
        assert loss[cfg.key(ifindex)] == cfg.loss_write(ifindex, 0.5).value
        # Only the port's own server was written.
        assert cfg.key(ifindex) not in dict(ebpf.servers["plane1"].dump(cfg.LOSS_MAP))
    finally:
        ebpf_switch.set_loss(network, [port], 0.0)


def play(network, transport, plan, folder, protocol=None):
    """One transport's run on a running fabric: its summary, events and port counters."""
    before = ebpf_switch.read_counters(network)
    run = run_transport(network, transport, plan, [], lambda a: apply_fault(network, a),
                        folder, 60.0, protocol or {}, print)
    events = read_events(run.event_files)
    counted = counter_totals(network.fabric, before, ebpf_switch.read_counters(network))
    return summarize(run, events), events, counted


def test_an_incast_is_trimmed_on_the_planes_servers_and_nacked_on_the_hosts(split, tmp_path):
    network, _, _ = split
    if not network.ebpf_ports.ports:
        pytest.skip(network.ebpf.reason)
    assert set(network.ebpf_ports.servers) == {"hosts", "plane0", "plane1"}
    scenario = load_scenario("incast-trim", network.fabric)
    summary, events, ports = play(network, "mrc", [list(p) for p in scenario.plan],
                                   tmp_path, scenario.protocol)
    assert summary["ok"] and summary["verified"], summary
    assert ports["host_ports"]["tx_trim_pkts"] > 100, ports
    nacks = [e for e in events if e["event"] == "nack"]
    for group, reason in (("host_ports", "TRIMMED_LASTHOP"), ("fabric_ports", "TRIMMED")):
        assert sum(e["reason"] == reason for e in nacks) == ports[group]["tx_trim_pkts"]
    assert ports["host_ports"]["dropped"] == ports["fabric_ports"]["dropped"] == 0


def _per_ev(pcap: Path, display_filter: str, field: str = "mrc.ev") -> Counter:
    """How many packets of `pcap` that `display_filter` keeps carry each value of
    `field`, as tshark reads them with the project's dissector."""
    done = subprocess.run(["tshark", "-r", str(pcap), "-X", f"lua_script:{DISSECTOR}",
                           "-Y", display_filter, "-T", "fields", "-e", field],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Lua: Error" not in done.stderr, done.stderr
    return Counter(done.stdout.split())


@pytest.mark.skipif(shutil.which("tshark") is None or shutil.which("tcpdump") is None,
                    reason="tshark or tcpdump not installed")
def test_per_ev_counts_agree_at_both_ends_of_a_tunnel(split, tmp_path):
    """h0's plane-0 port (on the hosts' server) and its T0's port (on plane 0's) are the
    two ends of one tunnel: captured on each server while h0 sends to h3, every EV
    counts as many DATA packets leaving h0 as arriving at the T0, and as many
    acknowledgements the other way."""
    network, _, _ = split
    folder = tmp_path / "results"  # not /tmp of a server: the captures come here
    plan = phases("transfer", {"src": 0, "dst": 3, "message_bytes": 400_000},
                  network.fabric)
    capture = Capture(network.net, parse_spec("h0:eth0,p0t0r0:eth0", network.fabric),
                      folder)
    with capture:
        run = run_transport(network, "mrc", plan, [], lambda a: apply_fault(network, a),
                            folder, 60.0, {}, print)
    (transfer,) = run.transfers
    assert transfer.done and transfer.verified, transfer
    results = {Path(r.file).name: r for r in capture.results}
    assert all(r.captured and r.dropped == 0 for r in results.values()), results
    host, t0 = folder / "pcap" / "h0-eth0.pcap", folder / "pcap" / "p0t0r0-eth0.pcap"
    sent = _per_ev(host, "mrc.type == 1 && ipv6.src == fcbb:bb00:8000::")
    assert len(sent) > 4 and sum(sent.values()) > 100, sent  # sprayed over plane 0's EVs
    assert _per_ev(t0, "mrc.type == 1 && ipv6.src == fcbb:bb00:8000::") == sent
    acks = "mrc.type != 1 && ipv6.dst == fcbb:bb00:8000::"
    assert _per_ev(t0, acks, "mrc.echo_ev") == _per_ev(host, acks, "mrc.echo_ev")
