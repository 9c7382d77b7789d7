// The drain rule on Tofino (p4src/README.md, "Moves that never reorder";
// v1model/drain.p4 is the reference): a flow changes path only when none
// of its packets is in flight. The same control-plane names as v1model,
// arranged for stateful ALUs, which touch each register once per packet:
//
//  - slot_owner (stage after the LPM): the queue pair's 32-bit signature
//    (its crc32; the low 12 bits are the slot). A data packet of another
//    queue pair takes the slot at once (v1model waits until it is
//    drained): a stateful ALU cannot read the PSNs of a register that a
//    later stage holds. The take resets the PSNs (below), which keeps the
//    rule safe: acked is set to the taking packet's PSN, and the slot is
//    drained only once a cumulative ACK at or past it comes back, which
//    covers everything the queue pair sent before.
//  - slot_psn (the next stage): {fwd_next << 8, acked << 8 | NAK} as a
//    pair of 32-bit halves, so that 24-bit serial arithmetic is the ALU's
//    32-bit signed arithmetic. A compare takes one half, so the owner's
//    data is fresh when acked == its PSN and fwd_next is at or before it
//    (the next packet after everything acknowledged); one access updates
//    both halves and outputs that.
//  - pair_asked (three stages on): the last report's time with its low
//    bit set, or 0 once a paired ACK confirmed the slot (v1model's
//    confirmed bit of slot_owner).
//
// First-leaf data is recognised by its mark: an RC request that arrives
// unmarked (hosts send reserved bits as 0, and egress clears the mark on
// host-facing ports) and is routed to a group. ingress_port_role cannot
// say it in time: on Tofino it is looked up late, with the egress port of
// INT packets (the sink decision).
#ifndef METAROCE_TNA_DRAIN_P4
#define METAROCE_TNA_DRAIN_P4

#include "metadata.p4"

const bit<2> DRAIN_KIND_DATA = 1;
const bit<2> DRAIN_KIND_ACK = 2;

struct drain_psn_t {
    bit<32> lo;   // acked << 8 | NAK outstanding
    bit<32> hi;   // fwd_next << 8
}

control Drain(inout ingress_headers_t hdr, inout ingress_metadata_t meta,
              in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
              inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Register<bit<32>, bit<12>>(DRAIN_SLOTS) slot_owner;
    Register<drain_psn_t, bit<12>>(DRAIN_SLOTS) slot_psn;
    // Time registers hold the low 32 bits of the ns clock.
    Register<bit<32>, bit<12>>(DRAIN_SLOTS) pair_asked;
    Counter<bit<32>, bit<8>>(DRAIN_EVENT_COUNT, CounterType_t.PACKETS) events;
    Hash<bit<32>>(HashAlgorithm_t.CRC32) data_hash;

    // The rule on (1) or off (0, the default), and the least time between
    // two reports of one slot (ns on Tofino; low 32 bits used). Its action
    // also computes the PSN and the time the slot needs (a table of their
    // own would take one of stage 0's logical tables, which are all used).
    action configure(bit<1> enabled, bit<32> pair_interval_us) {
        meta.drain_on = enabled;
        // interval - now: pair_asked adds it to the last report's time.
        meta.drain_cutoff = pair_interval_us - ig_prsr_md.global_tstamp[31:0];
        meta.drain_now = ig_prsr_md.global_tstamp[31:0] | 1;
        meta.drain_psn = hdr.bth.psn_word << 8;
    }

    table config {
        key = {}
        actions = {
            configure;
        }
        default_action = configure(0, 1000000);
        size = 1;
    }

    // The ACK's requester QP names the data's responder QP: the slot's key
    // is the data's (source, destination, QP), the ACK's turned around.
    action pair(bit<24> data_qp) {
        meta.drain_qp = data_qp;
        meta.drain_unpaired = 0;
        meta.drain_src = hdr.ipv4.dst_addr;
        meta.drain_dst = hdr.ipv4.src_addr;
    }

    // An ACK no entry pairs: its own QP stands in for the data's, for the
    // slot its reports are limited by.
    action unpaired() {
        meta.drain_qp = hdr.bth.dest_qp;
        meta.drain_unpaired = 1;
        meta.drain_src = hdr.ipv4.dst_addr;
        meta.drain_dst = hdr.ipv4.src_addr;
    }

    table qp_pair {
        key = {
            hdr.ipv4.src_addr: exact @name("src_addr");
            hdr.ipv4.dst_addr: exact @name("dst_addr");
            hdr.bth.dest_qp: exact @name("dest_qp");
        }
        actions = {
            pair;
            @defaultonly unpaired;
        }
        const default_action = unpaired();
        size = QP_PAIR_TABLE_SIZE;
    }

    // 1: the queue pair owns the slot. The slot is its own either way.
    RegisterAction<bit<32>, bit<12>, bit<1>>(slot_owner) owner_data = {
        void apply(inout bit<32> value, out bit<1> owner) {
            if (value == meta.drain_hash) {
                owner = 1;
            } else {
                owner = 0;
            }
            value = meta.drain_hash;
        }
    };

    RegisterAction<bit<32>, bit<12>, bit<1>>(slot_owner) owner_ack = {
        void apply(inout bit<32> value, out bit<1> owner) {
            if (value == meta.drain_hash) {
                owner = 1;
            } else {
                owner = 0;
            }
        }
    };

    // The owner's data: 1 (fresh) when drained. A compare takes one half
    // of the register, so drained (acked == fwd_next) is tested as acked
    // == PSN and fwd_next at or before it: the packet is the next one and
    // everything before it was acknowledged (a packet that skips PSNs or
    // repeats old ones is not fresh: the safe side). fwd_next moves past
    // its PSN.
    RegisterAction<drain_psn_t, bit<12>, bit<1>>(slot_psn) psn_forward = {
        void apply(inout drain_psn_t value, out bit<1> fresh) {
            fresh = 0;
            if ((int<32>)(value.hi - meta.drain_psn) <= 0) {
                value.hi = meta.drain_next;
                if (value.lo == meta.drain_psn) {
                    fresh = 1;
                }
            }
        }
    };

    // A queue pair takes the slot: this packet is forwarded, nothing of it
    // is acknowledged yet.
    RegisterAction<drain_psn_t, bit<12>, bit<1>>(slot_psn) psn_take = {
        void apply(inout drain_psn_t value) {
            value.hi = meta.drain_next;
            value.lo = meta.drain_psn;
        }
    };

    // An ACK of PSN p: acked moves to p + 1 when that is past it and not
    // past fwd_next, and the NAK ends. 1: it moved.
    RegisterAction<drain_psn_t, bit<12>, bit<1>>(slot_psn) psn_ack = {
        void apply(inout drain_psn_t value, out bit<1> moved) {
            if ((int<32>)(value.lo - meta.drain_next) < 0 && (int<32>)(value.hi - meta.drain_next) >= 0) {
                value.lo = meta.drain_next;
                moved = 1;
            } else {
                moved = 0;
            }
        }
    };

    // A NAK of PSN p: everything below p arrived (acked moves there if it
    // was behind), and a NAK is outstanding. 1: taken; 0: stale (past
    // fwd_next).
    RegisterAction<drain_psn_t, bit<12>, bit<1>>(slot_psn) psn_nak = {
        void apply(inout drain_psn_t value, out bit<1> seen) {
            if ((int<32>)(value.hi - meta.drain_psn) < 0) {
                seen = 0;
            } else if ((int<32>)(value.lo - meta.drain_psn) < 0) {
                value.lo = meta.drain_psn | 1;
                seen = 1;
            } else {
                value.lo = value.lo | 1;
                seen = 1;
            }
        }
    };

    // A report once per interval per slot (0: confirmed, or never asked).
    RegisterAction<bit<32>, bit<12>, bit<1>>(pair_asked) ask_any = {
        void apply(inout bit<32> value, out bit<1> report) {
            if (value == 0 || (int<32>)(value + meta.drain_cutoff) < 0) {
                value = meta.drain_now;
                report = 1;
            } else {
                report = 0;
            }
        }
    };

    // Busy data reports until a paired ACK confirms the slot.
    RegisterAction<bit<32>, bit<12>, bit<1>>(pair_asked) ask_unconfirmed = {
        void apply(inout bit<32> value, out bit<1> report) {
            if (value != 0 && (int<32>)(value + meta.drain_cutoff) < 0) {
                value = meta.drain_now;
                report = 1;
            } else {
                report = 0;
            }
        }
    };

    RegisterAction<bit<32>, bit<12>, bit<1>>(pair_asked) ask_stamp = {
        void apply(inout bit<32> value, out bit<1> report) {
            value = meta.drain_now;
            report = 1;
        }
    };

    RegisterAction<bit<32>, bit<12>, bit<1>>(pair_asked) ask_confirm = {
        void apply(inout bit<32> value, out bit<1> report) {
            value = 0;
            report = 0;
        }
    };

    @hidden action slot_data() {
        meta.drain_owner = owner_data.execute(meta.drain_hash[11:0]);
        meta.drain_kind = DRAIN_KIND_DATA;
    }
    @hidden action slot_ack() {
        meta.drain_owner = owner_ack.execute(meta.drain_hash[11:0]);
        meta.drain_kind = DRAIN_KIND_ACK;
    }
    @hidden action psn_data_own() { meta.drain_fresh = psn_forward.execute(meta.drain_hash[11:0]); }
    @hidden action psn_data_take() { psn_take.execute(meta.drain_hash[11:0]); }
    @hidden action psn_ack_own() { meta.drain_flag = psn_ack.execute(meta.drain_hash[11:0]); }
    @hidden action psn_nak_own() { meta.drain_flag = psn_nak.execute(meta.drain_hash[11:0]); }

    // Which slot_psn step, by what slot_owner said.
    @hidden table psn_step {
        key = {
            meta.drain_kind: exact;
            meta.drain_owner: exact;
            meta.drain_unpaired: exact;
            hdr.aeth.syndrome: ternary;
        }
        actions = {
            psn_data_own;
            psn_data_take;
            psn_ack_own;
            psn_nak_own;
            NoAction;
        }
        const entries = {
            (DRAIN_KIND_DATA, 1, 0, _): psn_data_own();
            (DRAIN_KIND_DATA, 0, 0, _): psn_data_take();
            (DRAIN_KIND_ACK, 1, 0, 0x00 &&& 0x60): psn_ack_own();
            (DRAIN_KIND_ACK, 1, 0, _): psn_nak_own();
        }
        const default_action = NoAction();
        size = 8;
    }

    @hidden action asked_any() { meta.drain_report = ask_any.execute(meta.drain_hash[11:0]); }
    @hidden action asked_unconfirmed() { meta.drain_report = ask_unconfirmed.execute(meta.drain_hash[11:0]); }
    @hidden action asked_stamp() { meta.drain_report = ask_stamp.execute(meta.drain_hash[11:0]); }
    @hidden action asked_confirm() { meta.drain_report = ask_confirm.execute(meta.drain_hash[11:0]); }

    // The report's limit, by what slot_psn said: fresh data and unpaired
    // ACKs once per interval; busy data until confirmed; a take at once; a
    // paired ACK or NAK that moved the slot confirms it.
    @hidden table ask_step {
        key = {
            meta.drain_kind: exact;
            meta.drain_unpaired: ternary;
            meta.drain_owner: ternary;
            meta.drain_fresh: ternary;
            meta.drain_flag: ternary;
        }
        actions = {
            asked_any;
            asked_unconfirmed;
            asked_stamp;
            asked_confirm;
            NoAction;
        }
        const entries = {
            (DRAIN_KIND_DATA, _, 1, 1, _): asked_any();
            (DRAIN_KIND_DATA, _, 1, 0, _): asked_unconfirmed();
            (DRAIN_KIND_DATA, _, 0, _, _): asked_stamp();
            (DRAIN_KIND_ACK, 1, _, _, _): asked_any();
            (DRAIN_KIND_ACK, 0, 1, _, 1): asked_confirm();
        }
        const default_action = NoAction();
        size = 8;
    }

    @hidden action count_event(bit<8> event) {
        events.count(event);
    }

    // One event per packet (a stale NAK counts as stale only; a repeated
    // ACK counts as stale).
    @hidden table event_step {
        key = {
            meta.drain_kind: exact;
            meta.drain_unpaired: ternary;
            meta.drain_owner: ternary;
            meta.drain_fresh: ternary;
            meta.drain_flag: ternary;
            hdr.aeth.syndrome: ternary;
        }
        actions = {
            count_event;
            NoAction;
        }
        const entries = {
            (DRAIN_KIND_DATA, _, 1, 1, _, _): count_event(DRAIN_FRESH);
            (DRAIN_KIND_DATA, _, 0, _, _, _): count_event(DRAIN_TAKEOVER);
            (DRAIN_KIND_ACK, 1, _, _, _, _): count_event(DRAIN_UNKNOWN_ACK);
            (DRAIN_KIND_ACK, 0, 0, _, _, _): count_event(DRAIN_UNKNOWN_ACK);
            (DRAIN_KIND_ACK, 0, 1, _, 0, _): count_event(DRAIN_STALE_ACK);
            (DRAIN_KIND_ACK, 0, 1, _, 1, 0x00 &&& 0x60): NoAction();
            (DRAIN_KIND_ACK, 0, 1, _, 1, _): count_event(DRAIN_NAK);
        }
        const default_action = NoAction();
        size = 16;
    }

    // The slot of the queue pair in drain_src, drain_dst, drain_qp (the
    // data's; an ACK's turned around by qp_pair): its low 12 bits index
    // it, all 32 are the owner's signature.
    @hidden action slot_hash() {
        meta.drain_hash = data_hash.get({ meta.drain_src, meta.drain_dst, hdr.ipv4.protocol, meta.drain_qp });
    }

    @hidden action next_psn() {
        meta.drain_next = meta.drain_psn + 0x100;
    }

    @hidden action mark_fresh() {
        hdr.bth.reserved0[1:0] = BTH_MARK_FRESH;
    }
    @hidden action mark_governed() {
        hdr.bth.reserved0[1:0] = BTH_MARK_GOVERNED;
    }

    // Applied after the LPM (group_id, drop_reason); what needs the packet
    // alone (the configuration, the slot's hash, the ACK's pairing) is
    // placed beside it, the slot's three registers in the stages after it.
    apply {
        // The parser copied what the slot and the report need of the BTH
        // (drain_qp, the addresses, the arriving mark) and told
        // an RC request that arrived unmarked (drain_rc).
        config.apply();
        if (hdr.aeth.isValid()) {
            qp_pair.apply();
        }
        slot_hash();
        next_psn();
        if (meta.drain_on == 1) {
            if (meta.group_id != 0 && meta.drain_rc == 1) {
                slot_data();
            } else if (meta.group_id == 0 && meta.drop_reason == 0 && hdr.aeth.isValid()) {
                // An ACK or NAK routed straight to a host: its sender's leaf.
                slot_ack();
            }
        }
        psn_step.apply();
        if (meta.drain_kind == DRAIN_KIND_DATA) {
            if (meta.drain_fresh == 1) {
                mark_fresh();
            } else {
                mark_governed();
            }
        }
        ask_step.apply();
        event_step.apply();
        // A large-flow digest, raised later in the same packet, wins: the
        // report is made good at the slot's next interval.
        if (meta.drain_report == 1) {
            ig_dprsr_md.digest_type = DIGEST_TYPE_DRAIN_PAIR;
        }
    }
}

#endif
