"""Check Lab 04: the student's topology file and next-uSID tables, with the project's code.

1. `3rack-2plane.yaml` loads with the project's topology model (its one-line errors
   are shown as they are) and has the shape the README asks for.
2. `routes()` gives, for every switch of that topology and of 2tier-8plane, exactly
   the routes of the controller's static tables (controller/tables.py), worked out from
   the port plan: routes.py may import only the addressing rule and the model's types
   (`own_work`), and `routes()` is handed a fabric that shows only its `spec`
   (`PlanOnly`), so a table read from the controller or from the fabric's ports is
   refused.
3. Every path of the catalogue (topologies/paths.py) between every two hosts of the
   student's topology, walked switch by switch through the student's tables with
   uSID shift-and-forward, ends at its destination host.
"""

from __future__ import annotations

import ast
from pathlib import Path

from controller.tables import all_tables
from labs.course import Report, check_questions, first_line, load_module
from topologies.errors import UserError
from topologies.model import Fabric, load_topology
from topologies.paths import all_paths, catalogue

TOPOLOGY = "3rack-2plane.yaml"
SHAPE = {"name": "3rack-2plane", "planes": 2, "racks": 3, "hosts_per_rack": 2,
         "t1_per_plane": 2}
# What routes.py may import: the addressing rule, the model's types, and the standard
# library's plain helpers. The controller, the path catalogue and the rest of the
# project hold the answer.
ALLOWED_IMPORTS = ("__future__", "typing", "dataclasses", "collections", "itertools",
                   "math", "topologies.addressing", "topologies.model")


class PlanOnly:
    """The fabric as routes() may see it: its spec (and name), not its ports or links."""

    def __init__(self, fabric: Fabric):
        self.spec, self.name = fabric.spec, fabric.name

    def __getattr__(self, name: str):
        raise AttributeError(f"routes() may read only fabric.spec, not fabric.{name}: "
                             "work the table out from the port plan")


def own_work(path: Path) -> str | None:
    """Why routes.py does not compute its table itself (an import it may not use), or
    None."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return None  # importing it reports the problem
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        called = getattr(node, "func", None)
        if getattr(called, "id", getattr(called, "attr", "")) in ("__import__",
                                                                   "import_module"):
            names = ["a module imported at run time"]
        for name in names:
            if not any(name == ok or name.startswith(ok + ".") for ok in ALLOWED_IMPORTS):
                return (f"routes.py imports {name}: the table must come from the port "
                        "plan (topologies.addressing gives the uSIDs), not from the "
                        "project's own tables or paths")
    return None


def check(folder: Path, options=None) -> Report:
    report = Report(f"Lab 04: static tables for a new topology ({folder})")
    fabric = _topology(folder / TOPOLOGY, report)
    borrowed = own_work(folder / "routes.py")
    if not report.add(borrowed is None, "routes.py works the table out itself", borrowed or ""):
        return report
    try:
        routes = load_module(folder / "routes.py", "lab04_routes").routes
    except Exception as err:  # noqa: BLE001 - a student's file may raise anything
        report.add(False, "routes.py imports", first_line(err))
        return report
    fabrics = [f for f in (fabric, load_topology("2tier-8plane")) if f is not None]
    tables: dict[str, dict[str, dict[int, int]]] = {}
    for each in fabrics:
        try:
            tables[each.name] = compare(each, routes, report)
        except Exception as err:  # noqa: BLE001
            report.add(False, f"routes() on {each.name}", first_line(err))
    if fabric is not None and fabric.name in tables:
        walked = walk_all(fabric, tables[fabric.name])
        report.add(walked is None, f"every path of {fabric.name} reaches its host through "
                   "your tables", walked or "")
    # The questions are about the lab's network (the solution's file: one source).
    lab = load_topology(str(Path(__file__).parent / "solution" / TOPOLOGY))
    tables = all_tables(lab)
    t0, t1 = (next(s.name for s in lab.switches if s.role == r) for r in ("t0", "t1"))
    check_questions(report, folder, {
        "entries_t0": tables[t0].entry_count, "entries_t1": tables[t1].entry_count,
        "paths_h0_h5": len(catalogue(lab, 0, 5)), "paths_h0_h1": len(catalogue(lab, 0, 1))})
    return report


def _topology(path: Path, report: Report) -> Fabric | None:
    try:
        fabric = load_topology(str(path))
    except UserError as err:
        report.add(False, f"{TOPOLOGY} loads", str(err))
        return None
    spec = fabric.spec
    wrong = [f"{key}: {getattr(spec, key)}, expected {want}" for key, want in SHAPE.items()
             if getattr(spec, key) != want]
    report.add(not wrong, f"{TOPOLOGY} loads and has 3 racks of 2 hosts, 2 planes, 2 T1 "
               "per plane", "; ".join(wrong))
    return fabric if not wrong else None


def compare(fabric: Fabric, routes, report: Report) -> dict[str, dict[int, int]]:
    """The student's table of every switch, after one report line comparing them all
    with the controller's."""
    want = {name: {r.usid: r.port for r in t.routes} for name, t in all_tables(fabric).items()}
    plan = PlanOnly(fabric)
    got = {s.name: dict(routes(plan, s)) for s in fabric.switches}
    wrong = []
    for name, table in want.items():
        if got[name] != table:
            missing = {f"{u:#06x}": p for u, p in table.items() if got[name].get(u) != p}
            extra = {f"{u:#06x}": p for u, p in got[name].items() if u not in table}
            wrong.append(f"{name}: expected (uSID: port) {missing or '-'}, "
                         f"not expected {extra or '-'}")
    report.add(not wrong, f"routes() equals the controller's tables on all "
               f"{len(want)} switches of {fabric.name}",
               "\n".join(wrong[:4] + (["..."] if len(wrong) > 4 else [])))
    return got


def walk_all(fabric: Fabric, tables: dict[str, dict[int, int]]) -> str | None:
    """Forward every catalogued path through `tables`; the first one that goes astray."""
    for path in all_paths(fabric):
        node = fabric.t0(path.plane, fabric.host(path.src).rack).name
        for active, behind in zip(path.usids, path.usids[1:]):
            if fabric.node(node).usid != active:
                return f"{path.label}: at {node}, the active uSID {active:#06x} is not its own"
            port = tables[node].get(behind)
            if port is None:
                return f"{path.label}: {node} has no route for {behind:#06x}"
            node = next(p.peer for p in fabric.ports(node) if p.number == port)
        if node != fabric.host(path.dst).name:
            return f"{path.label}: ended at {node}"
    return None
