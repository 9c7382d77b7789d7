//! The host side of metaroce: RoCE NIC counters read from the kernel's own
//! interfaces (sysfs `class/infiniband/*/ports/*/{counters,hw_counters}`,
//! `class/net/*/statistics`, ethtool and DCB netlink), served as
//! OpenMetrics by `metaroce host export`, checked by `metaroce doctor`, and
//! scraped back by the controller ([`scrape::scrape`]).
//!
//! Data flows one way: [`sample::Sampler`] reads a [`sample::HostSample`];
//! [`collector::Collector`] keeps rates and logs changes once;
//! [`exporter`] serves the rendered [`openmetrics::Snapshot`];
//! [`congestion::summarize`] turns counters into per-device PFC/CNP/ECN
//! signals on both the exporter and the scraper side.

pub mod collector;
pub mod congestion;
pub mod doctor;
pub mod error;
pub mod exporter;
pub mod fixture;
pub mod netlink;
pub mod openmetrics;
pub mod rates;
pub mod sample;
pub mod scrape;
pub mod sysfs;

pub use collector::Collector;
pub use congestion::{Counter, DeviceCongestion, HostCongestion};
pub use error::{ExportError, NetlinkError, ReadError, ScrapeError};
pub use sample::{HostSample, Sampler};
pub use scrape::{scrape, scrape_all, ScrapeOptions};
pub use sysfs::Sysfs;
