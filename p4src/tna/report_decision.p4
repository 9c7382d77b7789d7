// The INT sink's report decision, made in ingress: Tofino mirrors a packet
// as it arrived only from ingress, and the report must carry the INT
// stack that egress strips (an egress mirror copies the packet as egress
// emits it, and a mirror header is far too small for a 4-hop stack).
//
// Per flow slot, as on v1model: report when the path latency (the sum of
// the received hops' latencies) moves to another bucket, or when the flow
// was not reported for `report_period`. Differences, each forced by the
// place or by one stateful access per register:
//  - the sink's own hop latency is not in the sum (ingress cannot know
//    its queueing);
//  - report_last_time is refreshed by periodic reports only, so after a
//    bucket change the next periodic report may come sooner than on
//    v1model;
//  - report_last_bucket holds the latency with its low `latency_shift`
//    bits cleared (Tofino shifts by constants only), not shifted down.
#ifndef METAROCE_TNA_REPORT_DECISION_P4
#define METAROCE_TNA_REPORT_DECISION_P4

#include "metadata.p4"

control ReportDecision(inout ingress_headers_t hdr, inout ingress_metadata_t meta,
                       in ingress_intrinsic_metadata_t ig_intr_md,
                       in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                       inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                       inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Register<bit<32>, bit<13>>(INT_REPORT_SLOTS) report_last_bucket;
    Register<bit<32>, bit<13>>(INT_REPORT_SLOTS) report_last_time;

    RegisterAction<bit<32>, bit<13>, bit<1>>(report_last_time) period_check = {
        void apply(inout bit<32> value, out bit<1> due) {
            // now - value >= period, written value + (period - now) <= 0
            // (report_cutoff is period - now), as routing.p4's stamp_time.
            if (value == 0 || (int<32>)(value + meta.report_cutoff) <= 0) {
                value = ig_prsr_md.global_tstamp[31:0];
                due = 1;
            } else {
                due = 0;
            }
        }
    };

    // 1: the bucket changed. Beside period_check (same stage): on a
    // periodic report with the bucket unchanged, v1model's write of the
    // same bucket changes nothing.
    RegisterAction<bit<32>, bit<13>, bit<1>>(report_last_bucket) bucket_check = {
        void apply(inout bit<32> value, out bit<1> due) {
            if (value != meta.latency_bucket) {
                value = meta.latency_bucket;
                due = 1;
            } else {
                due = 0;
            }
        }
    };

    // The sink strips INT: the packet leaves with DSCP and lengths as the
    // source received it. Here, not in egress as on v1model: Tofino 1's
    // egress parser reaches 160 bytes, not the 4-hop stack. The report copy
    // is the packet as it arrived, INT included.
    action strip_int() {
        hdr.ipv4.total_len = hdr.ipv4.total_len + meta.int_minus_bytes;
        hdr.udp.len = hdr.udp.len + meta.int_minus_bytes;
        hdr.udp.checksum = 0;
        hdr.ipv4.dscp = hdr.int_hdr.original_dscp;
        hdr.int_hdr.setInvalid();
        hdr.int_hops[0].setInvalid();
        hdr.int_hops[1].setInvalid();
        hdr.int_hops[2].setInvalid();
        hdr.int_hops[3].setInvalid();
    }

    // PathLatency ran beside routing; the registers, the mirror and the
    // strip wait for the caller's verdict (the packet leaves through a
    // host-facing port). Two stages after it.
    apply {
        // The copy's header is filled beside the registers (`forward` set
        // its egress port); it is sent when valid.
        meta.report_copy.kind = KIND_REPORT;
        meta.report_copy.switch_id = meta.switch_id;
        meta.report_copy.ingress_port = (bit<16>)ig_intr_md.ingress_port;
        meta.report_copy.ingress_ts = ig_prsr_md.global_tstamp;
        meta.period_due = period_check.execute(meta.flow_slot);
        meta.report_due = bucket_check.execute(meta.flow_slot);
        if (meta.period_due == 1 || meta.report_due == 1) {
            // The copy is the packet as received (TTL and ECN included).
            meta.report_copy.setValid();
            ig_dprsr_md.mirror_type = MIRROR_TYPE_REPORT;
            meta.mirror_session = REPORT_SESSION;
        }
        strip_int();
    }
}

// What the sink's decision needs of the packet alone, computed before
// routing so that it takes none of routing's stages: the path latency (the
// received hops' latencies summed as a tree), its bucket and the strip
// length.
control PathLatency(inout ingress_headers_t hdr, inout ingress_metadata_t meta,
                    in ingress_intrinsic_metadata_t ig_intr_md,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {
    // Named as before the move (it shows in the P4Info, outside the
    // contract: its table is hidden).
    @name(".MetaroceEgress.int_egress.set_mask")
    action set_mask(bit<32> mask) {
        meta.latency_bucket = meta.path_latency & mask;
    }

    // latency >> shift compared for equality is latency & ~(2^shift - 1).
    @hidden
    table latency_mask {
        key = {
            meta.latency_shift: exact @name("latency_shift");
        }
        actions = {
            set_mask;
        }
        const entries = {
            0: set_mask(0xffffffff);
            1: set_mask(0xfffffffe);
            2: set_mask(0xfffffffc);
            3: set_mask(0xfffffff8);
            4: set_mask(0xfffffff0);
            5: set_mask(0xffffffe0);
            6: set_mask(0xffffffc0);
            7: set_mask(0xffffff80);
            8: set_mask(0xffffff00);
            9: set_mask(0xfffffe00);
            10: set_mask(0xfffffc00);
            11: set_mask(0xfffff800);
            12: set_mask(0xfffff000);
            13: set_mask(0xffffe000);
            14: set_mask(0xffffc000);
            15: set_mask(0xffff8000);
            16: set_mask(0xffff0000);
            17: set_mask(0xfffe0000);
            18: set_mask(0xfffc0000);
            19: set_mask(0xfff80000);
            20: set_mask(0xfff00000);
            21: set_mask(0xffe00000);
            22: set_mask(0xffc00000);
            23: set_mask(0xff800000);
            24: set_mask(0xff000000);
            25: set_mask(0xfe000000);
            26: set_mask(0xfc000000);
            27: set_mask(0xf8000000);
            28: set_mask(0xf0000000);
            29: set_mask(0xe0000000);
            30: set_mask(0xc0000000);
            31: set_mask(0x80000000);
        }
        // 32 and up: one bucket, periodic reports only.
        default_action = set_mask(0);
        size = 32;
    }

    // Per stack depth: minus the bytes of the shim, INT-MD header and
    // stack (mod 2^16: Tofino subtracts no action data, and an action that
    // computed them would span two stages), and the hops' latencies summed
    // in pairs (the first level of the sum's tree; invalid hops count 0).
    @hidden
    action hops_0() {
        meta.int_minus_bytes = 0xfff0;  // 16 bytes
        meta.latency_01 = 0;
        meta.latency_23 = 0;
    }

    @hidden
    action hops_1() {
        meta.int_minus_bytes = 0xffd8;  // 40 bytes
        meta.latency_01 = hdr.int_hops[0].hop_latency;
        meta.latency_23 = 0;
    }

    @hidden
    action hops_2() {
        meta.int_minus_bytes = 0xffc0;  // 64 bytes
        meta.latency_01 = hdr.int_hops[0].hop_latency + hdr.int_hops[1].hop_latency;
        meta.latency_23 = 0;
    }

    @hidden
    action hops_3() {
        meta.int_minus_bytes = 0xffa8;  // 88 bytes
        meta.latency_01 = hdr.int_hops[0].hop_latency + hdr.int_hops[1].hop_latency;
        meta.latency_23 = hdr.int_hops[2].hop_latency;
    }

    @hidden
    action hops_4() {
        meta.int_minus_bytes = 0xff90;  // 112 bytes
        meta.latency_01 = hdr.int_hops[0].hop_latency + hdr.int_hops[1].hop_latency;
        meta.latency_23 = hdr.int_hops[2].hop_latency + hdr.int_hops[3].hop_latency;
    }

    // The shim's length (words after the shim) is one of the five the
    // parser accepts: 3 + 6 per hop.
    @hidden
    table int_stack {
        key = {
            hdr.int_hdr.len: exact @name("len");
        }
        actions = {
            hops_0;
            hops_1;
            hops_2;
            hops_3;
            hops_4;
            @defaultonly NoAction;
        }
        const entries = {
            3: hops_0();
            9: hops_1();
            15: hops_2();
            21: hops_3();
            27: hops_4();
        }
        const default_action = NoAction();
        size = 8;
    }

    // Tables and plain steps only, no branch: the compiler may then place
    // them in any stage routing leaves room in.
    apply {
        int_stack.apply();
        meta.path_latency = meta.latency_01 + meta.latency_23;
        latency_mask.apply();
    }
}

#endif
