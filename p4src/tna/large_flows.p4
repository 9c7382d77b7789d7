// Large-flow detector at the flow's first switch, as v1model/large_flows.p4:
// per flow slot a window (signature, start, bytes, collision flag); the
// first packet after a window's end closes it and, if it counted at least
// `threshold_bytes`, raises one large_flow_digest_t from the ingress
// deparser. Each register is touched once, by one stateful ALU, in this
// order: the start decides whether the window runs; the signature and the
// bytes follow it; the collision flag last (it needs the signature).
// Times are the low 32 bits of the ns clock: window_us holds ns here, at
// most 4.29 s.
#ifndef METAROCE_TNA_LARGE_FLOWS_P4
#define METAROCE_TNA_LARGE_FLOWS_P4

#include "metadata.p4"

const bit<32> LF_RUNS = 2;

control LargeFlows(inout ingress_headers_t hdr, inout ingress_metadata_t meta,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Register<bit<16>, bit<13>>(LARGE_FLOW_SLOTS) window_sig;
    Register<bit<32>, bit<13>>(LARGE_FLOW_SLOTS) window_start;
    Register<bit<32>, bit<13>>(LARGE_FLOW_SLOTS) window_bytes;
    Register<bit<8>, bit<13>>(LARGE_FLOW_SLOTS) window_collision;

    // The window's state, in one output: LF_RUNS while it runs; else it
    // reopens now and the output is its old start (0: never opened). A
    // start is stored with its lowest bit set, so that it is never 0 or
    // LF_RUNS (1 ns off at most). The test is made here: Tofino's gateways
    // order a field against constants only.
    RegisterAction<bit<32>, bit<13>, bit<32>>(window_start) open_or_keep = {
        void apply(inout bit<32> value, out bit<32> old) {
            // now - value >= window, as in routing.p4's stamp_time.
            if (value == 0 || (int<32>)(meta.lf_cutoff - value) >= 0) {
                old = value;
                value = ig_prsr_md.global_tstamp[31:0] | 1;
            } else {
                old = LF_RUNS;
            }
        }
    };

    RegisterAction<bit<32>, bit<13>, bit<32>>(window_bytes) add_bytes = {
        void apply(inout bit<32> value) {
            value = value + (bit<32>)hdr.ipv4.total_len;
        }
    };

    RegisterAction<bit<32>, bit<13>, bit<32>>(window_bytes) restart_bytes = {
        void apply(inout bit<32> value, out bit<32> old) {
            old = value;
            value = (bit<32>)hdr.ipv4.total_len;
        }
    };

    RegisterAction<bit<16>, bit<13>, bit<16>>(window_sig) read_sig = {
        void apply(inout bit<16> value, out bit<16> old) {
            old = value;
        }
    };

    RegisterAction<bit<16>, bit<13>, bit<16>>(window_sig) restart_sig = {
        void apply(inout bit<16> value, out bit<16> old) {
            old = value;
            value = meta.flow_sig;
        }
    };

    RegisterAction<bit<8>, bit<13>, bit<8>>(window_collision) note_collision = {
        void apply(inout bit<8> value) {
            value = 1;
        }
    };

    RegisterAction<bit<8>, bit<13>, bit<8>>(window_collision) restart_collision = {
        void apply(inout bit<8> value, out bit<8> old) {
            old = value;
            value = 0;
        }
    };

    action configure(bit<32> window_us, bit<32> threshold_bytes) {
        meta.lf_window = window_us;
        meta.lf_threshold = threshold_bytes;
    }

    table config {
        key = {}
        actions = {
            configure;
        }
        default_action = configure(10000000, 0);
        size = 1;
    }

    // bytes >= threshold, as a saturating difference in a table's action
    // (a gateway cannot compute it, and the compiler would fold it back
    // into the test).
    @hidden
    action compare_bytes() {
        meta.lf_over = meta.lf_threshold |-| meta.lf_bytes;
    }

    @hidden
    action set_cutoff() {
        meta.lf_cutoff = ig_prsr_md.global_tstamp[31:0] - meta.lf_window;
    }

    // For open_or_keep (after `config`, which sets the window).
    @hidden
    table cutoff {
        actions = {
            set_cutoff;
        }
        const default_action = set_cutoff();
    }

    @hidden
    table compare {
        actions = {
            compare_bytes;
        }
        const default_action = compare_bytes();
    }

    apply {
        config.apply();
        if (meta.lf_threshold != 0) {
            cutoff.apply();
            meta.lf_start = open_or_keep.execute(meta.flow_slot);
            if (meta.lf_start == LF_RUNS) {
                // The window runs: count, and note another flow in the slot.
                add_bytes.execute(meta.flow_slot);
                meta.lf_sig = read_sig.execute(meta.flow_slot);
                if (meta.lf_sig != meta.flow_sig) {
                    note_collision.execute(meta.flow_slot);
                }
            } else {
                // The window ended: report it if it was large; the
                // registers already hold the next one.
                meta.lf_elapsed = ig_prsr_md.global_tstamp[31:0] - meta.lf_start;
                meta.lf_bytes = restart_bytes.execute(meta.flow_slot);
                meta.lf_sig = restart_sig.execute(meta.flow_slot);
                meta.lf_collision = restart_collision.execute(meta.flow_slot);
                if (meta.lf_sig != meta.flow_sig) {
                    meta.lf_collision = 1;
                }
                compare.apply();
                if (meta.lf_start != 0) {
                    if (meta.lf_over == 0) {
                        ig_dprsr_md.digest_type = DIGEST_TYPE_LARGE_FLOW;
                    }
                }
            }
        }
    }
}

#endif
