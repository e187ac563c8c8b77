//! A thread-local set for the length of one call: recovery and compaction run a write
//! with a thread-local mode on (its touched keys noted, its events handed off, its event
//! ids drawn as an older log drew them), and the mode must come off however the write
//! ends.

use std::cell::RefCell;
use std::thread::LocalKey;

/// Runs `f` with `key` holding `value`; returns `f`'s result and what `key` held when `f`
/// ended. What `key` held before is put back however `f` ends (a panic included).
pub fn scoped<T: Default + 'static, R>(key: &'static LocalKey<RefCell<T>>, value: T, f: impl FnOnce() -> R) -> (R, T) {
    /// Puts the value from before back, however `f` ends.
    struct Restore<T: Default + 'static> {
        key: &'static LocalKey<RefCell<T>>,
        outer: Option<T>,
    }
    impl<T: Default + 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            if let Some(outer) = self.outer.take() {
                self.key.with(|k| *k.borrow_mut() = outer);
            }
        }
    }
    let mut restore = Restore {
        key,
        outer: Some(key.with(|k| k.replace(value))),
    };
    let result = f();
    let outer = restore.outer.take().unwrap_or_default();
    let inner = key.with(|k| k.replace(outer));
    (result, inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static MODE: RefCell<u32> = const { RefCell::new(1) };
    }

    #[test]
    fn the_value_holds_inside_nests_and_comes_back_however_f_ends() {
        let ((seen, inner_end), end) = scoped(&MODE, 2, || {
            let seen = MODE.with_borrow(|m| *m);
            let ((), inner) = scoped(&MODE, 3, || MODE.with_borrow_mut(|m| *m += 1));
            (seen, inner)
        });
        assert_eq!((seen, inner_end, end), (2, 4, 2));
        assert_eq!(MODE.with_borrow(|m| *m), 1);
        let panicked = std::panic::catch_unwind(|| scoped(&MODE, 5, || panic!("inside")));
        assert!(panicked.is_err());
        assert_eq!(MODE.with_borrow(|m| *m), 1, "put back after a panic");
    }
}
