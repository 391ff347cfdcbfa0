"""The eBPF switch program's settings: per-port values, encodings, build and qdisc commands.

Pure: no clang, no kernel. tests/integration/test_ebpf_switch.py runs the program
itself and checks these encodings against its BTF.
"""

from __future__ import annotations

import re

import pytest

from controller import ebpf_config as cfg
from controller.tables import all_tables
from hosts import protocol
from topologies.model import LinkParams


def test_port_configs_follow_the_p4_port_config_values(fabric):
    tables = all_tables(fabric)
    t0 = tables["p0t0r0"]
    configs = cfg.switch_port_configs(fabric, t0)
    assert list(configs) == [p.intf for p in fabric.ports("p0t0r0")]
    for role, config in zip(t0.ports, configs.values()):
        link = fabric.link_params("host_t0" if role.host_facing else "t0_t1")
        assert config.host_facing == role.host_facing
        assert config.ecn_threshold_bytes == t0.ecn_threshold_pkts * protocol.DATA_FRAME_BYTES
        assert config.trim_threshold_bytes == t0.trim_threshold_pkts * protocol.DATA_FRAME_BYTES
        assert config.drop_threshold_bytes == link.queue_pkts * protocol.DATA_FRAME_BYTES
        assert config.rate_bytes_per_s == round(link.rate_mbit * 1e6 / 8)
    # A T0 faces its hosts on some ports and the T1s on the others; a T1 faces no host.
    assert {c.host_facing for c in configs.values()} == {True, False}
    assert not any(c.host_facing for c in cfg.switch_port_configs(fabric, tables["p0t1s0"])
                   .values())


def test_port_config_encoding():
    config = cfg.PortConfig(1_250_000, 100, 200, 300, host_facing=True)
    raw = config.encode()
    assert len(raw) == cfg.PORT_CONFIG.size == 32
    values = dict(zip(cfg.PORT_CONFIG_FIELDS, cfg.PORT_CONFIG.unpack(raw)))
    assert values == {"rate_bytes_per_s": 1_250_000, "ecn_threshold_bytes": 100,
                      "trim_threshold_bytes": 200, "drop_threshold_bytes": 300,
                      "classid_control": 0x10010, "classid_data": 0x10020,
                      "host_facing": 1, "enabled": 1}
    write = config.write()
    assert (write.map_name, write.key, write.value) == ("config", bytes(4), raw)


@pytest.mark.parametrize("bad", [
    cfg.PortConfig(0, 1, 1, 1, False),
    cfg.PortConfig(cfg.MAX_RATE_BYTES_PER_S + 1, 1, 1, 1, False),
    cfg.PortConfig(1, 1 << 32, 1, 1, False),
    cfg.PortConfig(1, 1, -1, 1, False),
])
def test_port_config_out_of_range(bad):
    with pytest.raises(cfg.EbpfConfigError):
        bad.encode()


def test_faults_only_port_never_marks_trims_or_drops():
    config = cfg.faults_only_config(LinkParams(10, 0, 64))
    assert (config.ecn_threshold_bytes, config.trim_threshold_bytes,
            config.drop_threshold_bytes) == (cfg.NEVER,) * 3


def test_loss_probability_encoding():
    assert cfg.loss_threshold(0.0) == 0
    assert cfg.loss_threshold(1.0) == 1 << 32  # above every 32-bit random number
    assert cfg.loss_threshold(0.25) == 1 << 30
    write = cfg.loss_write(0.01)
    assert write.map_name == "port_loss" and write.key == bytes(4)
    assert cfg.U64.unpack(write.value)[0] == round(0.01 * 2**32)
    for bad in (-0.1, 1.01, float("nan")):
        with pytest.raises(cfg.EbpfConfigError, match="between 0 and 1"):
            cfg.loss_threshold(bad)


def test_gray_loss_keys():
    write = cfg.gray_loss_write("fcbb:bb00:2001:1001:8003::", 0.2)
    prefix, addr = cfg.GRAY_KEY.unpack(write.key)
    assert prefix == 128
    assert addr == bytes.fromhex("fcbbbb00200110018003") + bytes(6)
    assert write.map_name == "gray_loss" and write.value == cfg.U64.pack(round(0.2 * 2**32))
    clear = cfg.gray_loss_clear("fcbb:bb00:2000::", prefix_len=48)
    assert clear.value is None and cfg.GRAY_KEY.unpack(clear.key)[0] == 48
    with pytest.raises(cfg.EbpfConfigError, match="address"):
        cfg.gray_key("fcbb::zz")
    with pytest.raises(cfg.EbpfConfigError, match="prefix length"):
        cfg.gray_key("fcbb::", 129)


def test_vqueue_reset_and_counters():
    reset = cfg.vqueue_reset()
    assert reset.map_name == "vqueue" and reset.value == bytes(cfg.VQUEUE_STATE.size)
    assert cfg.decode_counters([5, 2, 1, 3, 0]) == {
        "forwarded": 5, "trimmed": 2, "ecn_marked": 1, "dropped": 3, "fault_dropped": 0}
    with pytest.raises(cfg.EbpfConfigError):
        cfg.decode_counters([1, 2])


def test_every_fact_the_program_uses_comes_from_the_compiler_command():
    defines = cfg.program_defines()
    source = cfg.SOURCE.read_text()
    used = set(re.findall(r"\b(?:MRC|COUNTER|VQ)_[A-Z0-9_]+\b", source))
    assert used == set(defines)
    assert defines["MRC_UDP_PORT"] == protocol.MRC_UDP_PORT
    assert defines["MRC_DSCP_TRIMMABLE"] == protocol.DSCP_TRIMMABLE
    assert defines["MRC_DSCP_ROCE"] == protocol.DSCP_ROCE
    assert defines["MRC_TRIMMED_FRAME_BYTES"] == protocol.TRIMMED_FRAME_BYTES
    assert sorted(defines[f"COUNTER_{n.upper()}"] for n in cfg.COUNTERS) == list(
        range(defines["COUNTER_COUNT"]))
    command = cfg.compile_command(multiarch="aarch64-linux-gnu")
    assert command[:1] == ["clang"] and "-target" in command and "bpf" in command
    assert "-I/usr/include/aarch64-linux-gnu" in command
    assert all(f"-D{k}={v}" in command for k, v in defines.items())
    assert command[-4:] == ["-c", str(cfg.SOURCE), "-o", str(cfg.OBJECT)]


def test_qdisc_classes_are_the_ones_the_program_picks():
    link = LinkParams(rate_mbit=10, delay_ms=0, queue_pkts=64)
    commands = cfg.qdisc_commands("p0t0r0-eth2", link)
    assert all(c.startswith("tc ") and " dev p0t0r0-eth2 " in c for c in commands)
    classes = {}
    for command in commands:
        match = re.search(r"classid (\w+):(\w+) htb .*?(?:prio (\d))?\s*quantum", command)
        if match and match.group(3) is not None:
            classes[int(match.group(3))] = int(match.group(1), 16) << 16 | int(match.group(2), 16)
    default = cfg.PortConfig(1, 0, 0, 0, False)
    assert classes == {0: default.classid_control, 1: default.classid_data}
    limits = dict(re.findall(r"parent (\S+) handle \S+ pfifo limit (\d+)", " ".join(commands)))
    assert limits[cfg.tc_class(cfg.CLASS_DATA)] == "64"
    # The priority leaf holds as many trimmed headers as the data leaf holds bytes.
    assert int(limits[cfg.tc_class(cfg.CLASS_CONTROL)]) == (
        64 * protocol.DATA_FRAME_BYTES // protocol.TRIMMED_FRAME_BYTES)
    assert "root handle 1: stab overhead 0 linklayer ethernet htb default 20" in commands[0]
