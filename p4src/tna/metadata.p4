// Headers and metadata of the TNA (Tofino) program that the v1model one
// does not have: what ingress bridges to egress, the mirror headers of the
// two copies (threshold digests, Telemetry Reports), the resubmit header
// of a flowlet whose pinned port went down, and the digest structs.
#ifndef METAROCE_TNA_METADATA_P4
#define METAROCE_TNA_METADATA_P4

#include "../shared/headers.p4"

// The CPU (PCIe) port: 192 on a two-pipe Tofino 1, 320 on a four-pipe one.
// Build with -DTNA_CPU_PORT=320 for the latter; the topology's
// `fabric.cpu_port` must say the same.
#ifndef TNA_CPU_PORT
#define TNA_CPU_PORT 192
#endif
const bit<9> CPU_PORT = TNA_CPU_PORT;

// Recirculation ports: local ports 68-71 of every pipe (Tofino 1). The
// controller points DIGEST_SESSION at one of them (68 on pipe 0); what
// arrives there is a threshold digest handed back by egress.
const bit<9> RECIRC_PORT_VALUE = 0x044;
const bit<9> RECIRC_PORT_MASK = 0x07c;

// Mirror sessions the controller configures (P4Runtime clone sessions).
const bit<10> REPORT_SESSION = 500;
const bit<10> DIGEST_SESSION = 501;

// What the first byte in front of a packet entering egress is.
const bit<8> KIND_BRIDGED = 1;   // a packet from ingress, with bridged_t
const bit<8> KIND_DIGEST = 2;    // egress mirror: a threshold digest copy
const bit<8> KIND_REPORT = 3;    // ingress mirror: a sink's report copy

// Mirror types (the deparser's mirror_type selects the mirror header).
const MirrorType_t MIRROR_TYPE_DIGEST = 1;
const MirrorType_t MIRROR_TYPE_REPORT = 2;
// Digest types of the ingress deparser: the digest receivers of v1model.
const DigestType_t DIGEST_TYPE_QUEUE = (DigestType_t)DIGEST_QUEUE;
const DigestType_t DIGEST_TYPE_LARGE_FLOW = (DigestType_t)DIGEST_LARGE_FLOW;
const DigestType_t DIGEST_TYPE_DRAIN_PAIR = (DigestType_t)DIGEST_DRAIN_PAIR;
// Resubmit type: a running flowlet whose pinned port is down.
const ResubmitType_t RESUBMIT_PORT_DOWN = 1;

// Threshold digest: one port's queue crossed its high (congested = 1) or
// low (congested = 0) threshold. Same members as on v1model.
struct queue_digest_t {
    bit<32> switch_id;
    bit<16> port;
    bit<32> depth;
    bit<48> timestamp;
    bit<32> seq;
    bit<8> congested;
}

// Large-flow digest (see large_flows.p4). Same members as on v1model.
struct large_flow_digest_t {
    bit<32> switch_id;
    bit<104> flow;
    bit<16> egress_port;
    bit<32> bytes;
    bit<32> window_us;
    bit<16> slot;
    bit<8> collision;
    bit<48> timestamp;
}

// The drain rule's pairing report (see drain.p4). Same members as on
// v1model: hosts = the data's source ++ destination ++ protocol; report =
// kind 8 (0 data, 1 unpaired ACK) ++ QP 24 ++ PSN 24 ++ the switch's time 48.
struct drain_pair_digest_t {
    bit<72> hosts;
    bit<104> report;
}

// The first 5 bytes of the BTH, which egress parses to clear the drain
// rule's mark on host-facing ports (the rest passes as payload).
header bth_mark_t {
    bit<32> head;
    bit<6> reserved;
    bit<2> mark;
}

// What egress needs of ingress, in front of every packet ingress sends on
// (19 bytes).
header bridged_t {
    bit<8> kind;
    bit<7> pad0;
    bit<9> ingress_port;
    bit<32> switch_id;
    bit<48> ingress_ts;           // ingress global_tstamp (ns)
    bit<8> int_source;            // 1: instrument at this hop (INT source)
    bit<8> int_max_hops;
    bit<32> digest_interval;      // egress_config's, in ns (low 32 bits)
}

// The threshold digest that egress mirrors to DIGEST_SESSION; the copy
// leaves through a recirculation port with this header in front, and the
// ingress deparser packs it into queue_digest_t (22 bytes).
header digest_copy_t {
    bit<8> kind;
    bit<32> switch_id;
    bit<16> port;
    bit<32> depth;
    bit<48> timestamp;
    bit<32> seq;
    bit<8> congested;
}

// In front of the sink's ingress mirror copy: the packet as the sink
// received it follows, INT stack included (15 bytes).
header report_copy_t {
    bit<8> kind;
    bit<32> switch_id;
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<48> ingress_ts;
}

// A running flowlet whose pinned port is down comes back as a new flowlet
// that draws from its group and ignores its steer entries (8 bytes: the
// resubmit header of Tofino 1).
header resubmit_t {
    bit<8> redraw;
    bit<56> pad;
}

struct ingress_headers_t {
    bridged_t bridged;
    digest_copy_t digest_copy;
    packet_out_t packet_out;
    packet_in_t packet_in;
    ethernet_t ethernet;
    ipv4_t ipv4;
    udp_t udp;
    tcp_t tcp;
    int_t int_hdr;
    int_hop_t[INT_MAX_STACK_HOPS] int_hops;
    bth_t bth;
    aeth_t aeth;
}

// Egress parses no further than the INT-MD header (see the egress
// parser): the INT stack, TCP and the BTH pass as payload.
struct egress_headers_t {
    bridged_t bridged;
    digest_copy_t digest_copy;
    report_copy_t report_copy;
    packet_in_t packet_in;
    report_t report;
    ethernet_t ethernet;
    ipv4_t ipv4;
    udp_t udp;
    int_t int_hdr;
    int_hop_t int_local;
    bth_mark_t bth_mark;
}

struct ingress_metadata_t {
    resubmit_t resubmit;
    // The parser's verdict: 0, or the drop reason of a packet it refused.
    bit<8> drop_reason;
    bool checksum_error;
    // Flow identity: L4 ports (0 unless TCP or UDP) and RoCE entropy (the
    // BTH destination QP, 0 unless RoCEv2).
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    bit<24> dest_qp;
    // `config`.
    bit<32> switch_id;
    bit<32> flowlet_timeout;
    // A configured interval - now: what a time register is added to (see
    // routing.p4's stamp_time).
    bit<32> flowlet_cutoff;
    bit<32> report_cutoff;
    bit<32> lf_cutoff;
    // Routing.
    bit<16> group_id;
    bit<16> nhop_id;
    bit<16> steer_nhop;
    bit<16> steer_port;
    bit<16> flowlet_id;
    bit<32> flow_hash;
    bit<13> flow_slot;
    bit<16> flow_sig;
    bit<16> egress_port;   // the port `forward` set (port_down's key, the large-flow digest's)
    bit<1> flowlet_other;  // swap_sig: the slot held another flow
    bit<1> flowlet_gap;    // stamp_time: the gap exceeds the timeout
    bool new_flowlet;
    bool steered;
    bool forwarded;
    bool redraw;
    // The port ingress_port_role is looked up with: the ingress port for
    // a packet without INT (source, large flows), the egress port for one
    // with INT (is this its sink?).
    bit<9> role_port;
    // `egress_config` (applied here: the sink's report decision is made in
    // ingress) and `large_flows.config`.
    bit<32> digest_interval;
    bit<8> latency_shift;
    bit<32> lf_threshold;
    // Large-flow digest values.
    bit<32> lf_start;
    bit<32> lf_elapsed;
    bit<32> lf_short;      // IPv4 total length - threshold (signed)
    bit<32> lf_bytes;      // an ended window's bytes; a running one's after this packet when they reach the threshold, else 0
    bit<8> lf_sig_differs; // 1: the slot's window is another flow's
    bit<8> lf_collision;
    // Telemetry Report decision at the sink.
    bit<32> latency_01;    // hops 0 and 1
    bit<32> latency_23;    // hops 2 and 3
    bit<32> path_latency;
    bit<16> int_minus_bytes;  // minus the INT bytes the sink strips
    bit<32> latency_bucket;
    bit<1> period_due;
    bit<1> report_due;
    bit<6> pad1;
    report_copy_t report_copy;
    MirrorId_t mirror_session;  // REPORT_SESSION (Tofino takes the session from a field)
    // Ingress time (large-flow and drain digests).
    bit<48> now;
    // The drain rule (drain.p4).
    bit<1> drain_on;
    bit<1> drain_rc;        // an RC request that arrived unmarked
    bit<1> drain_unpaired;  // an ACK no qp_pair entry pairs
    bit<1> drain_report;
    bit<2> drain_kind;
    bit<2> drain_arrived;   // the mark the packet arrived with
    bit<1> drain_owner;     // slot_owner: 1 the queue pair owns the slot
    bit<1> drain_fresh;     // slot_psn: the owner's data found it drained
    bit<1> drain_flag;      // slot_psn: an ACK or NAK moved it
    bit<5> pad2;
    bit<24> drain_qp;       // the data's QP
    bit<32> drain_hash;     // the slot (low 12 bits) and the owner's signature
    bit<32> drain_cutoff;   // pair_interval - now
    bit<32> drain_psn;      // PSN << 8
    bit<32> drain_next;     // (PSN + 1) << 8
    bit<32> drain_now;      // now, low bit set
    bit<32> drain_src;      // the data's source and destination
    bit<32> drain_dst;
}

struct egress_metadata_t {
    // `egress_port_config`.
    bit<1> edge;
    bit<16> mtu;
    bit<32> queue_high;
    bit<32> queue_low;
    bit<32> ecn_threshold;
    bit<32> depth;
    // Saturating differences, 0 when the first field is at most the
    // second: how Tofino orders two fields (a gateway orders a field
    // against constants only).
    bit<32> high_diff;     // queue_high |-| depth: 0 at or above queue_high
    bit<32> low_diff;      // depth |-| queue_low: 0 at or below queue_low
    bit<32> ecn_diff;      // ecn_threshold |-| depth: 0 at or above it
    bit<32> digest_cutoff; // now - digest interval (rate_limit)
    bit<16> ip_len_hop;    // IPv4 total length + 23
    bit<16> ip_len_source; // IPv4 total length + 39
    bit<16> mtu_room;      // mtu |-| (total length + 23): 0 when a 24-byte hop does not fit
    bit<16> mtu_room_source;  // the same at the source, after its 16 bytes of INT headers
    bit<8> congested_now;  // the state the depth puts the port in (1 congested)
    bit<8> crossing;       // 0 none, 1 up through queue_high, 2 down through queue_low
    MirrorId_t mirror_session;  // DIGEST_SESSION (Tofino takes the session from a field)
    bit<8> digest_due;
    bit<32> seq;
    digest_copy_t digest_copy;
    // `report_config` (report copies only).
    bit<48> report_src_mac;
    bit<48> report_dst_mac;
    bit<32> report_src_ip;
    bit<32> report_dst_ip;
    bit<16> report_dst_port;
    bit<16> report_words;
    bit<16> report_ip_len;
    bit<16> report_udp_len;
    bit<1> report_bth;     // the copy is RoCEv2: a BTH follows the INT stack
    bit<7> pad1;
}

#endif
