//! The background decay ticker (std): the stand-in for each CPU's `vmstat_update` work,
//! calling [`Allocator::tick`] for every online CPU once per
//! [`Config::tick_interval_ms`](crate::Config::tick_interval_ms).

use crate::allocator::{Allocator, TickerHandle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

impl Allocator {
    /// Start the background decay ticker (idempotent).
    pub fn start_ticker(self: &Arc<Self>) {
        let mut slot = self.ticker.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let weak: Weak<Allocator> = Arc::downgrade(self);
        let period = Duration::from_millis(self.cfg.tick_interval_ms);
        let s2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("pagealloc-tick".into())
            .spawn(move || {
                while !s2.load(Ordering::Relaxed) {
                    std::thread::park_timeout(period);
                    if s2.load(Ordering::Relaxed) {
                        break;
                    }
                    match weak.upgrade() {
                        Some(a) => {
                            a.tick_all();
                        }
                        None => break,
                    }
                }
            })
            .expect("spawn ticker thread");
        *slot = Some(TickerHandle {
            stop,
            thread: Some(thread),
        });
    }

    /// Stop the background ticker if it runs.
    pub fn stop_ticker(&self) {
        let h = self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(h);
    }
}
