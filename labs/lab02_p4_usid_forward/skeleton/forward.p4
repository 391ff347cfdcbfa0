/*
 * Lab 02, part 2 of 2: the forwarding steps of MrcIngress's apply block.
 *
 * This text replaces the statements of the apply block of MrcIngress
 * (p4src/mrc_switch.p4, "uSID FORWARDING") from the my_usid lookup to the next_hop
 * lookup. Before it, non-IPv6 packets were dropped; after it, port_config gives the
 * egress port's settings (its MAC becomes the source MAC) and the traffic classes,
 * queues and trimming take over. Tables you apply: my_usid (its hit runs usid_shift)
 * and next_hop (its hit runs set_next_hop: egress port and next-hop MAC).
 * `table.apply().hit` says whether an entry matched; `drop_unroutable(); return;`
 * drops a packet and counts it in `unroutable`, by ingress port.
 */
// TODO 2: look the active uSID up in my_usid. A miss means the packet is not for this
// switch: the fabric is source-routed and has no default route, so drop it.

if (hdr.ipv6.hop_limit <= 1) {
    drop_unroutable();
    return;
}
hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;

// TODO 3: look the new active uSID up in next_hop. A miss means this switch has no
// neighbour with that uSID: drop it.
