/*
 * Lab 03, part 1 of 2: trimming, in MrcEgress's apply block.
 *
 * This text replaces the trimming statement of MrcEgress (p4src/mrc_switch.p4,
 * "TRIMMING"). Ingress has already decided (meta.trim == 1): this packet is of a
 * trimmable class (BEHAVIOUR_TRIMMABLE) and would have joined a data queue at or over
 * the port's trim threshold. Ingress counted it in TRIM_PKTS (trim_pkts), found room
 * for it in the strict-priority queue (else it dropped it and counted it in
 * DROPPED_TRIM_PKTS) and sent it there whole. Egress cuts it.
 *
 * What you need, all of it already in scope:
 *   meta.trim_size       frame bytes a trimmed packet keeps (SONiC's trimming `size`)
 *   meta.dscp_trimmed    the DSCP a trim on this port writes (written by the controller)
 *   port                 the egress port as a bit<32>, declared at the top of apply
 *   ETHERNET_HEADER_BYTES, IPV6_HEADER_BYTES   (bit<32>, p4src/include/headers.p4)
 *   tx_trim_pkts         a counter indexed by port (SONiC's TX_TRIM_PKTS)
 * truncate(bytes) keeps the first `bytes` bytes of the frame as it leaves: the
 * headers you write are the ones that go out.
 */
if (meta.trim == 1) {
    // TODO 1: trim the packet, as a SONiC switch does. Four steps:
    //  a. keep the first meta.trim_size bytes of the frame;
    //  b. rewrite the IPv6 DSCP to meta.dscp_trimmed. The DSCP is all the receiving NIC
    //     has to learn that this is a trimmed header and where the congestion was: the
    //     switch never reads or writes the transport header behind UDP, so no flag
    //     can say it. The controller writes TRIMMED here on a fabric port and
    //     TRIMMED_LASTHOP on a port facing a host (topology `trimming: {dscp:
    //     asymmetric}`; `symmetric` writes TRIMMED everywhere). A NACK for TRIMMED
    //     makes the sender skip that path; TRIMMED_LASTHOP blames no path, since every
    //     path ends at the receiver's own port;
    //  c. fix the IPv6 payload length and the UDP length to what is left: the trim size
    //     less the Ethernet and IPv6 headers (bit<32> arithmetic: cast it to bit<16>). The
    //     UDP checksum is zero and stays zero; write nothing behind the UDP header;
    //  d. count the packet in tx_trim_pkts at index port.
}
