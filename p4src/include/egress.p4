/*
 * Egress: trimming, ECN marking, and the queue-depth record that ingress reads.
 */
#ifndef MRC_EGRESS_P4
#define MRC_EGRESS_P4

control MrcEgress(inout headers_t hdr, inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    counter(MAX_PORTS, CounterType.packets) trimmed_packets;
    counter(MAX_PORTS, CounterType.packets) ecn_marked_packets;

    apply {
        // A data packet left its queue: what is still queued behind it is the true
        // backlog, for the next trimming decisions at ingress (see data_backlog).
        if (standard_metadata.priority == PRIORITY_DATA) {
            data_backlog.write((bit<32>) standard_metadata.egress_port,
                               (bit<32>) standard_metadata.deq_qdepth);
        }

        /*
         * Trimming: keep Ethernet, IPv6, UDP and MRC headers, flag the packet, fix the
         * lengths. The UDP checksum stays zero (docs/protocol.md).
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

        /*
         * ECN: mark CE on an ECN-capable packet that found the data queue over the
         * threshold, but never on a port facing a host (the RoCE class aside: below).
         * In MRC a mark says "this path is busier than its siblings"; the last hop is
         * shared by every path to the host, so a mark there would say nothing about
         * the path. Packets of the priority queue (acks, trimmed headers) are not
         * marked: their queue says nothing about the data path either.
         */
        if (hdr.ipv6.isValid() && meta.host_facing == 0 && hdr.ipv6.ecn != ECN_NOT_ECT
                && standard_metadata.priority == PRIORITY_DATA
                && (qdepth_t) standard_metadata.enq_qdepth >= meta.ecn_threshold) {
            hdr.ipv6.ecn = ECN_CE;
            ecn_marked_packets.count((bit<32>) standard_metadata.egress_port);
        }

        /*
         * ECN is configured per traffic class, as on a real switch, and the RoCE class
         * (DSCP_ROCE, the baseline's data) is marked on a port facing a host too, by
         * the same rule: a RoCE fabric marks every hop, since DCQCN needs the last
         * hop's marks to slow the senders of an incast before the receiver's port
         * overflows. The two conditions never hold together: one mark at most.
         */
        if (hdr.ipv6.isValid() && meta.host_facing == 1 && hdr.ipv6.dscp == DSCP_ROCE
                && hdr.ipv6.ecn != ECN_NOT_ECT
                && standard_metadata.priority == PRIORITY_DATA
                && (qdepth_t) standard_metadata.enq_qdepth >= meta.ecn_threshold) {
            hdr.ipv6.ecn = ECN_CE;
            ecn_marked_packets.count((bit<32>) standard_metadata.egress_port);
        }
    }
}

#endif
