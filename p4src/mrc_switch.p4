/*
 * mrc-testbed switch: a switch of an MRC fabric, as SONiC configures one.
 *
 *   uSID FORWARDING   SRv6 micro-SID shift-and-forward from static tables
 *   TRAFFIC CLASSES   the DSCP alone picks what happens to a packet (`dscp_class`)
 *   QUEUES            strict priority for control, trimmed headers and CNPs; a lossless
 *                     queue for the RoCE class (its acks in one of their own); a data
 *                     queue with tail drop
 *   TRIMMING          trimmable data over the trim threshold is cut to the trim size,
 *                     its DSCP rewritten (TRIMMED, or TRIMMED_LASTHOP facing a host)
 *   PFC               the lossless class is never dropped; each ingress port counts
 *                     what it has queued and past XOFF would pause its peer
 *   ECN               RED on the data classes off the last hop, at every hop for the
 *                     lossless class
 *   COUNTERS          per port, with SONiC's names for trimming
 *
 * The switch reads no further than the UDP header (include/parser.p4) and writes only
 * what a router writes: MAC addresses, the uSID shift, the hop limit, ECN, and on a
 * trim the DSCP and the lengths. docs/p4-switch.md explains each block.
 *
 * Target: v1model on BMv2 simple_switch_grpc, started with `--priority-queues 8`.
 * Tables are written once at start-up by controller/ over P4Runtime and never change:
 *   my_usid      the switch's own uSID (one entry)
 *   next_hop     next active uSID -> egress port, next-hop MAC (one per neighbour)
 *   port_config  egress port -> its MAC and queue settings (one per port)
 *   pfc_config   ingress port -> PFC's XOFF and XON (one per port)
 *   dscp_class   DSCP -> behaviour (one per traffic class the topology names)
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"
#include "include/parser.p4"

// ------------------------------------------------------------------ shared state
// v1model shows a queue's depth only at egress, when a packet leaves it, but a packet
// must be trimmed or dropped before it joins one. Ingress counts every packet it sends
// into a queue, and egress resets the count to the true depth each time a packet of
// that queue leaves. Between two departures the count keeps up with a burst; a packet
// BMv2 itself dropped is forgotten at the next departure.
register<bit<32>>(MAX_PORTS) data_backlog;      // by egress port
register<bit<32>>(MAX_PORTS) priority_backlog;  // by egress port
// PFC: the lossless packets each ingress port has queued in this switch, and whether
// that port has its peer paused.
register<bit<32>>(MAX_PORTS) lossless_queued;   // by ingress port
register<bit<1>>(MAX_PORTS) pfc_paused;         // by ingress port
// ECN: the RED decisions each port has taken so far (its Weyl sequence).
register<bit<32>>(MAX_PORTS) ecn_decisions;     // by egress port

control MrcIngress(inout headers_t hdr, inout local_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    // ************************************************************** COUNTERS
    // By egress port, as the eBPF switch counts them (controller/program.py reads them).
    counter(MAX_PORTS, CounterType.packets) forwarded;
    counter(MAX_PORTS, CounterType.packets) dropped;            // a full queue
    counter(MAX_PORTS, CounterType.packets) trim_pkts;          // TRIM_PKTS
    counter(MAX_PORTS, CounterType.packets) dropped_trim_pkts;  // DROPPED_TRIM_PKTS
    // By ingress port: the pauses it would send its peer, and what it could not route.
    counter(MAX_PORTS, CounterType.packets) pfc_xoff_tx;
    counter(MAX_PORTS, CounterType.packets) unroutable;

    direct_counter(CounterType.packets) my_usid_counter;
    direct_counter(CounterType.packets) next_hop_counter;
    direct_counter(CounterType.packets) port_config_counter;

    action drop_unroutable() {
        mark_to_drop(standard_metadata);
        unroutable.count((bit<32>) standard_metadata.ingress_port);
    }

    action drop_queue_full() {
        // Counted first: mark_to_drop sets egress_spec to the drop port.
        dropped.count((bit<32>) standard_metadata.egress_spec);
        mark_to_drop(standard_metadata);
    }

    // ************************************************************** uSID FORWARDING
    /*
     * A switch answers to one uSID. When it is the active one, the uSIDs behind it
     * move up by 16 bits, zeros come in at the end, and the new active uSID is looked
     * up in the next-hop table. An active uSID that is not this switch's is dropped:
     * the fabric is source-routed and has no default route.
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

    // ************************************************************** PORT SETTINGS
    /*
     * Each egress port's settings, written once by the controller (controller/tables.py
     * PortRole): its MAC, whether it faces a host, RED's thresholds, the trim threshold,
     * size and DSCP, and its queues' limits, in packets.
     */
    action set_port_config(mac_addr_t port_mac, bit<1> host_facing, bit<32> ecn_kmin,
                           bit<32> ecn_kmax, bit<32> ecn_slope, bit<32> trim_threshold,
                           bit<32> trim_size, bit<6> dscp_trimmed, bit<32> queue_limit,
                           bit<32> priority_limit) {
        meta.port_mac = port_mac;
        meta.host_facing = host_facing;
        meta.ecn_kmin = ecn_kmin;
        meta.ecn_kmax = ecn_kmax;
        meta.ecn_slope = ecn_slope;
        meta.trim_threshold = trim_threshold;
        meta.trim_size = trim_size;
        meta.dscp_trimmed = dscp_trimmed;
        meta.queue_limit = queue_limit;
        meta.priority_limit = priority_limit;
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

    // ************************************************************** TRAFFIC CLASSES
    // What the switch does with a DSCP: the operator's traffic classes (a topology's
    // `traffic_classes`). A DSCP the topology does not name is best effort.
    action set_behaviour(bit<2> behaviour) {
        meta.behaviour = behaviour;
    }

    table dscp_class {
        key = { hdr.ipv6.dscp: exact; }
        actions = { set_behaviour; }
        const default_action = set_behaviour(BEHAVIOUR_BEST_EFFORT);
        size = 64;
    }

    // ************************************************************** PFC (ingress)
    // The ingress port's thresholds: past XOFF queued lossless packets it pauses its
    // peer, at or below XON it lets it go (the release is at egress).
    action set_pfc_thresholds(bit<32> xoff, bit<32> xon) {
        meta.xoff = xoff;
        meta.xon = xon;
    }

    table pfc_config {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_pfc_thresholds; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_PORTS;
    }

    apply {
        // ---------------------------------------------------------- uSID FORWARDING
        if (!hdr.ipv6.isValid()) {
            drop_unroutable();
            return;
        }
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
        if (!port_config.apply().hit) {
            drop_unroutable();  // a port the controller did not configure
            return;
        }
        hdr.ethernet.src_addr = meta.port_mac;

        // ---------------------------------------------------------- TRAFFIC CLASSES
        dscp_class.apply();
        pfc_config.apply();

        // ---------------------------------------------------------- QUEUES, TRIMMING
        bit<32> port = (bit<32>) standard_metadata.egress_spec;
        bit<32> data;
        bit<32> headers;
        data_backlog.read(data, port);
        priority_backlog.read(headers, port);
        if (meta.behaviour == BEHAVIOUR_PRIORITY) {
            if (headers >= meta.priority_limit) {
                drop_queue_full();
                return;
            }
            priority_backlog.write(port, headers + 1);
            standard_metadata.priority = PRIORITY_CONTROL;
        } else if (meta.behaviour == BEHAVIOUR_LOSSLESS) {
            // Never dropped here: PFC below. A short frame (an ack) takes the short
            // frames' queue, paced in short frames (headers.p4).
            if (standard_metadata.packet_length <= CONTROL_FRAME_BYTES) {
                standard_metadata.priority = PRIORITY_LOSSLESS_SHORT;
            } else {
                standard_metadata.priority = PRIORITY_LOSSLESS;
            }
        } else if (meta.behaviour == BEHAVIOUR_TRIMMABLE && hdr.udp.isValid()
                   && data >= meta.trim_threshold
                   && standard_metadata.packet_length > meta.trim_size) {
            /*
             * Trimmable data that would join a data queue at or over its trim threshold
             * is cut at egress instead of dropped; the trimmed header takes the
             * priority queue, so the receiver learns of the loss at once and asks for
             * a retransmission. A trimmed header that finds no room there is dropped.
             */
            trim_pkts.count(port);
            if (headers >= meta.priority_limit) {
                mark_to_drop(standard_metadata);
                dropped_trim_pkts.count(port);
                return;
            }
            priority_backlog.write(port, headers + 1);
            meta.trim = 1;
            standard_metadata.priority = PRIORITY_CONTROL;
        } else {
            // Any other data joins the data queue whole, or is dropped if it is full.
            if (data >= meta.queue_limit) {
                drop_queue_full();
                return;
            }
            data_backlog.write(port, data + 1);
            standard_metadata.priority = PRIORITY_DATA;
        }

        // ---------------------------------------------------------- PFC
        /*
         * BMv2 cannot hold a queue of its peer, so a pause here is counted, not carried
         * out (docs/p4-switch.md "PFC"): the lossless queue is deep enough never to
         * drop, and DCQCN slows its senders.
         */
        if (meta.behaviour == BEHAVIOUR_LOSSLESS) {
            bit<32> in_port = (bit<32>) standard_metadata.ingress_port;
            bit<32> queued;
            bit<1> paused;
            lossless_queued.read(queued, in_port);
            lossless_queued.write(in_port, queued + 1);
            pfc_paused.read(paused, in_port);
            if (queued + 1 > meta.xoff && paused == 0) {
                pfc_paused.write(in_port, 1);
                pfc_xoff_tx.count(in_port);
            }
        }

        forwarded.count(port);
    }
}

control MrcEgress(inout headers_t hdr, inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    // ************************************************************** COUNTERS
    counter(MAX_PORTS, CounterType.packets) tx_trim_pkts;  // TX_TRIM_PKTS
    counter(MAX_PORTS, CounterType.packets) ecn_marked;

    apply {
        bit<32> port = (bit<32>) standard_metadata.egress_port;

        // ---------------------------------------------------------- QUEUES
        // A packet left its queue: what is still queued behind it is the true backlog,
        // for ingress's next decisions (see data_backlog).
        if (standard_metadata.priority == PRIORITY_DATA) {
            data_backlog.write(port, (bit<32>) standard_metadata.deq_qdepth);
        } else if (standard_metadata.priority == PRIORITY_CONTROL) {
            priority_backlog.write(port, (bit<32>) standard_metadata.deq_qdepth);
        }

        // ---------------------------------------------------------- PFC
        // A lossless packet left: its ingress port holds one fewer; at or below XON
        // that port's peer may send again.
        if (meta.behaviour == BEHAVIOUR_LOSSLESS) {
            bit<32> in_port = (bit<32>) standard_metadata.ingress_port;
            bit<32> queued;
            lossless_queued.read(queued, in_port);
            if (queued > 0) {
                queued = queued - 1;
            }
            lossless_queued.write(in_port, queued);
            if (queued <= meta.xon) {
                pfc_paused.write(in_port, 0);
            }
        }

        // ---------------------------------------------------------- TRIMMING
        /*
         * Keep the trim size's first bytes, rewrite the DSCP to the trimmed class of
         * this port (TRIMMED, or TRIMMED_LASTHOP facing a host: how the receiver knows
         * where the congestion was), and fix the IPv6 and UDP lengths to what is left.
         * Nothing behind the UDP header is written; the zero UDP checksum stays zero.
         */
        if (meta.trim == 1) {
            truncate(meta.trim_size);
            hdr.ipv6.dscp = meta.dscp_trimmed;
            hdr.ipv6.payload_len = (bit<16>) (meta.trim_size - ETHERNET_HEADER_BYTES
                                              - IPV6_HEADER_BYTES);
            hdr.udp.len = hdr.ipv6.payload_len;
            tx_trim_pkts.count(port);
        }

        // ---------------------------------------------------------- ECN
        /*
         * RED: an ECN-capable packet of a data class that found its queue at or over
         * Kmin is marked CE with a probability rising from 0 to Pmax at Kmax, and
         * always at or over Kmax; "at random" is the port's Weyl sequence. Not on a
         * port facing a host: in MRC a mark says "this path is busier than its
         * siblings", and the last hop is shared by every path to the host. The
         * lossless class is marked at every hop, since DCQCN needs the last hop's marks
         * to slow an incast before the receiver's port fills. Priority packets and
         * trimmed headers are never marked.
         */
        if (hdr.ipv6.isValid() && hdr.ipv6.ecn != ECN_NOT_ECT && meta.trim == 0
                && (meta.behaviour == BEHAVIOUR_LOSSLESS
                    || (meta.behaviour != BEHAVIOUR_PRIORITY && meta.host_facing == 0))) {
            bit<32> depth = (bit<32>) standard_metadata.enq_qdepth;
            if (depth >= meta.ecn_kmin) {
                bit<32> n;
                ecn_decisions.read(n, port);
                ecn_decisions.write(port, n + 1);
                bit<64> draw = (bit<64>) ((n * WEYL_STEP) & 0xFFFF);
                bit<64> p = ((bit<64>) meta.ecn_slope * (bit<64>) (depth - meta.ecn_kmin))
                            >> 16;
                if (depth >= meta.ecn_kmax || draw < p) {
                    hdr.ipv6.ecn = ECN_CE;
                    ecn_marked.count(port);
                }
            }
        }
    }
}

V1Switch(
    MrcParser(),
    MrcVerifyChecksum(),
    MrcIngress(),
    MrcEgress(),
    MrcComputeChecksum(),
    MrcDeparser()
) main;
