//! [`Proxy`]: a TCP proxy on a loopback port of its own, in front of a
//! server, and the faults of what sits between a client and Redis: a
//! virtual address moved at a failover, a silent network, connections
//! closed under the client or moved to another server under it, a port
//! nobody listens on. It also counts the
//! client's request bursts, to show how many round trips a call makes.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use socket2::{Domain, Socket, Type};

/// A TCP proxy on a loopback port of its own that forwards every
/// connection to a server's port (a new connection to the server for each
/// client connection), until told to fail:
///
/// | fault | what it imitates |
/// | --- | --- |
/// | [`point_at`](Self::point_at) | a virtual address, DNS name or Sentinel-aware client moved to another server at a failover |
/// | [`move_open_to`](Self::move_open_to) | a TCP proxy or load balancer that switches its backend and keeps its clients' connections open |
/// | [`freeze`](Self::freeze) | a network partition: bytes held both ways, connections open, nothing answered |
/// | [`drop_connections`](Self::drop_connections) | a server restart, an idle timeout or `CLIENT KILL`: every connection closed under its client |
/// | [`refuse`](Self::refuse) | a server that is down: nothing listens on the port |
///
/// Each fault lasts until undone ([`thaw`](Self::thaw), [`accept`](Self::accept))
/// or, for closed connections, until the client connects again.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

struct Shared {
    target: AtomicU16,
    stop: AtomicBool,
    frozen: AtomicBool,
    /// The proxy's port: listening, or held while refusing.
    listener: Mutex<Port>,
    /// The connections carried now, by a number of their own.
    links: Mutex<BTreeMap<u64, Link>>,
    /// Client-to-server bursts since the last reset, over every connection.
    bursts: AtomicU64,
}

/// The proxy's port.
enum Port {
    Listening(TcpListener),
    /// Bound and not listening: the kernel refuses a connection to it
    /// (`ECONNREFUSED`), and no other socket can take the port meanwhile.
    Held(Socket),
    /// Between the two, under the lock; or refusing with the port not held.
    Closed,
}

/// One proxied connection: the client's socket and the server's, which
/// [`Proxy::move_open_to`] replaces under the client.
struct Link {
    client: TcpStream,
    server: Arc<Mutex<TcpStream>>,
    /// Which server connection is the link's now: a copy from a replaced
    /// one ends without closing the client.
    serving: Arc<AtomicU64>,
    /// True once the server's bytes reached the client: its next bytes
    /// are a new burst. A new connection starts as if answered.
    answered: Arc<AtomicBool>,
}

impl Link {
    /// Closes both sockets, under both the client and the server.
    fn close(&self) {
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = lock(&self.server).shutdown(Shutdown::Both);
    }
}

impl Proxy {
    /// A proxy to `target` (a port on 127.0.0.1; `0` for none yet: a client
    /// is then closed at once, until [`point_at`](Self::point_at)).
    pub fn to(target: u16) -> Proxy {
        let listener = listen(0);
        let proxy = Proxy {
            port: listener.local_addr().expect("its address").port(),
            shared: Arc::new(Shared {
                target: AtomicU16::new(target),
                stop: AtomicBool::new(false),
                frozen: AtomicBool::new(false),
                listener: Mutex::new(Port::Listening(listener)),
                links: Mutex::default(),
                bursts: AtomicU64::new(0),
            }),
        };
        let shared = proxy.shared.clone();
        thread::spawn(move || accept_loop(&shared));
        proxy
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops forwarding bytes, in both directions, without closing
    /// anything: a connection that went silent (a network partition).
    pub fn freeze(&self) {
        self.shared.frozen.store(true, Ordering::SeqCst);
    }

    /// Forwards again what piled up, and what follows.
    pub fn thaw(&self) {
        self.shared.frozen.store(false, Ordering::SeqCst);
    }

    /// Sends new connections to `target` and closes the ones open.
    pub fn point_at(&self, target: u16) {
        self.shared.target.store(target, Ordering::SeqCst);
        self.drop_connections();
    }

    /// Sends new connections to `target` and moves each open one there: a
    /// new connection to `target` takes the place of its server's, and the
    /// client's stays open, knowing nothing of it. Call it between
    /// requests: bytes on their way are lost.
    pub fn move_open_to(&self, target: u16) {
        self.shared.target.store(target, Ordering::SeqCst);
        let links = lock(&self.shared.links);
        for link in links.values() {
            let server = TcpStream::connect((Ipv4Addr::LOCALHOST, target))
                .unwrap_or_else(|error| panic!("the proxy's new server ({target}): {error}"));
            let serving = link.serving.fetch_add(1, Ordering::SeqCst) + 1;
            let old = std::mem::replace(&mut *lock(&link.server), clone(&server));
            let _ = old.shutdown(Shutdown::Both);
            let to = (clone(&link.client), link.answered.clone());
            downstream(&self.shared, server, to, &link.serving, serving);
        }
    }

    /// Closes every connection it carries, both ways, as a server restart,
    /// an idle timeout or `CLIENT KILL` does: a client's next command on
    /// one fails with a closed connection. New connections are accepted as
    /// before.
    pub fn drop_connections(&self) {
        let links = std::mem::take(&mut *lock(&self.shared.links));
        for link in links.values() {
            link.close();
        }
    }

    /// Closes the listening port: a new connection is refused (`ECONNREFUSED`),
    /// as by a server that is down. Connections already open stay open.
    pub fn refuse(&self) {
        let mut port = lock(&self.shared.listener);
        if let Port::Listening(_) = &*port {
            // Closed before it is held: a listening socket keeps it from
            // being bound.
            *port = Port::Closed;
            if let Some(held) = hold(self.port) {
                *port = Port::Held(held);
            }
        }
    }

    /// Listens on the same port again after [`refuse`](Self::refuse).
    pub fn accept(&self) {
        let mut port = lock(&self.shared.listener);
        if !matches!(*port, Port::Listening(_)) {
            // The held socket closed first: it keeps the port from being bound.
            *port = Port::Closed;
            *port = Port::Listening(listen(self.port));
        }
    }

    /// The client's request bursts since the last [`reset_bursts`](Self::reset_bursts),
    /// over every connection: on each connection, a burst is what the client
    /// sends before the server's next bytes reach it, so a pipeline is one
    /// and each command awaited before the next is one more. A client that
    /// writes a batch at once and then reads makes one burst per connection.
    pub fn bursts(&self) -> u64 {
        self.shared.bursts.load(Ordering::SeqCst)
    }

    /// Counts bursts from zero again.
    pub fn reset_bursts(&self) {
        self.shared.bursts.store(0, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.refuse();
        self.drop_connections();
    }
}

/// A non-blocking listener on `port` of 127.0.0.1 (`0`: any free port).
/// The port `refuse` closed can be bound again at once: std sets
/// `SO_REUSEADDR`, so the connections it accepted do not hold it.
fn listen(port: u16) -> TcpListener {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
        .unwrap_or_else(|error| panic!("a proxy port ({port}): {error}"));
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    listener
}

/// A socket bound to `port` of 127.0.0.1 and not listening, beside the
/// connections its listener accepted (`SO_REUSEADDR`, as std's listener);
/// `None` if another socket took the port the moment it was free (a
/// connection's own end, never a listener: it is refused all the same).
fn hold(port: u16) -> Option<Socket> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    socket.set_reuse_address(true).expect("SO_REUSEADDR");
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    socket.bind(&address.into()).ok()?;
    Some(socket)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Accepts clients until the proxy is dropped; each gets a connection to
/// the target and two threads that copy bytes, one each way.
fn accept_loop(shared: &Arc<Shared>) {
    let mut next_id = 0;
    while !shared.stop.load(Ordering::SeqCst) {
        let accepted = match &*lock(&shared.listener) {
            Port::Listening(listener) => listener.accept(),
            Port::Held(_) | Port::Closed => Err(ErrorKind::WouldBlock.into()),
        };
        let Ok((client, _)) = accepted else {
            thread::sleep(Duration::from_millis(2));
            continue;
        };
        let port = shared.target.load(Ordering::SeqCst);
        // No server to forward to: the client is closed at once.
        let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
            continue;
        };
        let _ = client.set_nonblocking(false);
        let id = next_id;
        next_id += 1;
        let link = Link {
            client: clone(&client),
            server: Arc::new(Mutex::new(clone(&server))),
            serving: Arc::new(AtomicU64::new(0)),
            answered: Arc::new(AtomicBool::new(true)),
        };
        // Upstream writes to whichever server connection is the link's now.
        let (up_shared, up_server) = (shared.clone(), link.server.clone());
        let (serving, answered) = (link.serving.clone(), link.answered.clone());
        let to = (clone(&client), answered.clone());
        lock(&shared.links).insert(id, link);
        thread::spawn(move || {
            forward(client, &up_server, &up_shared, &answered);
            lock(&up_shared.links).remove(&id);
        });
        downstream(shared, server, to, &serving, 0);
    }
}

fn clone(stream: &TcpStream) -> TcpStream {
    stream.try_clone().expect("a socket's clone")
}

/// Copies `server` to `client` on a thread of its own, until either closes;
/// then closes the client, unless `server` is no longer the link's
/// (`serving` moved past `this`).
fn downstream(
    shared: &Arc<Shared>,
    server: TcpStream,
    (client, answered): (TcpStream, Arc<AtomicBool>),
    serving: &Arc<AtomicU64>,
    this: u64,
) {
    let (shared, serving) = (shared.clone(), serving.clone());
    thread::spawn(move || {
        let mut buffer = [0; 16 * 1024];
        let mut from = server;
        let mut to = client;
        loop {
            let read = match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(read) => read,
            };
            while shared.frozen.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(1));
            }
            // The answer is marked before the client can read it, so that
            // whatever the client sends after reading it counts anew.
            answered.store(true, Ordering::SeqCst);
            if to.write_all(&buffer[..read]).is_err() {
                break;
            }
        }
        if serving.load(Ordering::SeqCst) == this {
            let _ = to.shutdown(Shutdown::Both);
        }
    });
}

/// Copies the client's bytes to the link's server connection of the
/// moment until either closes, holding them back while frozen; bytes that
/// follow an answer start a burst.
fn forward(mut from: TcpStream, server: &Mutex<TcpStream>, shared: &Shared, answered: &AtomicBool) {
    let mut buffer = [0; 16 * 1024];
    let frozen = || shared.frozen.load(Ordering::SeqCst);
    loop {
        while frozen() {
            thread::sleep(Duration::from_millis(1));
        }
        let read = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        while frozen() {
            thread::sleep(Duration::from_millis(1));
        }
        if answered.swap(false, Ordering::SeqCst) {
            shared.bursts.fetch_add(1, Ordering::SeqCst);
        }
        if lock(server).write_all(&buffer[..read]).is_err() {
            break;
        }
    }
    let _ = lock(server).shutdown(Shutdown::Both);
}
