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

// Only the ports are read, together (the flow key); the rest of the
// 20-byte header is parsed (a truncated TCP header is dropped) as one
// opaque field, since a field costs per packet on BMv2 and nothing here
// reads or writes the others.
header tcp_t {
    bit<32> ports;    // source port ++ destination port
    bit<128> rest;    // seq, ack, data offset, flags, window, checksum, urgent
}

// InfiniBand Base Transport Header, as carried by RoCEv2 (12 bytes).
// The destination QP is path entropy; the opcode (head[31:24]) and the PSN
// (psn_word[23:0]) drive the drain rule, which keeps its marks in the two
// low reserved bits (reserved0[1:0]; see BTH_MARK_ below). The other
// fields are grouped.
header bth_t {
    bit<32> head;     // opcode, SE, M, pad, TVer, P_Key
    bit<8> reserved0; // FECN, BECN, reserved (6)
    bit<24> dest_qp;
    bit<32> psn_word; // AckReq, reserved, PSN
}

// ACK Extended Transport Header: follows the BTH of an RC Acknowledge.
// Syndrome bits 6:5 are 00 for an ACK, 01 for an RNR NAK, 11 for a NAK.
header aeth_t {
    bit<8> syndrome;
    bit<24> msn;
}

// INT shim for TCP/UDP (INT v2.1) and the INT-MD metadata header that
// always follows it, as one header (BMv2 pays for every declared header on
// every packet). Shim: `len` counts the INT-MD header and the stack in
// 4-byte words, not the shim itself; with DSCP signalling (NPT=0) the last
// byte carries the original DSCP in its top six bits. INT-MD: 12 bytes.
header int_t {
    // Shim (4 bytes).
    bit<4> int_type;
    bit<2> npt;
    bit<2> reserved0;
    bit<8> len;
    bit<8> reserved1;
    bit<6> original_dscp;
    bit<2> reserved2;
    // INT-MD header (12 bytes).
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

// One hop's metadata (HOP_ML 6 words), in instruction-bit order: node id,
// L1 ingress/egress port, hop latency, queue id + occupancy, egress
// timestamp. This hop pushes `int_local` on top of the received stack.
header int_hop_t {
    bit<32> node_id;
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<32> hop_latency;
    bit<8> queue_id;
    bit<24> occupancy;
    bit<64> egress_ts;
}

// A Telemetry Report v2.0 with its encapsulation, as one header: Ethernet,
// IPv4, UDP, the group header (8 bytes), the individual report header and
// the fixed INT main contents (12 bytes), and the sink's own metadata in
// RepMdBits order (5 words). One header rather than six because BMv2 pays
// for every declared header on every packet, report or not.
header report_t {
    mac_addr_t eth_dst;
    mac_addr_t eth_src;
    bit<16> eth_type;
    bit<4> ip_version;
    bit<4> ip_ihl;
    bit<6> ip_dscp;
    bit<2> ip_ecn;
    bit<16> ip_total_len;
    bit<16> ip_identification;
    bit<3> ip_flags;
    bit<13> ip_frag_offset;
    bit<8> ip_ttl;
    bit<8> ip_protocol;
    bit<16> ip_checksum;
    ipv4_addr_t ip_src;
    ipv4_addr_t ip_dst;
    bit<16> udp_src_port;
    bit<16> udp_dst_port;
    bit<16> udp_len;
    bit<16> udp_checksum;
    // Group header.
    bit<4> version;
    bit<6> hw_id;
    bit<22> seq_no;
    bit<32> node_id;
    // Individual report.
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
    // The sink's metadata.
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<32> hop_latency;
    bit<8> queue_id;
    bit<24> occupancy;
    bit<64> egress_ts;
}

// Not on the wire: the fields of the flow that path hashing covers, which
// the parser fills in. Hashing a header costs BMv2 nothing more than the
// hash, where a list of fields is first copied into temporaries.
header flow_key_t {
    bit<72> addresses;    // IPv4 source ++ destination ++ protocol: one write
    bit<32> l4_ports;     // L4 source ++ destination port, 0 when neither TCP nor UDP
    bit<24> entropy;      // RoCEv2 BTH destination QP, else 0
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
    // Report and its encapsulation, emitted in front of the reported packet.
    report_t report;
    // The packet itself.
    ethernet_t ethernet;
    ipv4_t ipv4;
    udp_t udp;
    tcp_t tcp;
    int_t int_hdr;  // shim and INT-MD
    int_hop_t int_local;
    int_hop_t[INT_MAX_STACK_HOPS] int_hops;
    bth_t bth;
    aeth_t aeth;
    // Parsed, never emitted.
    flow_key_t flow_key;
}

#endif
