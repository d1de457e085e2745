//! Helpers shared by the integration tests (`mod common;`). Each test binary
//! uses a part of them.
#![allow(dead_code)]

pub mod bad_entries;
pub mod generations;
pub mod redis_server;
pub mod stampede;
