# ruff: noqa: F821 - table_entry is p4runtime-shell's, given where these lines run
# Lab 07, solution: the forwarding entries of T1 p0t1s1 of 2tier-2plane, as typed in
# `p4shell p0t1s1 write` (make cli TOPO=2tier-2plane DATAPLANE=bmv2).

# my_usid: the switch's own uSID, 0x2001 (0x2000 + plane 0 x 0x100 + spine 1), in the
# block fcbb:bb00; a hit shifts it out of the destination address.
te = table_entry["MrcIngress.my_usid"](action="MrcIngress.usid_shift")
te.match["hdr.ipv6.dst_block"] = "0xfcbbbb00"
te.match["hdr.ipv6.dst_active"] = "0x2001"
te.insert()

# next_hop: a T1 of plane p has one neighbour per rack, the T0 pPt0rR on port R; dmac
# is that T0's MAC on the port facing this spine (the T0's uplink 2 + spine = 3).
for rack, mac in ((0, "02:00:10:00:00:03"), (1, "02:00:10:01:00:03")):
    te = table_entry["MrcIngress.next_hop"](action="MrcIngress.set_next_hop")
    te.match["hdr.ipv6.dst_block"] = "0xfcbbbb00"
    te.match["hdr.ipv6.dst_active"] = hex(0x1000 + rack)
    te.action["port"] = str(rack)
    te.action["dmac"] = mac
    te.insert()
