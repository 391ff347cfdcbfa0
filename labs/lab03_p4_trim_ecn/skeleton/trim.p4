/*
 * Lab 03, part 1 of 2: trimming, in MrcEgress's apply block.
 *
 * This text replaces the trimming statement of p4src/include/egress.p4. Ingress has
 * already decided (meta.trim == 1) that this data packet would join a queue over its
 * trim threshold, and put it into the strict-priority queue. Constants you need are in
 * p4src/include/headers.p4; the header layout is in docs/protocol.md.
 */
if (meta.trim == 1) {
    // TODO 1: cut the frame to its headers (truncate(bytes) keeps that many bytes),
    // set the TRIMMED flag, and also TRIMMED_LASTHOP when the egress port faces a host
    // (meta.host_facing == 1); fix the IPv6 payload length and the UDP length of what
    // is left; the UDP checksum of MRC packets is zero; count the packet in
    // trimmed_packets at index standard_metadata.egress_port (cast to bit<32>).
}
