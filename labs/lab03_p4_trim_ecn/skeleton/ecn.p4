/*
 * Lab 03, part 2 of 2: ECN marking, in MrcEgress's apply block.
 *
 * This text replaces the ECN statement of MrcEgress (p4src/mrc_switch.p4, "ECN"). As
 * on a real switch, ECN is configured per traffic class: ingress's dscp_class table
 * put the packet's class in meta.behaviour:
 *   BEHAVIOUR_TRIMMABLE, BEHAVIOUR_BEST_EFFORT   MRC's data (and any DSCP not named)
 *   BEHAVIOUR_LOSSLESS                           the RoCE baseline's data and acks
 *   BEHAVIOUR_PRIORITY                           control, trimmed headers, CNPs
 * The egress port's settings (port_config) are in meta: meta.host_facing is 1 on a
 * port facing a host; RED's meta.ecn_kmin, meta.ecn_kmax and meta.ecn_slope. `port`
 * is the egress port as a bit<32>; ecn_marked is a counter indexed by port.
 *
 * RED's arithmetic is given below: the queue depth the packet found, and a fair
 * "random" draw from the port's Weyl sequence, the same sequence the eBPF switch
 * draws from (ebpf/mrc_switch.bpf.c), against p, the probability of a mark in 1/2^16.
 * You write which packets it applies to, and the decision it takes.
 */
// TODO 2: which packets may be marked. Complete the condition: the packet is
// ECN-capable (its hdr.ipv6.ecn is not ECN_NOT_ECT) and was not trimmed (meta.trim;
// a trimmed header rides the priority queue and is never marked), and
//  - the lossless class is marked at every hop, the last one too: DCQCN needs the
//    last hop's marks to slow an incast before the receiver's port fills;
//  - any other data class (not BEHAVIOUR_PRIORITY) only on a port that does not face
//    a host: in MRC a mark says "this path is busier than its siblings", and the last
//    hop is shared by every path to the host, so a mark there blames no path.
if (hdr.ipv6.isValid()) {
    bit<32> depth = (bit<32>) standard_metadata.enq_qdepth;  // packets, at enqueue
    if (depth >= meta.ecn_kmin) {
        // The port's n-th decision draws n x WEYL_STEP mod 2^16: spread evenly over
        // [0, 2^16), the same sequence on every run.
        bit<32> n;
        ecn_decisions.read(n, port);
        ecn_decisions.write(port, n + 1);
        bit<64> draw = (bit<64>) ((n * WEYL_STEP) & 0xFFFF);
        // p, in 1/2^16, rises from 0 at Kmin to Pmax at Kmax: the controller wrote
        // slope = Pmax x 2^16 / (Kmax - Kmin), so there is no division at run time.
        bit<64> p = ((bit<64>) meta.ecn_slope * (bit<64>) (depth - meta.ecn_kmin))
                    >> 16;
        // TODO 3: RED's decision. Mark CE (hdr.ipv6.ecn = ECN_CE) always when the
        // depth is at or over Kmax, and between Kmin and Kmax when the draw is under
        // p; count each mark in ecn_marked at index port.
    }
}
