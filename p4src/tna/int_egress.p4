// INT-MD in egress: the source inserts the INT headers and every hop on
// the way (the source included) pushes its metadata. The sink leaf strips
// INT in ingress (ingress.p4), since egress parses no further than the
// INT-MD header (Tofino 1's egress parse depth); its Telemetry Report is
// decided and copied in ingress too (report_decision.p4) and built from
// that copy (report.p4).
#ifndef METAROCE_TNA_INT_EGRESS_P4
#define METAROCE_TNA_INT_EGRESS_P4

#include "metadata.p4"

// A hop towards the fabric pushes its metadata, or sets E (hop limit or
// full stack) or M (MTU; mtu 0: unchecked). ROOM: the MTU's room for the
// packet as it will be before this hop's push (egress_metadata_t). The
// MTU tests are apart: one gateway cannot take both fields.
#define TRANSIT_HOP(ROOM) \
    if (hdr.int_hdr.remaining_hops == 0 || hdr.int_hdr.len > INT_MAX_STACK_WORDS + 3 - (bit<8>)INT_HOP_ML) { \
        hdr.int_hdr.hop_exceeded = 1; \
    } else if (meta.mtu == 0) { \
        push_hop_metadata(); \
    } else if (ROOM == 0) { \
        hdr.int_hdr.mtu_exceeded = 1; \
    } else { \
        push_hop_metadata(); \
    }

control IntEgress(inout egress_headers_t hdr, inout egress_metadata_t meta,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md) {
    action add_int_bytes(bit<16> bytes) {
        hdr.ipv4.total_len = hdr.ipv4.total_len + bytes;
        hdr.udp.len = hdr.udp.len + bytes;
        // RoCEv2 relies on its ICRC; a zero UDP checksum stays valid for IPv4.
        hdr.udp.checksum = 0;
    }

    action insert_int_headers() {
        hdr.int_hdr.setValid();
        hdr.int_hdr.int_type = INT_TYPE_MD;
        hdr.int_hdr.npt = 0;
        hdr.int_hdr.reserved0 = 0;
        hdr.int_hdr.len = 3;
        hdr.int_hdr.reserved1 = 0;
        hdr.int_hdr.original_dscp = hdr.ipv4.dscp;
        hdr.int_hdr.reserved2 = 0;
        hdr.int_hdr.version = INT_VERSION;
        hdr.int_hdr.discard = 0;
        hdr.int_hdr.hop_exceeded = 0;
        hdr.int_hdr.mtu_exceeded = 0;
        hdr.int_hdr.reserved = 0;
        hdr.int_hdr.hop_ml = INT_HOP_ML;
        hdr.int_hdr.remaining_hops = hdr.bridged.int_max_hops;
        hdr.int_hdr.instructions = INT_INSTRUCTIONS;
        hdr.int_hdr.domain_id = 0;
        hdr.int_hdr.ds_instructions = 0;
        hdr.int_hdr.ds_flags = 0;
        hdr.ipv4.dscp = hdr.ipv4.dscp | INT_DSCP_BIT;
        add_int_bytes(16);
    }

    // Hop latency: ingress to egress on the ns clock (queueing included);
    // occupancy: the egress queue at enqueue, in 80-byte cells.
    action push_hop_metadata() {
        hdr.int_local.setValid();
        hdr.int_local.node_id = hdr.bridged.switch_id;
        hdr.int_local.ingress_port = (bit<16>)hdr.bridged.ingress_port;
        hdr.int_local.egress_port = (bit<16>)eg_intr_md.egress_port;
        hdr.int_local.hop_latency = eg_prsr_md.global_tstamp[31:0] - hdr.bridged.ingress_ts[31:0];
        hdr.int_local.queue_id = 0;
        hdr.int_local.occupancy = meta.depth[23:0];  // the 19-bit enq_qdepth
        hdr.int_local.egress_ts = (bit<64>)eg_prsr_md.global_tstamp;
        hdr.int_hdr.remaining_hops = hdr.int_hdr.remaining_hops - 1;
        hdr.int_hdr.len = hdr.int_hdr.len + (bit<8>)INT_HOP_ML;
        add_int_bytes(24);
    }

    apply {
        if (!hdr.int_hdr.isValid()) {
            // Not instrumented, unless this is the source.
            if (hdr.bridged.int_source == 1 && meta.edge == 0) {
                insert_int_headers();
                TRANSIT_HOP(meta.mtu_room_source)
            }
        } else if (meta.edge == 0) {
            TRANSIT_HOP(meta.mtu_room)
        }
        // An INT packet to an edge port was stripped by the sink's ingress
        // (ingress.p4): egress cannot parse the stack.
    }
}

#endif
