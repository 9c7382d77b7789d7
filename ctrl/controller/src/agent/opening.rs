//! The bound on switches being opened at once: connecting, pushing the
//! pipeline (megabytes of BMv2 JSON each), reading back what the switch
//! holds and writing its first difference. With every switch of a large
//! fabric doing that at once, each push holds its own buffers and the
//! pushes compete for the same cores, so the memory spikes and every
//! switch finishes late (some past their RPC deadlines, then retry);
//! bounded, each finishes in a fraction of the time and the next starts.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Shared by every agent of a controller (clones share the bound).
#[derive(Debug, Clone)]
pub struct Opening(Arc<Semaphore>);

impl Opening {
    /// At most `in_flight` switches opened at once (at least one).
    pub fn new(in_flight: usize) -> Self {
        Opening(Arc::new(Semaphore::new(in_flight.max(1))))
    }

    /// The default bound: a few switches per core, so that while one waits
    /// for its switch another has the CPU; more only piles up buffers.
    pub fn default_in_flight() -> usize {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        (cores * 4).clamp(4, 64)
    }

    /// Waits for a turn; the turn ends when the permit is dropped.
    pub async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        // The semaphore is never closed, so this always gets a permit.
        self.0.clone().acquire_owned().await.ok()
    }
}

impl Default for Opening {
    fn default() -> Self {
        Opening::new(Opening::default_in_flight())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn no_more_than_the_bound_are_opened_at_once() {
        let o = Opening::new(2);
        let a = o.turn().await;
        let b = o.clone().turn().await;
        assert!(a.is_some() && b.is_some());
        let third = tokio::time::timeout(std::time::Duration::from_millis(20), o.turn()).await;
        assert!(third.is_err(), "a third waits while two are open");
        drop(a);
        let third = tokio::time::timeout(std::time::Duration::from_millis(200), o.turn()).await;
        assert!(matches!(third, Ok(Some(_))), "and gets its turn when one ends");
    }
}
