//! The P4 program's contract in Rust: typed tables, actions, registers and
//! digests of `p4src/`, resolved against the loaded P4Info at start-up.
//! This is the only crate that spells a P4 name.
