/*
 * Lab 02, solution, part 2: the forwarding steps of MrcIngress's apply block.
 */
if (!my_usid.apply().hit) {
    drop_unroutable();  // the active uSID is not this switch's
    return;
}
if (hdr.ipv6.hop_limit <= 1) {
    drop_unroutable();
    return;
}
hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
if (!next_hop.apply().hit) {
    drop_unroutable();  // no route for the next uSID
    return;
}
