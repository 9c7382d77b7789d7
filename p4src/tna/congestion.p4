// Congestion sensing on the egress queue (Tofino's enq_qdepth, in 80-byte
// cells): ECN marking, the per-port maximum depth since the controller
// last wrote it, and high/low threshold crossings reported as digests.
//
// TNA raises digests only in the ingress deparser, so a crossing is
// mirrored (egress to egress) to DIGEST_SESSION with the digest in the
// mirror header; the controller points that session at a recirculation
// port, and ingress packs the digest and drops the copy.
//
// One difference from v1model, forced by one stateful access per
// register: the port's state (port_congested) flips at the crossing even
// when the digest interval holds its digest back, where v1model records
// only a crossing whose digest is sent. The controller's next poll of
// port_congested brings its view back in line.
#ifndef METAROCE_TNA_CONGESTION_P4
#define METAROCE_TNA_CONGESTION_P4

#include "metadata.p4"
#include "int_egress.p4"

control QueueSensing(inout egress_headers_t hdr, inout egress_metadata_t meta,
                     in egress_intrinsic_metadata_t eg_intr_md,
                     in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                     inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Register<bit<32>, bit<9>>(PORT_COUNT) port_max_depth;
    Register<bit<8>, bit<9>>(PORT_COUNT) port_congested;
    // Low 32 bits of the ns clock.
    Register<bit<32>, bit<9>>(PORT_COUNT) port_last_digest;
    Register<bit<32>, bit<1>>(1) digest_seq;
    Counter<bit<32>, bit<9>>(PORT_COUNT, CounterType_t.PACKETS) ecn_marks;
    // MetaroceEgress.int_egress in the contract, as on v1model.
    @name(".MetaroceEgress.int_egress") IntEgress() int_egress;

    RegisterAction<bit<32>, bit<9>, bit<32>>(port_max_depth) raise_max = {
        void apply(inout bit<32> value) {
            if (meta.depth > value) {
                value = meta.depth;
            }
        }
    };

    // The port's state moves to meta.congested_now (1: at or above
    // queue_high, 0: at or below queue_low; not applied in between).
    // 1: it flipped (a crossing), 0: it was already there. One comparison:
    // a stateful ALU has two.
    RegisterAction<bit<8>, bit<9>, bit<8>>(port_congested) cross = {
        void apply(inout bit<8> value, out bit<8> flipped) {
            if (value != meta.congested_now) {
                value = meta.congested_now;
                flipped = 1;
            } else {
                flipped = 0;
            }
        }
    };

    // 1: the port's last digest is at least digest_interval old.
    RegisterAction<bit<32>, bit<9>, bit<8>>(port_last_digest) rate_limit = {
        void apply(inout bit<32> value, out bit<8> due) {
            // now - value >= interval, as in routing.p4's stamp_time.
            if (value == 0 || (int<32>)(meta.digest_cutoff - value) >= 0) {
                value = eg_prsr_md.global_tstamp[31:0];
                due = 1;
            } else {
                due = 0;
            }
        }
    };

    RegisterAction<bit<32>, bit<1>, bit<32>>(digest_seq) next_seq = {
        void apply(inout bit<32> value, out bit<32> seq) {
            seq = value;
            value = value + 1;
        }
    };

    // MetaroceEgress.egress_port_config in the contract (hence the absolute
    // names). Thresholds in 80-byte cells.
    @name(".MetaroceEgress.set_port")
    action set_port(bit<1> edge, bit<16> mtu, bit<32> queue_high, bit<32> queue_low, bit<32> ecn_threshold) {
        meta.edge = edge;
        meta.mtu = mtu;
        // For the MTU tests: a hop adds 24 bytes, the source 16 more.
        meta.ip_len_hop = hdr.ipv4.total_len + 23;
        meta.ip_len_source = hdr.ipv4.total_len + 39;
        meta.queue_high = queue_high;
        meta.queue_low = queue_low;
        meta.ecn_threshold = ecn_threshold;
    }

    @name(".MetaroceEgress.egress_port_config")
    table egress_port_config {
        key = {
            eg_intr_md.egress_port: exact @name("port");
        }
        actions = {
            set_port;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = PORT_COUNT;
    }

    // The depth against the thresholds, and the MTU's room, as saturating
    // differences (see egress_metadata_t). In a table's action, so that
    // the compiler does not fold them back into the tests (a gateway
    // cannot compute them).
    @hidden
    action compare_depth() {
        meta.high_diff = meta.queue_high |-| (bit<32>)eg_intr_md.enq_qdepth;
        meta.low_diff = (bit<32>)eg_intr_md.enq_qdepth |-| meta.queue_low;
        meta.ecn_diff = meta.ecn_threshold |-| (bit<32>)eg_intr_md.enq_qdepth;
        meta.mtu_room = meta.mtu |-| meta.ip_len_hop;
        meta.mtu_room_source = meta.mtu |-| meta.ip_len_source;
        meta.digest_cutoff = eg_prsr_md.global_tstamp[31:0] - hdr.bridged.digest_interval;
    }

    @hidden
    table compare {
        actions = {
            compare_depth;
        }
        const default_action = compare_depth();
    }

    apply {
        meta.edge = 0;
        meta.mtu = 0;
        meta.queue_high = 0;
        meta.queue_low = 0;
        meta.ecn_threshold = 0;
        egress_port_config.apply();
        meta.depth = (bit<32>)eg_intr_md.enq_qdepth;
        raise_max.execute(eg_intr_md.egress_port);
        compare.apply();

        // (Nested: one gateway cannot test all of it.)
        if (meta.ecn_threshold != 0 && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)) {
            if (meta.ecn_diff == 0) {
                hdr.ipv4.ecn = 3;
                ecn_marks.count(eg_intr_md.egress_port);
            }
        }

        // Up through queue_high (crossing 1) from 0, down through
        // queue_low (2) from 1; between the two the state holds.
        meta.crossing = 0;
        if (meta.queue_high != 0) {
            bool update = true;
            if (meta.high_diff == 0) {
                meta.congested_now = 1;
            } else if (meta.low_diff == 0) {
                meta.congested_now = 0;
            } else {
                update = false;
            }
            if (update) {
                if (cross.execute(eg_intr_md.egress_port) == 1) {
                    if (meta.congested_now == 1) {
                        meta.crossing = 1;
                    } else {
                        meta.crossing = 2;
                    }
                }
            }
            if (meta.crossing != 0) {
                meta.digest_due = rate_limit.execute(eg_intr_md.egress_port);
                if (meta.digest_due == 1) {
                    meta.seq = next_seq.execute(0);
                    meta.digest_copy.setValid();
                    meta.digest_copy.kind = KIND_DIGEST;
                    meta.digest_copy.switch_id = hdr.bridged.switch_id;
                    meta.digest_copy.port = (bit<16>)eg_intr_md.egress_port;
                    meta.digest_copy.depth = meta.depth;
                    meta.digest_copy.timestamp = eg_prsr_md.global_tstamp;
                    meta.digest_copy.seq = meta.seq;
                    meta.digest_copy.congested = meta.congested_now;  // 1 up, 0 down
                    eg_dprsr_md.mirror_type = MIRROR_TYPE_DIGEST;
                    meta.mirror_session = DIGEST_SESSION;
                }
            }
        }
        // INT: a packet that carries it, or this hop is its source.
        if (hdr.int_hdr.isValid() || hdr.bridged.int_source == 1) {
            int_egress.apply(hdr, meta, eg_intr_md, eg_prsr_md);
        }
    }
}

#endif
