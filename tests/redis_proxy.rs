//! The faults a test [`Proxy`] injects, as a Redis client sees them, on a
//! real server: refused connections, connections closed under the client,
//! and the request bursts it counts.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use common::redis_server::{Proxy, Server};
use redis::{Connection, ConnectionLike};

fn connect(proxy: &Proxy) -> redis::RedisResult<Connection> {
    redis::Client::open(proxy.url())?.get_connection_with_timeout(Duration::from_secs(1))
}

fn ping(connection: &mut Connection) -> redis::RedisResult<String> {
    redis::cmd("PING").query(connection)
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_refusing_proxy_refuses_new_connections_and_keeps_the_open_ones() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let proxy = Proxy::to(server.port());
    let mut open = connect(&proxy).unwrap();
    assert_eq!(ping(&mut open).unwrap(), "PONG");

    proxy.refuse();
    let Err(error) = connect(&proxy) else {
        panic!("a connection while refusing");
    };
    assert!(error.is_connection_refusal(), "{error:?}");
    assert_eq!(ping(&mut open).unwrap(), "PONG", "an open connection stays");

    proxy.accept();
    assert_eq!(ping(&mut connect(&proxy).unwrap()).unwrap(), "PONG");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn dropped_connections_fail_their_next_command_and_new_ones_work() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let proxy = Proxy::to(server.port());
    let mut open = connect(&proxy).unwrap();
    assert_eq!(ping(&mut open).unwrap(), "PONG");

    proxy.drop_connections();
    let error = ping(&mut open).expect_err("a command on a closed connection");
    assert!(error.is_connection_dropped(), "{error:?}");
    assert!(!open.is_open());

    let mut new = connect(&proxy).unwrap();
    assert_eq!(ping(&mut new).unwrap(), "PONG");
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn a_pipeline_is_one_burst_and_awaited_commands_one_each() {
    let Some(server) = Server::start(false) else {
        return;
    };
    let proxy = Proxy::to(server.port());
    let mut connection = connect(&proxy).unwrap();
    proxy.reset_bursts();
    assert_eq!(proxy.bursts(), 0);

    for _ in 0..3 {
        assert_eq!(ping(&mut connection).unwrap(), "PONG");
    }
    assert_eq!(proxy.bursts(), 3);

    let pongs: Vec<String> = redis::pipe()
        .cmd("PING")
        .cmd("PING")
        .cmd("PING")
        .query(&mut connection)
        .unwrap();
    assert_eq!(pongs.len(), 3);
    assert_eq!(proxy.bursts(), 4, "a pipeline of three is one burst");

    // A command written in two pieces, the second after a pause, is still
    // one burst: nothing was answered in between.
    let mut raw = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    raw.write_all(b"*1\r\n$4\r\n").unwrap();
    thread::sleep(Duration::from_millis(50));
    raw.write_all(b"PING\r\n").unwrap();
    let mut pong = [0; 7];
    raw.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    assert_eq!(
        proxy.bursts(),
        5,
        "another connection's burst adds to the total"
    );

    proxy.reset_bursts();
    assert_eq!(proxy.bursts(), 0);
    assert_eq!(ping(&mut connection).unwrap(), "PONG");
    assert_eq!(proxy.bursts(), 1);
}
