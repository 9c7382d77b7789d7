// Every size in one place: tables, registers, INT limits.
#ifndef METAROCE_SIZES_P4
#define METAROCE_SIZES_P4

#define ROUTE_TABLE_SIZE 16384      // LPM routes (per-leaf subnets and host /32s)
#define NHOP_TABLE_SIZE 1024        // next hops (one per egress port and neighbor)
#define GROUP_SELECTOR_SIZE 4096    // action selector members, summed over groups
#define GROUP_SELECTOR_HASH_BITS 16 // width of the selector hash
#define FLOWLET_SLOTS 8192          // flowlet registers, indexed by a flow hash
#define FLOWLET_INDEX_BITS 13       // log2(FLOWLET_SLOTS)
#define PORT_COUNT 512              // 9-bit ports: per-port registers and counters
#define INT_WATCHLIST_SIZE 64       // flows to instrument
#define INT_REPORT_SLOTS 8192       // per-flow report sampling state
#define DROP_REASON_COUNT 16        // drop counter cells, one per reason
#define STEER_FLOW_TABLE_SIZE 4096  // steered flows (exact: ipv4 src, dst, UDP source port, dest QP)
#define STEER_PAIR_TABLE_SIZE 1024  // steered host pairs (exact: ipv4 src, dst)
#define DRAIN_SLOTS 4096           // drain rule slots at a flow's first leaf (a power of two)
#define QP_PAIR_TABLE_SIZE 4096    // ACK queue pair -> data queue pair (exact: ipv4 src, dst, dest QP)
#define DRAIN_EVENT_COUNT 8        // drain.events cells, one per DRAIN_ event
// Large-flow detector registers, indexed by the flow slot of the flowlet
// registers (the same hash bits), so they must be as many.
#define LARGE_FLOW_SLOTS FLOWLET_SLOTS

// INT-MD: the hops of a 3-tier Clos path (leaf, spine, super-spine, spine,
// leaf), each adding HOP_WORDS 32-bit words (node id, ports, hop latency,
// queue, egress timestamp x2).
#define INT_MAX_HOPS 5
#define INT_HOP_WORDS 6
// Hops (and words) a received stack may hold before this hop adds its own.
#define INT_MAX_STACK_HOPS 4
#define INT_MAX_STACK_WORDS 24

#endif
