/*
 * Lab 02, solution, part 2: the forwarding steps of MrcIngress's apply block.
 */
if (!my_usid.apply().hit) {
    drop();  // the active uSID is not this switch's
    return;
}
if (hdr.ipv6.hop_limit <= 1) {
    drop();
    return;
}
hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
if (!next_hop.apply().hit) {
    drop();  // no route for the next uSID
    return;
}
