//! Support for the `redis` crate (feature `redis`): a [`Key`] is a Redis
//! argument, so it can be passed to commands as it is.

use ::redis::{RedisWrite, ToRedisArgs, ToSingleRedisArg};

use crate::key::Key;

/// A key is one Redis argument: its text.
///
/// ```
/// use cache_key::KeyBuilder;
/// use redis::ToRedisArgs;
///
/// let key = KeyBuilder::new("library", "list").tenant("branch-2").build()?;
/// assert_eq!(key.to_redis_args(), [b"library:s1:g1:tbranch-2:list".to_vec()]);
///
/// let command = redis::cmd("GET").arg(&key).clone();
/// assert_eq!(command.args_iter().count(), 2);
/// # Ok::<(), cache_key::KeyError>(())
/// ```
impl ToRedisArgs for Key {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + RedisWrite,
    {
        out.write_arg(self.as_str().as_bytes());
    }
}

/// A key is always exactly one argument, so commands taking a single key
/// (`GET`, `SET`, ...) accept it.
impl ToSingleRedisArg for Key {}
