"""Sizing calculator: full-scale multi-plane networks on paper, without emulating them.

A switch ASIC with `radix` ports of S Gb/s can equally be used as radix/planes ports of
planes x S Gb/s. Multi-plane MRC splits every host NIC into `planes` ports and builds
one two-tier Clos per plane from the high-radix form; the conventional design builds one
network from the low-radix, fast form and needs more tiers for the same host count.

    python3 -m topologies.size --radix 512 --planes 8

Folded-Clos (fat-tree) rules used: with radix k, a tier-L network reaches
2 (k/2)^L hosts; tiers 1..L-1 each hold N/(k/2) switches and the top tier N/k.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Sizing:
    label: str
    radix: int
    port_gbps: float
    tiers: int
    hosts: int
    switches_per_tier: tuple[int, ...]
    links_per_tier: tuple[int, ...]  # host links first, then between tiers

    @property
    def switches(self) -> int:
        return sum(self.switches_per_tier)

    @property
    def links(self) -> int:
        return sum(self.links_per_tier)


def max_hosts(radix: int, tiers: int) -> int:
    return 2 * (radix // 2) ** tiers


def tiers_needed(radix: int, hosts: int) -> int:
    tiers = 1
    while max_hosts(radix, tiers) < hosts:
        tiers += 1
    return tiers


def clos(radix: int, hosts: int, tiers: int, planes: int = 1) -> tuple[tuple[int, ...], ...]:
    """Switches per tier and links per tier for `planes` copies of a Clos of `hosts`."""
    half = radix // 2
    # Lower tiers use half their ports down, half up; the top tier uses all ports down.
    per_tier = [-(-hosts // half)] * (tiers - 1) + [-(-hosts // radix)]
    links = [hosts] + [per_tier[i] * half for i in range(tiers - 1)]
    return tuple(n * planes for n in per_tier), tuple(n * planes for n in links)


def multiplane(radix: int, planes: int, port_gbps: float) -> Sizing:
    hosts = max_hosts(radix, 2)
    switches, links = clos(radix, hosts, 2, planes)
    return Sizing(f"{planes}-plane, 2 tiers", radix, port_gbps, 2, hosts, switches, links)


def single_plane(radix: int, planes: int, port_gbps: float, hosts: int) -> Sizing:
    fast_radix = radix // planes
    tiers = tiers_needed(fast_radix, hosts)
    switches, links = clos(fast_radix, hosts, tiers)
    return Sizing("single plane", fast_radix, port_gbps * planes, tiers, hosts, switches, links)


def report(radix: int, planes: int, port_gbps: float) -> str:
    multi = multiplane(radix, planes, port_gbps)
    single = single_plane(radix, planes, port_gbps, multi.hosts)
    lines = [
        f"switch ASIC: {radix} x {port_gbps:g}G = {radix // planes} x {port_gbps * planes:g}G "
        f"({radix * port_gbps / 1000:g} Tb/s)",
        f"host NIC: {port_gbps * planes:g}G, split into {planes} x {port_gbps:g}G ports "
        f"(one per plane)",
        "",
    ]
    for s in (multi, single):
        tier_names = ["T0", "T1", "T2", "T3", "T4", "T5"][: s.tiers]
        per_tier = ", ".join(f"{t} {n:,}" for t, n in zip(tier_names, s.switches_per_tier))
        link_names = ["host-T0"] + [f"{a}-{b}" for a, b in zip(tier_names, tier_names[1:])]
        links = ", ".join(f"{t} {n:,}" for t, n in zip(link_names, s.links_per_tier))
        lines += [
            f"{s.label}: {s.radix} x {s.port_gbps:g}G switches, {s.tiers} tiers",
            f"  hosts     {s.hosts:,}",
            f"  switches  {s.switches:,} ({per_tier})",
            f"  links     {s.links:,} ({links}; {s.port_gbps:g}G each)",
        ]
    lines.append(
        f"the single-plane network needs {single.tiers} tiers and "
        f"{single.switches / multi.switches:.2f}x the switches for the same {multi.hosts:,} hosts"
        f" (a 2-tier single plane reaches only {max_hosts(radix // planes, 2):,})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m topologies.size",
                                     description="Size full-scale multi-plane networks.")
    parser.add_argument("--radix", type=int, default=512, help="ports per switch in the split form")
    parser.add_argument("--planes", type=int, default=8)
    parser.add_argument("--port-gbps", type=float, default=100)
    args = parser.parse_args(argv)
    if args.radix < 4 or args.radix % 2 or args.planes < 1 or args.radix % args.planes \
            or (args.radix // args.planes) % 2:
        print("error: --radix must be even and divisible by --planes into an even number "
              "of fast ports (e.g. --radix 512 --planes 8)", file=sys.stderr)
        return 2
    print(report(args.radix, args.planes, args.port_gbps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
