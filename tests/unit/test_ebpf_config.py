"""The eBPF switch program's settings: per-port values, encodings, build and qdisc commands.

Pure: no clang, no kernel. tests/integration/test_ebpf_switch.py runs the program
itself and checks these encodings against its BTF.
"""

from __future__ import annotations

import re

import pytest

from controller import ebpf_config as cfg
from controller import tables
from controller.tables import all_tables
from hosts import protocol
from topologies.model import LinkParams


def test_port_configs_follow_the_p4_port_config_values(fabric):
    tables = all_tables(fabric)
    t0 = tables["p0t0r0"]
    frame = protocol.DATA_FRAME_BYTES
    for role, port in zip(t0.ports, fabric.ports("p0t0r0")):
        link = fabric.link_params(port.tier)
        config = cfg.port_config(t0, role, link, peer_ifindex=7)
        assert config.host_facing == role.host_facing == (port.tier == "host_t0")
        assert (config.ecn_kmin_bytes, config.ecn_kmax_bytes, config.ecn_pmax) == (
            role.ecn_kmin * frame, role.ecn_kmax * frame, role.ecn_pmax)
        assert config.trim_threshold_bytes == role.trim_threshold * frame
        assert config.drop_threshold_bytes == link.queue_pkts * frame
        assert config.priority_limit_bytes == role.priority_limit * t0.trim_size_bytes
        assert config.trim_size_bytes == fabric.spec.trim_size_bytes
        assert (config.xoff_bytes, config.xon_bytes) == (role.xoff * frame, role.xon * frame)
        assert config.rate_bytes_per_s == round(link.rate_mbit * 1e6 / 8)
        assert (config.peer_ifindex, config.mode) == (7, cfg.MODE_SWITCH)
        # Asymmetric trimming by default: the last hop writes TRIMMED_LASTHOP.
        trimmed = protocol.TRIMMED_LASTHOP if role.host_facing else protocol.TRIMMED
        assert config.dscp_trimmed == fabric.spec.traffic_classes[trimmed]
    # A T0 faces its hosts on some ports and the T1s on the others; a T1 faces no host.
    assert {r.host_facing for r in t0.ports} == {True, False}
    assert not any(r.host_facing for r in tables["p0t1s0"].ports)


def test_port_config_encoding():
    config = cfg.PortConfig(1_250_000, 100, 200, 300, trim_threshold_bytes=400,
                            host_facing=True, dscp_trimmed=55, mode=cfg.MODE_SWITCH)
    raw = config.encode()
    assert len(raw) == cfg.PORT_CONFIG.size == 64
    values = dict(zip(cfg.PORT_CONFIG_FIELDS, cfg.PORT_CONFIG.unpack(raw)))
    assert values == {
        "rate_bytes_per_s": 1_250_000, "ecn_kmin_bytes": 100, "ecn_kmax_bytes": 200,
        "ecn_pmax": 300, "trim_threshold_bytes": 400, "drop_threshold_bytes": cfg.NEVER,
        "priority_limit_bytes": cfg.NEVER, "trim_size_bytes": protocol.TRIMMED_FRAME_BYTES,
        "xoff_bytes": cfg.NEVER, "xon_bytes": cfg.NEVER, "peer_ifindex": 0,
        "classid_priority": 0x10010, "classid_lossless": 0x10030, "classid_data": 0x10020,
        "host_facing": 1, "dscp_trimmed": 55, "mode": cfg.MODE_SWITCH, "pad": 0}
    write = config.write(12)
    assert (write.map_name, write.key, write.value) == ("ports", cfg.U32.pack(12), raw)


@pytest.mark.parametrize("bad", [
    cfg.PortConfig(0),
    cfg.PortConfig(cfg.MAX_RATE_BYTES_PER_S + 1),
    cfg.PortConfig(1, ecn_kmin_bytes=1 << 32),
    cfg.PortConfig(1, trim_threshold_bytes=-1),
    cfg.PortConfig(1, ecn_kmin_bytes=10, ecn_kmax_bytes=5),
])
def test_port_config_out_of_range(bad):
    with pytest.raises(cfg.EbpfConfigError):
        bad.encode()


def test_faults_only_port_never_marks_trims_drops_or_pauses():
    config = cfg.faults_only_config(LinkParams(10, 0, 64), peer_ifindex=3)
    assert (config.ecn_kmin_bytes, config.trim_threshold_bytes, config.drop_threshold_bytes,
            config.xoff_bytes) == (cfg.NEVER,) * 4
    # It can still be paused by its peer's PFC (a host's NIC port).
    assert (config.mode, config.peer_ifindex) == (cfg.MODE_FAULTS, 3)


def test_each_named_dscp_gets_its_behaviour(fabric):
    writes = cfg.class_writes(all_tables(fabric)["p0t0r0"])
    got = {cfg.U32.unpack(w.key)[0]: cfg.U32.unpack(w.value)[0] for w in writes}
    assert got == {dscp: protocol.CLASS_BEHAVIOUR[cls]
                   for cls, dscp in enumerate(fabric.spec.traffic_classes)}
    assert {w.map_name for w in writes} == {"dscp_class"}


def test_loss_probability_encoding():
    assert cfg.loss_threshold(0.0) == 0
    assert cfg.loss_threshold(1.0) == 1 << 32  # above every 32-bit random number
    assert cfg.loss_threshold(0.25) == 1 << 30
    write = cfg.loss_write(9, 0.01)
    assert write.map_name == "port_loss" and write.key == cfg.U32.pack(9)
    assert cfg.U64.unpack(write.value)[0] == round(0.01 * 2**32)
    for bad in (-0.1, 1.01, float("nan")):
        with pytest.raises(cfg.EbpfConfigError, match="between 0 and 1"):
            cfg.loss_threshold(bad)


def test_gray_loss_keys_are_the_port_then_the_destination_prefix():
    write = cfg.gray_loss_write(5, "fcbb:bb00:2001:1001:8003::", 0.2)
    prefix, ifindex, addr = cfg.GRAY_KEY.unpack(write.key)
    # The port's index counts as the prefix's first 32 bits, big endian.
    assert (prefix, ifindex) == (32 + 128, (5).to_bytes(4, "big"))
    assert addr == bytes.fromhex("fcbbbb00200110018003") + bytes(6)
    assert write.map_name == "gray_loss" and write.value == cfg.U64.pack(round(0.2 * 2**32))
    clear = cfg.gray_loss_clear(5, "fcbb:bb00:2000::", prefix_len=48)
    assert clear.value is None and cfg.GRAY_KEY.unpack(clear.key)[0] == 32 + 48
    with pytest.raises(cfg.EbpfConfigError, match="address"):
        cfg.gray_key(5, "fcbb::zz")
    with pytest.raises(cfg.EbpfConfigError, match="prefix length"):
        cfg.gray_key(5, "fcbb::", 129)


def test_fresh_state_and_counters_and_pfc_events():
    writes = cfg.fresh_state_writes(4, {"state": 280, "ingress": 16, "counters": 72})
    assert [(w.map_name, w.key, w.value) for w in writes] == [
        ("state", cfg.U32.pack(4), bytes(280)), ("ingress", cfg.U32.pack(4), bytes(16)),
        ("counters", cfg.U32.pack(4), bytes(72))]
    raw = b"".join(cfg.U64.pack(v) for v in range(len(cfg.COUNTERS)))
    assert cfg.decode_counters(raw) == dict(zip(cfg.COUNTERS, range(len(cfg.COUNTERS))))
    assert {"trim_pkts", "tx_trim_pkts", "dropped_trim_pkts"} <= set(cfg.COUNTERS)
    with pytest.raises(cfg.EbpfConfigError):
        cfg.decode_counters(bytes(8))
    event = cfg.PFC_EVENT.pack(cfg.PFC_XOFF, 17, 123)
    assert cfg.decode_pfc_event(event) == (cfg.PFC_XOFF, 17, 123)


def test_every_fact_the_program_uses_comes_from_the_compiler_command():
    defines = cfg.program_defines()
    source = cfg.SOURCE.read_text()
    checked = re.search(r"#if (.*?)#error", source, re.S).group(1)
    assert set(re.findall(r"defined\((\w+)\)", checked)) == set(defines)
    assert defines["BEHAVIOUR_LOSSLESS"] == protocol.BEHAVIOUR_LOSSLESS
    assert defines["WEYL_STEP"] == tables.WEYL_STEP
    assert sorted(defines[f"COUNTER_{n.upper()}"] for n in cfg.COUNTERS) == list(
        range(defines["COUNTER_COUNT"]))
    command = cfg.compile_command(multiarch="aarch64-linux-gnu")
    assert command[:1] == ["clang"] and "-target" in command and "bpf" in command
    assert "-I/usr/include/aarch64-linux-gnu" in command
    assert all(f"-D{k}={v}" in command for k, v in defines.items())
    assert command[-4:] == ["-c", str(cfg.SOURCE), "-o", str(cfg.OBJECT)]


def test_qdisc_classes_are_the_ones_the_program_picks():
    link = LinkParams(rate_mbit=10, delay_ms=0, queue_pkts=64)
    commands = cfg.qdisc_commands("p0t0r0-eth2", link, trim_size_bytes=128)
    assert all(" dev p0t0r0-eth2 " in c and not c.startswith("tc ") for c in commands)
    prio = {}
    for command in commands:
        match = re.search(r"classid (\w+):(\w+) htb .*? prio (\d)", command)
        if match:
            minor = int(match.group(2), 16)
            prio[cfg.HTB_HANDLE << 16 | minor] = int(match.group(3))
    default = cfg.PortConfig(1)
    # The priority class is lent to first; the lossless and data classes after it.
    assert prio == {default.classid_priority: 0, default.classid_lossless: 1,
                    default.classid_data: 1}
    limits = dict(re.findall(r"parent (\S+) handle \S+ [pb]fifo limit (\d+)", " ".join(commands)))
    # The data leaf holds the bytes of its 64 full frames, as the virtual queue counts
    # them (small packets included); the priority leaf as many trimmed headers as fit
    # in those bytes; the lossless leaf more than PFC ever lets in.
    assert f"handle 20: bfifo limit {64 * protocol.DATA_FRAME_BYTES}" in " ".join(commands)
    assert limits[cfg.tc_class(cfg.CLASS_DATA)] == str(64 * protocol.DATA_FRAME_BYTES)
    assert int(limits[cfg.tc_class(cfg.CLASS_PRIORITY)]) == (
        64 * protocol.DATA_FRAME_BYTES // 128)
    # The lossless leaf is a tbf open far above the link's rate, PFC's gate (pfc.py).
    gate = re.search(rf"parent {cfg.tc_class(cfg.CLASS_LOSSLESS)} handle 30: "
                     r"tbf rate (\d+)bit burst (\d+) limit (\d+)", " ".join(commands))
    assert gate and int(gate.group(1)) == cfg.GATE_OPEN_BYTES_PER_S * 8
    assert int(gate.group(3)) == 64 * tables.LOSSLESS_QUEUE_FACTOR * protocol.DATA_FRAME_BYTES
    assert "root handle 1: stab overhead 0 linklayer ethernet htb default 20" in commands[0]



def test_each_write_names_the_port_it_concerns_or_none_for_every_port(fabric):
    sizes = {name: 16 for name in (cfg.STATE_MAP, cfg.INGRESS_MAP, cfg.COUNTERS_MAP)}
    for op in cfg.fresh_state_writes(100_007, sizes):
        assert cfg.port_of(op) == 100_007
    assert cfg.port_of(cfg.loss_write(100_009, 0.5)) == 100_009
    assert cfg.port_of(cfg.gray_loss_write(100_011, "fcbb:bb00:1::", 0.5, 48)) == 100_011
    assert cfg.port_of(cfg.gray_loss_clear(100_011, "fcbb:bb00:1::", 48)) == 100_011
    switch = tables.switch_tables(fabric, fabric.switches[0])
    assert {cfg.port_of(op) for op in cfg.class_writes(switch)} == {None}


def test_the_lossless_gate_shut_lets_one_largest_frame_by_and_open_never_shapes():
    """A tbf drops a frame larger than its bucket: the shut bucket must take the largest
    frame a port carries, and no more, since a pause lets a bucket's bytes through; the
    open gate must be far above any emulated link, which htb above it shapes."""
    opened = cfg.lossless_gate(64, protocol.DATA_FRAME_BYTES, shut=False)
    shut = cfg.lossless_gate(64, protocol.DATA_FRAME_BYTES, shut=True)
    assert shut.burst_bytes == max(protocol.DATA_FRAME_BYTES, 1514)
    assert cfg.lossless_gate(64, 4200, shut=True).burst_bytes == 4200
    assert opened.limit_bytes == shut.limit_bytes == 64 * tables.LOSSLESS_QUEUE_FACTOR * (
        protocol.DATA_FRAME_BYTES)
    assert opened.rate_bytes_per_s * 8 >= 1e10 > 1e6 * 100
    # Shut, a frame takes minutes to earn: no pause lasts that long.
    assert shut.burst_bytes / shut.rate_bytes_per_s > 120
