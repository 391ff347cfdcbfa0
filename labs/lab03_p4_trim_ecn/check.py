"""Check Lab 03: trimming and ECN marking in the egress control.

Static (always): no TODO left; the trimmed packet is cut to its headers, flagged
(TRIMMED, and TRIMMED_LASTHOP towards a host), its lengths fixed, its checksum zero, and
counted; CE is marked only on ECN-capable data-queue packets over the threshold, never
towards a host, and counted. With p4c-bm2-ss: the lab's program compiles. With BMv2 and
root: the project's PTF tests of ECN and trimming pass on it (tests/p4/test_labs_p4.py).
"""

from __future__ import annotations

from pathlib import Path

from labs.p4lab import Rule, add_arguments, check_lab

__all__ = ["add_arguments", "check"]

PORT = r"\(bit<32>\)standard_metadata\.egress_port"


def set_flag(flag: str) -> str:
    """flags = flags | FLAG, FLAG | flags, or flags |= FLAG."""
    return (rf"(hdr\.mrc\.flags=hdr\.mrc\.flags\|{flag}|hdr\.mrc\.flags={flag}\|hdr\.mrc\.flags"
            rf"|hdr\.mrc\.flags\|={flag});")


RULES = (
    Rule("trim.p4", "only packets ingress chose are cut, to the headers",
         (r"if\(meta\.trim==1\)\{", r"truncate\(TRIMMED_FRAME_BYTES\);"), ordered=True,
         hint="inside the if on meta.trim, truncate the frame to TRIMMED_FRAME_BYTES"),
    Rule("trim.p4", "flagged TRIMMED, and TRIMMED_LASTHOP towards a host",
         (set_flag("MRC_FLAG_TRIMMED"),
          r"if\(meta\.host_facing==1\)\{" + set_flag("MRC_FLAG_TRIMMED_LASTHOP") + r"\}"),
         hint="OR the TRIMMED flag into hdr.mrc.flags, and TRIMMED_LASTHOP too when "
              "meta.host_facing == 1 (keep the flags already set)"),
    Rule("trim.p4", "IPv6 payload length and UDP length of what is left, checksum zero",
         (r"hdr\.ipv6\.payload_len=TRIMMED_L4_BYTES;", r"hdr\.udp\.len=TRIMMED_L4_BYTES;",
          r"hdr\.udp\.checksum=0;"),
         hint="both lengths become TRIMMED_L4_BYTES (UDP 8 + MRC 32); checksum 0"),
    Rule("trim.p4", "counted in trimmed_packets", (rf"trimmed_packets\.count\({PORT}\);",),
         hint="count it in trimmed_packets at the egress port (cast to bit<32>)"),
    Rule("ecn.p4", "marks CE, and counts it",
         (r"hdr\.ipv6\.ecn=ECN_CE;", rf"ecn_marked_packets\.count\({PORT}\);"), ordered=True,
         hint="set hdr.ipv6.ecn to ECN_CE, then count it in ecn_marked_packets at the "
              "egress port"),
    Rule("ecn.p4", "only ECN-capable IPv6 data-queue packets, never towards a host",
         (r"hdr\.ipv6\.isValid\(\)", r"meta\.host_facing==0", r"hdr\.ipv6\.ecn!=ECN_NOT_ECT",
          r"standard_metadata\.priority==PRIORITY_DATA"),
         hint="the condition needs all four: valid IPv6, not host-facing, not Not-ECT, "
              "priority PRIORITY_DATA"),
    Rule("ecn.p4", "when the queue at enqueue was at or over the port's threshold",
         (r"\(qdepth_t\)standard_metadata\.enq_qdepth>=meta\.ecn_threshold",),
         hint="compare the queue depth at enqueue (enq_qdepth, cast to qdepth_t) with "
              "meta.ecn_threshold: at or over it"),
)


def check(folder: Path, options=None):
    return check_lab("03", "Lab 03: P4 trimming and ECN", folder, RULES, options, "lab03")
