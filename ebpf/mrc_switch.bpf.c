// SPDX-License-Identifier: GPL-2.0
/*
 * The MRC switch features of the kernel data plane: a tc program on the clsact egress
 * hook of one switch port (docs/ebpf-switch.md).
 *
 * The kernel forwards (SRv6 uSID shift, next hop); this program does what the P4
 * switch does on top of forwarding, for the port it is loaded on:
 *
 *   - a virtual queue (bytes, drained at the port's link rate) stands for the port's
 *     backlog, as NDP's Tofino switch uses a meter as its estimate of the queue;
 *   - an MRC DATA packet of the trimmable DSCP class that finds the virtual queue at or
 *     over the trim threshold is cut to its headers exactly as p4src/include/egress.p4
 *     does; untrimmable data is dropped once the virtual queue reaches the queue limit;
 *   - an ECN-capable packet of the data class that finds the virtual queue at or over
 *     the ECN threshold is marked CE, on a port facing a host only if it is of the
 *     RoCE DSCP class (ECN per traffic class, as in p4src/include/egress.p4);
 *   - control packets and trimmed headers go to the port's priority class (an htb class
 *     chosen through skb->priority), data to the data class;
 *   - random loss per port and "gray" loss per destination address prefix, for fault
 *     injection on kernels without netem;
 *   - per-port counters.
 *
 * Every value comes from the maps, written from Python (controller/ebpf_config.py), and
 * the protocol facts (UDP port, packet type, flags, header and trimmed lengths, the
 * trimmable and RoCE DSCPs, counter indexes) come from the compiler command line (-D,
 * built from hosts/protocol.py by controller/ebpf_config.py), so none of them is
 * written down here a second time. Each `tc filter add ... obj` load gets its own
 * instance of every map: one program, one set of maps per port.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#if !defined(MRC_UDP_PORT) || !defined(MRC_TYPE_DATA) || !defined(MRC_FLAG_TRIMMED) \
    || !defined(MRC_FLAG_TRIMMED_LASTHOP) || !defined(MRC_HEADER_LEN) \
    || !defined(MRC_TRIMMED_FRAME_BYTES) || !defined(MRC_TRIMMED_L4_BYTES) \
    || !defined(MRC_DSCP_TRIMMABLE) || !defined(MRC_DSCP_ROCE) || !defined(MRC_ECN_CE) \
    || !defined(VQ_MAX_IDLE_USEC) \
    || !defined(COUNTER_FORWARDED) || !defined(COUNTER_TRIMMED) \
    || !defined(COUNTER_ECN_MARKED) || !defined(COUNTER_DROPPED) \
    || !defined(COUNTER_FAULT_DROPPED) || !defined(COUNTER_COUNT)
#error "build with controller.ebpf_config.compile_command(): it passes the protocol facts"
#endif

#define ETH_LEN sizeof(struct ethhdr)
#define OFF_IP6 ETH_LEN
#define OFF_UDP (OFF_IP6 + sizeof(struct ipv6hdr))
#define OFF_MRC (OFF_UDP + sizeof(struct udphdr))
/* A trimmed packet keeps exactly the headers this program parses. */
_Static_assert(MRC_TRIMMED_FRAME_BYTES == OFF_MRC + MRC_HEADER_LEN, "trimmed frame");
_Static_assert(MRC_TRIMMED_L4_BYTES == sizeof(struct udphdr) + MRC_HEADER_LEN, "trimmed L4");

#define ECN_MASK 0x03
#define NSEC_PER_USEC 1000ULL
#define USEC_PER_SEC 1000000ULL

/* Per-port settings, one entry. The field order and sizes are those of
 * controller/ebpf_config.py (PORT_CONFIG); tests/integration/test_ebpf_switch.py
 * checks both against this object's BTF. */
struct port_config {
    __u64 rate_bytes_per_s;      /* virtual queue drain rate: the link rate */
    __u32 ecn_threshold_bytes;   /* CE at or above this virtual backlog */
    __u32 trim_threshold_bytes;  /* trim trimmable data at or above this backlog */
    __u32 drop_threshold_bytes;  /* drop untrimmable data at or above (queue limit) */
    __u32 classid_control;       /* skb->priority of control packets and trimmed headers */
    __u32 classid_data;          /* skb->priority of everything else */
    __u8 host_facing;            /* last hop: ECN marks for the RoCE class only,
                                  * TRIMMED_LASTHOP when trimming */
    __u8 enabled;                /* 0 until the configuration is written: pass all */
    __u8 pad[2];
};

struct vq_state {
    struct bpf_spin_lock lock;
    __u32 pad;
    __u64 bytes;    /* virtual backlog at last_ns */
    __u64 last_ns;
};

/* A destination prefix with gray loss: IPv6 address (the uSID path as it leaves this
 * port) and prefix length in bits. */
struct gray_key {
    __u32 prefixlen;
    __u8 addr[16];
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct port_config);
} config SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct vq_state);
} vqueue SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, COUNTER_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} counters SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(max_entries, 64);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct gray_key);
    __type(value, __u64);  /* loss threshold, as in port_loss */
} gray_loss SEC(".maps");

/* Random loss of the port: a packet is lost when prandom_u32 < the threshold
 * (probability x 2^32; 2^32 loses every packet). A map of its own, so a fault changes
 * it without rewriting the configuration. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} port_loss SEC(".maps");

enum pkt_class {
    CLASS_OTHER,         /* not IPv6: forwarded untouched, data class */
    CLASS_IPV6,          /* IPv6 but not MRC: data class, may be ECN-marked */
    CLASS_MRC_DATA,      /* untrimmed MRC DATA: trimmed or dropped by the queue */
    CLASS_MRC_CONTROL,   /* any other MRC packet, or a header trimmed upstream */
};

static __always_inline void count(__u32 index)
{
    __u64 *value = bpf_map_lookup_elem(&counters, &index);

    /* Per-CPU slots: no other CPU writes this one. */
    if (value)
        *value += 1;
}

static __always_inline int lost(__u64 threshold)
{
    return threshold && (__u64)bpf_get_prandom_u32() < threshold;
}

SEC("tc")
int mrc_port(struct __sk_buff *skb)
{
    __u32 zero = 0;
    struct port_config *cfg = bpf_map_lookup_elem(&config, &zero);
    struct vq_state *vq = bpf_map_lookup_elem(&vqueue, &zero);

    if (!cfg || !vq || !cfg->enabled)
        return TC_ACT_OK;

    enum pkt_class class = CLASS_OTHER;
    __u8 ip6_first[2] = {0, 0};  /* version, traffic class, flow label (first bits) */
    __u8 mrc_first[2] = {0, 0};  /* version/type, flags */
    struct gray_key dst = {.prefixlen = 128};

    if (skb->protocol == bpf_htons(ETH_P_IPV6)
            && bpf_skb_load_bytes(skb, OFF_IP6, ip6_first, sizeof(ip6_first)) == 0
            && bpf_skb_load_bytes(skb, OFF_IP6 + offsetof(struct ipv6hdr, daddr),
                                  dst.addr, sizeof(dst.addr)) == 0) {
        __u8 next_hdr = 0;
        struct udphdr udp;

        class = CLASS_IPV6;
        if (bpf_skb_load_bytes(skb, OFF_IP6 + offsetof(struct ipv6hdr, nexthdr),
                               &next_hdr, 1) == 0
                && next_hdr == IPPROTO_UDP
                && skb->len >= MRC_TRIMMED_FRAME_BYTES
                && bpf_skb_load_bytes(skb, OFF_UDP, &udp, sizeof(udp)) == 0
                && udp.dest == bpf_htons(MRC_UDP_PORT)
                && bpf_skb_load_bytes(skb, OFF_MRC, mrc_first, sizeof(mrc_first)) == 0) {
            int data = (mrc_first[0] & 0x0f) == MRC_TYPE_DATA
                       && !(mrc_first[1] & MRC_FLAG_TRIMMED);
            class = data ? CLASS_MRC_DATA : CLASS_MRC_CONTROL;
        }
    }

    /* Traffic class = low nibble of byte 0, high nibble of byte 1; DSCP its top six
     * bits, ECN its low two. */
    __u8 dscp = ((ip6_first[0] & 0x0f) << 2) | (ip6_first[1] >> 6);
    __u8 ecn = (ip6_first[1] >> 4) & ECN_MASK;
    int trim = 0, drop = 0, mark = 0;
    __u64 now = bpf_ktime_get_ns();

    /*
     * The virtual queue: what the port would hold if it sent at its link rate. It is
     * drained by the time since the last packet, then decides for this packet, which
     * then joins it (a trimmed packet with its header bytes only, a dropped one not at
     * all). Lost packets still join: the link carried them before losing them.
     */
    bpf_spin_lock(&vq->lock);
    __u64 elapsed_us = now > vq->last_ns ? (now - vq->last_ns) / NSEC_PER_USEC : 0;
    /* A port idle this long has an empty virtual queue at any rate it accepts; the cap
     * keeps elapsed x rate inside 64 bits. */
    if (elapsed_us > VQ_MAX_IDLE_USEC)
        elapsed_us = VQ_MAX_IDLE_USEC;
    __u64 drained = elapsed_us * cfg->rate_bytes_per_s / USEC_PER_SEC;
    __u64 backlog = vq->bytes > drained ? vq->bytes - drained : 0;

    if (class == CLASS_MRC_DATA && backlog >= cfg->trim_threshold_bytes
            && dscp == MRC_DSCP_TRIMMABLE)
        trim = 1;
    else if (class == CLASS_MRC_DATA && backlog >= cfg->drop_threshold_bytes)
        drop = 1;
    else if ((class == CLASS_MRC_DATA || class == CLASS_IPV6)
             && (!cfg->host_facing || dscp == MRC_DSCP_ROCE)
             && ecn != 0 && backlog >= cfg->ecn_threshold_bytes)
        /* ECN per traffic class (egress.p4). MRC's classes are never marked on a port
         * facing a host: the last hop is shared by every path to the host, so a mark
         * there says nothing about the path. The RoCE class is marked at every hop, as
         * a RoCE fabric marks it: DCQCN needs the last hop's marks to slow the senders
         * of an incast before the receiver's port overflows. */
        mark = 1;
    if (!drop)
        backlog += trim ? MRC_TRIMMED_FRAME_BYTES : skb->len;
    vq->bytes = backlog;
    if (now > vq->last_ns)
        vq->last_ns = now;
    bpf_spin_unlock(&vq->lock);

    if (drop) {
        count(COUNTER_DROPPED);
        return TC_ACT_SHOT;
    }

    if (trim) {
        __u8 flags = mrc_first[1] | MRC_FLAG_TRIMMED
                     | (cfg->host_facing ? MRC_FLAG_TRIMMED_LASTHOP : 0);
        __be16 l4_len = bpf_htons(MRC_TRIMMED_L4_BYTES);
        __u16 no_checksum = 0;

        /* A packet the kernel cannot cut (e.g. a GSO aggregate) is dropped, as a full
         * queue would drop it, rather than sent whole into the priority class. */
        if (bpf_skb_change_tail(skb, MRC_TRIMMED_FRAME_BYTES, 0)
                || bpf_skb_store_bytes(skb, OFF_IP6 + offsetof(struct ipv6hdr, payload_len),
                                       &l4_len, sizeof(l4_len), 0)
                || bpf_skb_store_bytes(skb, OFF_UDP + offsetof(struct udphdr, len),
                                       &l4_len, sizeof(l4_len), 0)
                || bpf_skb_store_bytes(skb, OFF_UDP + offsetof(struct udphdr, check),
                                       &no_checksum, sizeof(no_checksum), 0)
                || bpf_skb_store_bytes(skb, OFF_MRC + 1, &flags, 1, 0)) {
            count(COUNTER_DROPPED);
            return TC_ACT_SHOT;
        }
        count(COUNTER_TRIMMED);
    } else if (mark) {
        __u8 byte1 = ip6_first[1] | (MRC_ECN_CE << 4);

        if (bpf_skb_store_bytes(skb, OFF_IP6 + 1, &byte1, 1, 0) == 0)
            count(COUNTER_ECN_MARKED);
    }

    /* Faults act on the wire, after the queue. */
    __u64 *loss = bpf_map_lookup_elem(&port_loss, &zero);

    if (loss && lost(*loss)) {
        count(COUNTER_FAULT_DROPPED);
        return TC_ACT_SHOT;
    }
    if (class != CLASS_OTHER) {
        __u64 *gray = bpf_map_lookup_elem(&gray_loss, &dst);

        if (gray && lost(*gray)) {
            count(COUNTER_FAULT_DROPPED);
            return TC_ACT_SHOT;
        }
    }

    skb->priority = (trim || class == CLASS_MRC_CONTROL) ? cfg->classid_control
                                                         : cfg->classid_data;
    count(COUNTER_FORWARDED);
    return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
