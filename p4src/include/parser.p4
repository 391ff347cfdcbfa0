/*
 * Parser and deparser: Ethernet / IPv6 / UDP / MRC. Anything that is not IPv6 stops
 * after Ethernet; a UDP datagram to another port stops after UDP. The forwarding
 * decision needs only the IPv6 destination; the MRC header is read for trimming and
 * for the priority of control packets.
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
        transition select(hdr.udp.dst_port) {
            MRC_UDP_PORT: parse_mrc;
            default: accept;
        }
    }
    state parse_mrc {
        packet.extract(hdr.mrc);
        transition accept;
    }
}

control MrcDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.udp);
        packet.emit(hdr.mrc);
    }
}

// No IPv4 header, so no header checksum to verify or update; the MRC UDP checksum is
// zero by rule (docs/protocol.md) and a trimmed packet keeps it zero.
control MrcVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

control MrcComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

#endif
