//! The exec gate: ordinary commands hold it shared while they run, EXEC holds it exclusively,
//! so a transaction is atomic with respect to every other client.
//!
//! It is a "big reader" lock: one `RwLock` per stripe, each on its own cache line. A command
//! takes only its connection's stripe (chosen by client id), so the two worker threads of a
//! 2-core machine do not bounce one lock word between their caches on every command; EXEC
//! takes every stripe, in index order (two EXECs cannot deadlock, and a command never holds
//! more than one stripe). parking_lot's RwLock makes new readers wait behind a waiting writer,
//! so EXEC cannot starve.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

const STRIPES: usize = 32;

#[repr(align(128))]
#[derive(Default)]
struct Stripe(RwLock<()>);

pub struct ExecGate {
    stripes: Vec<Stripe>,
}

impl Default for ExecGate {
    fn default() -> Self {
        ExecGate {
            stripes: (0..STRIPES).map(|_| Stripe::default()).collect(),
        }
    }
}

impl ExecGate {
    /// Shared access for one command of client `client_id`.
    #[inline]
    pub fn shared(&self, client_id: u64) -> RwLockReadGuard<'_, ()> {
        self.stripes[(client_id as usize) % STRIPES].0.read()
    }

    /// Exclusive access for EXEC: no other command runs until the guards drop.
    pub fn exclusive(&self) -> Vec<RwLockWriteGuard<'_, ()>> {
        self.stripes.iter().map(|s| s.0.write()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Cost of taking the gate shared from two threads at once, striped (each thread its own
    /// stripe) against one shared RwLock. Run with
    /// `cargo test --release --lib gate -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn measure_shared_acquire() {
        const N: u64 = 20_000_000;
        let gate = ExecGate::default();
        let single = RwLock::new(());
        for round in 0..3 {
            let t = Instant::now();
            std::thread::scope(|s| {
                for id in 0..2u64 {
                    let gate = &gate;
                    s.spawn(move || {
                        for _ in 0..N {
                            drop(std::hint::black_box(gate.shared(id)));
                        }
                    });
                }
            });
            let striped = t.elapsed().as_nanos() as f64 / N as f64;
            let t = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..2 {
                    let single = &single;
                    s.spawn(move || {
                        for _ in 0..N {
                            drop(std::hint::black_box(single.read()));
                        }
                    });
                }
            });
            let one = t.elapsed().as_nanos() as f64 / N as f64;
            println!("round {round}: striped {striped:.1} ns/acquire, single lock {one:.1} ns/acquire (2 threads)");
        }
    }

    #[test]
    fn exclusive_excludes_every_stripe() {
        let gate = ExecGate::default();
        let w = gate.exclusive();
        for id in 0..64 {
            assert!(gate.stripes[id as usize % STRIPES].0.try_read().is_none());
        }
        drop(w);
        assert!(gate.stripes[5].0.try_read().is_some());
    }
}
