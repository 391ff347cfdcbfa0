/*
 * Lab 03, solution, part 2: ECN marking, in MrcEgress's apply block.
 */
if (hdr.ipv6.isValid() && meta.host_facing == 0 && hdr.ipv6.ecn != ECN_NOT_ECT
        && standard_metadata.priority == PRIORITY_DATA
        && (qdepth_t) standard_metadata.enq_qdepth >= meta.ecn_threshold) {
    hdr.ipv6.ecn = ECN_CE;
    ecn_marked_packets.count((bit<32>) standard_metadata.egress_port);
}
