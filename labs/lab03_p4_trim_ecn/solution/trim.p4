/*
 * Lab 03, solution, part 1: trimming, in MrcEgress's apply block.
 * Cut to the port's trim size, the port's trimmed DSCP, the lengths of what is left,
 * TX_TRIM_PKTS. Nothing behind the UDP header is written.
 */
if (meta.trim == 1) {
    truncate(meta.trim_size);
    hdr.ipv6.dscp = meta.dscp_trimmed;
    hdr.ipv6.payload_len = (bit<16>) (meta.trim_size - ETHERNET_HEADER_BYTES
                                      - IPV6_HEADER_BYTES);
    hdr.udp.len = hdr.ipv6.payload_len;
    tx_trim_pkts.count(port);
}
