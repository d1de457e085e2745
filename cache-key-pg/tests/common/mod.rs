//! What the tests share: a PostgreSQL and redis-servers of their own.
#![allow(dead_code)]

#[path = "../../../tests/common/redis_server.rs"]
pub mod redis_server;

pub mod postgres;

pub mod library;

pub mod wait;
