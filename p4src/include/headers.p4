/*
 * Headers, metadata and constants of the mrc-testbed switch.
 *
 * A switch sees a packet through Ethernet, IPv6 and UDP alone: it decides by the DSCP
 * (the top six bits of the IPv6 traffic class) and never reads or writes the MRC header
 * behind UDP (docs/protocol.md "Traffic classes"). Every value below that is also a
 * fact of the protocol has its twin in hosts/protocol.py, and
 * tests/unit/test_protocol_facts.py checks that they agree. The IPv6 destination
 * address is split into the 32-bit locator block, the active (first) uSID and the 80
 * bits behind it, so that the uSID shift is a plain field assignment.
 */
#ifndef MRC_HEADERS_P4
#define MRC_HEADERS_P4

typedef bit<48> mac_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<32> usid_block_t;
typedef bit<16> usid_t;
typedef bit<9> port_num_t;

const bit<16> ETHERTYPE_IPV6 = 0x86dd;
const bit<8> IP_PROTO_UDP = 17;

// Bytes in front of the UDP header: what a trimmed packet's lengths leave out.
const bit<32> ETHERNET_HEADER_BYTES = 14;
const bit<32> IPV6_HEADER_BYTES = 40;

// What the switch does with a traffic class (hosts/protocol.py CLASS_BEHAVIOUR): the
// `dscp_class` table maps each DSCP the topology names to one; any other DSCP is best
// effort.
const bit<2> BEHAVIOUR_BEST_EFFORT = 0;  // data queue, ECN off the last hop, tail drop
const bit<2> BEHAVIOUR_TRIMMABLE = 1;    // the same, but trimmed over the trim threshold
const bit<2> BEHAVIOUR_PRIORITY = 2;     // the strict-priority queue, never marked
const bit<2> BEHAVIOUR_LOSSLESS = 3;     // its own queue, ECN at every hop, no drop (PFC)

// Strict-priority queues (simple_switch --priority-queues 8: 7 is served first).
const bit<3> PRIORITY_CONTROL = 7;
const bit<3> PRIORITY_LOSSLESS = 3;
// A lossless frame up to CONTROL_FRAME_BYTES (a RoCE ack) takes a queue of its own:
// BMv2 paces each queue in packets, and in the data's queue an ack took a full
// frame's time (docs/p4-switch.md "Queues").
const bit<3> PRIORITY_LOSSLESS_SHORT = 4;
const bit<32> CONTROL_FRAME_BYTES = 118;
const bit<3> PRIORITY_DATA = 0;

// ECN code points (low two bits of the IPv6 traffic class).
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_CE = 3;

// RED's decisions are "random" along a Weyl sequence, n x WEYL_STEP mod 2^16 for the
// port's n-th decision, as the eBPF switch takes them (controller/tables.py).
const bit<32> WEYL_STEP = 40503;

// Number of ports counted and tracked per switch.
const bit<32> MAX_PORTS = 256;

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv6_t {
    bit<4>       version;
    bit<6>       dscp;
    bit<2>       ecn;
    bit<20>      flow_label;
    bit<16>      payload_len;
    bit<8>       next_hdr;
    bit<8>       hop_limit;
    ipv6_addr_t  src_addr;
    usid_block_t dst_block;   // fcbb:bb00
    usid_t       dst_active;  // the uSID this hop acts on
    bit<80>      dst_rest;    // the uSIDs behind it, zero-filled
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

struct headers_t {
    ethernet_t ethernet;
    ipv6_t     ipv6;
    udp_t      udp;
}

// Everything below is carried from ingress to egress.
struct local_metadata_t {
    bit<2>     behaviour;       // the packet's traffic class, as the switch treats it
    bit<1>     trim;            // cut this packet at egress
    // The egress port's settings (port_config).
    mac_addr_t port_mac;
    bit<1>     host_facing;     // the last hop: ECN for the lossless class only
    bit<32>    ecn_kmin;        // RED: no mark below this queue depth (packets) ...
    bit<32>    ecn_kmax;        // ... every ECT packet marked at or above ...
    bit<32>    ecn_slope;       // ... and in between p = slope x (depth - Kmin) / 2^32
    bit<32>    trim_threshold;  // trimmable data trimmed at or over this data backlog
    bit<32>    trim_size;       // frame bytes a trimmed packet keeps
    bit<6>     dscp_trimmed;    // the DSCP a trim here writes
    bit<32>    queue_limit;     // the data queue's limit: tail drop at or over
    bit<32>    priority_limit;  // the priority queue's limit
    // The ingress port's PFC thresholds (pfc_config).
    bit<32>    xoff;
    bit<32>    xon;
}

#endif
