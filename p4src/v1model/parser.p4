// Parser, deparser and checksums.
#ifndef METAROCE_V1MODEL_PARSER_P4
#define METAROCE_V1MODEL_PARSER_P4

#include "metadata.p4"

error {
    IPv4IncorrectVersion,
    IPv4OptionsNotSupported,
    IntUnsupported,
    IntStackTooDeep
}

parser MetaroceParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    bit<8> int_words_left = 0;

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.IPv4IncorrectVersion);
        verify(hdr.ipv4.ihl == 5, error.IPv4OptionsNotSupported);
        transition select(hdr.ipv4.protocol) {
            IP_PROTO_UDP: parse_udp;
            IP_PROTO_TCP: parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.ipv4.dscp & INT_DSCP_BIT, hdr.udp.dst_port) {
            (INT_DSCP_BIT, _): parse_int_shim;
            (_, UDP_PORT_ROCEV2): parse_bth;
            default: accept;
        }
    }

    state parse_int_shim {
        packet.extract(hdr.int_shim);
        verify(hdr.int_shim.int_type == INT_TYPE_MD, error.IntUnsupported);
        verify(hdr.int_shim.len >= 3, error.IntUnsupported);
        packet.extract(hdr.int_md);
        verify(hdr.int_md.version == INT_VERSION, error.IntUnsupported);
        int_words_left = hdr.int_shim.len - 3;
        verify(int_words_left <= INT_MAX_STACK_WORDS, error.IntStackTooDeep);
        transition select(int_words_left) {
            0: parse_after_int;
            default: parse_int_word;
        }
    }

    state parse_int_word {
        packet.extract(hdr.int_stack.next);
        int_words_left = int_words_left - 1;
        transition select(int_words_left) {
            0: parse_after_int;
            default: parse_int_word;
        }
    }

    state parse_after_int {
        transition select(hdr.udp.dst_port) {
            UDP_PORT_ROCEV2: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        meta.entropy = hdr.bth.dest_qp;
        transition accept;
    }
}

control MetaroceVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control MetaroceComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.report_ipv4.isValid(),
            { hdr.report_ipv4.version, hdr.report_ipv4.ihl, hdr.report_ipv4.dscp, hdr.report_ipv4.ecn,
              hdr.report_ipv4.total_len, hdr.report_ipv4.identification, hdr.report_ipv4.flags,
              hdr.report_ipv4.frag_offset, hdr.report_ipv4.ttl, hdr.report_ipv4.protocol,
              hdr.report_ipv4.src_addr, hdr.report_ipv4.dst_addr },
            hdr.report_ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control MetaroceDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.report_ethernet);
        packet.emit(hdr.report_ipv4);
        packet.emit(hdr.report_udp);
        packet.emit(hdr.report_group);
        packet.emit(hdr.report_individual);
        packet.emit(hdr.report_sink_md);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.tcp);
        packet.emit(hdr.int_shim);
        packet.emit(hdr.int_md);
        packet.emit(hdr.int_node_id);
        packet.emit(hdr.int_l1_ports);
        packet.emit(hdr.int_hop_latency);
        packet.emit(hdr.int_queue);
        packet.emit(hdr.int_egress_ts);
        packet.emit(hdr.int_stack);
        packet.emit(hdr.bth);
    }
}

#endif
