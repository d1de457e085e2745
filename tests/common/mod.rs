//! Helpers shared by the integration tests (`mod common;`). Each test binary
//! uses a part of them.
//!
//! The fixtures register their query types with `cache_key::registry` in every
//! binary that declares `mod common;`, and two of them share a namespace and
//! operation on purpose: a binary that calls `registry::check()` keeps its
//! own types instead.
#![allow(dead_code)]

pub mod async_runtime;
pub mod bad_entries;
pub mod exact;
pub mod fixtures;
pub mod generations;
pub mod inputs;
pub mod ports;
pub mod properties;
pub mod reader_report;
pub mod redis_server;
pub mod shortest_digits;
pub mod spec_model;
pub mod stampede;
pub mod strategies;
pub mod vectors;
