# ruff: noqa: F821 - table_entry is p4runtime-shell's, given where these lines run
# Lab 07: the forwarding entries of T1 p0t1s1 of 2tier-2plane, written by hand.
#
# Type these lines in `p4shell p0t1s1 write` inside
# `sudo make cli TOPO=2tier-2plane DATAPLANE=bmv2` (README, steps 2-4), then keep here
# what worked: the check replays this file on a sandbox switch and on a fabric of its
# own. `table_entry` is p4runtime-shell's (`table_entry["MrcIngress.my_usid"]?` in the
# shell lists its match fields and actions). Write every value yourself: no imports.

# TODO 1: my_usid. One entry: the block fcbb:bb00 and p0t1s1's own uSID (Lab 01, or
# docs/addressing.md), action MrcIngress.usid_shift.
te = table_entry["MrcIngress.my_usid"](action="MrcIngress.usid_shift")
te.match["hdr.ipv6.dst_block"] = "TODO"
te.match["hdr.ipv6.dst_active"] = "TODO"
te.insert()

# TODO 2: next_hop. One entry per neighbour of p0t1s1 (which uSIDs follow a T1's own in
# an address?), action MrcIngress.set_next_hop with the egress `port` and `dmac`, the
# neighbour's MAC on the port facing this switch. `tables p0t1s0` in the CLI shows the
# entries of p0t1s1's sibling, spine 0 of the same plane.
