//! What a switch holds of its program, kept small so that thousands of
//! in-process switches fit in one process (`sim serve` of a large fabric):
//!
//! - the pushed program (P4Info, its index and the device config, a BMv2
//!   JSON of megabytes) is held once per process and shared by every
//!   switch that runs the same one ([`Program::intern`]); only the cookie,
//!   which names the switch, is its own;
//! - a register's cells are allocated when one is first written non-zero
//!   ([`Register`]): an idle switch holds none.

use std::sync::Arc;

use crate::intern::Interner;

use crate::p4info::P4Info;
use crate::proto::p4::v1 as p4;

/// A committed program without its cookie: P4Info, its index and the
/// device config.
#[derive(Debug)]
pub(crate) struct Program {
    /// The pushed config with its cookie taken out.
    pub config: p4::ForwardingPipelineConfig,
    pub info: Arc<P4Info>,
}

/// The programs the process's switches run, each once.
static PROGRAMS: Interner<Program> = Interner::new();

impl Program {
    /// The shared program equal to `config` (cookie aside), or a new one
    /// from `config` and its parsed `info`; and the cookie.
    pub fn intern(
        mut config: p4::ForwardingPipelineConfig,
        info: P4Info,
    ) -> (Arc<Program>, Option<p4::forwarding_pipeline_config::Cookie>) {
        let cookie = config.cookie.take();
        let p = PROGRAMS.get_or_insert(
            |p| p.config == config,
            || Program { config: config.clone(), info: Arc::new(info) },
        );
        (p, cookie)
    }

    /// The config as pushed: the shared program with this switch's cookie.
    pub fn with_cookie(
        &self,
        cookie: Option<p4::forwarding_pipeline_config::Cookie>,
    ) -> p4::ForwardingPipelineConfig {
        let mut c = self.config.clone();
        c.cookie = cookie;
        c
    }
}

/// A register's cells, allocated at the first non-zero write.
#[derive(Debug)]
pub(crate) struct Register {
    size: usize,
    /// Empty while every cell is zero; `size` cells once one was written.
    cells: Vec<Vec<u8>>,
}

/// A cell never written: zero, as the codec writes it.
fn zero() -> Vec<u8> {
    vec![0]
}

fn is_zero(v: &[u8]) -> bool {
    v.iter().all(|b| *b == 0)
}

impl Register {
    pub fn new(size: usize) -> Self {
        Register { size, cells: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.size
    }

    /// The cell at `index`; `None` past the end.
    pub fn get(&self, index: usize) -> Option<Vec<u8>> {
        if index >= self.size {
            return None;
        }
        Some(self.cells.get(index).cloned().unwrap_or_else(zero))
    }

    /// Sets the cell at `index`; `false` past the end.
    pub fn set(&mut self, index: usize, value: Vec<u8>) -> bool {
        if index >= self.size {
            return false;
        }
        if self.cells.is_empty() {
            if is_zero(&value) {
                return true;
            }
            self.cells = vec![zero(); self.size];
        }
        self.cells[index] = value;
        true
    }

    /// Sets every cell to `value`.
    pub fn fill(&mut self, value: Vec<u8>) {
        if is_zero(&value) {
            self.cells = Vec::new();
        } else {
            self.cells = vec![value; self.size];
        }
    }

    /// Every cell in order.
    pub fn iter(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        (0..self.size).map(|i| self.cells.get(i).cloned().unwrap_or_else(zero))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_register_allocates_its_cells_at_the_first_non_zero_write() {
        let mut r = Register::new(4);
        assert!(r.set(1, vec![0]));
        assert!(r.cells.is_empty(), "a zero write allocates nothing");
        assert_eq!(r.get(1), Some(vec![0]));
        assert!(r.set(2, vec![7]));
        assert_eq!(r.cells.len(), 4);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![vec![0], vec![0], vec![7], vec![0]]);
        assert!(!r.set(4, vec![1]), "past the end");
        assert_eq!(r.get(4), None);
        r.fill(vec![0]);
        assert!(r.cells.is_empty());
        r.fill(vec![3]);
        assert_eq!(r.get(0), Some(vec![3]));
    }

    #[test]
    fn switches_running_one_program_share_it_whatever_their_cookies() {
        let raw = crate::proto::p4::config::v1::P4Info::default();
        let config = |cookie: u64| p4::ForwardingPipelineConfig {
            p4info: Some(raw.clone()),
            p4_device_config: vec![1, 2, 3].into(),
            cookie: Some(p4::forwarding_pipeline_config::Cookie { cookie }),
        };
        let info = || P4Info::new(raw.clone()).unwrap();
        let (a, ca) = Program::intern(config(1), info());
        let (b, cb) = Program::intern(config(2), info());
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!((ca.map(|c| c.cookie), cb.map(|c| c.cookie)), (Some(1), Some(2)));
        assert_eq!(a.with_cookie(cb), config(2));
        let mut other = config(1);
        other.p4_device_config = vec![9].into();
        let (c, _) = Program::intern(other, info());
        assert!(!Arc::ptr_eq(&a, &c));
    }
}
