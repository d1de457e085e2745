//! The blocking driver: a pool of connections, and the store and cache on it.

mod cache;
mod cluster;
mod generations;
mod pool;
mod resp;

pub use self::pool::{PooledConnection, RedisPool, RedisPoolBuilder};
