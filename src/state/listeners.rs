//! The listening sockets of the RESP ports, so that a shutdown closes them at once, as
//! Redis's `closeListeningSockets` does before it exits: the connection that sent SHUTDOWN
//! is closed right after, and a client that connects again at that moment must be refused,
//! not queued in the backlog of a socket whose accept loop has not noticed the shutdown yet
//! (it runs on the same runtime, later).
//!
//! The accept loops (`server::listener`) register their socket's descriptor and remove it
//! before the socket is dropped, under the same lock [`close_all`] holds, so a descriptor
//! shut here is always still the listening socket (never a number the kernel gave to
//! something else since).

use parking_lot::Mutex;
use std::os::fd::RawFd;

static LISTENING: Mutex<Vec<RawFd>> = parking_lot::const_mutex(Vec::new());

/// A listening socket starts accepting.
pub fn register(fd: RawFd) {
    LISTENING.lock().push(fd);
}

/// A listening socket is about to be closed.
pub fn unregister(fd: RawFd) {
    LISTENING.lock().retain(|&f| f != fd);
}

/// Stops every registered socket from listening: connections queued and new ones are
/// refused. The descriptors stay open (their accept loops own them and see an error, or
/// the shutdown, next).
pub fn close_all() {
    let mut fds = LISTENING.lock();
    for fd in fds.drain(..) {
        // SAFETY: `fd` is open: it is removed from the list before its socket is dropped,
        // and the lock is held until it is shut. shutdown() only changes
        // the socket's state.
        unsafe {
            libc::shutdown(fd, libc::SHUT_RDWR);
        }
    }
}
