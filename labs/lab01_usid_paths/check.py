"""Check Lab 01's answers against the addressing plan (and, with --live, in Mininet).

Each line of answer.txt is compared uSID by uSID with the address the project's path
catalogue gives (topologies/paths.py); a wrong line is read back uSID by uSID, so the
student sees which switch each one names. The README's numeric questions
(questions.yaml) are counted in the same catalogue.
"""

from __future__ import annotations

from pathlib import Path

from labs.course import Report, check_questions
from topologies.addressing import AddressingError, describe_usid, host_address, parse_usids
from topologies.model import Fabric, load_topology
from topologies.paths import catalogue

ANSWER = "answer.txt"


def add_arguments(parser) -> None:
    parser.add_argument("--live", action="store_true",
                        help="also send a datagram along your first path in Mininet (root)")


def expected(fabric: Fabric) -> list[tuple[str, str]]:
    cross = next(p for p in catalogue(fabric, 0, 3) if p.plane == 1 and p.spine == 0)
    direct = next(p for p in catalogue(fabric, 1, 0) if p.plane == 0 and p.spine is None)
    return [("h0 -> h3, plane 1, spine 0", cross.address),
            ("h1 -> h0, plane 0, direct", direct.address),
            ("what h3 receives", host_address(3))]


def explain(address: str) -> str:
    try:
        return " : ".join(describe_usid(u) for u in parse_usids(address))
    except (AddressingError, ValueError) as err:
        return f"not a uSID address ({err})"


def check(folder: Path, options=None) -> Report:
    report = Report(f"Lab 01: micro-SID paths ({folder})")
    path = folder / ANSWER
    lines = path.read_text().splitlines() if path.is_file() else []
    answers = [line.strip() for line in lines if line.strip()]
    fabric = load_topology("2tier-2plane")
    for i, (what, want) in enumerate(expected(fabric)):
        got = answers[i] if i < len(answers) else ""
        try:
            same = parse_usids(got) == parse_usids(want)
        except (AddressingError, ValueError):
            same = False
        report.add(same, f"{what}: {got or '(missing)'}",
                   f"yours reads: {explain(got)}" if got else f"line {i + 1} of {path}")
    check_questions(report, folder, {"paths_h0_h3": len(catalogue(fabric, 0, 3)),
                                     "paths_h0_h1": len(catalogue(fabric, 0, 1))})
    if getattr(options, "live", False) and report.items[0][0]:
        report.note(live(fabric, expected(fabric)[0][1]))
    return report


def live(fabric: Fabric, address: str) -> str:
    """Send a datagram along `address` on the kernel data plane; what became of it. The
    machine's fabric lock is taken first (experiments/run/fabric_lock.py): the start-up
    cleanup would otherwise tear down a `make cli` or a run that is up."""
    from experiments.dataplanes.targets import make_target
    from experiments.run.checks import check_paths
    from experiments.run.fabric import RunningFabric
    from experiments.run.fabric_lock import FabricLock

    with FabricLock(command="make lab-check LAB=01 --live") as lock, RunningFabric(
            fabric, make_target("kernel"), lock) as network:
        result = check_paths(network.net, fabric, copies=1, timeout_s=1.0)
    path = next(p for p in catalogue(fabric, 0, 3) if p.address == address)
    ok = all(p.ev != path.ev or (p.src, p.dst) != (0, 3) for p in result.failed)
    return f"live: a datagram from h0 to {address} {'arrived at h3' if ok else 'was lost'}"
