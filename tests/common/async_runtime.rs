//! The tokio runtime the async tests drive their caches on.

/// A multi-threaded runtime of two workers (the machine's cores), with
/// timers and I/O.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
