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
#include "int_egress.p4"

#define QUEUE_DEPTH ((bit<32>)standard_metadata.deq_qdepth)

control QueueSensing(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<32>, bit<9>>(PORT_COUNT) port_max_depth;
    register<bit<8>, bit<9>>(PORT_COUNT) port_congested;
    register<bit<48>, bit<9>>(PORT_COUNT) port_last_digest;
    register<bit<32>, bit<32>>(1) digest_seq;
    counter<bit<9>>(PORT_COUNT, CounterType.packets) ecn_marks;
    // MetaroceEgress.int_egress in the contract; applied from here so that
    // one condition keeps a packet without INT and without a crossing out
    // of both.
    @name(".MetaroceEgress.int_egress") IntEgress() int_egress;

    // Per egress port: host-facing or not, IP MTU, and queue thresholds
    // (packets on BMv2). A port without an entry is a fabric port with no
    // thresholds and no MTU check. It is MetaroceEgress.egress_port_config
    // in the contract (hence the absolute names) and lives here so that
    // its action also reads the port's registers: one table applied per
    // packet instead of three (BMv2 pays per table).
    @name(".MetaroceEgress.set_port")
    action set_port(bit<1> edge, bit<16> mtu, bit<32> queue_high, bit<32> queue_low, bit<32> ecn_threshold) {
        meta.port_cfg = edge ++ mtu ++ queue_high ++ queue_low ++ ecn_threshold;
        port_max_depth.read(meta.scratch_a, standard_metadata.egress_port);
        port_congested.read(meta.scratch_8, standard_metadata.egress_port);
    }

    @name(".MetaroceEgress.egress_port_config")
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

    HIDDEN_STEP(read_max_depth, port_max_depth.read(meta.scratch_a, standard_metadata.egress_port);)
    HIDDEN_STEP(new_max_depth, meta.scratch_a = QUEUE_DEPTH;)
    // SCRATCH_B: the next digest sequence number; scratch_8: the new state.
    // The sequence number is read, counted and written back in one action:
    // BMv2 holds an action's registers locked while it runs, so two egress
    // threads (ports on different threads) never take the same number.
    HIDDEN_STEP(digest_values,
        digest_seq.read(meta.scratch_a, 0);
        SCRATCH_B(meta) = meta.scratch_a + 1;
        digest_seq.write(0, SCRATCH_B(meta));
        meta.scratch_8 = meta.scratch_8 ^ 1;)

    // Switch-wide egress settings: the default action of a keyless table,
    // which the controller rewrites. It is MetaroceEgress.egress_config in
    // the contract (hence the absolute names); it lives here so that only a
    // packet that needs it reads it: one that crosses a threshold, or an
    // INT packet at its sink (IntEgress runs next).
    @name(".MetaroceEgress.configure_egress")
    action configure_egress(bit<48> digest_interval_us, bit<48> report_period_us, bit<8> latency_shift) {
        meta.egress_cfg = digest_interval_us ++ report_period_us ++ latency_shift;
    }

    @name(".MetaroceEgress.egress_config")
    table egress_config {
        key = {}
        actions = {
            configure_egress;
        }
        default_action = configure_egress(1000, 1000000, 8);
    }

// Crossing up from 0 or down from 1 (scratch_8: the port's state).
#define CROSSING ((meta.scratch_8 == 0 && QUEUE_DEPTH >= PORT_QUEUE_HIGH(meta)) \
    || (meta.scratch_8 == 1 && QUEUE_DEPTH <= PORT_QUEUE_LOW(meta)))

    apply {
        // scratch_a: the port's maximum depth; scratch_8: its state.
        if (!egress_port_config.apply().hit) {
            read_max_depth.apply();
        }
        // An empty queue on a port that is not congested changes nothing
        // below (no new maximum, no CE mark, no crossing): one condition.
        if (standard_metadata.deq_qdepth != 0 || meta.scratch_8 != 0) {
            if (QUEUE_DEPTH > meta.scratch_a) {
                new_max_depth.apply();
                port_max_depth.write(standard_metadata.egress_port, meta.scratch_a);
            }

            if (PORT_ECN_THRESHOLD(meta) != 0 && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)
                    && QUEUE_DEPTH >= PORT_ECN_THRESHOLD(meta)) {
                // A Telemetry Report shows the packet as this hop received it.
                FLAG_ECN_RECEIVED(meta) = 1w1 ++ hdr.ipv4.ecn;
                hdr.ipv4.ecn = 3;
                ecn_marks.count(standard_metadata.egress_port);
            }

            if (PORT_QUEUE_HIGH(meta) != 0 && CROSSING) {
                FLAG_CROSSING(meta) = 1;
            }
        }
        // One condition for a packet that neither crosses nor carries INT
        // nor starts it (most packets have no flag set at all).
        if (FLAGS_EGRESS(meta) != 0 || hdr.int_hdr.isValid()) {
            if (FLAG_CROSSING(meta) == 1 || (hdr.int_hdr.isValid() && PORT_EDGE(meta) == 1)) {
                egress_config.apply();
            }
            if (FLAG_CROSSING(meta) == 1) {
                bit<48> now = standard_metadata.egress_global_timestamp;
                port_last_digest.read(meta.scratch_time, standard_metadata.egress_port);
                if (meta.scratch_time == 0 || now - meta.scratch_time >= CFG_DIGEST_INTERVAL(meta)) {
                    digest_values.apply();
                    port_congested.write(standard_metadata.egress_port, meta.scratch_8);
                    port_last_digest.write(standard_metadata.egress_port, now);
                    meta.digest_copy = 1w1 ++ CFG_SWITCH_ID(meta) ++ (bit<16>)standard_metadata.egress_port ++ QUEUE_DEPTH
                        ++ now ++ meta.scratch_a ++ meta.scratch_8;
                    clone_preserving_field_list(CloneType.E2E, DIGEST_SESSION, FL_DIGEST);
                }
            }
            // INT: a packet that carries it, or this hop is its source.
            int_egress.apply(hdr, meta, standard_metadata);
        }
    }
}

#endif
