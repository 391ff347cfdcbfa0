/*
 * Lab 02, part 1 of 2: the uSID shift, an action of MrcIngress.
 *
 * This text replaces the action `usid_shift` of MrcIngress (p4src/mrc_switch.p4) in
 * the lab's program; everything around it (tables, counters, drop_unroutable()) is the
 * project's own.
 * The destination address is split by the parser (p4src/include/headers.p4) into
 *   hdr.ipv6.dst_block   32 bits, fcbb:bb00
 *   hdr.ipv6.dst_active  16 bits, the uSID this switch acts on
 *   hdr.ipv6.dst_rest    80 bits, the uSIDs behind it, zero-filled
 */
action usid_shift() {
    // TODO 1: the uSID behind the active one becomes the active one, and the uSIDs
    // behind that move up by 16 bits, zeros coming in at the end. Two assignments;
    // a P4 bit slice reads x[hi:lo], and << shifts a bit<80> left.
    my_usid_counter.count();
}
