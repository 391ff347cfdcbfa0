/*
 * Ingress: uSID shift-and-forward, hop limit, per-port settings, priority and the
 * trimming decision.
 */
#ifndef MRC_INGRESS_P4
#define MRC_INGRESS_P4

control MrcIngress(inout headers_t hdr, inout local_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    // Per-port packet counters, indexed by port number (read by the controller).
    counter(MAX_PORTS, CounterType.packets) forwarded_packets;
    counter(MAX_PORTS, CounterType.packets) dropped_packets;

    direct_counter(CounterType.packets) my_usid_counter;
    direct_counter(CounterType.packets) next_hop_counter;
    direct_counter(CounterType.packets) port_config_counter;

    action drop() {
        mark_to_drop(standard_metadata);
        dropped_packets.count((bit<32>) standard_metadata.ingress_port);
    }

    /*
     * uSID shift-and-forward. A switch answers to one uSID. When it is the active
     * one, the uSIDs behind it move up by 16 bits, zeros come in at the end, and the
     * new active uSID is looked up in the next-hop table. An active uSID that is not
     * this switch's is dropped: the fabric is source-routed and has no default route.
     */
    action usid_shift() {
        hdr.ipv6.dst_active = hdr.ipv6.dst_rest[79:64];
        hdr.ipv6.dst_rest = hdr.ipv6.dst_rest << 16;
        my_usid_counter.count();
    }

    table my_usid {
        key = {
            hdr.ipv6.dst_block: exact;
            hdr.ipv6.dst_active: exact;
        }
        actions = { usid_shift; @defaultonly NoAction; }
        const default_action = NoAction();
        counters = my_usid_counter;
        size = 4;
    }

    action set_next_hop(port_num_t port, mac_addr_t dmac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dmac;
        next_hop_counter.count();
    }

    action next_hop_miss() {
        next_hop_counter.count();
    }

    // The static next-uSID table: next active uSID -> egress port and next-hop MAC.
    table next_hop {
        key = {
            hdr.ipv6.dst_block: exact;
            hdr.ipv6.dst_active: exact;
        }
        actions = { set_next_hop; @defaultonly next_hop_miss; }
        const default_action = next_hop_miss();
        counters = next_hop_counter;
        size = 1024;
    }

    /*
     * Per-port settings, written once by the controller: the port's MAC, whether it
     * faces a host (ECN marks there for DSCP_ROCE only, TRIMMED_LASTHOP when trimming
     * there), and the ECN and trim thresholds of its queue.
     */
    action set_port_config(mac_addr_t port_mac, bit<1> host_facing, qdepth_t ecn_threshold,
                           qdepth_t trim_threshold) {
        meta.port_mac = port_mac;
        meta.host_facing = host_facing;
        meta.ecn_threshold = ecn_threshold;
        meta.trim_threshold = trim_threshold;
        port_config_counter.count();
    }

    action port_config_miss() {
        port_config_counter.count();
    }

    table port_config {
        key = { standard_metadata.egress_spec: exact; }
        actions = { set_port_config; @defaultonly port_config_miss; }
        const default_action = port_config_miss();
        counters = port_config_counter;
        size = MAX_PORTS;
    }

    apply {
        if (!hdr.ipv6.isValid()) {
            drop();
            return;
        }
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
        if (!port_config.apply().hit) {
            drop();  // a port the controller did not configure
            return;
        }
        hdr.ethernet.src_addr = meta.port_mac;

        /*
         * Trimming decision. A trimmable data packet (DSCP_TRIMMABLE) that would join
         * a queue already over the trim threshold is cut to its headers at egress
         * instead of being dropped; its header, like every control packet, takes the
         * strict-priority queue so the receiver learns of it at once and asks for a
         * retransmission. Any other data packet joins the data queue whole, and the
         * queue drops it if it is full.
         */
        standard_metadata.priority = PRIORITY_DATA;
        if (hdr.mrc.isValid()) {
            if (hdr.mrc.pkt_type != MRC_TYPE_DATA
                    || (hdr.mrc.flags & MRC_FLAG_TRIMMED) != 0) {
                standard_metadata.priority = PRIORITY_CONTROL;
            } else {
                bit<32> backlog;
                data_backlog.read(backlog, (bit<32>) standard_metadata.egress_spec);
                if (backlog >= (bit<32>) meta.trim_threshold
                        && hdr.ipv6.dscp == DSCP_TRIMMABLE) {
                    meta.trim = 1;
                    standard_metadata.priority = PRIORITY_CONTROL;
                } else {
                    data_backlog.write((bit<32>) standard_metadata.egress_spec, backlog + 1);
                }
            }
        }
        forwarded_packets.count((bit<32>) standard_metadata.egress_spec);
    }
}

#endif
