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
pub const EGRESS_CONFIG: &str = "MetaroceEgress.egress_config";
pub const CONFIGURE_EGRESS: &str = "MetaroceEgress.configure_egress";
pub const EGRESS_PORT_CONFIG: &str = "MetaroceEgress.egress_port_config";
pub const SET_PORT: &str = "MetaroceEgress.set_port";
pub const REPORT_CONFIG: &str = "MetaroceEgress.int_egress.report_config";
pub const SET_REPORT_ENCAP: &str = "MetaroceEgress.int_egress.set_report_encap";

pub const PORT_MAX_DEPTH: &str = "MetaroceEgress.queue_sensing.port_max_depth";
pub const PORT_CONGESTED: &str = "MetaroceEgress.queue_sensing.port_congested";

pub const DROP_REASONS: &str = "MetaroceIngress.drop_reasons";
pub const NEW_FLOWLETS: &str = "MetaroceIngress.routing.new_flowlets";
pub const ECN_MARKS: &str = "MetaroceEgress.queue_sensing.ecn_marks";
pub const REPORTS_SENT: &str = "MetaroceEgress.report_builder.reports_sent";

pub const QUEUE_DIGEST: &str = "queue_digest_t";
pub const PACKET_IN: &str = "packet_in";
pub const PACKET_OUT: &str = "packet_out";

/// Clone session of Telemetry Reports (`REPORT_SESSION` in p4src).
pub const REPORT_SESSION: u32 = 500;
/// Clone session whose copies raise threshold digests (`DIGEST_SESSION`).
pub const DIGEST_SESSION: u32 = 501;
/// Packet-in reasons.
pub const PACKET_IN_REPORT: u8 = 1;
pub const PACKET_IN_ARP: u8 = 2;
/// Size of the per-port register arrays.
pub const PORT_REGISTER_SIZE: u32 = 512;
