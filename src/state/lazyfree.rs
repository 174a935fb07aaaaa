//! Freeing large values off the clients' path (Redis's lazy free): UNLINK of a value with a
//! large free effort, FLUSHDB/FLUSHALL ASYNC. One background thread, started at first use,
//! drops what it is sent, in order; `lazyfree_pending_objects` counts what it has not freed
//! yet and `lazyfreed_objects` what it has (INFO memory / INFO stats).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};

type Job = (Box<dyn Send>, u64);

pub struct LazyFree {
    /// Objects handed over and not freed yet (`Stats::lazyfree_pending`).
    pending: Arc<AtomicU64>,
    /// Objects freed in the background (`Stats::lazyfreed`).
    freed: Arc<AtomicU64>,
    worker: OnceLock<Mutex<Sender<Job>>>,
}

impl LazyFree {
    /// Counts into the server's statistics.
    pub fn new(pending: Arc<AtomicU64>, freed: Arc<AtomicU64>) -> LazyFree {
        LazyFree {
            pending,
            freed,
            worker: OnceLock::new(),
        }
    }

    /// Frees `what` (counted as `objects` objects) on the background thread.
    pub fn free(&self, what: Box<dyn Send>, objects: u64) {
        self.pending.fetch_add(objects, Ordering::Relaxed);
        let worker = self.worker.get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            let (pending, freed) = (self.pending.clone(), self.freed.clone());
            let spawned = std::thread::Builder::new()
                .name("lazyfree".into())
                .spawn(move || {
                    for (what, objects) in rx {
                        drop(what);
                        pending.fetch_sub(objects, Ordering::Relaxed);
                        freed.fetch_add(objects, Ordering::Relaxed);
                    }
                });
            if let Err(e) = spawned {
                // Without the thread the receiver is gone and `send` hands the job back:
                // it is freed in place below.
                tracing::warn!("cannot start the lazyfree thread: {e}");
            }
            Mutex::new(tx)
        });
        let sent = worker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((what, objects));
        if let Err(back) = sent {
            drop(back.0);
            self.pending.fetch_sub(objects, Ordering::Relaxed);
            self.freed.fetch_add(objects, Ordering::Relaxed);
        }
    }
}
