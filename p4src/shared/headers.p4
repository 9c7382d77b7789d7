// Packet headers shared by every target.
#ifndef METAROCE_HEADERS_P4
#define METAROCE_HEADERS_P4

#include "sizes.p4"

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<6> dscp;
    bit<2> ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4> data_offset;
    bit<4> res;
    bit<8> flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

// InfiniBand Base Transport Header, as carried by RoCEv2 (12 bytes).
header bth_t {
    bit<8> opcode;
    bit<1> solicited;
    bit<1> mig_req;
    bit<2> pad_count;
    bit<4> tver;
    bit<16> pkey;
    bit<1> fecn;
    bit<1> becn;
    bit<6> reserved0;
    bit<24> dest_qp;
    bit<1> ack_req;
    bit<7> reserved1;
    bit<24> psn;
}

// INT shim for TCP/UDP (INT v2.1). `len` counts the INT-MD header and the
// stack in 4-byte words, not the shim itself. With DSCP signalling (NPT=0)
// the last byte carries the original DSCP in its top six bits.
header int_shim_t {
    bit<4> int_type;
    bit<2> npt;
    bit<2> reserved0;
    bit<8> len;
    bit<8> reserved1;
    bit<6> original_dscp;
    bit<2> reserved2;
}

// INT-MD metadata header (12 bytes).
header int_md_t {
    bit<4> version;
    bit<1> discard;
    bit<1> hop_exceeded;
    bit<1> mtu_exceeded;
    bit<12> reserved;
    bit<5> hop_ml;
    bit<8> remaining_hops;
    bit<16> instructions;
    bit<16> domain_id;
    bit<16> ds_instructions;
    bit<16> ds_flags;
}

// This hop's metadata, in instruction-bit order; each is pushed on top of
// the stack (emitted right after int_md).
header int_node_id_t {
    bit<32> node_id;
}

header int_l1_ports_t {
    bit<16> ingress_port;
    bit<16> egress_port;
}

header int_hop_latency_t {
    bit<32> hop_latency;
}

header int_queue_t {
    bit<8> queue_id;
    bit<24> occupancy;
}

header int_egress_ts_t {
    bit<64> egress_ts;
}

// One 32-bit word of the stack received from upstream hops.
header int_word_t {
    bit<32> data;
}

// Telemetry Report v2.0: group header (8 bytes).
header report_group_t {
    bit<4> version;
    bit<6> hw_id;
    bit<22> seq_no;
    bit<32> node_id;
}

// Individual report header (4 bytes) and the fixed INT main contents (8 bytes).
header report_individual_t {
    bit<4> rep_type;
    bit<4> in_type;
    bit<8> report_len;
    bit<8> md_len;
    bit<1> dropped;
    bit<1> congested;
    bit<1> tracked;
    bit<1> intermediate;
    bit<4> reserved;
    bit<16> rep_md_bits;
    bit<16> domain_id;
    bit<16> ds_md_bits;
    bit<16> ds_md_status;
}

// The sink's own metadata in the report, in RepMdBits order (5 words).
header report_sink_md_t {
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<32> hop_latency;
    bit<8> queue_id;
    bit<24> occupancy;
    bit<64> egress_ts;
}

// Controller packet I/O on the CPU port.
@controller_header("packet_in")
header packet_in_t {
    bit<16> ingress_port;
    bit<8> reason;
    bit<8> reserved;
}

@controller_header("packet_out")
header packet_out_t {
    bit<16> egress_port;
    bit<8> flags;
    bit<8> reserved;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t packet_in;
    // Report encapsulation, emitted in front of the reported packet.
    ethernet_t report_ethernet;
    ipv4_t report_ipv4;
    udp_t report_udp;
    report_group_t report_group;
    report_individual_t report_individual;
    report_sink_md_t report_sink_md;
    // The packet itself.
    ethernet_t ethernet;
    ipv4_t ipv4;
    udp_t udp;
    tcp_t tcp;
    int_shim_t int_shim;
    int_md_t int_md;
    int_node_id_t int_node_id;
    int_l1_ports_t int_l1_ports;
    int_hop_latency_t int_hop_latency;
    int_queue_t int_queue;
    int_egress_ts_t int_egress_ts;
    int_word_t[INT_MAX_STACK_WORDS] int_stack;
    bth_t bth;
}

#endif
