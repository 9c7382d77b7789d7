// Egress: per-port settings, queue sensing and ECN, INT, and the clone
// copies (Telemetry Reports, and threshold digests that go back to ingress).
#ifndef METAROCE_V1MODEL_EGRESS_P4
#define METAROCE_V1MODEL_EGRESS_P4

#include "metadata.p4"
#include "congestion.p4"
#include "int_egress.p4"
#include "report.p4"

control MetaroceEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    QueueSensing() queue_sensing;
    IntEgress() int_egress;
    ReportBuilder() report_builder;

    action set_port(bit<1> edge, bit<16> mtu, bit<32> queue_high, bit<32> queue_low, bit<32> ecn_threshold) {
        meta.port_cfg = edge ++ mtu ++ queue_high ++ queue_low ++ ecn_threshold;
    }

    // Per egress port: host-facing or not, IP MTU, and queue thresholds
    // (packets on BMv2). A port without an entry is a fabric port with no
    // thresholds and no MTU check.
    table egress_port_config {
        key = {
            standard_metadata.egress_port: exact @name("port");
        }
        actions = {
            set_port;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = PORT_COUNT;
    }

    apply {
        if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_EGRESS_CLONE) {
            if (meta.copy_kind == COPY_DIGEST) {
                truncate(64);
                recirculate_preserving_field_list(FL_DIGEST);
            } else if (meta.copy_kind == COPY_REPORT) {
                report_builder.apply(hdr, meta, standard_metadata);
            }
            return;
        }
        if (standard_metadata.egress_port == CPU_PORT || !hdr.ipv4.isValid()) {
            return;
        }
        egress_port_config.apply();
        queue_sensing.apply(hdr, meta, standard_metadata);
        int_egress.apply(hdr, meta, standard_metadata);
    }
}

#endif
