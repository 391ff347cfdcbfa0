"""Check Lab 03: trimming and ECN marking in the egress control.

Graded by behaviour (labs/p4lab.py check_lab): the lab's program compiles
with p4c-bm2-ss, and the project's PTF tests of ECN and trimming pass on it on BMv2
(tests/p4/test_labs_p4.py): a busy uplink marks, the last hop and Not-ECT packets are
never marked, a saturated queue trims with exact expected bytes, a trim facing a host
writes TRIMMED_LASTHOP... Without BMv2 the lab is "not verified". The rules below are
hints only: a trimmed packet cut to the port's trim size, its DSCP rewritten, its
lengths fixed and counted; ECN on ECN-capable, untrimmed packets of the lossless class
everywhere or of a data class off host-facing ports, with RED's decision.
"""

from __future__ import annotations

from pathlib import Path

from labs.p4lab import Rule, add_arguments, check_lab, reading_copy

__all__ = ["add_arguments", "check", "on_start"]

# The egress port as a counter index: the apply block's `port`, or the cast it holds.
PORT = r"(port|\(bit<32>\)standard_metadata\.egress_port)"
# The bytes behind the IPv6 header of a trimmed frame, either way round.
L4_BYTES = (r"\(bit<16>\)\(meta\.trim_size-(ETHERNET_HEADER_BYTES-IPV6_HEADER_BYTES"
            r"|IPV6_HEADER_BYTES-ETHERNET_HEADER_BYTES)\)")


def either(a: str, b: str, op: str) -> str:
    """`a op b` or `b op a`."""
    return rf"({a}{op}{b}|{b}{op}{a})"


RULES = (
    Rule("trim.p4", "only packets ingress chose are cut, to the port's trim size",
         (r"if\(meta\.trim==1\)\{", r"truncate\(meta\.trim_size\);"), ordered=True,
         hint="inside the if on meta.trim, truncate(meta.trim_size): the size is the "
              "port's setting, not a constant"),
    Rule("trim.p4", "the DSCP becomes the port's trimmed class",
         (r"hdr\.ipv6\.dscp=meta\.dscp_trimmed;",),
         hint="hdr.ipv6.dscp = meta.dscp_trimmed; (TRIMMED, or TRIMMED_LASTHOP facing a "
              "host: the controller chose it for the port)"),
    Rule("trim.p4", "IPv6 payload length and UDP length of what is left",
         (rf"hdr\.ipv6\.payload_len={L4_BYTES};",
          rf"hdr\.udp\.len=(hdr\.ipv6\.payload_len|{L4_BYTES});"),
         hint="both become meta.trim_size - ETHERNET_HEADER_BYTES - IPV6_HEADER_BYTES, "
              "cast to bit<16> (the UDP length may copy the IPv6 payload length)"),
    Rule("trim.p4", "counted in tx_trim_pkts", (rf"tx_trim_pkts\.count\({PORT}\);",),
         hint="tx_trim_pkts.count(port);"),
    Rule("ecn.p4", "marks CE, and counts it",
         (r"hdr\.ipv6\.ecn=ECN_CE;", rf"ecn_marked\.count\({PORT}\);"), ordered=True,
         hint="set hdr.ipv6.ecn to ECN_CE, then ecn_marked.count(port);"),
    Rule("ecn.p4", "RED: always at or over Kmax, between Kmin and Kmax when the draw is "
         "under p",
         (r"if\(" + either(r"depth>=meta\.ecn_kmax", r"(draw<p|p>draw)", r"\|\|")
          + r"\)\{hdr\.ipv6\.ecn=ECN_CE;",),
         hint="if (depth >= meta.ecn_kmax || draw < p) { mark }, inside the given "
              "arithmetic"),
    Rule("ecn.p4", "only ECN-capable packets that were not trimmed",
         (either(r"hdr\.ipv6\.ecn!=(ECN_NOT_ECT|0)", r"meta\.trim==0", "&&"),),
         hint="the condition needs hdr.ipv6.ecn != ECN_NOT_ECT && meta.trim == 0 (both)"),
    Rule("ecn.p4", "the lossless class at every hop, other data classes off host-facing "
         "ports, priority never",
         (r"meta\.behaviour==BEHAVIOUR_LOSSLESS\|\||\|\|meta\.behaviour==BEHAVIOUR_LOSSLESS",
          either(r"meta\.behaviour!=BEHAVIOUR_PRIORITY", r"meta\.host_facing(==0|!=1)",
                 "&&")),
         hint="(meta.behaviour == BEHAVIOUR_LOSSLESS || (meta.behaviour != "
              "BEHAVIOUR_PRIORITY && meta.host_facing == 0))"),
)


def check(folder: Path, options=None):
    return check_lab("03", "Lab 03: P4 trimming and ECN", folder, RULES, options, "lab03")


def on_start(work: Path) -> None:
    """The program to read beside the work copy, without the lab's answers."""
    reading_copy("03", work / "reading")
