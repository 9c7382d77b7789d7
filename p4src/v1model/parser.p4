// Parser, deparser and checksums.
#ifndef METAROCE_V1MODEL_PARSER_P4
#define METAROCE_V1MODEL_PARSER_P4

#include "metadata.p4"

error {
    IPv4IncorrectVersion,
    IPv4OptionsNotSupported,
    IntUnsupported,
    IntStackMalformed
}

parser MetaroceParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
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

    // Checks are select transitions rather than verify(): on BMv2 each
    // verify() costs a temporary field and two operations per packet.
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        hdr.flow_key.setValid();
        hdr.flow_key.addresses = hdr.ipv4.src_addr ++ hdr.ipv4.dst_addr ++ hdr.ipv4.protocol;
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (4, 5, IP_PROTO_UDP): parse_udp;
            (4, 5, IP_PROTO_TCP): parse_tcp;
            (4, 5, _): no_l4_ports;
            (4, _, _): ipv4_options;
            default: ipv4_bad_version;
        }
    }

    state no_l4_ports {
        hdr.flow_key.l4_ports = 0;
        hdr.flow_key.entropy = 0;
        transition accept;
    }

    state ipv4_options {
        verify(false, error.IPv4OptionsNotSupported);
        transition accept;
    }

    state ipv4_bad_version {
        verify(false, error.IPv4IncorrectVersion);
        transition accept;
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        hdr.flow_key.l4_ports = hdr.tcp.ports;
        hdr.flow_key.entropy = 0;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        hdr.flow_key.l4_ports = hdr.udp.src_port ++ hdr.udp.dst_port;
        hdr.flow_key.entropy = 0;
        transition select(hdr.ipv4.dscp, hdr.udp.dst_port) {
            (INT_DSCP_BIT &&& INT_DSCP_BIT, _): parse_int_shim;
            (_, UDP_PORT_ROCEV2): parse_bth;
            default: accept;
        }
    }

    // The shim length counts the 3 words of INT-MD and the stack, which
    // must hold whole hops of HOP_ML words, at most INT_MAX_STACK_HOPS.
    state parse_int_shim {
        packet.extract(hdr.int_hdr);
        transition select(hdr.int_hdr.int_type, hdr.int_hdr.version, hdr.int_hdr.len) {
            (INT_TYPE_MD, INT_VERSION, 3): parse_after_int;
            (INT_TYPE_MD, INT_VERSION, 9): parse_int_hops_1;
            (INT_TYPE_MD, INT_VERSION, 15): parse_int_hops_2;
            (INT_TYPE_MD, INT_VERSION, 21): parse_int_hops_3;
            (INT_TYPE_MD, INT_VERSION, 27): parse_int_hops_4;
            (INT_TYPE_MD, INT_VERSION, _): int_stack_malformed;
            default: int_unsupported;
        }
    }

    state int_unsupported {
        verify(false, error.IntUnsupported);
        transition accept;
    }

    state int_stack_malformed {
        verify(false, error.IntStackMalformed);
        transition accept;
    }

    state parse_int_hops_4 {
        packet.extract(hdr.int_hops.next);
        transition parse_int_hops_3;
    }

    state parse_int_hops_3 {
        packet.extract(hdr.int_hops.next);
        transition parse_int_hops_2;
    }

    state parse_int_hops_2 {
        packet.extract(hdr.int_hops.next);
        transition parse_int_hops_1;
    }

    state parse_int_hops_1 {
        packet.extract(hdr.int_hops.next);
        transition parse_after_int;
    }

    state parse_after_int {
        transition select(hdr.udp.dst_port) {
            UDP_PORT_ROCEV2: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        hdr.flow_key.entropy = hdr.bth.dest_qp;
        // The opcode is the top byte (a masked select needs no copy of it).
        transition select(hdr.bth.head) {
            BTH_OPCODE_RC_ACK ++ 24w0 &&& 0xff000000: parse_aeth;
            default: accept;
        }
    }

    // An ACK or NAK: the drain rule reads its syndrome. A truncated one
    // is a parser error (dropped and counted).
    state parse_aeth {
        packet.extract(hdr.aeth);
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
        update_checksum(hdr.report.isValid(),
            { hdr.report.ip_version, hdr.report.ip_ihl, hdr.report.ip_dscp, hdr.report.ip_ecn,
              hdr.report.ip_total_len, hdr.report.ip_identification, hdr.report.ip_flags,
              hdr.report.ip_frag_offset, hdr.report.ip_ttl, hdr.report.ip_protocol,
              hdr.report.ip_src, hdr.report.ip_dst },
            hdr.report.ip_checksum, HashAlgorithm.csum16);
    }
}

control MetaroceDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.report);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.tcp);
        packet.emit(hdr.int_hdr);
        packet.emit(hdr.int_local);
        packet.emit(hdr.int_hops);
        packet.emit(hdr.bth);
        packet.emit(hdr.aeth);
    }
}

#endif
