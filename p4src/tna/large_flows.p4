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

control LargeFlows(inout ingress_headers_t hdr, inout ingress_metadata_t meta,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Register<bit<16>, bit<13>>(LARGE_FLOW_SLOTS) window_sig;
    Register<bit<32>, bit<13>>(LARGE_FLOW_SLOTS) window_start;
    Register<bit<32>, bit<13>>(LARGE_FLOW_SLOTS) window_bytes;
    Register<bit<8>, bit<13>>(LARGE_FLOW_SLOTS) window_collision;

    // The old start; a window that ended (or never opened) reopens now.
    RegisterAction<bit<32>, bit<13>, bit<32>>(window_start) open_or_keep = {
        void apply(inout bit<32> value, out bit<32> old) {
            old = value;
            if (value == 0 || ig_prsr_md.global_tstamp[31:0] - value >= meta.lf_window) {
                value = ig_prsr_md.global_tstamp[31:0];
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
    }

    apply {
        config.apply();
        if (meta.lf_threshold != 0) {
            meta.lf_start = open_or_keep.execute(meta.flow_slot);
            meta.lf_elapsed = ig_prsr_md.global_tstamp[31:0] - meta.lf_start;
            if (meta.lf_start != 0 && meta.lf_elapsed < meta.lf_window) {
                // The window runs: count, and note another flow in the slot.
                add_bytes.execute(meta.flow_slot);
                meta.lf_sig = read_sig.execute(meta.flow_slot);
                if (meta.lf_sig != meta.flow_sig) {
                    note_collision.execute(meta.flow_slot);
                }
            } else {
                // The window ended: report it if it was large; the
                // registers already hold the next one.
                meta.lf_bytes = restart_bytes.execute(meta.flow_slot);
                meta.lf_sig = restart_sig.execute(meta.flow_slot);
                meta.lf_collision = restart_collision.execute(meta.flow_slot);
                if (meta.lf_sig != meta.flow_sig) {
                    meta.lf_collision = 1;
                }
                if (meta.lf_start != 0 && meta.lf_bytes >= meta.lf_threshold) {
                    ig_dprsr_md.digest_type = DIGEST_TYPE_LARGE_FLOW;
                }
            }
        }
    }
}

#endif
