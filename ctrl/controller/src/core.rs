//! The control core ([`metaroce_core`]), under the name the daemon's
//! modules use: the state task owns one [`Core`] and drives it.

pub use metaroce_core::fabric::*;
pub use metaroce_core::note::{Note, NoteKind};
