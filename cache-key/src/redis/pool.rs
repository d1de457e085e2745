//! [`Pool`]: what the protocol needs of a driver's pool of connections.

/// The pools a [`RedisGenerations`](super::RedisGenerations) and a [`RedisCache`](super::RedisCache)
/// run on: [`RedisPool`](super::RedisPool) and `AsyncRedisPool`. Sealed.
pub trait Pool: sealed::Sealed + Clone {
    #[doc(hidden)]
    fn __is_cluster(&self) -> bool;
    /// Where a subscription (tracked counters) connects.
    #[doc(hidden)]
    fn __subscribers(&self) -> &[::redis::Client];
}

pub(super) mod sealed {
    pub trait Sealed {}
}
