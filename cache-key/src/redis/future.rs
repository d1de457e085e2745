//! The async driver (feature `redis-async`): multiplexed connections, and
//! the store and cache on them.

mod cache;
mod generations;
mod mux;
mod pool;
mod resp;
mod server;

pub use self::cache::AsyncRedisCache;
pub use self::generations::AsyncRedisGenerations;
pub use self::pool::{AsyncRedisPool, AsyncRedisPoolBuilder};
