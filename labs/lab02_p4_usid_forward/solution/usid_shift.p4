/*
 * Lab 02, solution, part 1: the uSID shift, an action of MrcIngress.
 * The uSID behind the active one becomes active; the rest moves up 16 bits and
 * zeros come in at the end. The order matters: read dst_rest before shifting it.
 */
action usid_shift() {
    hdr.ipv6.dst_active = hdr.ipv6.dst_rest[79:64];
    hdr.ipv6.dst_rest = hdr.ipv6.dst_rest << 16;
    my_usid_counter.count();
}
