/*
 * Header and metadata definitions of the mrc-testbed switch.
 *
 * The MRC header layout is defined once, in docs/protocol.md; this file follows it
 * field for field (32 bytes). Every protocol value below has its twin in
 * hosts/protocol.py, and tests/unit/test_protocol_facts.py checks that they agree. The IPv6 destination address is split into the 32-bit
 * locator block, the active (first) uSID and the 80 bits behind it, so that the uSID
 * shift is a plain field assignment.
 */
#ifndef MRC_HEADERS_P4
#define MRC_HEADERS_P4

typedef bit<48> mac_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<32> usid_block_t;
typedef bit<16> usid_t;
typedef bit<9> port_num_t;
typedef bit<19> qdepth_t;

const bit<16> ETHERTYPE_IPV6 = 0x86dd;
const bit<8> IP_PROTO_UDP = 17;
const bit<16> MRC_UDP_PORT = 4793;

// MRC version, packet types and flags (docs/protocol.md). The switch acts on DATA,
// TRIMMED and TRIMMED_LASTHOP; the others are here so the whole set is checked.
const bit<4> MRC_VERSION = 1;
const bit<4> MRC_TYPE_DATA = 1;
const bit<4> MRC_TYPE_SACK = 2;
const bit<4> MRC_TYPE_NACK = 3;
const bit<4> MRC_TYPE_PROBE = 4;
const bit<4> MRC_TYPE_PROBE_REPLY = 5;
const bit<4> MRC_TYPE_PLANE_STATUS = 6;
const bit<4> MRC_TYPE_CNP = 7;
const bit<8> MRC_FLAG_TRIMMED = 0x01;
const bit<8> MRC_FLAG_TRIMMED_LASTHOP = 0x02;
const bit<8> MRC_FLAG_ECN_ECHO = 0x04;
const bit<8> MRC_FLAG_LAST = 0x08;
const bit<8> MRC_FLAG_RETRANSMIT = 0x10;

// Bytes a trimmed packet keeps: Ethernet 14 + IPv6 40 + UDP 8 + MRC 32.
const bit<32> TRIMMED_FRAME_BYTES = 94;
// IPv6 payload and UDP length of a trimmed packet: UDP 8 + MRC 32.
const bit<16> TRIMMED_L4_BYTES = 40;

// Strict priority of control packets and trimmed headers (simple_switch
// --priority-queues 8: 7 is served first); data rides priority 0.
const bit<3> PRIORITY_CONTROL = 7;
const bit<3> PRIORITY_DATA = 0;

// ECN code points (low two bits of the IPv6 traffic class).
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_ECT0 = 2;
const bit<2> ECN_CE = 3;

// DSCP classes (top six bits of the IPv6 traffic class), as a switch configures
// trimming and ECN per traffic class: the switch trims only DATA packets that ask for
// it (DSCP_TRIMMABLE); untrimmable data over the trim threshold joins the data queue
// whole, and is dropped if the queue is full. DSCP_ROCE, the RoCE baseline's data, is
// never trimmed and is the one class ECN-marked on a port facing a host too (egress).
const bit<6> DSCP_NO_TRIM = 0;
const bit<6> DSCP_TRIMMABLE = 10;
const bit<6> DSCP_ROCE = 26;

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

header mrc_t {
    bit<4>  version;
    bit<4>  pkt_type;
    bit<8>  flags;
    bit<8>  plane;
    bit<8>  reason;
    bit<32> conn_id;
    bit<32> ev;
    bit<32> msg_id;
    bit<32> psn;
    bit<32> offset;
    bit<32> msg_len;
    bit<16> payload_len;
    bit<16> reserved;
}

struct headers_t {
    ethernet_t ethernet;
    ipv6_t     ipv6;
    udp_t      udp;
    mrc_t      mrc;
}

struct local_metadata_t {
    bit<1>   host_facing;     // the egress port faces a host (last hop)
    bit<1>   trim;            // cut this data packet to its headers at egress
    qdepth_t ecn_threshold;   // mark CE above this egress queue depth (packets)
    qdepth_t trim_threshold;  // trim data above this egress queue depth (packets)
    mac_addr_t port_mac;      // the egress port's own MAC
}

// The backlog of each egress port's data queue, for the trimming decision at ingress.
// v1model shows queue depths only at egress, when a packet leaves its queue, but a
// packet must be trimmed before it joins one: ingress counts every data packet it
// sends into a queue, and egress resets the count to the true depth each time a data
// packet leaves. Between two departures (50 ms apart on a slow port) the count keeps
// up with a burst, and a packet the queue dropped is forgotten at the next departure.
// Declared at the top level so both controls share it.
register<bit<32>>(MAX_PORTS) data_backlog;

#endif
