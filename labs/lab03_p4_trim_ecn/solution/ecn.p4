/*
 * Lab 03, solution, part 2: ECN marking, in MrcEgress's apply block.
 * Eligible: ECT, not trimmed, and the lossless class at every hop or a data class off
 * the last hop. Marked: always at or over Kmax, between Kmin and Kmax when the draw
 * is under p.
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
