//! The host side: RoCE NIC counters from sysfs and ethtool netlink,
//! served as OpenMetrics, and the `doctor` checks.
