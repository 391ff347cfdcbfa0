"""The benchmarks load and find what they measure, without root: `make bench` is not in
the suite (it needs the machine to itself), so a renamed class it imports would
otherwise show only when a user runs it."""

import importlib
import pkgutil

import bench
from bench.agent_throughput import failed_path
from topologies.model import load_topology
from topologies.paths import path_for_ev


def test_every_bench_module_imports():
    names = [m.name for m in pkgutil.iter_modules(bench.__path__)]
    assert "agent_throughput" in names
    for name in names:
        importlib.import_module(f"bench.{name}")


def test_recovery_breaks_the_baselines_hashed_path():
    fabric = load_topology("2tier-2plane")
    path, path_of = failed_path(fabric)
    assert path.src == 0 and path.dst == 3 and path.spine is not None
    assert path_of(path.ev) == (path.plane, path.spine)
    other = path_for_ev(fabric, 0, 3, path.ev ^ 1)
    assert path_of(other.ev) == (other.plane, other.spine)
