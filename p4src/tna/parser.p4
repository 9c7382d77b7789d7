// Parsers and deparsers of both gresses. Checks that v1model makes with
// verify() are select transitions that record a drop reason
// (meta.drop_reason); a truncated header is the parser's own error
// (parser_err), dropped as DROP_PARSER_ERROR.
#ifndef METAROCE_TNA_PARSER_P4
#define METAROCE_TNA_PARSER_P4

#include "metadata.p4"

parser MetaroceIngressParser(packet_in pkt, out ingress_headers_t hdr, out ingress_metadata_t meta,
                             out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;

    state start {
        pkt.extract(ig_intr_md);
        meta.drop_reason = 0;
        meta.checksum_error = false;
        meta.l4_src_port = 0;
        meta.l4_dst_port = 0;
        meta.dest_qp = 0;
        meta.redraw = false;
        meta.drain_rc = 0;
        meta.drain_unpaired = 0;
        meta.drain_arrived = 0;
        meta.drain_kind = 0;
        meta.drain_owner = 0;
        meta.drain_fresh = 0;
        meta.drain_flag = 0;
        meta.drain_report = 0;
        transition select(ig_intr_md.resubmit_flag) {
            1: parse_resubmit;
            0: parse_port_metadata;
        }
    }

    state parse_resubmit {
        pkt.extract(meta.resubmit);
        meta.redraw = true;
        transition parse_ethernet;
    }

    state parse_port_metadata {
        pkt.advance(PORT_METADATA_SIZE);
        transition select(ig_intr_md.ingress_port) {
            CPU_PORT: parse_packet_out;
            RECIRC_PORT_VALUE &&& RECIRC_PORT_MASK: parse_digest_copy;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    // Only egress's digest copies are sent to a recirculation port.
    state parse_digest_copy {
        pkt.extract(hdr.digest_copy);
        transition accept;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        // The drain rule's report names the data's hosts (an ACK's are
        // turned around in ingress).
        meta.drain_src = hdr.ipv4.src_addr;
        meta.drain_dst = hdr.ipv4.dst_addr;
        ipv4_checksum.add(hdr.ipv4);
        meta.checksum_error = ipv4_checksum.verify();
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (4, 5, IP_PROTO_UDP): parse_udp;
            (4, 5, IP_PROTO_TCP): parse_tcp;
            (4, 5, _): accept;
            default: ipv4_invalid;
        }
    }

    state ipv4_invalid {
        meta.drop_reason = DROP_IPV4_INVALID;
        transition accept;
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.ports[31:16];
        meta.l4_dst_port = hdr.tcp.ports[15:0];
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.ipv4.dscp, hdr.udp.dst_port) {
            (INT_DSCP_BIT &&& INT_DSCP_BIT, _): parse_int;
            (_, UDP_PORT_ROCEV2): parse_bth;
            default: accept;
        }
    }

    state parse_int {
        pkt.extract(hdr.int_hdr);
        // The INT-MD version is checked in ingress: the parser has too few
        // match registers for it, with the UDP port live until the BTH.
        transition select(hdr.int_hdr.int_type, hdr.int_hdr.len) {
            (INT_TYPE_MD, 3): parse_after_int;
            (INT_TYPE_MD, 9): parse_int_hops_1;
            (INT_TYPE_MD, 15): parse_int_hops_2;
            (INT_TYPE_MD, 21): parse_int_hops_3;
            (INT_TYPE_MD, 27): parse_int_hops_4;
            default: int_malformed;
        }
    }

    state int_malformed {
        meta.drop_reason = DROP_INT_MALFORMED;
        transition accept;
    }

    state parse_int_hops_4 {
        pkt.extract(hdr.int_hops.next);
        transition parse_int_hops_3;
    }

    state parse_int_hops_3 {
        pkt.extract(hdr.int_hops.next);
        transition parse_int_hops_2;
    }

    state parse_int_hops_2 {
        pkt.extract(hdr.int_hops.next);
        transition parse_int_hops_1;
    }

    state parse_int_hops_1 {
        pkt.extract(hdr.int_hops.next);
        transition parse_after_int;
    }

    state parse_after_int {
        transition select(hdr.udp.dst_port) {
            UDP_PORT_ROCEV2: parse_bth;
            default: accept;
        }
    }

    // What the drain rule needs of the BTH is copied here, where it costs
    // no stage: the data's QP (an ACK's is paired in ingress) and the
    // arriving mark.
    state parse_bth {
        pkt.extract(hdr.bth);
        meta.dest_qp = hdr.bth.dest_qp;
        meta.drain_qp = hdr.bth.dest_qp;
        meta.drain_arrived = hdr.bth.reserved0[1:0];
        transition select(hdr.bth.head[31:24], hdr.bth.reserved0[1:0]) {
            (BTH_OPCODE_RC_ACK, _): parse_aeth;
            (BTH_OPCODE_RC_ATOMIC_ACK, _): accept;
            (0x00 &&& 0xe0, BTH_MARK_NONE): parse_rc_request;
            default: accept;
        }
    }

    // An RC request that arrived unmarked: data entering the fabric, if it
    // is routed to a group (drain.p4).
    state parse_rc_request {
        meta.drain_rc = 1;
        transition accept;
    }

    state parse_aeth {
        pkt.extract(hdr.aeth);
        transition accept;
    }
}

control MetaroceIngressDeparser(packet_out pkt, inout ingress_headers_t hdr, in ingress_metadata_t meta,
                                in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    // Control-plane names as on v1model, where a digest is named by its
    // struct.
    @name(".queue_digest_t") Digest<queue_digest_t>() queue_digest;
    @name(".large_flow_digest_t") Digest<large_flow_digest_t>() large_flow_digest;
    @name(".drain_pair_digest_t") Digest<drain_pair_digest_t>() drain_pair_digest;
    Mirror() mirror;
    Resubmit() resubmit;

    apply {
        if (ig_dprsr_md.digest_type == DIGEST_TYPE_QUEUE) {
            queue_digest.pack({ hdr.digest_copy.switch_id, hdr.digest_copy.port, hdr.digest_copy.depth,
                                hdr.digest_copy.timestamp, hdr.digest_copy.seq, hdr.digest_copy.congested });
        } else if (ig_dprsr_md.digest_type == DIGEST_TYPE_LARGE_FLOW) {
            large_flow_digest.pack({ meta.switch_id,
                                     hdr.ipv4.src_addr ++ hdr.ipv4.dst_addr ++ meta.l4_src_port ++ meta.dest_qp,
                                     meta.egress_port, meta.lf_bytes, meta.lf_elapsed,
                                     (bit<16>)meta.flow_slot, meta.lf_collision,
                                     meta.now });
        } else if (ig_dprsr_md.digest_type == DIGEST_TYPE_DRAIN_PAIR) {
            drain_pair_digest.pack({ meta.drain_src ++ meta.drain_dst ++ hdr.ipv4.protocol,
                                     7w0 ++ meta.drain_unpaired ++ meta.drain_qp ++ hdr.bth.psn_word[23:0]
                                     ++ meta.now });
        }
        if (ig_dprsr_md.mirror_type == MIRROR_TYPE_REPORT) {
            mirror.emit<report_copy_t>(meta.mirror_session, meta.report_copy);
        }
        if (ig_dprsr_md.resubmit_type == RESUBMIT_PORT_DOWN) {
            resubmit.emit(meta.resubmit);
        }
        pkt.emit(hdr.bridged);
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.int_hdr);
        pkt.emit(hdr.int_hops);
        pkt.emit(hdr.bth);
        pkt.emit(hdr.aeth);
    }
}

parser MetaroceEgressParser(packet_in pkt, out egress_headers_t hdr, out egress_metadata_t meta,
                            out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        transition select(pkt.lookahead<bit<8>>()) {
            KIND_BRIDGED: parse_bridged;
            KIND_DIGEST: parse_digest_copy;
            KIND_REPORT: parse_report_copy;
            default: accept;
        }
    }

    // What ingress sends to the CPU port (ARP) carries its packet_in.
    state parse_bridged {
        pkt.extract(hdr.bridged);
        transition select(eg_intr_md.egress_port) {
            CPU_PORT: parse_packet_in;
            default: parse_ethernet;
        }
    }

    state parse_packet_in {
        pkt.extract(hdr.packet_in);
        transition parse_ethernet;
    }

    // The copy only passes through egress on its way to recirculation.
    state parse_digest_copy {
        pkt.extract(hdr.digest_copy);
        transition accept;
    }

    state parse_report_copy {
        pkt.extract(hdr.report_copy);
        transition parse_ethernet;
    }

    // What egress reads and writes of the packet: Ethernet, IPv4, UDP and
    // the INT shim with the INT-MD header. Not the INT stack (a transit
    // hop pushes its own in front of it; the sink's ingress has stripped
    // it), TCP or the BTH: with them, the longest path (intrinsic
    // metadata 27 B, bridged 19, packet_in 4, up to the BTH behind a
    // 4-hop stack) was 216 B, over the 160 B that Tofino 1's egress
    // parser can reach. Now it is 108 B.
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (4, 5, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.ipv4.dscp, hdr.udp.dst_port) {
            (INT_DSCP_BIT &&& INT_DSCP_BIT, _): parse_int;
            (_, UDP_PORT_ROCEV2): parse_bth_mark;
            default: accept;
        }
    }

    // RoCEv2 without INT (what leaves for a host: the sink stripped INT):
    // the drain rule's mark is cleared on host-facing ports.
    state parse_bth_mark {
        pkt.extract(hdr.bth_mark);
        transition accept;
    }

    state parse_int {
        pkt.extract(hdr.int_hdr);
        transition accept;
    }
}

control MetaroceEgressDeparser(packet_out pkt, inout egress_headers_t hdr, in egress_metadata_t meta,
                               in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;
    Checksum() report_checksum;
    Mirror() mirror;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
                hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        if (hdr.report.isValid()) {
            hdr.report.ip_checksum = report_checksum.update({
                hdr.report.ip_version, hdr.report.ip_ihl, hdr.report.ip_dscp, hdr.report.ip_ecn,
                hdr.report.ip_total_len, hdr.report.ip_identification, hdr.report.ip_flags,
                hdr.report.ip_frag_offset, hdr.report.ip_ttl, hdr.report.ip_protocol,
                hdr.report.ip_src, hdr.report.ip_dst });
        }
        if (eg_dprsr_md.mirror_type == MIRROR_TYPE_DIGEST) {
            mirror.emit<digest_copy_t>(meta.mirror_session, meta.digest_copy);
        }
        // A digest copy leaves with its header in front (to the
        // recirculation port); bridged and report_copy are never emitted.
        pkt.emit(hdr.digest_copy);
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.report);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.int_hdr);
        pkt.emit(hdr.int_local);  // on top of the received stack (payload)
        pkt.emit(hdr.bth_mark);
    }
}

#endif
