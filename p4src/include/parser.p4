/*
 * Parser and deparser: Ethernet / IPv6 / UDP, and no further: what follows UDP (the
 * MRC header, a RoCE packet) is payload to the switch. Anything that is not IPv6 stops
 * after Ethernet. Forwarding needs the IPv6 destination, every other decision the
 * DSCP; the UDP header is read so that a trimmed packet's UDP length can be fixed.
 */
#ifndef MRC_PARSER_P4
#define MRC_PARSER_P4

parser MrcParser(packet_in packet, out headers_t hdr, inout local_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }
    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        transition select(hdr.ipv6.next_hdr) {
            IP_PROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }
}

control MrcDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.udp);
    }
}

// No IPv4 header, so no header checksum to verify or update; the hosts send UDP with a
// zero checksum (docs/protocol.md), which a trimmed packet keeps.
control MrcVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

control MrcComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

#endif
