"""Check Lab 1's answers against the addressing plan (and, with --live, in Mininet)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from topologies.addressing import (  # noqa: E402
    AddressingError,
    describe_usid,
    host_address,
    parse_usids,
)
from topologies.model import load_topology  # noqa: E402
from topologies.paths import catalogue  # noqa: E402

ANSWER = Path(__file__).with_name("answer.txt")


def expected(fabric) -> list[tuple[str, str]]:
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


def live(address: str) -> None:
    from experiments.bringup import running
    from experiments.checks import check_paths
    from experiments.targets import KernelTarget

    fabric = load_topology("2tier-2plane")
    with running(fabric, KernelTarget()) as network:
        result = check_paths(network.net, fabric, copies=1, timeout_s=1.0)
        path = next(p for p in catalogue(fabric, 0, 3) if p.address == address)
        ok = all(p.ev != path.ev or (p.src, p.dst) != (0, 3) for p in result.failed)
        print(f"live: a datagram from h0 to {address} {'arrived at h3' if ok else 'was lost'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--live", action="store_true", help="send a real packet (root)")
    args = parser.parse_args()
    if not ANSWER.exists():
        print(f"write your three addresses into {ANSWER} first (see README.md)")
        return 2
    answers = [line.strip() for line in ANSWER.read_text().splitlines() if line.strip()]
    fabric = load_topology("2tier-2plane")
    right = 0
    for i, (what, want) in enumerate(expected(fabric)):
        got = answers[i] if i < len(answers) else ""
        try:
            same = parse_usids(got) == parse_usids(want)
        except (AddressingError, ValueError):
            same = False
        right += same
        print(f"{'ok  ' if same else 'WRONG'} {what}: {got or '(missing)'}")
        if got and not same:
            print(f"      yours reads: {explain(got)}")
    print(f"{right}/3 right")
    if args.live and right:
        live(expected(fabric)[0][1])
    return 0 if right == 3 else 1


if __name__ == "__main__":
    sys.exit(main())
