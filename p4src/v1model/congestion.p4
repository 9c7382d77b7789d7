// Congestion sensing on the egress queue: ECN marking (the DCQCN
// baseline), the per-port maximum depth since the controller last read it,
// and high/low threshold crossings reported as digests.
//
// A crossing is only recorded when its digest is sent, and at most once
// per digest_interval per port: a suppressed crossing is seen again by the
// next packet, so the controller's view and the switch's state never part.
#ifndef METAROCE_V1MODEL_CONGESTION_P4
#define METAROCE_V1MODEL_CONGESTION_P4

#include "metadata.p4"

control QueueSensing(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<32>>(PORT_COUNT) port_max_depth;
    register<bit<8>>(PORT_COUNT) port_congested;
    register<bit<48>>(PORT_COUNT) port_last_digest;
    register<bit<32>>(1) digest_seq;
    counter(PORT_COUNT, CounterType.packets) ecn_marks;

    apply {
        bit<32> port = (bit<32>)standard_metadata.egress_port;
        bit<32> depth = (bit<32>)standard_metadata.deq_qdepth;

        bit<32> max_depth;
        port_max_depth.read(max_depth, port);
        if (depth > max_depth) {
            port_max_depth.write(port, depth);
        }

        if (meta.ecn_threshold != 0 && hdr.ipv4.isValid() && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)
                && depth >= meta.ecn_threshold) {
            hdr.ipv4.ecn = 3;
            ecn_marks.count(port);
        }

        if (meta.queue_high == 0) {
            return;
        }
        bit<8> congested;
        port_congested.read(congested, port);
        bit<8> next = congested;
        if (congested == 0 && depth >= meta.queue_high) {
            next = 1;
        } else if (congested == 1 && depth <= meta.queue_low) {
            next = 0;
        }
        if (next == congested) {
            return;
        }
        bit<48> now = standard_metadata.egress_global_timestamp;
        bit<48> last;
        port_last_digest.read(last, port);
        if (last != 0 && now - last < meta.digest_interval) {
            return;
        }
        bit<32> seq;
        digest_seq.read(seq, 0);
        digest_seq.write(0, seq + 1);
        port_congested.write(port, next);
        port_last_digest.write(port, now);
        meta.copy_kind = COPY_DIGEST;
        meta.copy_switch_id = meta.switch_id;
        meta.digest_port = (bit<16>)standard_metadata.egress_port;
        meta.digest_depth = depth;
        meta.digest_time = now;
        meta.digest_seq = seq;
        meta.digest_congested = next;
        clone_preserving_field_list(CloneType.E2E, DIGEST_SESSION, FL_DIGEST);
    }
}

#endif
