//! Values held once per process however many switches (or sessions to
//! them) use them: a pushed program's config is megabytes (BMv2's JSON),
//! and a fabric has thousands of switches.

use std::sync::{Arc, Mutex, Weak};

/// The live values of one kind, each once; a value no one holds any more
/// is forgotten.
#[derive(Debug)]
pub(crate) struct Interner<T> {
    all: Mutex<Vec<Weak<T>>>,
}

impl<T> Interner<T> {
    pub const fn new() -> Self {
        Interner { all: Mutex::new(Vec::new()) }
    }

    /// The held value `same` picks, or a new one from `make`.
    pub fn get_or_insert(&self, same: impl Fn(&T) -> bool, make: impl FnOnce() -> T) -> Arc<T> {
        let Ok(mut all) = self.all.lock() else { return Arc::new(make()) };
        all.retain(|w| w.strong_count() > 0);
        if let Some(v) = all.iter().filter_map(Weak::upgrade).find(|v| same(v)) {
            return v;
        }
        let v = Arc::new(make());
        all.push(Arc::downgrade(&v));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_are_held_once_and_dropped_ones_forgotten() {
        let interner: Interner<Vec<u8>> = Interner::new();
        let a = interner.get_or_insert(|v| v == &[1, 2], || vec![1, 2]);
        let b = interner.get_or_insert(|v| v == &[1, 2], || vec![1, 2]);
        assert!(Arc::ptr_eq(&a, &b));
        let c = interner.get_or_insert(|v| v == &[3], || vec![3]);
        assert!(!Arc::ptr_eq(&a, &c));
        drop((a, b));
        let _d = interner.get_or_insert(|v| v == &[4], || vec![4]);
        assert_eq!(interner.all.lock().unwrap().len(), 2, "[1, 2] was forgotten");
    }
}
