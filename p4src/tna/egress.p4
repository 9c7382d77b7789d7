// Egress: per-port settings, queue sensing, ECN and INT (congestion.p4,
// which applies IntEgress) for packets from ingress; Telemetry Reports
// built from the sink's report copies; digest copies pass untouched on
// their way to recirculation.
#ifndef METAROCE_TNA_EGRESS_P4
#define METAROCE_TNA_EGRESS_P4

#include "metadata.p4"
#include "congestion.p4"
#include "report.p4"

control MetaroceEgress(inout egress_headers_t hdr, inout egress_metadata_t meta,
                       in egress_intrinsic_metadata_t eg_intr_md,
                       in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                       inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                       inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    QueueSensing() queue_sensing;
    ReportBuilder() report_builder;

    apply {
        if (hdr.bridged.isValid()) {
            if (eg_intr_md.egress_port != CPU_PORT && hdr.ipv4.isValid()) {
                queue_sensing.apply(hdr, meta, eg_intr_md, eg_prsr_md, eg_dprsr_md);  // and INT
                // The drain rule's mark ends where the packet leaves for a
                // host (receivers ignore reserved bits; the ICRC masks them).
                if (hdr.bth_mark.isValid() && meta.edge == 1) {
                    hdr.bth_mark.mark = BTH_MARK_NONE;
                }
            }
        } else if (hdr.report_copy.isValid()) {
            report_builder.apply(hdr, meta, eg_intr_md, eg_dprsr_md);
        }
    }
}

#endif
