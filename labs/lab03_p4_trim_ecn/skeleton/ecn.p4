/*
 * Lab 03, part 2 of 2: ECN marking, in MrcEgress's apply block.
 *
 * This text replaces the ECN statement of p4src/include/egress.p4. In MRC a CE mark
 * says "this path is busier than its siblings", and the sender steers away from it.
 */
// TODO 2: mark CE (hdr.ipv6.ecn = ECN_CE) on a valid IPv6 packet that is ECN-capable
// (its ecn is not ECN_NOT_ECT) and rides the data queue (priority PRIORITY_DATA), when
// standard_metadata.enq_qdepth (a bit<19>: cast it to qdepth_t) was at or over the
// port's meta.ecn_threshold, but never on a port facing a host (meta.host_facing);
// count it in ecn_marked_packets at index standard_metadata.egress_port (bit<32>).
