//! The Node.js and Python ports' plain read of counters on one server
//! (WIRE-FORMAT.md, "Reading counters on a connection that knows its
//! server"), on real servers: `MGET` with `CLIENT GETNAME` and `WAIT 0 0`,
//! no script on a hit; a connection that reconnected learns its server
//! again; a counter another instance stamped is raised, never trusted; a
//! connection a proxy moved to another server (its name gone) trusts
//! nothing it reads there; the connection reads as its URL says (an ACL
//! user, a database, TLS: each port reads on a connection of its own); a
//! hung server fails a read within the port's bound, and the next reads hit;
//! callers reading at once each read the entry.
//!
//! Ignored by default; run with `cargo test -- --include-ignored`. Without
//! `redis-server`, `node` or `python3` and their Redis clients it is skipped
//! with a message, except under CI (`CI=true`), where that is a failure.

mod common;

use common::ports::{Lang, Port, Target, dune, ports_installed};
use common::redis_server::{Proxy, Replicated, Server};
use redis::Commands;
use serde_json::{Value, json};

fn book(title: &str) -> Value {
    json!([{ "title": title, "year": 1965, "subtitle": null }])
}

/// A server for the ports, or `None` (the test skipped) without one or them.
fn server() -> Option<Server> {
    if !ports_installed() {
        return None;
    }
    Server::start(false)
}

/// The tenant's counter of `dune()`.
const TENANT: &str = "library:g:t{1}";

fn read(port: &mut Port) -> Value {
    port.ask(json!({ "op": "read", "query": dune() }))
}

/// A read's answer, which may be an error.
fn read_or_error(port: &mut Port) -> Value {
    let request = json!({ "op": "read", "query": dune() });
    port.send(&request);
    port.answer_or_error(&request)
}

/// How many times `server` ran `command` (`INFO commandstats`).
fn calls(server: &Server, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connect())
        .expect("INFO commandstats");
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .map_or(0, |rest| {
            rest.split(',').next().unwrap().parse().expect("a count")
        })
}

/// `CLIENT LIST` on `server`: a line per connection it holds.
fn client_list(server: &Server) -> String {
    redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.connect())
        .expect("CLIENT LIST")
}

/// The names of the connections `server` holds.
fn names(server: &Server) -> Vec<String> {
    client_list(server)
        .lines()
        .filter_map(|line| {
            line.split(' ')
                .find_map(|field| field.strip_prefix("name="))
        })
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_port_hits_without_the_script_and_learns_its_server_again_after_a_reconnect() {
    let Some(server) = server() else { return };
    let name = format!("cache-key:{}", server.instance_id());
    for lang in Lang::ALL {
        server.flush();
        let mut port = Port::start(lang, &Target::Server(&server));
        let what = lang.name();
        port.ask(json!({ "op": "get_or_load", "query": dune(), "value": book("Dune") }));
        assert!(
            names(&server).contains(&name),
            "{what}: {:?}",
            names(&server)
        );

        let scripts = calls(&server, "evalsha") + calls(&server, "eval");
        for _ in 0..5 {
            assert_eq!(read(&mut port)["value"], book("Dune"), "{what}");
        }
        let after = calls(&server, "evalsha") + calls(&server, "eval");
        assert_eq!(after, scripts, "{what}: a hit runs no script");

        // Every client connection closed: the port's client reconnects on
        // its own, to a connection with no name, which learns its server
        // before it trusts a counter. The first read may meet the closed
        // socket (an error, never a value); the next one hits.
        let killed: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .query(&mut server.connect())
            .expect("CLIENT KILL");
        assert!(killed >= 1, "{what}: the port's connection was open");
        let first = read_or_error(&mut port);
        if first.get("error").is_none() {
            assert_eq!(first["value"], book("Dune"), "{what}: {first}");
        }
        assert_eq!(read(&mut port)["value"], book("Dune"), "{what}");
        assert!(
            names(&server).contains(&name),
            "{what}: {:?}",
            names(&server)
        );
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_counter_stamped_by_another_instance_is_raised_not_trusted() {
    let Some(server) = server() else { return };
    let id = server.instance_id();
    for lang in Lang::ALL {
        server.flush();
        let mut port = Port::start(lang, &Target::Server(&server));
        let what = lang.name();
        port.ask(json!({ "op": "get_or_load", "query": dune(), "value": book("Dune") }));
        assert_eq!(read(&mut port)["value"], book("Dune"), "{what}");

        // The same number, stamped by an instance this server is not (a
        // restored file, a resync): trusted, the read would hit.
        let mut redis = server.connect();
        let held: String = redis.get(TENANT).unwrap();
        let (number, stamp) = held.split_once(':').expect("a stamped counter");
        assert_eq!(stamp, id, "{what}");
        let number: u64 = number.parse().unwrap();
        let other = "f".repeat(id.len());
        let () = redis.set(TENANT, format!("{number}:{other}")).unwrap();

        let after = read(&mut port);
        assert_eq!(after["hit"], json!(false), "{what}: {after}");
        let raised: String = redis.get(TENANT).unwrap();
        let (raised_number, raised_stamp) = raised.split_once(':').unwrap();
        assert_eq!(
            raised_stamp, id,
            "{what}: stamped by this server once raised"
        );
        assert!(
            raised_number.parse::<u64>().unwrap() > number,
            "{what}: {raised} raised above {held}"
        );
    }
}

/// Split brain behind a TCP proxy: the replica promoted with the old
/// primary's counters, a bump acknowledged on the old primary, then the
/// proxy moves the port's open connection to the promoted replica, whose
/// counters are stamped with the instance the connection learned. Only
/// `CLIENT GETNAME` (a new server connection has no name) tells it. The
/// Python client speaks RESP3 by default, which a new server connection
/// (RESP2 until `HELLO 3`) answers in a form it refuses anyway (it times
/// out on a RESP2 nil): RESP2 too, so that the name alone is what refuses
/// the read. A port reads on a connection of its own and sends the rest on
/// its client's; a RESP3 client's other moved connection fails once too
/// (`also_refused`), an error, never the entry from before.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_connection_a_proxy_moved_trusts_nothing_it_reads_there() {
    for (lang, options, also_refused) in [
        (Lang::Node, "", 0),
        (Lang::Python, "", 1),
        (Lang::Python, "?protocol=2", 0),
    ] {
        let Some(servers) = Replicated::start() else {
            return;
        };
        if !ports_installed() {
            return;
        }
        let what = format!("{}{options}", lang.name());
        let proxy = Proxy::to(servers.primary.port());
        let mut port = Port::start(lang, &Target::Url(format!("{}{options}", proxy.url())));
        port.ask(json!({ "op": "get_or_load", "query": dune(), "value": book("before") }));
        assert_eq!(read(&mut port)["value"], book("before"), "{what}");
        servers.wait_in_sync();

        servers.replica.promote();
        port.ask(json!({ "op": "invalidate", "scope": "tenant", "query": dune() }));
        proxy.move_open_to(servers.replica.port());
        let held: String = servers.replica.connect().get(TENANT).unwrap();
        assert!(
            held.ends_with(&servers.primary.instance_id()),
            "{what}: {held}"
        );

        let moved = read_or_error(&mut port);
        assert!(moved.get("error").is_some(), "{what}: {moved}");
        for _ in 0..also_refused {
            let refused = read_or_error(&mut port);
            assert_ne!(refused["hit"], json!(true), "{what}: {refused}");
        }
        // Learned again: the promoted replica's counters are raised there.
        let learned = read(&mut port);
        assert_eq!(learned["hit"], json!(false), "{what}: {learned}");
    }
}

/// The `CLIENT LIST` line of the connection named `name` on `server`.
fn connection_named(server: &Server, name: &str) -> String {
    let list = client_list(server);
    let field = format!(" name={name} ");
    list.lines()
        .find(|line| line.contains(&field))
        .unwrap_or_else(|| panic!("no connection named {name}: {list}"))
        .to_owned()
}

/// The connection a port reads counters on is the one its URL describes:
/// its user (an ACL user, not the default one) and its database, so that a
/// read finds the entries the port's client wrote there (the Node.js port
/// reads on a connection of its own, which must authenticate and select as
/// the client does).
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_port_reads_as_its_url_says_with_its_user_and_database() {
    let Some(server) = server() else { return };
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "porter", "on", ">secret", "~*", "&*", "+@all"])
        .query(&mut server.connect())
        .expect("ACL SETUSER");
    let url = format!("redis://porter:secret@127.0.0.1:{}/2", server.port());
    let name = format!("cache-key:{}", server.instance_id());
    for lang in Lang::ALL {
        server.flush();
        let what = lang.name();
        let mut port = Port::start(lang, &Target::Url(url.clone()));
        port.ask(json!({ "op": "get_or_load", "query": dune(), "value": book("Dune") }));
        let hit = read(&mut port);
        assert_eq!(hit["value"], book("Dune"), "{what}: {hit}");

        let line = connection_named(&server, &name);
        assert!(
            line.contains(" db=2 ") && line.contains(" user=porter "),
            "{what}: {line}"
        );
        let mut db2 = server.connect();
        let () = redis::cmd("SELECT").arg(2).query(&mut db2).unwrap();
        let key = hit["key"].as_str().expect("the entry's key");
        assert!(db2.exists::<_, bool>(key).unwrap(), "{what}: {key} in db 2");
        assert!(
            !server.connect().exists::<_, bool>(key).unwrap(),
            "{what}: {key} not in db 0"
        );
    }
}

/// A server that answers nothing (`SIGSTOP`): a read fails within the
/// port's bound (5 s for each port's client here) instead of waiting for
/// ever, and once the server answers again the port reads, learning its
/// server again if it had to open another connection.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_read_from_a_hung_server_fails_and_the_port_reads_once_it_answers() {
    let Some(server) = server() else { return };
    for lang in Lang::ALL {
        server.flush();
        let what = lang.name();
        let mut port = Port::start(lang, &Target::Server(&server));
        port.ask(json!({ "op": "get_or_load", "query": dune(), "value": book("Dune") }));
        assert_eq!(read(&mut port)["value"], book("Dune"), "{what}");

        server.pause();
        let hung = read_or_error(&mut port);
        server.resume();
        assert!(hung.get("error").is_some(), "{what}: {hung}");

        // A reply the hung read no longer waits for may still arrive on the
        // old connection: it must not answer the next read.
        for _ in 0..3 {
            assert_eq!(read(&mut port)["value"], book("Dune"), "{what}");
        }
    }
}

/// Callers reading at once (eight threads in Python, eight concurrent
/// promises in Node.js) each read the entry, every time: Node.js pipelines
/// them on its own connection, whose replies must answer the reads that
/// asked; Python reads on its own connection when no other thread holds it
/// and on a pooled one otherwise, which learns its server too (a second
/// connection bears the instance's name).
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn callers_reading_at_once_each_read_the_entry() {
    let Some(server) = server() else { return };
    let name = format!("cache-key:{}", server.instance_id());
    for lang in Lang::ALL {
        server.flush();
        let what = lang.name();
        let mut port = Port::start(lang, &Target::Server(&server));
        port.ask(json!({ "op": "get_or_load", "query": dune(), "value": book("Dune") }));
        let together = port.ask(json!({
            "op": "read_together", "query": dune(), "callers": 8, "reads": 200,
        }));
        assert_eq!(together["hits"], json!(1600), "{what}: {together}");
        assert_eq!(together["values"], json!([book("Dune")]), "{what}");
        if matches!(lang, Lang::Python) {
            let named = names(&server).iter().filter(|n| **n == name).count();
            assert!(named >= 2, "{what}: {:?}", names(&server));
        }
    }
}

/// Over TLS (`rediss://`, the server's certificate trusted as the ports'
/// CA): the connection a port reads counters on speaks TLS as its client
/// does, in the client's database, and the read hits. The server serves TLS
/// on a second port (`CONFIG SET`), the test's own connections the plain one.
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_port_reads_over_tls_as_its_client_connects() {
    let Some(server) = server() else { return };
    let tls = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls");
    let (cert, key) = (format!("{tls}/cert.pem"), format!("{tls}/key.pem"));
    let tls_port = common::redis_server::free_port();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(&["tls-cert-file", &cert, "tls-key-file", &key])
        .arg(&["tls-ca-cert-file", &cert, "tls-auth-clients", "no"])
        .arg(&["tls-port", &tls_port.to_string()])
        .query(&mut server.connect())
        .expect("TLS served on a second port");
    let url = format!("rediss://127.0.0.1:{tls_port}/3");
    let name = format!("cache-key:{}", server.instance_id());
    for lang in Lang::ALL {
        server.flush();
        let what = lang.name();
        let mut port = Port::start_with(lang, &Target::Url(url.clone()), &["--ca", &cert]);
        port.ask(json!({ "op": "get_or_load", "query": dune(), "value": book("Dune") }));
        let hit = read(&mut port);
        assert_eq!(hit["value"], book("Dune"), "{what}: {hit}");
        let line = connection_named(&server, &name);
        assert!(line.contains(" db=3 "), "{what}: {line}");
        // A connection's `laddr` is the server's side: its TLS port.
        assert!(
            line.contains(&format!(" laddr=127.0.0.1:{tls_port} ")),
            "{what}: {line}"
        );
    }
}

/// A Node.js client that `SELECT`s another database after the cache was
/// made: the cache keeps every command in the database the client's options
/// name, its reads and its bumps alike, so an invalidation is never read
/// past (its reads on the cache's own connection, its bump through a client
/// now in another database, would serve the entry from before it).
#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_node_client_that_selects_another_database_keeps_the_cache_in_its_own() {
    let Some(server) = server() else { return };
    let url = format!("redis://127.0.0.1:{}/1", server.port());
    let mut port = Port::start(Lang::Node, &Target::Url(url));
    port.ask(json!({ "op": "get_or_load", "query": dune(), "value": book("before") }));
    assert_eq!(read(&mut port)["value"], book("before"));

    port.ask(json!({ "op": "select", "db": 5 }));
    port.ask(json!({ "op": "invalidate", "scope": "tenant", "query": dune() }));
    let after = read(&mut port);
    assert_eq!(after["hit"], json!(false), "{after}");
    let mut db5 = server.connect();
    let () = redis::cmd("SELECT").arg(5).query(&mut db5).unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut db5).unwrap();
    assert!(
        keys.is_empty(),
        "nothing of the cache's in database 5: {keys:?}"
    );
}
