// Egress: per-port settings, queue sensing, ECN and INT (congestion.p4, which
// applies IntEgress), and the clone
// copies (Telemetry Reports, and threshold digests that go back to ingress).
#ifndef METAROCE_V1MODEL_EGRESS_P4
#define METAROCE_V1MODEL_EGRESS_P4

#include "metadata.p4"
#include "congestion.p4"
#include "report.p4"

control MetaroceEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    QueueSensing() queue_sensing;
    ReportBuilder() report_builder;

    apply {
        // The common case, a packet of this switch's own towards a port, is
        // one condition.
        if (standard_metadata.instance_type != PKT_INSTANCE_TYPE_EGRESS_CLONE
                && standard_metadata.egress_port != CPU_PORT && hdr.ipv4.isValid()) {
            queue_sensing.apply(hdr, meta, standard_metadata);  // and INT
            // The drain rule's mark ends where the packet leaves for a host
            // (receivers ignore reserved bits, and the ICRC masks them).
            if (hdr.bth.isValid()) {
                if (PORT_EDGE(meta) == 1) {
                    hdr.bth.reserved0[1:0] = BTH_MARK_NONE;
                }
            }

        } else if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_EGRESS_CLONE) {
            if (IS_DIGEST_COPY(meta)) {
                truncate(64);
                recirculate_preserving_field_list(FL_DIGEST);
            } else if (IS_REPORT_COPY(meta)) {
                report_builder.apply(hdr, meta, standard_metadata);
            }
        }
    }
}

#endif
