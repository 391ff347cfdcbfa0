"""The data-plane targets' pure parts: what each node is handed, and the Target protocol.

The Mininet nodes run the commands they are given; these tests check the commands and
the per-port restore lists the kernel target and the bring-up hand over, and that both
targets offer every member of the `Target` protocol with the same parameters.
"""

from __future__ import annotations

import inspect
import subprocess

import pytest

from controller.kernel import (
    ANCHOR_DEV,
    blackhole_commands,
    by_interface,
    host_commands,
    router_setup_commands,
    switch_commands,
)
from controller.tables import switch_tables
from experiments.dataplanes.bmv2_target import Bmv2Target
from experiments.dataplanes.kernel_target import KernelTarget
from experiments.dataplanes.targets import TARGETS, Target, make_target
from experiments.run.fabric import host_params
from topologies.nodes import LINE_CHARS, CommandError, run_commands


def test_blackhole_replaces_the_end_route_and_puts_it_back(fabric):
    tables = switch_tables(fabric, fabric.node("p0t1s0"))
    end = switch_commands(tables)[0]
    assert end.startswith("ip -6 route replace fcbb:bb00:2000::/48 encap seg6local")
    assert blackhole_commands(tables, on=True) == [
        "ip -6 route replace blackhole fcbb:bb00:2000::/48"]
    assert blackhole_commands(tables, on=False) == [end]


def test_the_end_route_leaves_by_the_anchor_device_a_router_creates():
    setup = router_setup_commands()
    assert setup[0] == f"ip link add {ANCHOR_DEV} type veth peer name usid1"
    assert f"ip link set {ANCHOR_DEV} up" in setup


def test_host_commands_route_each_plane_out_of_its_port():
    cmds = host_commands("fcbb:bb00:8003::", [(0, "h3-eth0", "02:00:10:01:00:01"),
                                              (1, "h3-eth1", "02:00:11:01:00:01")])
    assert cmds == [
        "ip -6 addr replace fcbb:bb00:8003::/128 dev lo",
        "ip -6 neigh replace fe80::1 lladdr 02:00:10:01:00:01 dev h3-eth0 nud permanent",
        "ip -6 route replace fcbb:bb00:1000::/40 via fe80::1 dev h3-eth0",
        "ip -6 neigh replace fe80::1 lladdr 02:00:11:01:00:01 dev h3-eth1 nud permanent",
        "ip -6 route replace fcbb:bb00:1100::/40 via fe80::1 dev h3-eth1",
    ]


def test_by_interface_groups_the_commands_of_each_named_port():
    cmds = ["ip -6 addr replace fcbb:bb00:8000::/128 dev lo",
            "ip -6 route replace a via fe80::1 dev h0-eth1",
            "ip -6 route replace b via fe80::1 dev h0-eth10"]
    # h0-eth1 must not take h0-eth10's command; a port no command names is left out.
    assert by_interface(cmds, ["h0-eth1", "h0-eth10", "h0-eth2"]) == {
        "h0-eth1": [cmds[1]], "h0-eth10": [cmds[2]]}


def test_every_host_is_handed_its_commands_and_their_split_by_port(fabric):
    params = host_params(fabric)
    assert set(params) == {h.name for h in fabric.hosts}
    for host in fabric.hosts:
        commands, by_port = params[host.name]["commands"], params[host.name]["port_commands"]
        assert commands[0].startswith("ip -6 addr replace fcbb:bb00:")
        assert set(by_port) == {p.intf for p in fabric.ports(host.name)}
        # Every command but the address on lo belongs to exactly one port.
        assert sorted(c for cs in by_port.values() for c in cs) == sorted(commands[1:])


def test_kernel_routers_get_the_anchor_and_per_port_restore_lists(fabric):
    target = KernelTarget()
    assert target.switch_params(fabric) == {
        s.name: {"setup_commands": router_setup_commands()} for s in fabric.switches}
    commands, by_port = target._tables(fabric, "p1t0r1")
    assert commands == switch_commands(switch_tables(fabric, fabric.node("p1t0r1")))
    assert set(by_port) == {p.intf for p in fabric.ports("p1t0r1")}
    # The End route names no port: a link flap never re-installs it.
    assert commands[0] not in {c for cs in by_port.values() for c in cs}


def _members(cls) -> dict[str, list[str] | None]:
    """Attribute names of a class -> its parameter names (None for a plain attribute)."""
    names = set(getattr(cls, "__annotations__", {})) | {
        n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    return {n: (list(inspect.signature(getattr(cls, n)).parameters)
                if inspect.isfunction(getattr(cls, n, None)) else None)
            for n in names}


@pytest.mark.parametrize("cls", [KernelTarget, Bmv2Target])
def test_each_target_offers_every_member_of_the_protocol(cls):
    for name, params in _members(Target).items():
        assert hasattr(cls, name), f"{cls.__name__} lacks {name}"
        if params is not None:
            assert list(inspect.signature(getattr(cls, name)).parameters) == params, name


def test_make_target_names_the_targets_it_knows():
    assert isinstance(make_target("kernel"), KernelTarget)
    assert TARGETS == ("kernel", "bmv2")
    with pytest.raises(ValueError, match="unknown data-plane target 'p4'"):
        make_target("p4")


def test_run_commands_counts_and_stops_at_the_first_failure(tmp_path):
    lines = []

    def shell(line: str) -> str:  # a node's shell: what it prints, stdout and stderr
        lines.append(line)
        return subprocess.run(["bash", "-c", line], capture_output=True, text=True,
                              cwd=tmp_path).stdout

    assert run_commands(["true", "touch a", "echo ok; true"], shell, "r1") == 3
    assert len(lines) == 1 and (tmp_path / "a").exists()  # one turn through the shell
    bad = "echo 'RTNETLINK answers: File exists' >&2; false"
    with pytest.raises(CommandError, match="r1: '.*false' failed: RTNETLINK answers: File"):
        run_commands(["echo noise", bad, "touch never"], shell, "r1")
    assert not (tmp_path / "never").exists()
    # A long list goes in several lines, each short enough for a terminal's line.
    lines.clear()
    assert run_commands([f"touch f{i}" for i in range(400)], shell, "r1") == 400
    assert len(lines) > 1 and all(len(line) < LINE_CHARS + 200 for line in lines)
    assert len(list(tmp_path.glob("f*"))) == 400
    with pytest.raises(CommandError, match="'false' failed: exit status not 0"):
        run_commands([*(f"true {i}" for i in range(300)), "false", "touch late"], shell, "r1")
    assert not (tmp_path / "late").exists()
    # `ip` commands go to one `ip -batch`, which names the line that failed.
    lines.clear()
    assert run_commands(["ip link show lo", "ip -6 route show table 7", "ip link show lo"],
                        shell, "r1") == 3
    assert len(lines) == 1 and lines[0].count("-batch") == 3  # options differ: 3 batches
    with pytest.raises(CommandError,
                       match="'ip link show nosuch0' failed: Device \"nosuch0\" does not exist"):
        run_commands(["ip link show lo", "ip link show nosuch0", "ip link show lo",
                      "touch after"], shell, "r1")
    assert not (tmp_path / "after").exists()
