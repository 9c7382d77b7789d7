// INT-MD in egress: the source inserts the INT headers, every hop on the
// way (the source included) pushes its metadata, and the sink leaf strips
// INT before delivery and hands a copy to the report builder.
//
// v1model copies a packet at the end of egress, after the strip, so the
// sink saves what the report needs (its own metadata and the INT headers as
// received) into a preserved field list, and ReportBuilder rebuilds them in
// the copy. Packets without INT leave this control after one check.
#ifndef METAROCE_V1MODEL_INT_EGRESS_P4
#define METAROCE_V1MODEL_INT_EGRESS_P4

#include "metadata.p4"

#define THIS_HOP_LATENCY ((bit<32>)(standard_metadata.egress_global_timestamp - standard_metadata.ingress_global_timestamp))
#define ADD_HOP_LATENCY(i) if (hdr.int_hops[i].isValid()) { meta.scratch_a = meta.scratch_a + hdr.int_hops[i].hop_latency; }
#define HOP_BITS(i) hdr.int_hops[i].node_id ++ hdr.int_hops[i].ingress_port ++ hdr.int_hops[i].egress_port \
    ++ hdr.int_hops[i].hop_latency ++ hdr.int_hops[i].queue_id ++ hdr.int_hops[i].occupancy \
    ++ hdr.int_hops[i].egress_ts

// A hop towards the fabric pushes its metadata, or sets E (hop limit or
// full stack) or M (MTU).
#define TRANSIT_HOP \
    if (hdr.int_hdr.remaining_hops == 0 || hdr.int_hdr.len + (bit<8>)INT_HOP_ML > INT_MAX_STACK_WORDS + 3) { \
        hdr.int_hdr.hop_exceeded = 1; \
    } else if (PORT_MTU(meta) != 0 && hdr.ipv4.total_len + 24 > PORT_MTU(meta)) { \
        hdr.int_hdr.mtu_exceeded = 1; \
    } else { \
        push_hop_metadata(); \
    }

control IntEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<32>, bit<32>>(INT_REPORT_SLOTS) report_last_bucket;
    register<bit<48>, bit<32>>(INT_REPORT_SLOTS) report_last_time;

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
        hdr.int_hdr.remaining_hops = FLAG_INT_SOURCE(meta)[7:0];
        hdr.int_hdr.instructions = INT_INSTRUCTIONS;
        hdr.int_hdr.domain_id = 0;
        hdr.int_hdr.ds_instructions = 0;
        hdr.int_hdr.ds_flags = 0;
        hdr.ipv4.dscp = hdr.ipv4.dscp | INT_DSCP_BIT;
        add_int_bytes(16);
    }

    action push_hop_metadata() {
        hdr.int_local.setValid();
        hdr.int_local.node_id = CFG_SWITCH_ID(meta);
        hdr.int_local.ingress_port = (bit<16>)standard_metadata.ingress_port;
        hdr.int_local.egress_port = (bit<16>)standard_metadata.egress_port;
        hdr.int_local.hop_latency = THIS_HOP_LATENCY;
        hdr.int_local.queue_id = 0;
        hdr.int_local.occupancy = (bit<24>)standard_metadata.deq_qdepth;
        hdr.int_local.egress_ts = (bit<64>)standard_metadata.egress_global_timestamp;
        hdr.int_hdr.remaining_hops = hdr.int_hdr.remaining_hops - 1;
        hdr.int_hdr.len = hdr.int_hdr.len + (bit<8>)INT_HOP_ML;
        add_int_bytes(24);
    }

    action save_for_report() {
        // 1 (a report copy) ++ the sink's own metadata ++ the INT headers
        // as received, the ECN before queue sensing may have marked CE ++
        // the hops (words of hops not received are never restored) ++ where
        // report_config sends it.
        meta.report_copy = 1w1 ++ CFG_SWITCH_ID(meta) ++ (bit<16>)standard_metadata.ingress_port
            ++ (bit<16>)standard_metadata.egress_port ++ THIS_HOP_LATENCY ++ (bit<24>)standard_metadata.deq_qdepth
            ++ (bit<64>)standard_metadata.egress_global_timestamp
            ++ (PORT_QUEUE_HIGH(meta) != 0 && (bit<32>)standard_metadata.deq_qdepth >= PORT_QUEUE_HIGH(meta)
                ? 1w1 : 1w0)
            ++ hdr.int_hdr.len ++ hdr.int_hdr.original_dscp
            ++ (FLAG_ECN_RECEIVED(meta)[2:2] == 1 ? FLAG_ECN_RECEIVED(meta)[1:0] : hdr.ipv4.ecn)
            ++ hdr.int_hdr.version ++ hdr.int_hdr.discard ++ hdr.int_hdr.hop_exceeded ++ hdr.int_hdr.mtu_exceeded
            ++ hdr.int_hdr.reserved ++ hdr.int_hdr.hop_ml ++ hdr.int_hdr.remaining_hops ++ hdr.int_hdr.instructions
            ++ hdr.int_hdr.domain_id ++ hdr.int_hdr.ds_instructions ++ hdr.int_hdr.ds_flags
            ++ HOP_BITS(0) ++ HOP_BITS(1) ++ HOP_BITS(2) ++ HOP_BITS(3) ++ REP_ENCAP(meta, 175, 0);
    }

    action strip_int() {
        bit<16> bytes = 4 + ((bit<16>)hdr.int_hdr.len << 2);
        hdr.ipv4.total_len = hdr.ipv4.total_len - bytes;
        hdr.udp.len = hdr.udp.len - bytes;
        hdr.udp.checksum = 0;
        hdr.ipv4.dscp = hdr.int_hdr.original_dscp;
        hdr.int_hdr.setInvalid();
        hdr.int_hops.pop_front(INT_MAX_STACK_HOPS);
    }

    HIDDEN_STEP(bucket_value, SCRATCH_B(meta) = meta.scratch_a >> CFG_LATENCY_SHIFT(meta);)

    action set_report_encap(mac_addr_t src_mac, mac_addr_t dst_mac, ipv4_addr_t src_ip, ipv4_addr_t dst_ip,
                            bit<16> dst_port) {
        meta.report_copy = (bit<1242>)(src_mac ++ dst_mac ++ src_ip ++ dst_ip ++ dst_port);
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
        if (!hdr.int_hdr.isValid()) {
            // Not instrumented, unless this is the source.
            if (FLAG_INT_SOURCE(meta)[8:8] == 1 && PORT_EDGE(meta) == 0) {
                insert_int_headers();
                TRANSIT_HOP
            }
        } else if (PORT_EDGE(meta) == 0) {
            TRANSIT_HOP
        } else {
            // Sink: report if the path latency (scratch_a) moved to another
            // bucket, or when the flow has not been reported for
            // report_period.
            meta.scratch_a = THIS_HOP_LATENCY;
            ADD_HOP_LATENCY(0) ADD_HOP_LATENCY(1) ADD_HOP_LATENCY(2) ADD_HOP_LATENCY(3)
            // SCRATCH_B, scratch_time: the flow's last reported bucket and time.
            report_last_bucket.read(SCRATCH_B(meta), meta.flow_slot);
            report_last_time.read(meta.scratch_time, meta.flow_slot);
            bit<48> now = standard_metadata.egress_global_timestamp;
            report_config.apply();
            bool due = meta.scratch_time == 0 || meta.scratch_a >> CFG_LATENCY_SHIFT(meta) != SCRATCH_B(meta)
                || now - meta.scratch_time >= CFG_REPORT_PERIOD(meta);
            // One clone per packet: a threshold digest raised by this packet
            // wins, and the next packet of the flow is reported instead.
            if (due && REP_DST_IP(meta) != 0 && !IS_DIGEST_COPY(meta)) {
                bucket_value.apply();
                report_last_bucket.write(meta.flow_slot, SCRATCH_B(meta));
                report_last_time.write(meta.flow_slot, now);
                save_for_report();
                clone_preserving_field_list(CloneType.E2E, REPORT_SESSION, FL_REPORT);
            }
            strip_int();
        }
    }
}

#endif
