// SPDX-License-Identifier: GPL-2.0
/*
 * The switch features of the kernel data plane: one tc program on the clsact egress
 * hook of every switch port (docs/ebpf-switch.md), loaded once and attached to every
 * port, its maps shared and keyed by the port's interface index.
 *
 * The kernel forwards (SRv6 uSID shift, next hop); this program does what the P4
 * switch does on top of forwarding, reading no further than the UDP header and
 * deciding by the DSCP alone (docs/protocol.md "Traffic classes"):
 *
 *   - TRAFFIC CLASSES: the DSCP picks a behaviour (the `dscp_class` map, written once
 *     from the topology): priority (control, trimmed headers, CNPs), trimmable data,
 *     best-effort data, or lossless (the RoCE baseline's class);
 *   - QUEUES: a virtual queue per behaviour (bytes, drained at the port's link rate,
 *     the priority queue first, the lossless one only while it is not paused) stands
 *     for the port's real htb classes, as NDP's Tofino switch uses a meter as its
 *     estimate of the queue; skb->priority picks the real class;
 *   - TRIMMING as SONiC configures it: trimmable data that finds its queue at or over
 *     the trim threshold is cut to the trim size, its lengths fixed, its DSCP rewritten
 *     to TRIMMED, or TRIMMED_LASTHOP on a port facing a host, and sent in the priority
 *     queue; a trimmed packet that finds no room there is dropped (DROPPED_TRIM_PKTS);
 *   - ECN, RED-like: an ECT packet of a data class is marked CE with a probability
 *     that rises linearly from 0 at Kmin to Pmax at Kmax, and always at or over Kmax;
 *     "at random" is the Weyl sequence of the port's marking decisions, so the P4
 *     switch, counting the same way, takes the very same decision for the same packet;
 *     never on a port facing a host, except for the lossless class (DCQCN);
 *   - PFC for the lossless class: it is never dropped; the bytes each ingress port has
 *     queued in its switch are counted, and past XOFF the port at the other end of that
 *     link is paused (its lossless virtual queue stops), resumed below XON, hop by hop
 *     back to the sending NIC; an event on the `pfc_events` ring tells user space,
 *     which holds a paused NIC's sender and shuts a paused switch port's lossless
 *     leaf (experiments/dataplanes/pfc.py); a timer drains the lossless queue of a port
 *     that no packet visits;
 *   - faults: random loss per port and gray loss per destination prefix;
 *   - counters per port, with SONiC's names for trimming.
 *
 * Every value comes from the maps, written from Python (controller/ebpf_config.py);
 * the behaviour and counter numbers come from the compiler command line (-D, built from
 * hosts/protocol.py and the config module), so none is written down here twice.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <linux/time.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#if !defined(BEHAVIOUR_BEST_EFFORT) || !defined(BEHAVIOUR_TRIMMABLE) \
    || !defined(BEHAVIOUR_PRIORITY) || !defined(BEHAVIOUR_LOSSLESS) \
    || !defined(ECN_CE) || !defined(VQ_MAX_IDLE_USEC) || !defined(PFC_SLOTS) \
    || !defined(PFC_TICK_NS) || !defined(MODE_SWITCH) || !defined(MODE_FAULTS) \
    || !defined(PFC_XOFF) || !defined(PFC_XON) || !defined(ETH_P_WAKE) \
    || !defined(COUNTER_COUNT) \
    || !defined(COUNTER_FORWARDED) || !defined(COUNTER_TRIM_PKTS) \
    || !defined(COUNTER_TX_TRIM_PKTS) || !defined(COUNTER_DROPPED_TRIM_PKTS) \
    || !defined(COUNTER_ECN_MARKED) || !defined(COUNTER_DROPPED) \
    || !defined(COUNTER_FAULT_DROPPED) || !defined(COUNTER_PFC_XOFF_RX) \
    || !defined(COUNTER_PFC_XOFF_TX) || !defined(WEYL_STEP)
#error "build with controller.ebpf_config.compile_command(): it passes the facts"
#endif

#define ETH_LEN sizeof(struct ethhdr)
#define OFF_IP6 ETH_LEN
#define OFF_UDP (OFF_IP6 + sizeof(struct ipv6hdr))
#define HEADERS_LEN (OFF_UDP + sizeof(struct udphdr))
#define ECN_MASK 0x03
#define NSEC_PER_USEC 1000ULL
#define USEC_PER_SEC 1000000ULL
#define PROBABILITY_ONE 65536

/* Per-port settings (HASH by ifindex). Field order and sizes are those of
 * controller/ebpf_config.py (PORT_CONFIG); tests/integration/test_ebpf_switch.py checks
 * both against this object's BTF. */
struct port_config {
    __u64 rate_bytes_per_s;        /* virtual queues drain at the link rate */
    __u32 ecn_kmin_bytes;          /* RED: no mark below */
    __u32 ecn_kmax_bytes;          /* RED: every ECT packet marked at or above */
    __u32 ecn_pmax;                /* mark probability at Kmax, in 1/65536 */
    __u32 trim_threshold_bytes;    /* trim trimmable data at or above */
    __u32 drop_threshold_bytes;    /* the data queue's limit: tail drop at or above */
    __u32 priority_limit_bytes;    /* the priority queue's limit */
    __u32 trim_size_bytes;         /* frame bytes a trimmed packet keeps */
    __u32 xoff_bytes;              /* PFC: what this port's ingress may queue ... */
    __u32 xon_bytes;               /* ... before its peer pauses, and resumes */
    __u32 peer_ifindex;            /* the port at the other end of the link, 0: none */
    __u32 classid_priority;        /* skb->priority of each real htb class */
    __u32 classid_lossless;
    __u32 classid_data;
    __u8 host_facing;              /* last hop: ECN for the lossless class only */
    __u8 dscp_trimmed;             /* the DSCP a trim here writes */
    __u8 mode;                     /* MODE_SWITCH, MODE_FAULTS (faults only), 0: pass */
    __u8 pad;
};

/* What a port's queues hold now (HASH by ifindex), under its lock. */
struct port_state {
    struct bpf_spin_lock lock;
    __u32 paused;                  /* the peer's ingress is past XOFF: hold lossless */
    __u64 priority_bytes;
    __u64 lossless_bytes;
    __u64 data_bytes;
    __u64 last_ns;
    __u64 ecn_seq;                 /* ECN decisions taken so far (the Weyl sequence) */
    __u64 paused_since_ns;
    __u64 paused_total_ns;
    __u32 timer_armed;
    __u32 timer_ready;
    __u32 pause_seq;               /* pauses and resumes applied so far (events' order) */
    __u32 slot_ifindex[PFC_SLOTS]; /* lossless bytes queued here, by ingress port */
    __u64 slot_bytes[PFC_SLOTS];
    struct bpf_timer timer;
};

/* The lossless bytes an ingress port has queued in its switch (HASH by ifindex). */
struct ingress_state {
    __u64 bytes;
    __u32 xoff;                    /* 1 while its peer is paused */
    __u32 pad;
};

struct counters {
    __u64 value[COUNTER_COUNT];
};

/* A destination prefix with gray loss on one port: the IPv6 address the packet has as
 * it leaves the port (its uSID path), preceded by the port's ifindex (big endian, so
 * that it is the first 32 bits of the prefix). */
struct gray_key {
    __u32 prefixlen;
    __u32 ifindex;
    __u8 addr[16];
};

struct pfc_event {
    __u32 kind;                    /* PFC_XOFF or PFC_XON */
    __u32 ifindex;                 /* the port paused or resumed */
    __u64 seq;                     /* the port's pause_seq after this change */
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct port_config);
} ports SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct port_state);
} state SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct ingress_state);
} ingress SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} dscp_class SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct counters);
} counters SEC(".maps");

/* Random loss of a port: a packet is lost when prandom_u32 < the threshold
 * (probability x 2^32; 2^32 loses every packet). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, __u64);
} port_loss SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(max_entries, 1024);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct gray_key);
    __type(value, __u64);          /* loss threshold, as in port_loss */
} gray_loss SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 1 << 16);
} pfc_events SEC(".maps");

#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

enum queue { QUEUE_DATA, QUEUE_PRIORITY, QUEUE_LOSSLESS };

static __always_inline void count(__u32 ifindex, __u32 index)
{
    struct counters *c = bpf_map_lookup_elem(&counters, &ifindex);

    if (c && index < COUNTER_COUNT)
        __sync_fetch_and_add(&c->value[index], 1);
}

static __always_inline int lost(__u64 threshold)
{
    return threshold && (__u64)bpf_get_prandom_u32() < threshold;
}

/* What draining a lossless queue took from each ingress port, to be applied outside
 * the port's lock. */
struct drained {
    __u32 ifindex[PFC_SLOTS];
    __u64 bytes[PFC_SLOTS];
};

/* Drain the virtual queues by the time since the last update (under the lock): the
 * priority queue first, then the lossless one unless paused, then data. Lossless bytes
 * leave each ingress's share in proportion (a FIFO, taken as a fluid). */
static __always_inline void drain(struct port_state *st, const struct port_config *cfg,
                                  __u64 now, struct drained *out)
{
    __u64 elapsed_us = now > st->last_ns ? (now - st->last_ns) / NSEC_PER_USEC : 0;

    /* An idle port's queues are empty at any rate it accepts; the cap keeps
     * elapsed x rate inside 64 bits. */
    if (elapsed_us > VQ_MAX_IDLE_USEC)
        elapsed_us = VQ_MAX_IDLE_USEC;
    __u64 budget = elapsed_us * cfg->rate_bytes_per_s / USEC_PER_SEC;
    __u64 take = st->priority_bytes < budget ? st->priority_bytes : budget;

    st->priority_bytes -= take;
    budget -= take;
    if (!st->paused && st->lossless_bytes) {
        __u64 total = st->lossless_bytes, left = total;

        take = total < budget ? total : budget;
        budget -= take;
        for (int k = 0; k < PFC_SLOTS; k++) {
            __u64 share = take == total ? st->slot_bytes[k]
                                        : st->slot_bytes[k] * take / total;

            if (share > st->slot_bytes[k])
                share = st->slot_bytes[k];
            st->slot_bytes[k] -= share;
            left -= share < left ? share : left;
            out->ifindex[k] = st->slot_ifindex[k];
            out->bytes[k] = share;
        }
        st->lossless_bytes = left;
    }
    take = st->data_bytes < budget ? st->data_bytes : budget;
    st->data_bytes -= take;
    if (now > st->last_ns)
        st->last_ns = now;
}

static __always_inline void pfc_event(__u32 kind, __u32 ifindex, __u64 seq)
{
    struct pfc_event ev = {.kind = kind, .ifindex = ifindex, .seq = seq};

    bpf_ringbuf_output(&pfc_events, &ev, sizeof(ev), 0);
}

/* Make the peer of ingress port `ifindex` paused exactly while that ingress is past
 * XOFF (`in->xoff`, read under the peer's lock), and tell user space if it changed.
 * Reading the flag, not being told its new value, is what keeps the two in step when
 * two CPUs pause and resume the same peer at once: whichever takes the lock last sees
 * the last value. The events of two such changes may reach the ring in either order;
 * their `seq` says which came last. */
static __always_inline void sync_peer(__u32 ifindex, const struct port_config *cfg,
                                      struct ingress_state *in, __u64 now)
{
    if (!cfg->peer_ifindex)
        return;
    __u32 peer = cfg->peer_ifindex;
    struct port_state *st = bpf_map_lookup_elem(&state, &peer);

    if (!st)
        return;
    __u32 want, changed = 0, seq = 0;

    bpf_spin_lock(&st->lock);
    want = READ_ONCE(in->xoff);
    if (want && !st->paused) {
        st->paused = 1;
        st->paused_since_ns = now;
        changed = 1;
    } else if (!want && st->paused) {
        st->paused = 0;
        st->paused_total_ns += now - st->paused_since_ns;
        changed = 1;
    }
    if (changed)
        seq = ++st->pause_seq;
    bpf_spin_unlock(&st->lock);
    if (!changed)
        return;
    if (want) {
        count(ifindex, COUNTER_PFC_XOFF_TX);
        count(peer, COUNTER_PFC_XOFF_RX);
    }
    pfc_event(want ? PFC_XOFF : PFC_XON, peer, seq);
}

/* How many times account() looks again at an ingress port after changing its XOFF
 * state: each look that changes it again means another CPU moved its bytes across a
 * threshold meanwhile. */
#define PFC_SETTLE_LOOKS 4

/* An ingress port's queued bytes grew or shrank by `delta`: past XOFF its peer
 * pauses, at or below XON it resumes. Looked at again after each change, since
 * another CPU may have moved the bytes the other way while this one changed the state
 * (its own change then failed, the state being not yet what it expected). */
static __always_inline void account(__u32 ifindex, __s64 delta, __u64 now)
{
    struct ingress_state *in = bpf_map_lookup_elem(&ingress, &ifindex);
    struct port_config *cfg = bpf_map_lookup_elem(&ports, &ifindex);

    if (!in || !cfg)
        return;
    __sync_fetch_and_add(&in->bytes, delta);
    for (int look = 0; look < PFC_SETTLE_LOOKS; look++) {
        __s64 bytes = (__s64)READ_ONCE(in->bytes);
        __u32 to;

        if (bytes > (__s64)cfg->xoff_bytes)
            to = 1;
        else if (bytes <= (__s64)cfg->xon_bytes)
            to = 0;
        else
            return;  /* between the thresholds: the state stands */
        if (__sync_val_compare_and_swap(&in->xoff, !to, to) != !to)
            return;  /* already so: its last change was synced by whoever made it */
        /* The port sends its PAUSE whether or not the program runs at the other end. */
        if (to && !cfg->peer_ifindex)
            count(ifindex, COUNTER_PFC_XOFF_TX);
        sync_peer(ifindex, cfg, in, now);
    }
}

static __always_inline void settle(const struct drained *out, __u64 now)
{
    for (int k = 0; k < PFC_SLOTS; k++)
        if (out->ifindex[k] && out->bytes[k])
            account(out->ifindex[k], -(__s64)out->bytes[k], now);
}

static int drain_timer(void *map, __u32 *key, struct port_state *st);

/* Keep a lossless queue draining while no packet visits its port. */
static __always_inline void arm(struct port_state *st)
{
    if (!st->timer_ready) {
        /* -EBUSY when another CPU got there first: the timer is set up all the same. */
        bpf_timer_init(&st->timer, &state, CLOCK_MONOTONIC);
        bpf_timer_set_callback(&st->timer, drain_timer);
        st->timer_ready = 1;
    }
    if (__sync_val_compare_and_swap(&st->timer_armed, 0, 1) == 0)
        bpf_timer_start(&st->timer, PFC_TICK_NS, 0);
}

static int drain_timer(void *map, __u32 *key, struct port_state *st)
{
    struct port_config *cfg = bpf_map_lookup_elem(&ports, key);
    struct drained out = {};
    __u64 now = bpf_ktime_get_ns(), left;

    if (!cfg)
        return 0;
    bpf_spin_lock(&st->lock);
    drain(st, cfg, now, &out);
    left = st->lossless_bytes;
    bpf_spin_unlock(&st->lock);
    settle(&out, now);
    st->timer_armed = 0;
    if (left)
        arm(st);
    return 0;
}

/* RED with a Weyl sequence: the mark probability at `backlog`, against the sequence's
 * next value (n x WEYL_STEP mod 2^16, spread evenly over [0, 2^16)). */
static __always_inline int red(struct port_state *st, const struct port_config *cfg,
                               __u64 backlog)
{
    if (backlog < cfg->ecn_kmin_bytes)
        return 0;
    __u64 x = (st->ecn_seq++ * WEYL_STEP) & (PROBABILITY_ONE - 1);

    if (backlog >= cfg->ecn_kmax_bytes)
        return 1;
    __u64 p = (__u64)cfg->ecn_pmax * (backlog - cfg->ecn_kmin_bytes)
              / (cfg->ecn_kmax_bytes - cfg->ecn_kmin_bytes);
    return x < p;
}

SEC("tc")
int mrc_port(struct __sk_buff *skb)
{
    __u32 port = skb->ifindex;
    struct port_config *cfg = bpf_map_lookup_elem(&ports, &port);

    if (!cfg || !cfg->mode)
        return TC_ACT_OK;
    /* PFC's wake-up frame (experiments/dataplanes/pfc.py): sent by a resume only to make
     * the port's qdisc send the lossless queue it let go; not the fabric's traffic. */
    if (skb->protocol == bpf_htons(ETH_P_WAKE))
        return TC_ACT_OK;

    __u8 ip6_first[2] = {0, 0};  /* version, traffic class, flow label (first bits) */
    struct gray_key dst = {.prefixlen = 32 + 128, .ifindex = bpf_htonl(port)};
    __u32 behaviour = BEHAVIOUR_BEST_EFFORT, ipv6 = 0, udp = 0;

    if (skb->protocol == bpf_htons(ETH_P_IPV6)
            && bpf_skb_load_bytes(skb, OFF_IP6, ip6_first, sizeof(ip6_first)) == 0
            && bpf_skb_load_bytes(skb, OFF_IP6 + offsetof(struct ipv6hdr, daddr),
                                  dst.addr, sizeof(dst.addr)) == 0) {
        __u8 next_hdr = 0;

        ipv6 = 1;
        udp = bpf_skb_load_bytes(skb, OFF_IP6 + offsetof(struct ipv6hdr, nexthdr),
                                 &next_hdr, 1) == 0
              && next_hdr == IPPROTO_UDP && skb->len >= HEADERS_LEN;
    }
    /* Traffic class = low nibble of byte 0, high nibble of byte 1; DSCP its top six
     * bits, ECN its low two. */
    __u32 dscp = ((ip6_first[0] & 0x0f) << 2) | (ip6_first[1] >> 6);
    __u8 ecn = (ip6_first[1] >> 4) & ECN_MASK;

    if (ipv6) {
        __u32 *found = bpf_map_lookup_elem(&dscp_class, &dscp);

        if (found)
            behaviour = *found;
    }

    int trim = 0, drop = 0, mark = 0, dropped_trim = 0;
    enum queue queue = QUEUE_DATA;
    __u64 now = bpf_ktime_get_ns();
    __u32 len = skb->len, in_port = skb->ingress_ifindex;

    if (cfg->mode == MODE_SWITCH) {
        struct port_state *st = bpf_map_lookup_elem(&state, &port);
        struct drained out = {};
        int lossless = 0, slotted = 0;

        if (!st)
            return TC_ACT_OK;
        bpf_spin_lock(&st->lock);
        drain(st, cfg, now, &out);
        if (behaviour == BEHAVIOUR_PRIORITY) {
            queue = QUEUE_PRIORITY;
            if (st->priority_bytes >= cfg->priority_limit_bytes)
                drop = 1;
            else
                st->priority_bytes += len;
        } else if (behaviour == BEHAVIOUR_LOSSLESS) {
            /* Never dropped: past XOFF its upstream is paused instead. */
            queue = QUEUE_LOSSLESS;
            lossless = 1;
            mark = ecn && red(st, cfg, st->lossless_bytes);
            st->lossless_bytes += len;
            for (int k = 0; k < PFC_SLOTS && in_port && !slotted; k++) {
                if (st->slot_ifindex[k] == in_port
                        || (st->slot_ifindex[k] == 0 && st->slot_bytes[k] == 0)) {
                    st->slot_ifindex[k] = in_port;
                    st->slot_bytes[k] += len;
                    slotted = 1;
                }
            }
        } else if (behaviour == BEHAVIOUR_TRIMMABLE && udp
                   && st->data_bytes >= cfg->trim_threshold_bytes
                   && len > cfg->trim_size_bytes) {
            trim = 1;
            queue = QUEUE_PRIORITY;
            if (st->priority_bytes >= cfg->priority_limit_bytes)
                dropped_trim = 1;
            else
                st->priority_bytes += cfg->trim_size_bytes;
        } else if (st->data_bytes >= cfg->drop_threshold_bytes) {
            drop = 1;
        } else {
            mark = ipv6 && ecn && !cfg->host_facing && red(st, cfg, st->data_bytes);
            st->data_bytes += len;
        }
        bpf_spin_unlock(&st->lock);
        settle(&out, now);
        if (lossless) {
            if (slotted)
                account(in_port, len, now);
            arm(st);
        }
    }

    if (drop) {
        count(port, COUNTER_DROPPED);
        return TC_ACT_SHOT;
    }
    if (trim) {
        count(port, COUNTER_TRIM_PKTS);
        if (dropped_trim) {
            count(port, COUNTER_DROPPED_TRIM_PKTS);
            return TC_ACT_SHOT;
        }
        __be16 l4_len = bpf_htons(cfg->trim_size_bytes - OFF_UDP);
        /* The DSCP becomes the trimmed class's; the version, ECN and flow label stay. */
        __u8 tc = (cfg->dscp_trimmed << 2) | ecn;
        __u8 tclass[2] = {(ip6_first[0] & 0xf0) | (tc >> 4),
                          ((tc & 0x0f) << 4) | (ip6_first[1] & 0x0f)};

        /* A packet the kernel cannot cut (a GSO aggregate, say) is dropped, as a full
         * queue would drop it, rather than sent whole into the priority class. */
        if (bpf_skb_change_tail(skb, cfg->trim_size_bytes, 0)
                || bpf_skb_store_bytes(skb, OFF_IP6, tclass, sizeof(tclass), 0)
                || bpf_skb_store_bytes(skb, OFF_IP6 + offsetof(struct ipv6hdr, payload_len),
                                       &l4_len, sizeof(l4_len), 0)
                || bpf_skb_store_bytes(skb, OFF_UDP + offsetof(struct udphdr, len),
                                       &l4_len, sizeof(l4_len), 0)) {
            count(port, COUNTER_DROPPED_TRIM_PKTS);
            return TC_ACT_SHOT;
        }
        count(port, COUNTER_TX_TRIM_PKTS);
    } else if (mark) {
        __u8 byte1 = ip6_first[1] | (ECN_CE << 4);

        if (bpf_skb_store_bytes(skb, OFF_IP6 + 1, &byte1, 1, 0) == 0)
            count(port, COUNTER_ECN_MARKED);
    }

    /* Faults act on the wire, after the queue. */
    __u64 *loss = bpf_map_lookup_elem(&port_loss, &port);

    if (loss && lost(*loss)) {
        count(port, COUNTER_FAULT_DROPPED);
        return TC_ACT_SHOT;
    }
    if (ipv6) {
        __u64 *gray = bpf_map_lookup_elem(&gray_loss, &dst);

        if (gray && lost(*gray)) {
            count(port, COUNTER_FAULT_DROPPED);
            return TC_ACT_SHOT;
        }
    }

    if (cfg->mode == MODE_SWITCH)
        skb->priority = queue == QUEUE_PRIORITY ? cfg->classid_priority
                        : queue == QUEUE_LOSSLESS ? cfg->classid_lossless
                        : cfg->classid_data;
    count(port, COUNTER_FORWARDED);
    return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
