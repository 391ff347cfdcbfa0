/*
 * mrc-testbed switch: SRv6 micro-SID shift-and-forward with static tables, ECN
 * marking (off the last hop, but at every hop for the RoCE class DSCP_ROCE), and
 * trimming of the data packets that ask for it (DSCP_TRIMMABLE) into a strict-priority
 * queue.
 *
 * Target: v1model on BMv2 simple_switch_grpc, started with `--priority-queues 8`.
 * Tables are written once at start-up by controller/ over P4Runtime and never change:
 *   my_usid      the switch's own uSID (one entry)
 *   next_hop     next active uSID -> egress port, next-hop MAC (one per neighbour)
 *   port_config  per port: MAC, host-facing, ECN and trim thresholds (one per port)
 * See docs/p4-switch.md.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"
#include "include/parser.p4"
#include "include/ingress.p4"
#include "include/egress.p4"

V1Switch(
    MrcParser(),
    MrcVerifyChecksum(),
    MrcIngress(),
    MrcEgress(),
    MrcComputeChecksum(),
    MrcDeparser()
) main;
