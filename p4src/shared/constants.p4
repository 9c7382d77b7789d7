// Protocol numbers, reserved values and drop reasons shared by all targets.
#ifndef METAROCE_CONSTANTS_P4
#define METAROCE_CONSTANTS_P4

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP = 0x0806;
const bit<8> IP_PROTO_TCP = 6;
const bit<8> IP_PROTO_UDP = 17;
const bit<16> UDP_PORT_ROCEV2 = 4791;

// RoCEv2 BTH opcodes the drain rule tells apart: RC Acknowledge (it
// carries an AETH) and RC Atomic Acknowledge. Every other RC opcode (the
// top three bits 0) is a request: data whose delivery ACKs confirm.
const bit<8> BTH_OPCODE_RC_ACK = 0x11;
const bit<8> BTH_OPCODE_RC_ATOMIC_ACK = 0x12;
// The drain rule's mark, the BTH's two low reserved bits (reserved0[1:0]),
// written by a flow's first leaf and cleared where the packet leaves for a
// host. 0: the flow does not follow the rule (flowlet gaps decide);
// GOVERNED (bit 1): it does, and this packet keeps its path at every
// switch whatever the gap; FRESH (bits 1 and 0): nothing of the flow is in
// flight, so this packet may take a new path at every switch.
const bit<2> BTH_MARK_NONE = 0;
const bit<2> BTH_MARK_GOVERNED = 2;
const bit<2> BTH_MARK_FRESH = 3;

// INT presence is signalled by one DSCP bit, so the UDP destination port
// (4791, which the receiving RNIC needs) and the 5-tuple used for path
// hashing stay untouched. QoS must ignore this bit inside the fabric.
const bit<6> INT_DSCP_BIT = 0x01;
const bit<4> INT_TYPE_MD = 1;
const bit<4> INT_VERSION = 2;
// Instruction bitmap (bit0 is the MSB): node id, L1 ports, hop latency,
// queue id + occupancy, egress timestamp.
const bit<16> INT_INSTRUCTIONS = 0xF400;
const bit<5> INT_HOP_ML = 6;

// Telemetry Report v2.0.
const bit<4> REPORT_VERSION = 2;
const bit<4> REPORT_TYPE_INT = 1;
const bit<4> REPORT_INNER_IPV4 = 4;
// RepMdBits: L1 ports, hop latency, queue, egress timestamp of the sink.
const bit<16> REPORT_MD_BITS = 0x7400;
const bit<8> REPORT_MD_WORDS = 5;

// Why a packet was dropped: the index of drop_reasons.
const bit<8> DROP_PARSER_ERROR = 1;      // malformed or truncated header
const bit<8> DROP_NO_ROUTE = 2;          // no LPM match
const bit<8> DROP_TTL_EXPIRED = 3;       // TTL 0 or 1 on arrival
const bit<8> DROP_NO_NHOP = 4;           // selected next hop has no entry
const bit<8> DROP_INT_MALFORMED = 5;     // INT header inconsistent with its length
const bit<8> DROP_IPV4_INVALID = 6;      // version or IHL wrong, or bad checksum
const bit<8> DROP_UNSUPPORTED = 7;       // neither IPv4 nor ARP

// What the drain rule counts: the index of drain.events.
const bit<8> DRAIN_FRESH = 0;          // data found drained: it may take a new path
const bit<8> DRAIN_COLLISION = 1;      // data of a queue pair whose slot another holds busy
const bit<8> DRAIN_TAKEOVER = 2;       // a drained slot taken over by another queue pair
const bit<8> DRAIN_UNKNOWN_ACK = 3;    // ACK or NAK of no paired queue pair, or of a slot another holds
const bit<8> DRAIN_STALE_ACK = 4;      // ACK behind the last, or beyond anything forwarded
const bit<8> DRAIN_NAK = 5;            // NAKs (and RNR NAKs) seen

// Digest receivers.
const bit<32> DIGEST_QUEUE = 1;
const bit<32> DIGEST_LARGE_FLOW = 2;
const bit<32> DIGEST_DRAIN_PAIR = 3;

// Why a packet reaches the controller.
const bit<8> PACKET_IN_REPORT = 1;
const bit<8> PACKET_IN_ARP = 2;

#endif
