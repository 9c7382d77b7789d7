// Telemetry Report v2.0 built in the egress copy made by the sink: the
// INT headers the sink stripped are restored from the preserved field
// list, the report encapsulation is put in front, and the payload cut.
// A copy sent to the CPU port also gets a packet_in header.
#ifndef METAROCE_V1MODEL_REPORT_P4
#define METAROCE_V1MODEL_REPORT_P4

#include "metadata.p4"

// Hop i of the saved stack (HOP_ML 6 words): bits B (its top) down to
// B - 191 of the saved hops (REP_HOPS).
#define RESTORE_HOP(i, B) if (REP_INT(meta, 111, 104) >= 3 + 6 * (i + 1)) { \
    hdr.int_hops[i].setValid(); \
    hdr.int_hops[i].node_id = REP_HOPS(meta, B, B - 31); \
    hdr.int_hops[i].ingress_port = REP_HOPS(meta, B - 32, B - 47); \
    hdr.int_hops[i].egress_port = REP_HOPS(meta, B - 48, B - 63); \
    hdr.int_hops[i].hop_latency = REP_HOPS(meta, B - 64, B - 95); \
    hdr.int_hops[i].queue_id = REP_HOPS(meta, B - 96, B - 103); \
    hdr.int_hops[i].occupancy = REP_HOPS(meta, B - 104, B - 127); \
    hdr.int_hops[i].egress_ts = REP_HOPS(meta, B - 128, B - 191); }

const bit<16> REPORT_SRC_PORT = 50000;

control ReportBuilder(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<32>, bit<32>>(1) report_seq;
    counter<bit<32>>(1, CounterType.packets) reports_sent;

    // Read, counted and written back in one action: BMv2 holds an action's
    // registers locked while it runs, so two copies of one report built by
    // different egress threads (a collector port and the CPU port) never
    // take the same number.
    HIDDEN_STEP(next_seq,
        report_seq.read(meta.scratch_a, 0);
        SCRATCH_B(meta) = meta.scratch_a + 1;
        report_seq.write(0, SCRATCH_B(meta));)

    action restore_int() {
        bit<16> bytes = 4 + ((bit<16>)REP_INT(meta, 111, 104) << 2);
        hdr.int_hdr.setValid();
        hdr.int_hdr.int_type = INT_TYPE_MD;
        hdr.int_hdr.npt = 0;
        hdr.int_hdr.reserved0 = 0;
        hdr.int_hdr.len = REP_INT(meta, 111, 104);
        hdr.int_hdr.reserved1 = 0;
        hdr.int_hdr.original_dscp = REP_INT(meta, 103, 98);
        hdr.int_hdr.reserved2 = 0;
        hdr.int_hdr.version = REP_INT(meta, 95, 92);
        hdr.int_hdr.discard = REP_INT(meta, 91, 91);
        hdr.int_hdr.hop_exceeded = REP_INT(meta, 90, 90);
        hdr.int_hdr.mtu_exceeded = REP_INT(meta, 89, 89);
        hdr.int_hdr.reserved = REP_INT(meta, 88, 77);
        hdr.int_hdr.hop_ml = REP_INT(meta, 76, 72);
        hdr.int_hdr.remaining_hops = REP_INT(meta, 71, 64);
        hdr.int_hdr.instructions = REP_INT(meta, 63, 48);
        hdr.int_hdr.domain_id = REP_INT(meta, 47, 32);
        hdr.int_hdr.ds_instructions = REP_INT(meta, 31, 16);
        hdr.int_hdr.ds_flags = REP_INT(meta, 15, 0);
        hdr.ipv4.total_len = hdr.ipv4.total_len + bytes;
        hdr.ipv4.dscp = REP_INT(meta, 103, 98) | INT_DSCP_BIT;
        // The header as the sink received it: routing decremented the TTL
        // of every packet that reaches a sink, and queue sensing may have
        // marked CE.
        hdr.ipv4.ttl = hdr.ipv4.ttl + 1;
        hdr.ipv4.ecn = REP_INT(meta, 97, 96);
        hdr.udp.len = hdr.udp.len + bytes;
    }

    apply {
        restore_int();
        RESTORE_HOP(0, 767) RESTORE_HOP(1, 575) RESTORE_HOP(2, 383) RESTORE_HOP(3, 191)
        // The inner packet starts at IPv4 (InType 4), keeping it 4-byte aligned:
        // IPv4, UDP, shim, INT-MD and the stack, then the BTH.
        hdr.ethernet.setInvalid();
        // scratch_time: the report length in words (group header,
        // individual report, sink metadata, inner packet).
        meta.scratch_time = (bit<48>)(2 + REPORT_MD_WORDS + 8 + REP_INT(meta, 111, 104));
        if (hdr.bth.isValid()) {
            meta.scratch_time = meta.scratch_time + 3;
        }
#define REPORT_LEN ((bit<8>)meta.scratch_time)
#define UDP_LEN (8 + 8 + 4 + ((bit<16>)meta.scratch_time << 2))

        hdr.report.setValid();
        hdr.report.eth_dst = REP_ENCAP(meta, 127, 80);
        hdr.report.eth_src = REP_ENCAP(meta, 175, 128);
        hdr.report.eth_type = ETHERTYPE_IPV4;
        hdr.report.ip_version = 4;
        hdr.report.ip_ihl = 5;
        hdr.report.ip_dscp = 0;
        hdr.report.ip_ecn = 0;
        hdr.report.ip_total_len = 20 + UDP_LEN;
        hdr.report.ip_identification = 0;
        hdr.report.ip_flags = 2; // don't fragment
        hdr.report.ip_frag_offset = 0;
        hdr.report.ip_ttl = 64;
        hdr.report.ip_protocol = IP_PROTO_UDP;
        hdr.report.ip_src = REP_ENCAP(meta, 79, 48);
        hdr.report.ip_dst = REP_ENCAP(meta, 47, 16);
        hdr.report.udp_src_port = REPORT_SRC_PORT;
        hdr.report.udp_dst_port = REP_ENCAP(meta, 15, 0);
        hdr.report.udp_len = UDP_LEN;
        hdr.report.udp_checksum = 0;

        next_seq.apply();
        hdr.report.version = REPORT_VERSION;
        hdr.report.hw_id = 0;
        hdr.report.seq_no = meta.scratch_a[21:0];
        hdr.report.node_id = REP_SINK(meta, 184, 153);
        hdr.report.rep_type = REPORT_TYPE_INT;
        hdr.report.in_type = REPORT_INNER_IPV4;
        hdr.report.report_len = REPORT_LEN;
        hdr.report.md_len = REPORT_MD_WORDS;
        hdr.report.dropped = 0;
        hdr.report.congested = REP_SINK(meta, 0, 0);
        hdr.report.tracked = 1;
        hdr.report.intermediate = 0;
        hdr.report.reserved = 0;
        hdr.report.rep_md_bits = REPORT_MD_BITS;
        hdr.report.domain_id = 0;
        hdr.report.ds_md_bits = 0;
        hdr.report.ds_md_status = 0;
        hdr.report.ingress_port = REP_SINK(meta, 152, 137);
        hdr.report.egress_port = REP_SINK(meta, 136, 121);
        hdr.report.hop_latency = REP_SINK(meta, 120, 89);
        hdr.report.queue_id = 0;
        hdr.report.occupancy = REP_SINK(meta, 88, 65);
        hdr.report.egress_ts = REP_SINK(meta, 64, 1);

        // SCRATCH_B: the frame's length.
        SCRATCH_B(meta) = 14 + 20 + (bit<32>)UDP_LEN;
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = REP_SINK(meta, 152, 137);
            hdr.packet_in.reason = PACKET_IN_REPORT;
            hdr.packet_in.reserved = 0;
            SCRATCH_B(meta) = SCRATCH_B(meta) + 4;
        }
        truncate(SCRATCH_B(meta));
        reports_sent.count(0);
    }
}

#endif
