// Telemetry Report v2.0 built in egress from the sink's ingress mirror
// copy (report_decision.p4), which holds the packet as the sink received
// it: IPv4, UDP, INT shim and INT-MD header, the stack, the BTH. The
// report encapsulation goes in front and the Ethernet header goes; a copy
// sent to the CPU port also gets a packet_in header.
//
// Differences from v1model: the sink's own metadata has its ports and
// the time it received the packet (egress_ts), but hop latency,
// occupancy and the congested flag are 0 (ingress cannot know the sink's
// queue); and the payload after the BTH is not cut off (Tofino cannot
// truncate in egress): the report's lengths count the headers only, and
// the controller may set the session's `packet_length_bytes` to cut it.
#ifndef METAROCE_TNA_REPORT_P4
#define METAROCE_TNA_REPORT_P4

#include "metadata.p4"

const bit<16> REPORT_SRC_PORT = 50000;

control ReportBuilder(inout egress_headers_t hdr, inout egress_metadata_t meta,
                      in egress_intrinsic_metadata_t eg_intr_md,
                      inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Register<bit<32>, bit<1>>(1) report_seq;
    Counter<bit<32>, bit<1>>(1, CounterType_t.PACKETS) reports_sent;

    RegisterAction<bit<32>, bit<1>, bit<32>>(report_seq) next_seq = {
        void apply(inout bit<32> value, out bit<32> seq) {
            seq = value;
            value = value + 1;
        }
    };

    // MetaroceEgress.int_egress.report_config in the contract.
    @name(".MetaroceEgress.int_egress.set_report_encap")
    action set_report_encap(mac_addr_t src_mac, mac_addr_t dst_mac, ipv4_addr_t src_ip, ipv4_addr_t dst_ip,
                            bit<16> dst_port) {
        meta.report_src_mac = src_mac;
        meta.report_dst_mac = dst_mac;
        meta.report_src_ip = src_ip;
        meta.report_dst_ip = dst_ip;
        meta.report_dst_port = dst_port;
    }

    // Where Telemetry Reports go; a zero destination address turns them off.
    @name(".MetaroceEgress.int_egress.report_config")
    table report_config {
        key = {}
        actions = {
            set_report_encap;
        }
        default_action = set_report_encap(0, 0, 0, 0, 32766);
        size = 1;
    }

    @hidden
    action set_report_lengths(bit<16> words, bit<16> ip_len, bit<16> udp_len) {
        meta.report_words = words;
        meta.report_ip_len = ip_len;
        meta.report_udp_len = udp_len;
    }

    // The report's lengths: in words, group header (2), individual report
    // and the sink's metadata (3 + REPORT_MD_WORDS), the inner packet
    // (IPv4 5, UDP 2, shim 1 and `len` more, the BTH 3); the IPv4 and UDP
    // lengths add the 20 + 8 + 8 + 4 and 8 + 8 + 4 bytes in front. A table:
    // an action that computed them would span stages. `len` is one of the
    // five ingress accepts.
    @hidden
    table report_lengths {
        key = {
            hdr.int_hdr.len: exact @name("len");
            meta.report_bth: exact @name("bth");
        }
        actions = {
            set_report_lengths;
            @defaultonly NoAction;
        }
        const entries = {
            (3, 0): set_report_lengths(18, 112, 92);
            (3, 1): set_report_lengths(21, 124, 104);
            (9, 0): set_report_lengths(24, 136, 116);
            (9, 1): set_report_lengths(27, 148, 128);
            (15, 0): set_report_lengths(30, 160, 140);
            (15, 1): set_report_lengths(33, 172, 152);
            (21, 0): set_report_lengths(36, 184, 164);
            (21, 1): set_report_lengths(39, 196, 176);
            (27, 0): set_report_lengths(42, 208, 188);
            (27, 1): set_report_lengths(45, 220, 200);
        }
        const default_action = NoAction();
        size = 16;
    }

    apply {
        report_config.apply();
        if (meta.report_dst_ip == 0) {
            eg_dprsr_md.drop_ctl = 1;
            exit;
        }
        meta.report_bth = 0;
        // The BTH follows the stack of a RoCEv2 packet (egress does not
        // parse it; ingress dropped the copy's packet had it been cut).
        if (hdr.udp.dst_port == UDP_PORT_ROCEV2) {
            meta.report_bth = 1;
        }
        report_lengths.apply();
        hdr.ethernet.setInvalid();

        hdr.report.setValid();
        hdr.report.eth_dst = meta.report_dst_mac;
        hdr.report.eth_src = meta.report_src_mac;
        hdr.report.eth_type = ETHERTYPE_IPV4;
        hdr.report.ip_version = 4;
        hdr.report.ip_ihl = 5;
        hdr.report.ip_dscp = 0;
        hdr.report.ip_ecn = 0;
        hdr.report.ip_total_len = meta.report_ip_len;
        hdr.report.ip_identification = 0;
        hdr.report.ip_flags = 2; // don't fragment
        hdr.report.ip_frag_offset = 0;
        hdr.report.ip_ttl = 64;
        hdr.report.ip_protocol = IP_PROTO_UDP;
        hdr.report.ip_src = meta.report_src_ip;
        hdr.report.ip_dst = meta.report_dst_ip;
        hdr.report.udp_src_port = REPORT_SRC_PORT;
        hdr.report.udp_dst_port = meta.report_dst_port;
        hdr.report.udp_len = meta.report_udp_len;
        hdr.report.udp_checksum = 0;

        bit<32> seq = next_seq.execute(0);
        hdr.report.version = REPORT_VERSION;
        hdr.report.hw_id = 0;
        hdr.report.seq_no = seq[21:0];
        hdr.report.node_id = hdr.report_copy.switch_id;
        hdr.report.rep_type = REPORT_TYPE_INT;
        hdr.report.in_type = REPORT_INNER_IPV4;
        hdr.report.report_len = (bit<8>)meta.report_words;
        hdr.report.md_len = REPORT_MD_WORDS;
        hdr.report.dropped = 0;
        hdr.report.congested = 0;
        hdr.report.tracked = 1;
        hdr.report.intermediate = 0;
        hdr.report.reserved = 0;
        hdr.report.rep_md_bits = REPORT_MD_BITS;
        hdr.report.domain_id = 0;
        hdr.report.ds_md_bits = 0;
        hdr.report.ds_md_status = 0;
        hdr.report.ingress_port = hdr.report_copy.ingress_port;
        hdr.report.egress_port = hdr.report_copy.egress_port;
        hdr.report.hop_latency = 0;
        hdr.report.queue_id = 0;
        hdr.report.occupancy = 0;
        hdr.report.egress_ts = (bit<64>)hdr.report_copy.ingress_ts;

        if (eg_intr_md.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = hdr.report_copy.ingress_port;
            hdr.packet_in.reason = PACKET_IN_REPORT;
            hdr.packet_in.reserved = 0;
        }
        reports_sent.count(0);
    }
}

#endif
