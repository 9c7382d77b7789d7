// Ingress: controller packet I/O, sanity checks, routing, INT watchlist,
// large flows, the INT sink's report decision, and the threshold digests
// that egress hands back through a recirculation port (TNA raises
// digests in the ingress deparser only).
#ifndef METAROCE_TNA_INGRESS_P4
#define METAROCE_TNA_INGRESS_P4

#include "metadata.p4"
#include "routing.p4"
#include "large_flows.p4"
#include "report_decision.p4"

control MetaroceIngress(inout ingress_headers_t hdr, inout ingress_metadata_t meta,
                        in ingress_intrinsic_metadata_t ig_intr_md,
                        in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Routing() routing;
    LargeFlows() large_flows;
    // MetaroceEgress.int_egress's sampling registers in the contract; the
    // sink decides here, where the packet is still as received.
    @name(".MetaroceEgress.int_egress") ReportDecision() int_egress;
    PathLatency() path_latency;
    LargeFlowsConfig() large_flows_config;
    Counter<bit<32>, bit<8>>(DROP_REASON_COUNT, CounterType_t.PACKETS) drop_reasons;
    Hash<bit<32>>(HashAlgorithm_t.CRC32) flow_hash;

    // Switch-wide settings: the default of a keyless table. Defaults suit
    // Tofino (timestamps in ns); the timeout's low 32 bits are used.
    action configure(bit<32> switch_id, bit<48> flowlet_timeout_us) {
        meta.switch_id = switch_id;
        meta.flowlet_timeout = flowlet_timeout_us[31:0];
        // timeout - now: routing's stamp_time adds it to the last-seen time.
        meta.flowlet_cutoff = flowlet_timeout_us[31:0] - ig_prsr_md.global_tstamp[31:0];
    }

    table config {
        key = {}
        actions = {
            configure;
        }
        default_action = configure(0, 50000000);
        size = 1;
    }

    // MetaroceEgress.egress_config in the contract. It is applied here
    // because the sink's report decision (period, latency bucket) is made
    // in ingress; egress gets the digest interval over the bridge. Values
    // in ns, low 32 bits used.
    @name(".MetaroceEgress.configure_egress")
    action configure_egress(bit<48> digest_interval_us, bit<48> report_period_us, bit<8> latency_shift) {
        meta.digest_interval = digest_interval_us[31:0];
        // period - now, for the sink's period_check.
        meta.report_cutoff = report_period_us[31:0] - ig_prsr_md.global_tstamp[31:0];
        meta.latency_shift = latency_shift;
    }

    @name(".MetaroceEgress.egress_config")
    table egress_config {
        key = {}
        actions = {
            configure_egress;
        }
        default_action = configure_egress(1000000, 1000000000, 8);
        size = 1;
    }

    // A hit is all that matters (see apply).
    action set_edge() {
    }

    // Host-facing ports: INT sources, the large-flow detector, and (looked
    // up with the egress port of an INT packet) INT sinks.
    table ingress_port_role {
        key = {
            meta.role_port: exact @name("port");
        }
        actions = {
            set_edge;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = PORT_COUNT;
    }

    // Straight into the bridged header (bridge() ran before): a step
    // after this table's would cost a stage.
    action int_source(bit<8> max_hops) {
        hdr.bridged.int_source = 1;
        hdr.bridged.int_max_hops = max_hops;
    }

    table int_watchlist {
        key = {
            hdr.ipv4.src_addr: ternary @name("src_addr");
            hdr.ipv4.dst_addr: ternary @name("dst_addr");
            hdr.udp.dst_port: ternary @name("l4_dst_port");  // applied to UDP only
        }
        actions = {
            int_source;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = INT_WATCHLIST_SIZE;
    }

    action drop(bit<8> reason) {
        ig_dprsr_md.drop_ctl = 1;
        drop_reasons.count(reason);
    }

    action to_cpu(bit<8> reason) {
        ig_tm_md.ucast_egress_port = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = (bit<16>)ig_intr_md.ingress_port;
        hdr.packet_in.reason = reason;
        hdr.packet_in.reserved = 0;
    }

    action bridge() {
        hdr.bridged.setValid();
        hdr.bridged.kind = KIND_BRIDGED;
        hdr.bridged.pad0 = 0;
        hdr.bridged.ingress_port = ig_intr_md.ingress_port;
        hdr.bridged.switch_id = meta.switch_id;
        hdr.bridged.ingress_ts = ig_prsr_md.global_tstamp;
        hdr.bridged.int_source = 0;     // int_watchlist may set them
        hdr.bridged.int_max_hops = 0;
        hdr.bridged.digest_interval = meta.digest_interval;
    }

    // Tofino 1 has 12 stages: nothing waits for routing that does not need
    // its result. What the large-flow detector and the INT sink need of
    // the packet alone (configuration, cutoffs, path latency, strip length)
    // is computed beside routing, as tables and steps without branches
    // (the compiler places a branch's tables together, before what follows
    // it); only their registers, digest and mirror wait for routing's
    // verdict and, for the sink, the egress port. Branches test tables'
    // results and fields set stages before: a flag set by an action and
    // tested right after costs a stage.
    apply {
        meta.switch_id = 0;
        meta.digest_interval = 0;
        if (hdr.digest_copy.isValid()) {
            // Egress's threshold digest, back through recirculation.
            ig_dprsr_md.digest_type = DIGEST_TYPE_QUEUE;
            ig_dprsr_md.drop_ctl = 1;
            exit;
        }
        // The common case, a well-formed IPv4 packet from a port with TTL
        // to spare, is one condition rather than one per check below. The
        // INT-MD version is checked here (not by the parser).
        if (!hdr.packet_out.isValid() && meta.drop_reason == 0 && ig_prsr_md.parser_err == 0
                && !(hdr.int_hdr.isValid() && hdr.int_hdr.version != INT_VERSION)
                && !meta.checksum_error && hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            config.apply();
            egress_config.apply();
            large_flows_config.apply(meta, ig_prsr_md);
            path_latency.apply(hdr, meta, ig_intr_md, ig_prsr_md);
            meta.flow_hash = flow_hash.get({ hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                                             meta.l4_src_port, meta.l4_dst_port, meta.dest_qp });
            meta.flow_slot = meta.flow_hash[FLOWLET_INDEX_BITS - 1:0];
            meta.flow_sig = meta.flow_hash[31:16];
            meta.now = ig_prsr_md.global_tstamp;
            routing.apply(hdr, meta, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
            // Set before the verdicts below, so that the lookup waits for
            // nothing but the egress port.
            if (hdr.int_hdr.isValid()) {
                meta.role_port = ig_tm_md.ucast_egress_port;
            } else {
                meta.role_port = ig_intr_md.ingress_port;
            }
            if (meta.drop_reason != 0) {
                drop(meta.drop_reason);
            } else if (ig_dprsr_md.resubmit_type == RESUBMIT_PORT_DOWN) {
                // Comes back as a new flowlet; nothing else happens now.
                ig_dprsr_md.drop_ctl = 0;
            } else {
                bridge();
                if (hdr.udp.isValid()) {
                    if (ingress_port_role.apply().hit) {
                        if (hdr.int_hdr.isValid()) {
                            // The egress port is host-facing: this switch
                            // is the packet's INT sink. Decides the report,
                            // strips INT.
                            int_egress.apply(hdr, meta, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
                        } else {
                            // From a host-facing port: an INT source, and
                            // the large-flow detector for a group route.
                            int_watchlist.apply();
                            if (meta.group_id != 0) {
                                large_flows.apply(hdr, meta, ig_prsr_md, ig_dprsr_md);
                            }
                        }
                    }
                }
            }
        } else if (hdr.packet_out.isValid()) {
            ig_tm_md.ucast_egress_port = (bit<9>)hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            bridge();
        } else if (ig_prsr_md.parser_err != 0) {
            drop(DROP_PARSER_ERROR);
        } else if (hdr.int_hdr.isValid() && hdr.int_hdr.version != INT_VERSION) {
            drop(DROP_INT_MALFORMED);
        } else if (meta.drop_reason != 0) {
            drop(meta.drop_reason);
        } else if (meta.checksum_error) {
            drop(DROP_IPV4_INVALID);
        } else if (hdr.ipv4.isValid()) {
            drop(DROP_TTL_EXPIRED);
        } else if (hdr.ethernet.ether_type == ETHERTYPE_ARP) {
            to_cpu(PACKET_IN_ARP);
            bridge();
        } else {
            drop(DROP_UNSUPPORTED);
        }
    }
}

#endif
