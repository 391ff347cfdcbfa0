"""Topology files: the shipped ones load, any valid file works, bad files give one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from topologies.model import TopologyError, available_topologies, load_topology, parse_spec

REPO = Path(__file__).resolve().parents[2]
BAD = sorted((Path(__file__).parent / "bad_topologies").glob("*.yaml"))

VALID = {
    "planes": 3, "racks": 3, "hosts_per_rack": 3, "t1_per_plane": 3,
    "links": {"host_t0": {"rate_mbit": 10, "delay_ms": 0.5, "queue_pkts": 64},
              "t0_t1": {"rate_mbit": 10, "delay_ms": 0.5, "queue_pkts": 64}},
    "ecn_threshold_pkts": 16,
}


def test_shipped_topologies_load():
    assert {"2tier-8plane", "2tier-2plane", "2tier-1plane"} <= set(available_topologies())
    big = load_topology("2tier-8plane")
    assert (len(big.hosts), len(big.switches), len(big.links)) == (8, 48, 128)
    assert big.spec.planes == 8 and big.spec.racks >= 2 and big.spec.t1_per_plane >= 2
    assert load_topology("2tier-1plane").spec.planes == 1


def test_any_valid_file_works(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump(VALID))
    fabric = load_topology(str(path))
    # 3 planes x (3 T0 + 3 T1); 9 hosts x 3 planes + 3 planes x 3 T0 x 3 T1 links
    assert len(fabric.switches) == 18
    assert len(fabric.links) == 27 + 27
    assert fabric.name == "three"
    # The file sets Kmin 16 alone: Kmax stays at it (a step), trimming starts a frame
    # above, since the BDP's rule (topologies/scale.py) asks for less.
    spec = fabric.spec
    assert (spec.ecn_threshold_pkts, spec.ecn_kmax, spec.trim_threshold_pkts,
            spec.trim_lasthop) == (16, 16, 17, 17)
    assert spec.explicit == {"ecn_threshold_pkts"}


def test_ports_are_numbered_by_rule():
    fabric = load_topology("2tier-2plane")
    assert [p.peer for p in fabric.ports("h2")] == ["p0t0r1", "p1t0r1"]
    assert [p.peer for p in fabric.ports("p1t0r0")] == ["h0", "h1", "p1t1s0", "p1t1s1"]
    assert [p.peer for p in fabric.ports("p0t1s1")] == ["p0t0r0", "p0t0r1"]
    assert fabric.ports("p1t0r0")[2].intf == "p1t0r0-eth2"


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_file_gives_one_line_error(path):
    with pytest.raises(TopologyError) as err:
        load_topology(str(path))
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(str(path) + ": ")
    assert "; fix: " in text


def test_ten_bad_files_exit_2_with_one_line(tmp_path):
    assert len(BAD) >= 10
    for path in BAD:
        cmd = [sys.executable, "-m", "experiments", "validate", "--topo", str(path)]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        assert proc.returncode == 2, path
        assert proc.stdout == ""
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (path, proc.stderr)


def test_unknown_topology_name_lists_known_ones():
    with pytest.raises(TopologyError, match="2tier-2plane"):
        load_topology("no-such-topology")


@pytest.mark.parametrize("field,value,match", [
    ("planes", 0, "planes: 0 is out of range"),
    ("t1_per_plane", True, "t1_per_plane: must be an integer"),
    ("name", "bad name!", "name: must be letters"),
    ("racks", 150, "too large to emulate"),
])
def test_field_errors_name_the_field(field, value, match):
    data = dict(VALID, **{field: value})
    if field == "racks":
        data.update(planes=16, hosts_per_rack=100)
    with pytest.raises(TopologyError, match=match):
        parse_spec(data, "x.yaml")
