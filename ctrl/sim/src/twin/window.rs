//! The large-flow detector's rule for one slot (`p4src/README.md`, "Large
//! flows"), shared by the pipeline twin, which keeps a slot's state in the
//! P4 program's registers, and the engine's own switches, which keep it in
//! an array (`engine/steer.rs`): one rule, two stores.
//!
//! A slot holds the signature of the flow that opened its window, the
//! window's start and the bytes counted in it. A packet inside the window
//! counts into it (and flags it when its signature is another's). The
//! first packet after the window has ended closes it, a report if it
//! counted at least the threshold (naming that packet's flow, flagged when
//! the slot was shared), and opens the next window with its own bytes.

/// One slot's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// A window was ever opened here.
    pub open: bool,
    pub sig: u64,
    pub start: u64,
    pub bytes: u64,
    pub collided: bool,
}

/// A window that closed at or above the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed {
    pub bytes: u64,
    /// From the window's start to the packet that closed it, in the
    /// caller's clock.
    pub elapsed: u64,
    /// Another flow used the slot in the window, or closed it.
    pub collision: bool,
}

/// What a packet did to its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// It counted into the open window (bytes and flag changed).
    Counted,
    /// It closed the window (a report if it was large) and opened the
    /// next: every field changed.
    Opened(Option<Closed>),
}

/// Counts a packet of `len` bytes and signature `sig` arriving at `now`,
/// `elapsed` after the window's start in the caller's clock (the twin's
/// wraps), against a window of `window` and a threshold of `threshold`
/// bytes.
pub fn count(
    w: &mut Window,
    sig: u64,
    len: u64,
    now: u64,
    elapsed: u64,
    window: u64,
    threshold: u64,
) -> Count {
    if w.open && elapsed < window {
        w.collided |= w.sig != sig;
        w.bytes = w.bytes.wrapping_add(len);
        return Count::Counted;
    }
    let report = (w.open && w.bytes >= threshold).then_some(Closed {
        bytes: w.bytes,
        elapsed,
        collision: w.collided || w.sig != sig,
    });
    *w = Window { open: true, sig, start: now, bytes: len, collided: false };
    Count::Opened(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_reports_once_when_large_and_flags_a_shared_slot() {
        let mut w = Window::default();
        let step = |w: &mut Window, sig: u64, now: u64| count(w, sig, 100, now, now - w.start, 10, 250);
        assert_eq!(step(&mut w, 1, 1), Count::Opened(None), "opens the first window");
        assert_eq!(step(&mut w, 1, 5), Count::Counted);
        assert_eq!(step(&mut w, 2, 6), Count::Counted, "another flow counts into it");
        let r = step(&mut w, 1, 11);
        assert_eq!(r, Count::Opened(Some(Closed { bytes: 300, elapsed: 10, collision: true })));
        assert_eq!(step(&mut w, 1, 30), Count::Opened(None), "100 bytes is below the threshold");
        assert_eq!((w.start, w.bytes, w.collided), (30, 100, false));
    }
}
