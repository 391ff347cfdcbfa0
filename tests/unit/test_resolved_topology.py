"""topology.json: what a run writes, a tool reads back, without Mininet."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from topologies.addressing import host_address
from topologies.resolved import (
    ResolvedTopologyError,
    read_resolved_topology,
    resolved_topology,
    write_resolved_topology,
)


def test_what_the_writer_writes_the_reader_reads_back(fabric, tmp_path):
    path = tmp_path / "topology.json"
    write_resolved_topology(path, fabric, "kernel")
    topo = read_resolved_topology(path)
    assert (topo.name, topo.source, topo.dataplane) == (
        "2tier-2plane", fabric.spec.source, "kernel")
    assert set(topo.nodes) == {n.name for n in (*fabric.hosts, *fabric.switches)}
    for n in (*fabric.hosts, *fabric.switches):
        node = topo.nodes[n.name]
        assert (node.role, node.index, node.usid) == (n.role, n.index, n.usid)
        assert [(p.port, p.intf, p.mac, p.peer, p.peer_port, p.tier) for p in node.ports] == [
            (p.number, p.intf, p.mac, p.peer, p.peer_port, p.tier) for p in fabric.ports(n.name)]
        if n.role == "host":
            assert (node.address, node.plane) == (host_address(n.index), None)
        else:
            assert (node.address, node.plane) == (None, n.plane)
    h3 = fabric.host(3)
    assert topo.by_usid(h3.usid).name == "h3"
    node, port = topo.by_mac(fabric.ports("p1t1s0")[1].mac.upper())
    assert (node.name, port.port) == ("p1t1s0", 1)
    assert topo.by_usid(0x7777) is None and topo.by_mac("02:00:00:00:00:00") is None


def test_the_content_is_plain_json_without_a_dataplane_when_none_is_given(fabric):
    doc = resolved_topology(fabric)
    assert "dataplane" not in doc and json.loads(json.dumps(doc)) == doc
    assert doc["nodes"]["p0t1s1"]["usid"] == "0x2001"


def test_reading_needs_no_mininet(fabric, tmp_path):
    path = tmp_path / "topology.json"
    write_resolved_topology(path, fabric)
    code = ("import sys; from topologies.resolved import read_resolved_topology as r; "
            f"t = r({str(path)!r}); assert 'mininet' not in sys.modules; print(len(t.nodes))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "12", done.stderr


@pytest.mark.parametrize("change,field", [
    (lambda d: d.pop("nodes"), "nodes: must be dict"),
    (lambda d: d["nodes"]["h0"].update(role="router"), "nodes.h0.role: unknown role"),
    (lambda d: d["nodes"]["h0"].update(usid="zz"), "nodes.h0.usid: not a hex number"),
    (lambda d: d["nodes"]["h0"]["ports"][1].update(port="1"), r"nodes.h0.ports\[1\].port: must "
                                                               "be int"),
    (lambda d: d["nodes"]["h0"]["ports"][0].update(peer="p9t0r0"),
     r"nodes.h0.ports\[0\].peer: 'p9t0r0' is not a node"),
    (lambda d: d["nodes"]["p0t0r0"].pop("plane"), "nodes.p0t0r0.plane: must be int"),
])
def test_a_broken_file_is_one_line_naming_the_field(fabric, tmp_path, change, field):
    doc = resolved_topology(fabric)
    change(doc)
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ResolvedTopologyError, match=f"^{path}: {field}"):
        read_resolved_topology(path)


def test_a_file_that_is_not_json(tmp_path):
    path = tmp_path / "topology.json"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ResolvedTopologyError, match="file: is not JSON text"):
        read_resolved_topology(path)
    with pytest.raises(ResolvedTopologyError, match="file: cannot be read"):
        read_resolved_topology(tmp_path / "missing.json")
