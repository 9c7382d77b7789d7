//! INT-MD / Telemetry Report v2.0 decoding and the fabric-wide congestion
//! view built from threshold digests, register snapshots and reports.
