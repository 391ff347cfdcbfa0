"""Check Lab 02: the uSID shift and the forwarding steps of the ingress control.

Graded by behaviour (labs/p4lab.py check_lab): the lab's program (p4src/
with the student's pieces) compiles with p4c-bm2-ss, and the project's PTF tests of
shift-and-forward, last hop, drops and hop limit pass on it on BMv2
(tests/p4/test_labs_p4.py); without BMv2 the lab is "not verified". The rules below are
hints only: they say what a usual answer looks like when the text differs from it.
"""

from __future__ import annotations

from pathlib import Path

from labs.course import check_questions
from labs.p4lab import Rule, add_arguments, check_lab, reading_copy

__all__ = ["add_arguments", "check", "on_start"]

ACTIVE = r"hdr\.ipv6\.dst_active=hdr\.ipv6\.dst_rest\[79:64\];"
REST = (r"hdr\.ipv6\.dst_rest=(hdr\.ipv6\.dst_rest<<16|hdr\.ipv6\.dst_rest\[63:0\]\+\+"
        r"[^;]+|\(hdr\.ipv6\.dst_rest<<16\));")
# A miss drops: `if (!t.apply().hit) {...}`, `if (t.apply().miss) {...}`, or
# `if (t.apply().hit) {} else {...}`.
MISS = (r"((if\(!{t}\.apply\(\)\.hit\)|if\({t}\.apply\(\)\.miss\))"
        r"|if\({t}\.apply\(\)\.hit\)\{{\}}else)\{{drop_unroutable\(\);return;\}}")

RULES = (
    Rule("usid_shift.p4", "the next uSID becomes active, then the rest moves up 16 bits",
         (r"actionusid_shift\(\)\{", ACTIVE, REST), ordered=True,
         hint="dst_active takes dst_rest's top 16 bits [79:64] first; then dst_rest "
              "shifts left by 16 (the other order would copy the wrong uSID)"),
    Rule("usid_shift.p4", "the action still counts its packets",
         (r"my_usid_counter\.count\(\);",), hint="keep my_usid_counter.count();"),
    Rule("forward.p4", "my_usid is applied, and a miss drops",
         (MISS.format(t="my_usid"),),
         hint="apply my_usid; when it does not hit, drop_unroutable() and return"),
    Rule("forward.p4", "next_hop is applied after my_usid and the hop limit, and a miss drops",
         (MISS.format(t="my_usid"), r"hop_limit-1;", MISS.format(t="next_hop")), ordered=True,
         hint="after the hop-limit step, apply next_hop; when it does not hit, "
              "drop_unroutable() and return"),
)


def check(folder: Path, options=None):
    from controller.tables import switch_tables
    from topologies.model import load_topology

    report = check_lab("02", "Lab 02: P4 uSID shift-and-forward", folder, RULES, options,
                       "lab02")
    fabric = load_topology("2tier-8plane")
    t1 = next(s for s in fabric.switches if s.role == "t1")
    check_questions(report, folder, {
        "next_hop_entries_t1_2tier_8plane": len(switch_tables(fabric, t1).routes)})
    return report


def on_start(work: Path) -> None:
    """The program to read beside the work copy, without the lab's answers."""
    reading_copy("02", work / "reading")
