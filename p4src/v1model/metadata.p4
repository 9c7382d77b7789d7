// Per-packet metadata of the v1model program.
#ifndef METAROCE_V1MODEL_METADATA_P4
#define METAROCE_V1MODEL_METADATA_P4

#include "../shared/headers.p4"

// Field lists preserved across clones and recirculation (v1model).
#define FL_REPORT 1
#define FL_DIGEST 2


// standard_metadata.instance_type values of BMv2.
const bit<32> PKT_INSTANCE_TYPE_NORMAL = 0;
const bit<32> PKT_INSTANCE_TYPE_EGRESS_CLONE = 2;
const bit<32> PKT_INSTANCE_TYPE_RECIRC = 4;

// BMv2 reports the CPU port given by --cpu-port; metaroce uses 255.
const bit<9> CPU_PORT = 255;
// A port_down key no port has (ports are 9 bits): nothing to check.
const bit<16> PORT_NONE = 0xffff;

// Clone sessions the controller configures.
const bit<32> REPORT_SESSION = 500;
const bit<32> DIGEST_SESSION = 501;

// Threshold digest: one port's queue crossed its high (congested = 1) or
// low (congested = 0) threshold.
struct queue_digest_t {
    bit<32> switch_id;
    bit<16> port;
    bit<32> depth;
    bit<48> timestamp;
    bit<32> seq;
    bit<8> congested;
}

// Large-flow digest: the bytes one flow slot counted in one window
// (see large_flows.p4). `flow` is the steer_flow key of the packet that
// closed the window: ipv4 src ++ dst ++ UDP source port ++ dest QP.
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

// Drain pairing digest (drain.p4): what the controller needs to pair the
// queue pair an ACK names with its data's. `hosts` is the data's
// direction: IPv4 source ++ destination ++ protocol. `report` is kind (8)
// ++ QP (24) ++ PSN (24): kind 0, a data queue pair took a slot at its
// first leaf (its QP, its packet's PSN); kind 1, an ACK or NAK of a queue
// pair with no qp_pair entry reached its sender's leaf (the ACK's QP and
// PSN). Two members, not five: BMv2 copies every member into a field of
// its own, which it then resets for every packet. The switch is the one
// whose stream carries the digest.
struct drain_pair_digest_t {
    bit<72> hosts;
    bit<56> report;
}

// BMv2 resets every metadata field of every packet, and every field write
// is a bignum operation, so the cost of this struct is per field, not per
// bit: settings that an action writes together are kept in one wide field
// (one write) and read back through the slices below, and locals that would
// become one temporary per use are kept here once.
struct metadata_t {
    // `config`: switch_id ++ flowlet_timeout_us.
    bit<80> config;
    // Flow identity (the key itself is hdr.flow_key).
    // crc32: slot in the low bits, signature in the high 16. Egress, which
    // needs it no more, uses the field as scratch (SCRATCH_B): one field
    // less to reset.
    bit<32> flow_hash;
    bit<32> flow_slot;    // flow_hash mod FLOWLET_SLOTS (register index)
    // Routing and flowlets.
    bit<16> group_id;
    bit<16> nhop_id;
    bit<16> flowlet_id;
    // Rare per-packet flags, zero for most packets, in one field (one
    // reset instead of four), read through the FLAG_ macros below:
    // new flowlet (bit 0), threshold crossing (1), ECN as received when
    // this hop marks CE (1 ++ ECN, bits 4:2), INT source (1 ++ max_hops
    // when the watchlist matched, bits 13:5), the new flowlet follows a
    // steer entry (14). Bits 15 and up live in ingress only (egress tests
    // bits 14:0): the packet arrived on a host-facing port (15), the drain
    // rule is on (16), the packet updates a drain slot (17), an ACK no
    // qp_pair entry pairs (18), a pairing digest to send (19), one to send
    // if the slot's last is older than the interval (20). 28 bits: with 20
    // the struct's widths added up to whole bytes, and must still (else
    // p4c pads it with one more field to reset).
    bit<28> flags;
    // `egress_config`: digest_interval_us ++ report_period_us ++ latency_shift.
    // Ingress, which needs it not, keeps the large-flow detector's
    // settings here (LF_CONFIG): egress always applies `egress_config`
    // before it reads the field. One field less to reset.
    bit<104> egress_cfg;
    // `egress_port_config`: edge ++ mtu ++ queue_high ++ queue_low ++ ecn_threshold.
    bit<113> port_cfg;
    // Register reads and intermediate values, shared by the controls in
    // turn instead of one field per local variable (see above).
    bit<48> scratch_time;
    bit<32> scratch_a;
    bit<16> scratch_16;
    bit<8> scratch_8;
    // Preserved into egress clone copies. BMv2 resets every field of every
    // packet and a clone copies its list field by field, so each copy's
    // values are one field, written at once, whose top bit says that the
    // copy is for it (see the macros below).
    // Digest copy: 1 ++ switch_id ++ port ++ depth ++ timestamp ++ seq ++
    // congested.
    @field_list(FL_DIGEST)
    bit<169> digest_copy;
    // Report copy: 1 ++ the sink's own metadata (185: switch_id ++ ingress
    // port ++ egress port ++ hop latency ++ occupancy ++ egress ts ++
    // congested) ++ the INT headers as the sink received them (112: shim
    // length ++ original DSCP ++ ECN ++ the 96-bit INT-MD header) ++ the
    // hops (768) ++ where to send it (176: `report_config`'s src_mac ++
    // dst_mac ++ src_ip ++ dst_ip ++ dst_port, which it writes first).
    @field_list(FL_REPORT)
    bit<1242> report_copy;
}

// A step whose results stay in their fields: p4c copy-propagates values
// assigned in control code into every later use, and turns every use that
// is an expression argument of an extern (a register index or value) into
// a new temporary field, which BMv2 then resets for every packet. Values
// assigned in the action of a table are left alone.
#define HIDDEN_STEP(name, body) \
    @hidden action name##_action() { body } \
    @hidden table name { actions = { name##_action; } const default_action = name##_action(); }

#define CFG_SWITCH_ID(m) m.config[79:48]
#define CFG_FLOWLET_TIMEOUT(m) m.config[47:0]
#define CFG_DIGEST_INTERVAL(m) m.egress_cfg[103:56]
#define CFG_REPORT_PERIOD(m) m.egress_cfg[55:8]
#define CFG_LATENCY_SHIFT(m) m.egress_cfg[7:0]
#define PORT_EDGE(m) m.port_cfg[112:112]
#define PORT_MTU(m) m.port_cfg[111:96]
#define PORT_QUEUE_HIGH(m) m.port_cfg[95:64]
#define PORT_QUEUE_LOW(m) m.port_cfg[63:32]
#define PORT_ECN_THRESHOLD(m) m.port_cfg[31:0]
#define SCRATCH_B(m) m.flow_hash
#define FLAG_NEW_FLOWLET(m) m.flags[0:0]
#define FLAG_CROSSING(m) m.flags[1:1]
#define FLAG_ECN_RECEIVED(m) m.flags[4:2]
#define FLAG_INT_SOURCE(m) m.flags[13:5]
#define FLAG_STEERED(m) m.flags[14:14]
#define FLAGS_EGRESS(m) m.flags[14:0]
#define FLAG_EDGE(m) m.flags[15:15]
#define FLAG_DRAIN_ON(m) m.flags[16:16]
#define FLAG_DRAIN_SLOT(m) m.flags[17:17]
#define FLAG_DRAIN_UNPAIRED(m) m.flags[18:18]
#define FLAG_DRAIN_REPORT(m) m.flags[19:19]
#define FLAG_DRAIN_ASK(m) m.flags[20:20]
// A drain slot as the drain step reads it (drain.p4), into fields that
// routing refills after it: slot_owner into flow_slot (the owner's
// signature, 31 bits, 0: never used ++ NAK outstanding), slot_psn into
// scratch_time (fwd_next ++ acked).
// The pairing digests' rate limit, written by drain's config (ingress
// holds nothing else in egress_cfg while routing runs).
#define DRAIN_PAIR_INTERVAL(m) m.egress_cfg[31:0]
#define DRAIN_SIG(m) m.flow_slot[31:1]
#define DRAIN_NAK(m) m.flow_slot[0:0]
#define DRAIN_FWD(m) m.scratch_time[47:24]
#define DRAIN_ACKED(m) m.scratch_time[23:0]
#define DRAINED(m) (DRAIN_NAK(m) == 0 && DRAIN_FWD(m) == DRAIN_ACKED(m))
// 24-bit serial arithmetic: a comes after b (PSNs start anywhere and wrap).
#define PSN_AFTER(a, b) ((a) != (b) && (bit<24>)((a) - (b)) < 24w0x800000)
#define LF_WINDOW(m) m.egress_cfg[63:32]
#define LF_THRESHOLD(m) m.egress_cfg[31:0]
#define IS_DIGEST_COPY(m) (m.digest_copy[168:168] == 1)
#define IS_REPORT_COPY(m) (m.report_copy[1241:1241] == 1)
#define DIGEST_DATA(m, hi, lo) m.digest_copy[(hi):(lo)]
#define REP_SINK(m, hi, lo) m.report_copy[1056 + (hi):1056 + (lo)]
#define REP_INT(m, hi, lo) m.report_copy[944 + (hi):944 + (lo)]
#define REP_HOPS(m, hi, lo) m.report_copy[176 + (hi):176 + (lo)]
#define REP_ENCAP(m, hi, lo) m.report_copy[(hi):(lo)]
#define REP_DST_IP(m) REP_ENCAP(m, 47, 16)

#endif
