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
//!
//! A new large flow is also reported early, at its threshold crossing: a
//! window is armed when it opens unless the window it closes reported the
//! same flow (that flow is known, and the close reports it). In an armed
//! window, the window's own flow's packet that brings its bytes to the
//! threshold reports them at once (with the time since the window's
//! start) and disarms it. So a flow that becomes large is reported within
//! a few packets, not one window later, and a steady flow adds no digest.

/// One slot's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// A window was ever opened here.
    pub open: bool,
    pub sig: u64,
    pub start: u64,
    pub bytes: u64,
    pub collided: bool,
    /// The window already reported at the crossing, or needs not (its
    /// flow was reported when it opened): the P4 `window_early` register.
    pub early_done: bool,
}

/// A window that closed at or above the threshold, or an armed window
/// that reached it.
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
    /// It counted into the open window and brought the window's own flow
    /// to the threshold: an early report (the window is disarmed).
    Crossed(Closed),
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
        if !w.early_done && w.sig == sig && w.bytes >= threshold {
            w.early_done = true;
            // Never an empty window (the controller drops one): BMv2's
            // clock counts µs, and a crossing can come in the start's µs.
            return Count::Crossed(Closed { bytes: w.bytes, elapsed: elapsed.max(1), collision: w.collided });
        }
        return Count::Counted;
    }
    let report = (w.open && w.bytes >= threshold).then_some(Closed {
        bytes: w.bytes,
        elapsed,
        collision: w.collided || w.sig != sig,
    });
    let early_done = report.is_some() && w.sig == sig;
    *w = Window { open: true, sig, start: now, bytes: len, collided: false, early_done };
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
        assert_eq!(step(&mut w, 2, 6), Count::Counted, "another flow counts into it, and does not report it");
        let r = step(&mut w, 1, 11);
        assert_eq!(r, Count::Opened(Some(Closed { bytes: 300, elapsed: 10, collision: true })));
        assert_eq!(step(&mut w, 1, 30), Count::Opened(None), "100 bytes is below the threshold");
        assert_eq!((w.start, w.bytes, w.collided), (30, 100, false));
    }

    #[test]
    fn a_new_large_flow_reports_at_its_crossing_once_and_a_known_one_does_not() {
        let mut w = Window::default();
        let step = |w: &mut Window, sig: u64, now: u64| count(w, sig, 100, now, now - w.start, 10, 250);
        assert_eq!(step(&mut w, 1, 0), Count::Opened(None));
        assert_eq!(step(&mut w, 1, 1), Count::Counted);
        let crossing = Closed { bytes: 300, elapsed: 2, collision: false };
        assert_eq!(step(&mut w, 1, 2), Count::Crossed(crossing), "the third packet reaches 250");
        assert_eq!(step(&mut w, 1, 3), Count::Counted, "once per window");
        assert!(matches!(step(&mut w, 1, 10), Count::Opened(Some(_))), "the close reports as before");
        for now in 11..14 {
            assert_eq!(
                step(&mut w, 1, now),
                Count::Counted,
                "the flow was reported at the close: no early report"
            );
        }
        // Another flow closes the window: the next window is armed again.
        assert!(matches!(step(&mut w, 2, 20), Count::Opened(Some(Closed { collision: true, .. }))));
        assert_eq!(step(&mut w, 2, 21), Count::Counted);
        assert_eq!(step(&mut w, 1, 22), Count::Counted, "not the window's flow: never an early report");
        assert!(matches!(step(&mut w, 2, 23), Count::Crossed(Closed { bytes: 400, collision: true, .. })));
    }
}
