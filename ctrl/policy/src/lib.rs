//! Pure, deterministic decisions: (topology, congestion, installed groups,
//! time) → desired next-hop group weights, with hysteresis.
