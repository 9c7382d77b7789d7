//! Every P4 name the controller uses, spelled once. The values are the
//! full names in `p4src/build/main.p4info.txtpb`; `p4src/README.md` is the
//! contract that documents them.

pub const CONFIG: &str = "MetaroceIngress.config";
pub const CONFIGURE: &str = "MetaroceIngress.configure";
pub const INGRESS_PORT_ROLE: &str = "MetaroceIngress.ingress_port_role";
pub const SET_EDGE: &str = "MetaroceIngress.set_edge";
pub const INT_WATCHLIST: &str = "MetaroceIngress.int_watchlist";
pub const INT_SOURCE: &str = "MetaroceIngress.int_source";
pub const IPV4_LPM: &str = "MetaroceIngress.routing.ipv4_lpm";
pub const SET_GROUP: &str = "MetaroceIngress.routing.set_group";
pub const SET_NHOP: &str = "MetaroceIngress.routing.set_nhop";
pub const ROUTING_DROP: &str = "MetaroceIngress.routing.drop";
pub const NHOP_GROUP: &str = "MetaroceIngress.routing.nhop_group";
pub const SELECT_NHOP: &str = "MetaroceIngress.routing.select_nhop";
pub const NHOP_SELECTOR: &str = "MetaroceIngress.routing.nhop_selector";
pub const PORT_DOWN: &str = "MetaroceIngress.routing.port_down";
pub const MARK_PORT_DOWN: &str = "MetaroceIngress.routing.mark_port_down";
pub const NHOP: &str = "MetaroceIngress.routing.nhop";
pub const FORWARD: &str = "MetaroceIngress.routing.forward";
pub const STEER_FLOW: &str = "MetaroceIngress.routing.steer_flow";
pub const STEER_PAIR: &str = "MetaroceIngress.routing.steer_pair";
pub const STEER: &str = "MetaroceIngress.routing.steer";
pub const DRAIN_CONFIG: &str = "MetaroceIngress.routing.drain.config";
pub const CONFIGURE_DRAIN: &str = "MetaroceIngress.routing.drain.configure";
pub const QP_PAIR: &str = "MetaroceIngress.routing.drain.qp_pair";
pub const PAIR: &str = "MetaroceIngress.routing.drain.pair";
pub const LARGE_FLOW_CONFIG: &str = "MetaroceIngress.large_flows.config";
pub const CONFIGURE_LARGE_FLOWS: &str = "MetaroceIngress.large_flows.configure";
pub const EGRESS_CONFIG: &str = "MetaroceEgress.egress_config";
pub const CONFIGURE_EGRESS: &str = "MetaroceEgress.configure_egress";
pub const EGRESS_PORT_CONFIG: &str = "MetaroceEgress.egress_port_config";
pub const SET_PORT: &str = "MetaroceEgress.set_port";
pub const REPORT_CONFIG: &str = "MetaroceEgress.int_egress.report_config";
pub const SET_REPORT_ENCAP: &str = "MetaroceEgress.int_egress.set_report_encap";

pub const PORT_MAX_DEPTH: &str = "MetaroceEgress.queue_sensing.port_max_depth";
pub const PORT_CONGESTED: &str = "MetaroceEgress.queue_sensing.port_congested";
// Registers only the data plane (and the simulator's twin of it) touches.
pub const FLOWLET_SIG: &str = "MetaroceIngress.routing.flowlet_sig";
pub const FLOWLET_LAST_SEEN: &str = "MetaroceIngress.routing.flowlet_last_seen";
pub const FLOWLET_NHOP: &str = "MetaroceIngress.routing.flowlet_nhop";
pub const FLOWLET_PORT: &str = "MetaroceIngress.routing.flowlet_port";
pub const FLOWLET_ID: &str = "MetaroceIngress.routing.flowlet_id";
pub const PORT_LAST_DIGEST: &str = "MetaroceEgress.queue_sensing.port_last_digest";
pub const DIGEST_SEQ: &str = "MetaroceEgress.queue_sensing.digest_seq";
pub const REPORT_LAST_BUCKET: &str = "MetaroceEgress.int_egress.report_last_bucket";
pub const REPORT_LAST_TIME: &str = "MetaroceEgress.int_egress.report_last_time";
pub const REPORT_SEQ: &str = "MetaroceEgress.report_builder.report_seq";
pub const WINDOW_SIG: &str = "MetaroceIngress.large_flows.window_sig";
pub const WINDOW_START: &str = "MetaroceIngress.large_flows.window_start";
pub const WINDOW_BYTES: &str = "MetaroceIngress.large_flows.window_bytes";
pub const WINDOW_COLLISION: &str = "MetaroceIngress.large_flows.window_collision";
/// 1: the slot's window reported at the crossing, or needs not (`p4src/README.md`, "Large flows").
pub const WINDOW_EARLY: &str = "MetaroceIngress.large_flows.window_early";
/// The drain rule's slots (`p4src/README.md`): the owner's signature ++ a
/// NAK outstanding (32 bits), and fwd_next ++ acked (48 bits).
pub const DRAIN_SLOT_OWNER: &str = "MetaroceIngress.routing.drain.slot_owner";
pub const DRAIN_SLOT_PSN: &str = "MetaroceIngress.routing.drain.slot_psn";
/// When an unpaired ACK hashing to a slot was last reported (time).
pub const DRAIN_PAIR_ASKED: &str = "MetaroceIngress.routing.drain.pair_asked";

pub const DROP_REASONS: &str = "MetaroceIngress.drop_reasons";
pub const NEW_FLOWLETS: &str = "MetaroceIngress.routing.new_flowlets";
pub const ECN_MARKS: &str = "MetaroceEgress.queue_sensing.ecn_marks";
pub const REPORTS_SENT: &str = "MetaroceEgress.report_builder.reports_sent";
pub const STEERED: &str = "MetaroceIngress.routing.steered";
pub const DRAIN_EVENTS: &str = "MetaroceIngress.routing.drain.events";

pub const QUEUE_DIGEST: &str = "queue_digest_t";
pub const LARGE_FLOW_DIGEST: &str = "large_flow_digest_t";
pub const DRAIN_PAIR_DIGEST: &str = "drain_pair_digest_t";
pub const PACKET_IN: &str = "packet_in";
pub const PACKET_OUT: &str = "packet_out";

/// The Tofino program's name, as bf-p4c names it after `p4src/tna/main.p4`
/// and as the SDE's device config must carry it.
pub const TNA_PROGRAM: &str = "main";
/// The recirculation port the digest clone session points at on Tofino
/// (local port 68 of pipe 0): threshold digests come back to ingress there.
pub const TOFINO_RECIRC_PORT: u32 = 68;

/// Clone session of Telemetry Reports (`REPORT_SESSION` in p4src).
pub const REPORT_SESSION: u32 = 500;
/// Clone session whose copies raise threshold digests (`DIGEST_SESSION`).
pub const DIGEST_SESSION: u32 = 501;
/// Packet-in reasons.
pub const PACKET_IN_REPORT: u8 = 1;
pub const PACKET_IN_ARP: u8 = 2;
/// Slots of the drain rule per first leaf (`DRAIN_SLOTS` in sizes.p4).
pub const DRAIN_SLOT_COUNT: u32 = 4096;
/// Cells of `drain.events`, one per event (`DRAIN_EVENT_COUNT`).
pub const DRAIN_EVENT_COUNT: u32 = 8;
/// Size of the per-port register arrays.
pub const PORT_REGISTER_SIZE: u32 = 512;
/// Size of the flowlet, report-sampling and large-flow registers (per
/// flow slot).
pub const FLOW_SLOTS: u32 = 8192;
/// Entries of `steer_flow` and `steer_pair` (`sizes.p4`).
pub const STEER_FLOW_TABLE_SIZE: u32 = 4096;
pub const STEER_PAIR_TABLE_SIZE: u32 = 1024;
/// A `port_down` key no port has: a new flowlet without a steer entry
/// checks it (`PORT_NONE` in p4src). Never mark it down.
pub const PORT_NONE: u16 = 0xffff;
/// The CPU port (`--cpu-port` on BMv2): packet-in and packet-out.
pub const CPU_PORT: u32 = 255;
/// Digest receiver and packet-in reasons are above; drop reasons index
/// `drop_reasons`, whose size is this.
pub const DROP_REASON_COUNT: u32 = 16;

/// Match field names (`@name` in p4src), as the tables above use them.
pub mod field {
    pub const PORT: &str = "port";
    pub const SRC_ADDR: &str = "src_addr";
    pub const DST_ADDR: &str = "dst_addr";
    pub const L4_DST_PORT: &str = "l4_dst_port";
    pub const GROUP_ID: &str = "group_id";
    pub const NHOP_ID: &str = "nhop_id";
    pub const UDP_SRC_PORT: &str = "udp_src_port";
    pub const DEST_QP: &str = "dest_qp";
}

/// Action parameter and packet metadata field names.
pub mod param {
    pub const SWITCH_ID: &str = "switch_id";
    pub const FLOWLET_TIMEOUT_US: &str = "flowlet_timeout_us";
    pub const MAX_HOPS: &str = "max_hops";
    pub const GROUP_ID: &str = "group_id";
    pub const NHOP_ID: &str = "nhop_id";
    pub const REASON: &str = "reason";
    pub const PORT: &str = "port";
    pub const SRC_MAC: &str = "src_mac";
    pub const DST_MAC: &str = "dst_mac";
    pub const DIGEST_INTERVAL_US: &str = "digest_interval_us";
    pub const REPORT_PERIOD_US: &str = "report_period_us";
    pub const LATENCY_SHIFT: &str = "latency_shift";
    pub const EDGE: &str = "edge";
    pub const MTU: &str = "mtu";
    pub const QUEUE_HIGH: &str = "queue_high";
    pub const QUEUE_LOW: &str = "queue_low";
    pub const ECN_THRESHOLD: &str = "ecn_threshold";
    pub const SRC_IP: &str = "src_ip";
    pub const DST_IP: &str = "dst_ip";
    pub const DST_PORT: &str = "dst_port";
    pub const INGRESS_PORT: &str = "ingress_port";
    pub const EGRESS_PORT: &str = "egress_port";
    pub const RESERVED: &str = "reserved";
    pub const WINDOW_US: &str = "window_us";
    pub const THRESHOLD_BYTES: &str = "threshold_bytes";
    pub const ENABLED: &str = "enabled";
    pub const PAIR_INTERVAL_US: &str = "pair_interval_us";
    pub const DATA_QP: &str = "data_qp";
}
