/*
 * Lab 03, solution, part 1: trimming, in MrcEgress's apply block.
 */
if (meta.trim == 1) {
    truncate(TRIMMED_FRAME_BYTES);
    hdr.mrc.flags = hdr.mrc.flags | MRC_FLAG_TRIMMED;
    if (meta.host_facing == 1) {
        hdr.mrc.flags = hdr.mrc.flags | MRC_FLAG_TRIMMED_LASTHOP;
    }
    hdr.ipv6.payload_len = TRIMMED_L4_BYTES;
    hdr.udp.len = TRIMMED_L4_BYTES;
    hdr.udp.checksum = 0;
    trimmed_packets.count((bit<32>) standard_metadata.egress_port);
}
