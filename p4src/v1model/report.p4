// Telemetry Report v2.0 built in the egress copy made by the sink: the
// INT headers the sink stripped are restored from the preserved field
// list, the report encapsulation is put in front, and the payload cut.
// A copy sent to the CPU port also gets a packet_in header.
#ifndef METAROCE_V1MODEL_REPORT_P4
#define METAROCE_V1MODEL_REPORT_P4

#include "metadata.p4"

#define RESTORE_WORD(i) if (meta.rep_words > i) { hdr.int_stack[i].setValid(); hdr.int_stack[i].data = meta.rep_w##i; }

const bit<16> REPORT_SRC_PORT = 50000;

control ReportBuilder(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<32>>(1) report_seq;
    counter(1, CounterType.packets) reports_sent;

    action restore_int() {
        bit<16> bytes = 4 + ((bit<16>)meta.rep_shim_len << 2);
        hdr.int_shim.setValid();
        hdr.int_shim.int_type = INT_TYPE_MD;
        hdr.int_shim.npt = 0;
        hdr.int_shim.reserved0 = 0;
        hdr.int_shim.len = meta.rep_shim_len;
        hdr.int_shim.reserved1 = 0;
        hdr.int_shim.original_dscp = meta.rep_original_dscp;
        hdr.int_shim.reserved2 = 0;
        hdr.int_md.setValid();
        hdr.int_md.version = meta.rep_md0[31:28];
        hdr.int_md.discard = meta.rep_md0[27:27];
        hdr.int_md.hop_exceeded = meta.rep_md0[26:26];
        hdr.int_md.mtu_exceeded = meta.rep_md0[25:25];
        hdr.int_md.reserved = meta.rep_md0[24:13];
        hdr.int_md.hop_ml = meta.rep_md0[12:8];
        hdr.int_md.remaining_hops = meta.rep_md0[7:0];
        hdr.int_md.instructions = meta.rep_md1[31:16];
        hdr.int_md.domain_id = meta.rep_md1[15:0];
        hdr.int_md.ds_instructions = meta.rep_md2[31:16];
        hdr.int_md.ds_flags = meta.rep_md2[15:0];
        hdr.ipv4.total_len = hdr.ipv4.total_len + bytes;
        hdr.ipv4.dscp = meta.rep_original_dscp | INT_DSCP_BIT;
        // Routing decremented the TTL of every packet that reaches a sink;
        // the report carries the header as the sink received it.
        hdr.ipv4.ttl = hdr.ipv4.ttl + 1;
        hdr.udp.len = hdr.udp.len + bytes;
        RESTORE_WORD(0) RESTORE_WORD(1) RESTORE_WORD(2) RESTORE_WORD(3) RESTORE_WORD(4) RESTORE_WORD(5)
        RESTORE_WORD(6) RESTORE_WORD(7) RESTORE_WORD(8) RESTORE_WORD(9) RESTORE_WORD(10) RESTORE_WORD(11)
        RESTORE_WORD(12) RESTORE_WORD(13) RESTORE_WORD(14) RESTORE_WORD(15) RESTORE_WORD(16) RESTORE_WORD(17)
        RESTORE_WORD(18) RESTORE_WORD(19) RESTORE_WORD(20) RESTORE_WORD(21) RESTORE_WORD(22) RESTORE_WORD(23)
    }

    apply {
        restore_int();
        // The inner packet starts at IPv4 (InType 4), keeping it 4-byte aligned.
        hdr.ethernet.setInvalid();
        bit<8> inner_words = 11 + meta.rep_words;
        if (hdr.bth.isValid()) {
            inner_words = inner_words + 3;
        }
        bit<8> report_len = 2 + REPORT_MD_WORDS + inner_words;
        bit<16> udp_len = 8 + 8 + 4 + ((bit<16>)report_len << 2);

        hdr.report_ethernet.setValid();
        hdr.report_ethernet.dst_addr = meta.rep_dst_mac;
        hdr.report_ethernet.src_addr = meta.rep_src_mac;
        hdr.report_ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.report_ipv4.setValid();
        hdr.report_ipv4.version = 4;
        hdr.report_ipv4.ihl = 5;
        hdr.report_ipv4.dscp = 0;
        hdr.report_ipv4.ecn = 0;
        hdr.report_ipv4.total_len = 20 + udp_len;
        hdr.report_ipv4.identification = 0;
        hdr.report_ipv4.flags = 2; // don't fragment
        hdr.report_ipv4.frag_offset = 0;
        hdr.report_ipv4.ttl = 64;
        hdr.report_ipv4.protocol = IP_PROTO_UDP;
        hdr.report_ipv4.src_addr = meta.rep_src_ip;
        hdr.report_ipv4.dst_addr = meta.rep_dst_ip;
        hdr.report_udp.setValid();
        hdr.report_udp.src_port = REPORT_SRC_PORT;
        hdr.report_udp.dst_port = meta.rep_dst_port;
        hdr.report_udp.len = udp_len;
        hdr.report_udp.checksum = 0;

        bit<32> seq;
        report_seq.read(seq, 0);
        report_seq.write(0, seq + 1);
        hdr.report_group.setValid();
        hdr.report_group.version = REPORT_VERSION;
        hdr.report_group.hw_id = 0;
        hdr.report_group.seq_no = seq[21:0];
        hdr.report_group.node_id = meta.copy_switch_id;
        hdr.report_individual.setValid();
        hdr.report_individual.rep_type = REPORT_TYPE_INT;
        hdr.report_individual.in_type = REPORT_INNER_IPV4;
        hdr.report_individual.report_len = report_len;
        hdr.report_individual.md_len = REPORT_MD_WORDS;
        hdr.report_individual.dropped = 0;
        hdr.report_individual.congested = meta.rep_congested;
        hdr.report_individual.tracked = 1;
        hdr.report_individual.intermediate = 0;
        hdr.report_individual.reserved = 0;
        hdr.report_individual.rep_md_bits = REPORT_MD_BITS;
        hdr.report_individual.domain_id = 0;
        hdr.report_individual.ds_md_bits = 0;
        hdr.report_individual.ds_md_status = 0;
        hdr.report_sink_md.setValid();
        hdr.report_sink_md.ingress_port = meta.rep_ingress_port;
        hdr.report_sink_md.egress_port = meta.rep_egress_port;
        hdr.report_sink_md.hop_latency = meta.rep_hop_latency;
        hdr.report_sink_md.queue_id = 0;
        hdr.report_sink_md.occupancy = meta.rep_occupancy;
        hdr.report_sink_md.egress_ts = meta.rep_egress_ts;

        bit<32> frame = 14 + 20 + (bit<32>)udp_len;
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = meta.rep_ingress_port;
            hdr.packet_in.reason = PACKET_IN_REPORT;
            hdr.packet_in.reserved = 0;
            frame = frame + 4;
        }
        truncate(frame);
        reports_sent.count(0);
    }
}

#endif
