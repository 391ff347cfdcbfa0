"""One import direction: no project module imports a module of a higher layer.

Every module's imports are read with `ast` (nothing is imported or run) and checked
against the layer table below. Layers, from the bottom:

- `model`: facts and the topology model, and what follows from the model alone: the
  protocol constants and the header codec, the YAML model and its errors, addressing,
  paths, the resolved topology file, the static switch tables.
- `logic`: pure builders and the host agent: controller/ (table entries, `ip` commands,
  P4Runtime session and programming) and hosts/ (sender, receiver, agent process).
- `nodes`: the Mininet network and its node classes. They run what they are handed
  (commands, table contents, queue settings) and import only the model layer: the
  target that hands them their configuration sits above them.
- `top`: experiments/ (targets, bring-up, runner), bench/, labs/ and tests/.

`logic` and `nodes` stand side by side: neither may import the other. Mininet itself
may be imported only by `nodes` and `top`, so that the controller and the agents run
without it.

Every module needs a layer: an exact entry in LAYERS, or its package's entry in
PACKAGE_LAYERS. topologies/ has no package entry, since it holds both the model and the
Mininet network: a new module there must be given its layer here.

No two modules import each other, directly or around a loop of several, within a
layer too (`import_loops`): an import inside a function or under `if TYPE_CHECKING:`
makes a loop as much as one at the top, since it couples the two modules all the same.
A module that needs something of its caller takes it as an argument.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

LAYERS = {
    "hosts.protocol": "model",
    "hosts.wire": "model",
    "topologies": "model",
    "topologies.errors": "model",
    "topologies.model": "model",
    "topologies.addressing": "model",
    "topologies.paths": "model",
    "topologies.resolved": "model",
    "topologies.size": "model",
    "topologies.scale": "model",
    "topologies.netns": "model",  # a system call that agents and nodes both make
    "controller.tables": "model",
    "topologies.network": "nodes",
    "topologies.nodes": "nodes",
    "topologies.bmv2": "nodes",
    "topologies.linkstate": "nodes",
    "topologies.offloads": "nodes",
    "topologies.shaping": "nodes",
    "topologies.ebpf_program": "nodes",
    "topologies.nsserver": "nodes",  # the machines nodes run on, stood in for by namespaces
    "topologies.remote": "nodes",
    "topologies.links": "nodes",
    "topologies.placement": "nodes",  # which server holds which node, read from a file
    "topologies.tunnels": "nodes",
}
PACKAGE_LAYERS = {
    "controller": "logic",
    "hosts": "logic",
    "experiments": "top",
    "bench": "top",
    "labs": "top",
    "tests": "top",
}
MAY_IMPORT = {
    "model": {"model"},
    "logic": {"model", "logic"},
    "nodes": {"model", "nodes"},
    "top": {"model", "logic", "nodes", "top"},
}
MININET_LAYERS = {"nodes", "top"}
PACKAGES = tuple(PACKAGE_LAYERS) + ("topologies",)


class LayerError(Exception):
    """A module has no entry in the layer table."""


def layer_of(module: str) -> str:
    if module in LAYERS:
        return LAYERS[module]
    package = module.split(".")[0]
    if package in PACKAGE_LAYERS:
        return PACKAGE_LAYERS[package]
    raise LayerError(f"{module} has no layer: add it to LAYERS in {Path(__file__).name}")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_sources(root: Path) -> dict[str, str]:
    """Module name -> source text of every Python file of the project's packages."""
    sources = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            sources[module_name(path, root)] = path.read_text(encoding="utf-8")
    return sources


def imports(module: str, source: str, known: set[str]) -> list[tuple[int, str]]:
    """(line, imported module) for every import in `source`, also those inside
    functions and `if TYPE_CHECKING:` blocks: each one couples the two modules."""
    is_package = any(other.startswith(module + ".") for other in known)
    found = []
    for node in ast.walk(ast.parse(source, filename=module)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                # A package's own name is its anchor; a module's is its package.
                anchor = anchor[:len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                # `from hosts import wire` imports the module hosts.wire.
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if sub in known else base))
    return found


def violations(sources: dict[str, str]) -> list[str]:
    """Every import that goes up or sideways between layers, one line each."""
    known = set(sources)
    problems = []
    for module, source in sorted(sources.items()):
        layer = layer_of(module)
        for line, target in imports(module, source, known):
            top = target.split(".")[0]
            if top == "mininet" and layer not in MININET_LAYERS:
                problems.append(f"{module}:{line} imports {target}: the {layer} layer must "
                                "run without Mininet")
            elif top in PACKAGES:
                other = layer_of(target)
                if other not in MAY_IMPORT[layer]:
                    problems.append(f"{module}:{line} imports {target}: the {layer} layer "
                                    f"may not import the {other} layer")
    return problems


def test_no_module_imports_a_higher_layer():
    sources = project_sources(REPO)
    assert "topologies.network" in sources and "controller.kernel" in sources
    assert violations(sources) == []


def test_every_layer_is_populated():
    """A table whose entries name no real module would check nothing."""
    layers = {layer_of(module) for module in project_sources(REPO)}
    assert layers == set(MAY_IMPORT)


# What follows proves the check can fail, on module sources made up for the purpose.

MODEL = "from __future__ import annotations\nfrom dataclasses import dataclass\n"


@pytest.mark.parametrize("module, source, expected", [
    ("topologies.model", "from topologies.network import FabricTopo\n",
     "topologies.model:1 imports topologies.network: the model layer may not import the "
     "nodes layer"),
    ("topologies.nodes", "import os\n\nfrom controller.kernel import switch_commands\n",
     "topologies.nodes:3 imports controller.kernel: the nodes layer may not import the "
     "logic layer"),
    ("controller.kernel", "def f():\n    from topologies import nodes\n",
     "controller.kernel:2 imports topologies.nodes: the logic layer may not import the "
     "nodes layer"),
    ("hosts.sender", "import experiments.run.runner\n",
     "hosts.sender:1 imports experiments.run.runner: the logic layer may not import the top layer"),
    ("controller.tables", "from . import kernel\n",
     "controller.tables:1 imports controller.kernel: the model layer may not import the "
     "logic layer"),
    ("hosts.agent", "from mininet.net import Mininet\n",
     "hosts.agent:1 imports mininet.net: the logic layer must run without Mininet"),
])
def test_an_upward_import_is_named(module, source, expected):
    sources = {"topologies.model": MODEL, "topologies.network": MODEL,
               "topologies.nodes": MODEL, "controller.kernel": MODEL,
               "controller.tables": MODEL, "hosts.sender": MODEL, "hosts.agent": MODEL,
               "experiments.run.runner": MODEL}
    sources[module] = source
    assert violations(sources) == [expected]


def test_downward_and_same_layer_imports_pass():
    sources = {
        "topologies.model": "from topologies import addressing\n",
        "topologies.addressing": MODEL,
        "controller.kernel": "from controller.tables import SwitchTables\n",
        "controller.tables": "from topologies.model import Fabric\n",
        "topologies.network": "from mininet.net import Mininet\nfrom topologies.nodes import X\n",
        "topologies.nodes": "from topologies.addressing import intf_name\n",
        "experiments.dataplanes.targets":
            "from controller.kernel import x\nfrom topologies.nodes import y\n",
    }
    assert violations(sources) == []


def test_an_upward_import_in_a_file_on_disk_is_found(tmp_path):
    """The same check as on the repository, on a tree with one bad file written to it."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "topologies" / "model.py").write_text(MODEL)
    (tmp_path / "topologies" / "linkstate.py").write_text("import socket\n")
    (tmp_path / "controller" / "p4info.py").write_text(
        '"""Doc."""\n\nfrom topologies.linkstate import LinkState\n')
    assert violations(project_sources(tmp_path)) == [
        "controller.p4info:3 imports topologies.linkstate: the logic layer may not import "
        "the nodes layer"]


def test_a_module_without_a_layer_is_named():
    with pytest.raises(LayerError, match="topologies.fresh has no layer: add it to LAYERS"):
        violations({"topologies.fresh": MODEL})


# Within experiments/, the subpackages by job have a direction of their own: what a
# run's records say (analysis/) needs nothing of how a run is made; the scenario model,
# the fault kinds and the data-plane adapters (one tier, whose parts may import each
# other: a fault applies itself on a target, a fault's fields name roles) need no
# runner; the lifecycle and the runner (run/) serve the entry points above them, which
# do not import each other.
EXPERIMENT_TIERS = {
    "analysis": 0,
    "scenarios": 1, "faults": 1, "dataplanes": 1,
    "run": 2,
    "interactive": 3, "paper": 3,
}


def experiment_tier(module: str) -> tuple[str, int] | None:
    parts = module.split(".")
    if parts[0] != "experiments" or len(parts) < 3 and parts[-1] != "__main__":
        return None
    if parts[1] == "__main__":
        return "__main__", 3
    if parts[1] not in EXPERIMENT_TIERS:
        raise LayerError(f"{module}: experiments/{parts[1]}/ has no tier: add it to "
                         f"EXPERIMENT_TIERS in {Path(__file__).name}")
    return parts[1], EXPERIMENT_TIERS[parts[1]]


def tier_violations(sources: dict[str, str]) -> list[str]:
    known = set(sources)
    problems = []
    for module, source in sorted(sources.items()):
        mine = experiment_tier(module)
        if mine is None:
            continue
        for line, target in imports(module, source, known):
            theirs = experiment_tier(target)
            if theirs is None or theirs[0] == mine[0]:
                continue
            # One tier imports the tiers below it; tier 1's parts also each other.
            if theirs[1] > mine[1] or theirs[1] == mine[1] != 1:
                problems.append(f"{module}:{line} imports {target}: experiments/{mine[0]}/ "
                                f"may not import experiments/{theirs[0]}/")
    return problems


def test_every_experiments_module_sits_in_a_subpackage_by_job():
    loose = [path.name for path in (REPO / "experiments").glob("*.py")
             if path.name not in ("__init__.py", "__main__.py")]
    assert loose == [], f"put these in a subpackage of experiments/ by their job: {loose}"


def test_experiments_subpackages_import_downwards_only():
    sources = project_sources(REPO)
    assert "experiments.run.lifecycle" in sources and "experiments.analysis.metrics" in sources
    assert tier_violations(sources) == []


@pytest.mark.parametrize("module, source, expected", [
    ("experiments.analysis.metrics", "from experiments.run import runner\n",
     "experiments.analysis.metrics:1 imports experiments.run.runner: experiments/analysis/ "
     "may not import experiments/run/"),
    ("experiments.paper.replay", "from experiments.interactive.cli import main\n",
     "experiments.paper.replay:1 imports experiments.interactive.cli: experiments/paper/ "
     "may not import experiments/interactive/"),
])
def test_a_sideways_or_upward_subpackage_import_is_named(module, source, expected):
    sources = {module: source, "experiments.run.runner": MODEL,
               "experiments.interactive.cli": MODEL}
    assert tier_violations(sources) == [expected]


# ------------------------------------------------------------------ import loops
def import_graph(sources: dict[str, str]) -> dict[str, dict[str, int]]:
    """Module -> the project modules it imports, each with the line of its first
    import (those inside functions and under TYPE_CHECKING too)."""
    known = set(sources)
    graph: dict[str, dict[str, int]] = {}
    for module, source in sources.items():
        edges = graph.setdefault(module, {})
        for line, target in imports(module, source, known):
            if target in known and target != module:
                edges.setdefault(target, line)
    return graph


def loop_groups(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The groups of modules that reach each other through their imports (Tarjan's
    strongly connected components, without recursion), each sorted; groups of one
    module are no loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def one_loop(graph: dict[str, dict[str, int]], group: list[str]) -> list[str]:
    """A shortest way round the loop from the group's first module back to it."""
    start = group[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph[module]):
                if target not in group or target in came_from:
                    continue
                came_from[target] = module
                if target == start:
                    path = [start]
                    while path[-1] != start or len(path) == 1:
                        path.append(came_from[path[-1]])
                    return path[::-1]
                following.append(target)
        frontier = following
    raise AssertionError(f"no loop through {start} in {group}")


def import_loops(sources: dict[str, str]) -> list[str]:
    """Every import loop, one line each: the way round it, import by import."""
    graph = import_graph(sources)
    problems = []
    for group in loop_groups(graph):
        path = one_loop(graph, group)
        steps = ", ".join(f"{a}:{graph[a][b]} imports {b}" for a, b in zip(path, path[1:]))
        others = [m for m in group if m not in path]
        problems.append(f"import loop: {steps}" + (
            f" (the loop also takes in {', '.join(others)})" if others else ""))
    return problems


def test_no_module_imports_itself_round_a_loop():
    sources = project_sources(REPO)
    assert "experiments.interactive.cli" in sources and "experiments.faults.base" in sources
    assert import_loops(sources) == []


@pytest.mark.parametrize("sources, expected", [
    ({"experiments.interactive.cli": "from experiments.interactive import cli_ev\n",
      "experiments.interactive.cli_ev":
          "def f():\n    from experiments.interactive.cli import g\n"},
     "import loop: experiments.interactive.cli:1 imports experiments.interactive.cli_ev, "
     "experiments.interactive.cli_ev:2 imports experiments.interactive.cli"),
    ({"experiments.faults.base": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from experiments.faults.fields import Entry\n",
      "experiments.faults.fields": "from experiments.faults.base import FIX\n"},
     "import loop: experiments.faults.base:3 imports experiments.faults.fields, "
     "experiments.faults.fields:1 imports experiments.faults.base"),
    ({"hosts.a": "from hosts import b\n", "hosts.b": "import hosts.c\n",
      "hosts.c": "from . import a\n"},
     "import loop: hosts.a:1 imports hosts.b, hosts.b:1 imports hosts.c, "
     "hosts.c:1 imports hosts.a"),
])
def test_an_import_loop_is_named_even_inside_a_function(sources, expected):
    assert import_loops(sources) == [expected]


def test_imports_one_way_make_no_loop():
    sources = {"hosts.a": "from hosts import b\nfrom hosts import c\n",
               "hosts.b": "import hosts.c\n", "hosts.c": MODEL,
               "hosts": "from hosts.a import x\n"}
    assert import_loops(sources) == []
