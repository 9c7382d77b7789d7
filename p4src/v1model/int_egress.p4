// INT-MD in egress: the source inserts the INT headers, every hop on the
// way (the source included) pushes its metadata, and the sink leaf strips
// INT before delivery and hands a copy to the report builder.
//
// v1model copies a packet at the end of egress, after the strip, so the
// sink saves what the report needs (its own metadata and the INT headers as
// received) into a preserved field list, and ReportBuilder rebuilds them in
// the copy.
#ifndef METAROCE_V1MODEL_INT_EGRESS_P4
#define METAROCE_V1MODEL_INT_EGRESS_P4

#include "metadata.p4"

#define SAVE_WORD(i) if (hdr.int_stack[i].isValid()) { meta.rep_w##i = hdr.int_stack[i].data; }
#define HOP_LATENCY(i) if (hdr.int_stack[i].isValid()) { path_latency = path_latency + hdr.int_stack[i].data; }

control IntEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<32>>(INT_REPORT_SLOTS) report_last_bucket;
    register<bit<48>>(INT_REPORT_SLOTS) report_last_time;

    bit<32> hop_latency = 0;

    action add_int_bytes(bit<16> bytes) {
        hdr.ipv4.total_len = hdr.ipv4.total_len + bytes;
        hdr.udp.len = hdr.udp.len + bytes;
        // RoCEv2 relies on its ICRC; a zero UDP checksum stays valid for IPv4.
        hdr.udp.checksum = 0;
    }

    action insert_int_headers() {
        hdr.int_shim.setValid();
        hdr.int_shim.int_type = INT_TYPE_MD;
        hdr.int_shim.npt = 0;
        hdr.int_shim.reserved0 = 0;
        hdr.int_shim.len = 3;
        hdr.int_shim.reserved1 = 0;
        hdr.int_shim.original_dscp = hdr.ipv4.dscp;
        hdr.int_shim.reserved2 = 0;
        hdr.int_md.setValid();
        hdr.int_md.version = INT_VERSION;
        hdr.int_md.discard = 0;
        hdr.int_md.hop_exceeded = 0;
        hdr.int_md.mtu_exceeded = 0;
        hdr.int_md.reserved = 0;
        hdr.int_md.hop_ml = INT_HOP_ML;
        hdr.int_md.remaining_hops = meta.int_max_hops;
        hdr.int_md.instructions = INT_INSTRUCTIONS;
        hdr.int_md.domain_id = 0;
        hdr.int_md.ds_instructions = 0;
        hdr.int_md.ds_flags = 0;
        hdr.ipv4.dscp = hdr.ipv4.dscp | INT_DSCP_BIT;
        add_int_bytes(16);
    }

    action push_hop_metadata() {
        hdr.int_node_id.setValid();
        hdr.int_node_id.node_id = meta.switch_id;
        hdr.int_l1_ports.setValid();
        hdr.int_l1_ports.ingress_port = (bit<16>)standard_metadata.ingress_port;
        hdr.int_l1_ports.egress_port = (bit<16>)standard_metadata.egress_port;
        hdr.int_hop_latency.setValid();
        hdr.int_hop_latency.hop_latency = hop_latency;
        hdr.int_queue.setValid();
        hdr.int_queue.queue_id = 0;
        hdr.int_queue.occupancy = (bit<24>)standard_metadata.deq_qdepth;
        hdr.int_egress_ts.setValid();
        hdr.int_egress_ts.egress_ts = (bit<64>)standard_metadata.egress_global_timestamp;
        hdr.int_md.remaining_hops = hdr.int_md.remaining_hops - 1;
        hdr.int_shim.len = hdr.int_shim.len + (bit<8>)INT_HOP_ML;
        add_int_bytes(24);
    }

    action save_for_report() {
        meta.copy_kind = COPY_REPORT;
        meta.copy_switch_id = meta.switch_id;
        meta.rep_ingress_port = (bit<16>)standard_metadata.ingress_port;
        meta.rep_egress_port = (bit<16>)standard_metadata.egress_port;
        meta.rep_hop_latency = hop_latency;
        meta.rep_occupancy = (bit<24>)standard_metadata.deq_qdepth;
        meta.rep_egress_ts = (bit<64>)standard_metadata.egress_global_timestamp;
        meta.rep_congested = (bit<1>)(meta.queue_high != 0 && (bit<32>)standard_metadata.deq_qdepth >= meta.queue_high);
        meta.rep_shim_len = hdr.int_shim.len;
        meta.rep_original_dscp = hdr.int_shim.original_dscp;
        meta.rep_md0 = hdr.int_md.version ++ hdr.int_md.discard ++ hdr.int_md.hop_exceeded
            ++ hdr.int_md.mtu_exceeded ++ hdr.int_md.reserved ++ hdr.int_md.hop_ml ++ hdr.int_md.remaining_hops;
        meta.rep_md1 = hdr.int_md.instructions ++ hdr.int_md.domain_id;
        meta.rep_md2 = hdr.int_md.ds_instructions ++ hdr.int_md.ds_flags;
        meta.rep_words = hdr.int_shim.len - 3;
        SAVE_WORD(0) SAVE_WORD(1) SAVE_WORD(2) SAVE_WORD(3) SAVE_WORD(4) SAVE_WORD(5)
        SAVE_WORD(6) SAVE_WORD(7) SAVE_WORD(8) SAVE_WORD(9) SAVE_WORD(10) SAVE_WORD(11)
        SAVE_WORD(12) SAVE_WORD(13) SAVE_WORD(14) SAVE_WORD(15) SAVE_WORD(16) SAVE_WORD(17)
        SAVE_WORD(18) SAVE_WORD(19) SAVE_WORD(20) SAVE_WORD(21) SAVE_WORD(22) SAVE_WORD(23)
    }

    action strip_int() {
        bit<16> bytes = 4 + ((bit<16>)hdr.int_shim.len << 2);
        hdr.ipv4.total_len = hdr.ipv4.total_len - bytes;
        hdr.udp.len = hdr.udp.len - bytes;
        hdr.udp.checksum = 0;
        hdr.ipv4.dscp = hdr.int_shim.original_dscp;
        hdr.int_shim.setInvalid();
        hdr.int_md.setInvalid();
        hdr.int_stack.pop_front(INT_MAX_STACK_WORDS);
    }

    action set_report_encap(mac_addr_t src_mac, mac_addr_t dst_mac, ipv4_addr_t src_ip, ipv4_addr_t dst_ip,
                            bit<16> dst_port) {
        meta.rep_src_mac = src_mac;
        meta.rep_dst_mac = dst_mac;
        meta.rep_src_ip = src_ip;
        meta.rep_dst_ip = dst_ip;
        meta.rep_dst_port = dst_port;
    }

    // Where Telemetry Reports go; a zero destination address turns them off.
    table report_config {
        key = {}
        actions = {
            set_report_encap;
        }
        default_action = set_report_encap(0, 0, 0, 0, 32766);
    }

    apply {
        hop_latency = (bit<32>)(standard_metadata.egress_global_timestamp
            - standard_metadata.ingress_global_timestamp);
        if (meta.int_source == 1 && meta.egress_edge == 0 && !hdr.int_md.isValid()) {
            insert_int_headers();
        }
        if (!hdr.int_md.isValid()) {
            return;
        }
        if (meta.egress_edge == 0) {
            if (hdr.int_md.remaining_hops == 0 || hdr.int_shim.len + (bit<8>)INT_HOP_ML > INT_MAX_STACK_WORDS + 3) {
                hdr.int_md.hop_exceeded = 1;
            } else if (meta.egress_mtu != 0 && hdr.ipv4.total_len + 24 > meta.egress_mtu) {
                hdr.int_md.mtu_exceeded = 1;
            } else {
                push_hop_metadata();
            }
            return;
        }
        // Sink: report if the path latency moved to another bucket, or
        // when the flow has not been reported for report_period.
        bit<32> path_latency = hop_latency;
        HOP_LATENCY(2) HOP_LATENCY(8) HOP_LATENCY(14) HOP_LATENCY(20)
        bit<32> bucket = path_latency >> meta.latency_shift;
        bit<32> slot = meta.flow_hash & (INT_REPORT_SLOTS - 1);
        bit<32> last_bucket;
        bit<48> last_time;
        report_last_bucket.read(last_bucket, slot);
        report_last_time.read(last_time, slot);
        bit<48> now = standard_metadata.egress_global_timestamp;
        report_config.apply();
        bool due = last_time == 0 || bucket != last_bucket || now - last_time >= meta.report_period;
        // One clone per packet: a threshold digest raised by this packet wins,
        // and the next packet of the flow is reported instead.
        if (due && meta.rep_dst_ip != 0 && meta.copy_kind != COPY_DIGEST) {
            report_last_bucket.write(slot, bucket);
            report_last_time.write(slot, now);
            save_for_report();
            clone_preserving_field_list(CloneType.E2E, REPORT_SESSION, FL_REPORT);
        }
        strip_int();
    }
}

#endif
