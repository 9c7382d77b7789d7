// Per-packet metadata of the v1model program.
#ifndef METAROCE_V1MODEL_METADATA_P4
#define METAROCE_V1MODEL_METADATA_P4

#include "../shared/headers.p4"

// Field lists preserved across clones and recirculation (v1model).
#define FL_REPORT 1
#define FL_DIGEST 2

// What an egress clone copy is for.
const bit<8> COPY_REPORT = 1;
const bit<8> COPY_DIGEST = 2;

// standard_metadata.instance_type values of BMv2.
const bit<32> PKT_INSTANCE_TYPE_EGRESS_CLONE = 2;
const bit<32> PKT_INSTANCE_TYPE_RECIRC = 4;

// BMv2 reports the CPU port given by --cpu-port; metaroce uses 255.
const bit<9> CPU_PORT = 255;

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

struct metadata_t {
    bit<8> drop_reason;
    // Switch configuration (the `config` table's default action).
    bit<32> switch_id;
    bit<48> flowlet_timeout;
    bit<48> digest_interval;
    bit<48> report_period;
    bit<8> latency_shift;
    // Flow identity and entropy.
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    bit<24> entropy;
    bit<32> flow_hash;
    bit<16> flow_sig;
    // Routing and flowlets.
    bit<16> group_id;
    bit<16> nhop_id;
    bit<16> flowlet_id;
    bit<1> routed;
    bit<1> new_flowlet;
    // Edge ports and INT roles.
    bit<1> ingress_edge;
    bit<1> egress_edge;
    bit<16> egress_mtu;
    bit<1> int_source;
    bit<8> int_max_hops;
    // Egress thresholds.
    bit<32> queue_high;
    bit<32> queue_low;
    bit<32> ecn_threshold;
    // Preserved into egress clone copies.
    @field_list(FL_REPORT, FL_DIGEST)
    bit<8> copy_kind;
    @field_list(FL_REPORT, FL_DIGEST)
    bit<32> copy_switch_id;
    // Digest copy contents (also preserved through recirculation).
    @field_list(FL_DIGEST)
    bit<16> digest_port;
    @field_list(FL_DIGEST)
    bit<32> digest_depth;
    @field_list(FL_DIGEST)
    bit<48> digest_time;
    @field_list(FL_DIGEST)
    bit<32> digest_seq;
    @field_list(FL_DIGEST)
    bit<8> digest_congested;
    // Report copy contents: the sink's own metadata ...
    @field_list(FL_REPORT)
    bit<16> rep_ingress_port;
    @field_list(FL_REPORT)
    bit<16> rep_egress_port;
    @field_list(FL_REPORT)
    bit<32> rep_hop_latency;
    @field_list(FL_REPORT)
    bit<24> rep_occupancy;
    @field_list(FL_REPORT)
    bit<64> rep_egress_ts;
    @field_list(FL_REPORT)
    bit<1> rep_congested;
    // ... the INT headers as the sink received them ...
    @field_list(FL_REPORT)
    bit<8> rep_shim_len;
    @field_list(FL_REPORT)
    bit<6> rep_original_dscp;
    @field_list(FL_REPORT)
    bit<32> rep_md0;
    @field_list(FL_REPORT)
    bit<32> rep_md1;
    @field_list(FL_REPORT)
    bit<32> rep_md2;
    @field_list(FL_REPORT)
    bit<8> rep_words;
#define REPORT_WORD(i) @field_list(FL_REPORT) bit<32> rep_w##i;
    REPORT_WORD(0) REPORT_WORD(1) REPORT_WORD(2) REPORT_WORD(3) REPORT_WORD(4) REPORT_WORD(5)
    REPORT_WORD(6) REPORT_WORD(7) REPORT_WORD(8) REPORT_WORD(9) REPORT_WORD(10) REPORT_WORD(11)
    REPORT_WORD(12) REPORT_WORD(13) REPORT_WORD(14) REPORT_WORD(15) REPORT_WORD(16) REPORT_WORD(17)
    REPORT_WORD(18) REPORT_WORD(19) REPORT_WORD(20) REPORT_WORD(21) REPORT_WORD(22) REPORT_WORD(23)
    // ... and where to send the report.
    @field_list(FL_REPORT)
    bit<48> rep_src_mac;
    @field_list(FL_REPORT)
    bit<48> rep_dst_mac;
    @field_list(FL_REPORT)
    bit<32> rep_src_ip;
    @field_list(FL_REPORT)
    bit<32> rep_dst_ip;
    @field_list(FL_REPORT)
    bit<16> rep_dst_port;
}

#endif
