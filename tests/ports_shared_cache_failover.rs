//! The Node.js and Python ports after a failover whose connections stay
//! open, on real servers: split brain, a bump `Ok` on the old primary, then
//! the old primary demoted with `REPLICAOF` (no `CLIENT KILL`) and resynced
//! from the new one, losing the bump, then promoted again. A port still
//! connected to it keeps its run id and its scripts there: its reads must
//! never serve the entry from before the bump, while it is a replica or
//! once it is a primary again (`tests/redis_failover.rs` is the Rust
//! cache's).
//!
//! Ignored by default; run with `cargo test -- --include-ignored`. Without
//! `redis-server`, `node` or `python3` and their Redis clients it is skipped
//! with a message, except under CI (`CI=true`), where that is a failure.

mod common;

use common::ports::{Lang, Port, Target, dune, ports_installed};
use common::redis_server::{Replicated, Server};
use redis::Commands;
use serde_json::json;

/// The tenant's counter on `server`.
fn counter(server: &Server) -> String {
    server.connect().get("library:g:t{1}").unwrap()
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_port_never_serves_the_bump_a_demoted_primary_lost_nor_once_promoted_again() {
    for lang in Lang::ALL {
        let Some(servers) = Replicated::start() else {
            return;
        };
        if !ports_installed() {
            return;
        }
        let mut port = Port::start(lang, &Target::Server(&servers.primary));
        let before = json!([{ "title": "before", "year": 1965, "subtitle": null }]);
        port.ask(json!({ "op": "get_or_load", "query": dune(), "value": before }));
        let read = port.ask(json!({ "op": "read", "query": dune() }));
        assert_eq!(read["value"], before, "{}: {read}", lang.name());
        servers.wait_in_sync();

        servers.replica.promote();
        port.ask(json!({ "op": "invalidate", "scope": "tenant", "query": dune() }));
        servers.primary.replicate(&servers.replica);
        // The bump is gone: the old primary holds the new one's counter.
        assert_eq!(counter(&servers.primary), counter(&servers.replica));

        never_stale(&mut port, "a replica");

        // Failback: promoted again, with a new replication id. The port,
        // which read it as a replica, and one started now, both learn it.
        servers.primary.promote();
        never_stale(&mut port, "a primary again");
        let mut fresh = Port::start(lang, &Target::Server(&servers.primary));
        never_stale(&mut fresh, "a primary again, a port started after");
    }
}

/// Twenty reads: an error (the server is a replica) or a miss, never the
/// entry from before the bump.
fn never_stale(port: &mut Port, what: &str) {
    for _ in 0..20 {
        let request = json!({ "op": "read", "query": dune() });
        port.send(&request);
        let read = port.answer_or_error(&request);
        let lang = port.lang.name();
        assert_ne!(read["hit"], json!(true), "{lang}, {what}: {read}");
    }
}
