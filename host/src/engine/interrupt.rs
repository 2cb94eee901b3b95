//! A process-wide request to stop: set by a program's Ctrl-C handler (the `streamline` command
//! installs one; a library leaves signals to the program), checked by
//! [`crate::engine::Plan::run`] before each iteration and by other long loops, which then
//! return [`Error::Interrupted`] after the work already queued, dropping (freeing) what they
//! hold on the way out.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks every running pipeline to stop at its next iteration.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Forgets a request (before a new run).
pub fn clear() {
    REQUESTED.store(false, Ordering::SeqCst);
}

/// `Err(Error::Interrupted)` once a stop was requested; `done` says how far the loop got.
pub fn check(done: impl FnOnce() -> String) -> Result<()> {
    if requested() {
        Err(Error::Interrupted(done()))
    } else {
        Ok(())
    }
}
