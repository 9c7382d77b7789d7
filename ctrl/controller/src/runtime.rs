//! The controller's async runtime: tokio's multi-threaded scheduler,
//! optionally with one worker per usable CPU, each pinned to its own.
//!
//! Why pinning exists. A decision that touches two switches wakes two
//! agents; the second wake makes the state task's worker notify an idle
//! worker to take the first agent. Measured on a 2-vCPU VM (`perf sched`,
//! the reaction bench), the kernel often starts the woken worker on the
//! CPU of the worker that woke it, although the other CPU is idle, and it
//! preempts the waker there. The second agent, queued on the preempted
//! worker (tokio's LIFO slot, which other workers cannot steal), then
//! waits until the first agent's whole write is done: about 1.6 ms in the
//! bench, where the simulated switches share the controller's CPUs. With
//! each worker pinned to its own CPU a woken worker runs where it is
//! parked, on the idle CPU, and the job → steer write p99 fell from
//! 2.0 ms to 0.6 ms. Pinning suits a controller host of its own; where
//! other work shares the CPUs, an unpinned worker can move away from it
//! and a pinned one cannot, so it is opt-in (`--pin-workers`).
//!
//! [`small_pages`]: the controller (and `sim serve`) run without
//! transparent huge pages, see there.

use tokio::runtime::Runtime;

/// Why the runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot read the CPUs this process may run on (sched_getaffinity): {0}")]
    Affinity(String),
    #[error("--pin-workers needs Linux (sched_setaffinity); run without it")]
    Unsupported,
    #[error("cannot start the async runtime: {0}")]
    Build(#[from] std::io::Error),
}

/// A runtime and, when its workers are pinned, their CPUs (worker `i`
/// on `cpus[i]`).
#[derive(Debug)]
pub struct Built {
    pub runtime: Runtime,
    pub pinned: Option<Vec<usize>>,
}

/// Turns transparent huge pages off for this process (Linux; elsewhere a
/// no-op), before its memory grows.
///
/// Why. mimalloc asks for huge pages on its arenas, and it gives the
/// memory of a freed large block back to the OS (then faults it in
/// again) as it goes. Programming a fabric allocates and frees megabytes
/// per switch (the pushed pipeline's gRPC buffers; a table's hash map as
/// it grows), and with huge pages each first touch of such memory had
/// the kernel zero a whole 2 MiB page: at 1,280 switches `perf` put that
/// zeroing (`clear_page_erms`) at 20% of the controller's CPU and 32% of
/// `sim serve`'s. With 4 KiB pages only what is touched is zeroed.
/// Nothing the controller keeps is large enough for huge pages to save
/// much on TLB misses (its state is many small maps).
pub fn small_pages() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_thp_disable(true) {
        tracing::debug!(error = %e, "cannot turn transparent huge pages off (prctl); memory faults cost more");
    }
}

/// Builds the multi-threaded runtime (after [`small_pages`]). With `pin`, it runs one worker per
/// CPU in this process's affinity set and pins worker `i` to the set's
/// `i`-th CPU; the blocking pool's threads (file writes, DNS) keep the
/// whole set.
pub fn build(pin: bool) -> Result<Built, RuntimeError> {
    small_pages();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if !pin {
        return Ok(Built { runtime: builder.build()?, pinned: None });
    }
    let cpus = pin::usable_cpus()?;
    pin::workers(&mut builder, cpus.clone());
    let runtime = builder.build()?;
    tracing::info!(workers = cpus.len(), ?cpus, "runtime workers pinned, one per CPU");
    Ok(Built { runtime, pinned: Some(cpus) })
}

#[cfg(target_os = "linux")]
mod pin {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;

    use super::RuntimeError;

    /// The CPUs this process (the calling thread) may run on, in ascending order.
    pub(super) fn usable_cpus() -> Result<Vec<usize>, RuntimeError> {
        let set = sched_getaffinity(Pid::from_raw(0)).map_err(|e| RuntimeError::Affinity(e.to_string()))?;
        let cpus: Vec<usize> = (0..CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).collect();
        if cpus.is_empty() {
            return Err(RuntimeError::Affinity("the affinity set is empty".into()));
        }
        Ok(cpus)
    }

    /// Workers pin themselves, each to the next CPU, when they first park
    /// (tokio calls the park hooks on worker threads only). Every thread
    /// first takes the whole set at its start: a thread inherits its
    /// creator's affinity, and a blocking thread created by a pinned
    /// worker must not stay on that worker's CPU. (Pinning the first N
    /// threads started raced: under load a blocking thread could start
    /// before the last worker and take its CPU.)
    pub(super) fn workers(builder: &mut tokio::runtime::Builder, cpus: Vec<usize>) {
        thread_local! {
            static PINNED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        let started = Arc::new(AtomicUsize::new(0));
        let all = cpus.clone();
        builder
            .worker_threads(cpus.len())
            .on_thread_start(move || {
                if let Err(e) = set(&all) {
                    tracing::warn!(error = %e, "cannot widen a runtime thread's CPU set");
                }
            })
            .on_thread_park(move || {
                if PINNED.with(|p| p.replace(true)) {
                    return;
                }
                let i = started.fetch_add(1, Ordering::Relaxed);
                let Some(&cpu) = cpus.get(i) else { return };
                match set(&[cpu]) {
                    Ok(()) => tracing::debug!(worker = i, cpu, "runtime worker pinned"),
                    Err(e) => tracing::warn!(worker = i, cpu, error = %e, "cannot pin a runtime worker; it runs unpinned"),
                }
            });
    }

    fn set(cpus: &[usize]) -> nix::Result<()> {
        let mut set = CpuSet::new();
        for &c in cpus {
            set.set(c)?;
        }
        sched_setaffinity(Pid::from_raw(0), &set)
    }
}

#[cfg(not(target_os = "linux"))]
mod pin {
    use super::RuntimeError;

    pub(super) fn usable_cpus() -> Result<Vec<usize>, RuntimeError> {
        Err(RuntimeError::Unsupported)
    }

    pub(super) fn workers(_: &mut tokio::runtime::Builder, _: Vec<usize>) {}
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The calling thread's affinity set (empty if it cannot be read,
    /// which fails every assertion below).
    fn cpus_of_this_thread() -> Vec<usize> {
        pin::usable_cpus().unwrap_or_default()
    }

    #[test]
    fn pinned_workers_run_on_one_cpu_each_and_blocking_threads_on_all() {
        let all = cpus_of_this_thread();
        let built = build(true).unwrap();
        assert_eq!(built.pinned.as_deref(), Some(&all[..]));
        let (workers, blocking) = built.runtime.block_on(async {
            // Workers pin themselves when they first park: wait until a
            // run of tasks all saw one CPU (bounded), then sample.
            let mut run = 0;
            for _ in 0..10_000 {
                let one = tokio::spawn(async { cpus_of_this_thread() }).await.unwrap().len() == 1;
                run = if one { run + 1 } else { 0 };
                if run == 16 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            let mut seen = Vec::new();
            for _ in 0..64 {
                seen.push(tokio::spawn(async { cpus_of_this_thread() }).await.unwrap());
            }
            // A blocking thread started from a pinned worker inherits its
            // CPU unless the start hook widens it.
            let blocking =
                tokio::spawn(async { tokio::task::spawn_blocking(cpus_of_this_thread).await.unwrap() })
                    .await
                    .unwrap();
            (seen, blocking)
        });
        for w in &workers {
            assert_eq!(w.len(), 1, "a worker ran on {w:?}, not one CPU");
            assert!(all.contains(&w[0]));
        }
        assert_eq!(blocking, all, "a blocking thread was pinned");
        assert_eq!(built.runtime.metrics().num_workers(), all.len());
    }

    #[test]
    fn unpinned_workers_keep_the_whole_set() {
        let all = cpus_of_this_thread();
        let built = build(false).unwrap();
        assert!(built.pinned.is_none());
        let w =
            built.runtime.block_on(async { tokio::spawn(async { cpus_of_this_thread() }).await.unwrap() });
        assert_eq!(w, all);
    }
}
