//! The Node.js and Python ports as child processes (`ports/js/cache-cli.mjs`,
//! `ports/python/cache_redis.py`), one request line in, one answer line out,
//! against one `redis-server` or a cluster; and the Rust cache on the same.
//! A port whose interpreter or Redis client is missing is skipped with a
//! message, except under `CI=true`, where that is a failure.

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use cache_key::redis::{FailurePolicy, RedisCache, RedisGenerations, RedisPool, Timeouts};
use serde_json::{Value, json};

use super::redis_server::{Cluster, Server};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Node,
    Python,
}

impl Lang {
    pub const ALL: [Lang; 2] = [Lang::Node, Lang::Python];

    pub fn name(self) -> &'static str {
        match self {
            Lang::Node => "node",
            Lang::Python => "python",
        }
    }

    /// Whether the interpreter and the port's Redis client are installed.
    pub fn installed(self) -> Result<(), String> {
        let (program, check, fix) = match self {
            Lang::Node => (
                "node",
                vec!["-e", "require.resolve('redis')"],
                "npm ci --prefix ports/js",
            ),
            Lang::Python => (
                "python3",
                vec!["-c", "import redis"],
                "python3 -m pip install --require-hashes -r ports/python/requirements.txt",
            ),
        };
        let dir = Path::new(ROOT).join(self.dir());
        match Command::new(program).args(&check).current_dir(dir).output() {
            Ok(output) if output.status.success() => Ok(()),
            Ok(_) => Err(format!(
                "the {} port's Redis client is not installed: {fix}",
                self.name()
            )),
            Err(_) => Err(format!("`{program}` is not installed")),
        }
    }

    pub fn dir(self) -> &'static str {
        match self {
            Lang::Node => "ports/js",
            Lang::Python => "ports/python",
        }
    }

    pub fn command(self) -> (&'static str, &'static str) {
        match self {
            Lang::Node => ("node", "cache-cli.mjs"),
            Lang::Python => ("python3", "cache_redis.py"),
        }
    }
}

/// Whether every port can run here; under `CI=true` they must.
pub fn ports_installed() -> bool {
    let missing: Vec<String> = Lang::ALL
        .iter()
        .filter_map(|lang| lang.installed().err())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1");
    assert!(
        !ci,
        "CI must test the ports sharing the cache: {}",
        missing.join("; ")
    );
    let _ = writeln!(
        std::io::stderr(),
        "skipped: the ports cannot share the cache here: {}",
        missing.join("; ")
    );
    false
}

/// `Search { branch: 1, title: "Dune" }` of `tests/common/library_search.rs`,
/// as the ports take a query.
pub fn dune() -> Value {
    json!({
        "namespace": "library", "operation": "search", "schema": 1, "hash_tag": true,
        "tenant": { "type": "int", "value": "1" },
        "criteria": [["title", { "type": "str", "value": "Dune" }]],
        "value_id": "Vec<Book>", "ttl_ms": 60_000,
    })
}

/// Where the caches meet: one server, or a cluster.
pub enum Target<'a> {
    Server(&'a Server),
    Cluster(&'a Cluster),
    /// One server at this `redis://` address (a proxy's, say).
    Url(String),
}

impl Target<'_> {
    pub fn args(&self) -> [String; 2] {
        match self {
            Target::Server(server) => ["--url".to_owned(), server.url()],
            Target::Cluster(cluster) => ["--cluster".to_owned(), cluster.urls().join(",")],
            Target::Url(url) => ["--url".to_owned(), url.clone()],
        }
    }

    /// The Rust cache. A failure of Redis is an error here, not a miss
    /// answered by the origin (the default policy), and calls get seconds
    /// on a loaded machine: a slow call must not pass for an invalidation.
    pub fn rust(&self) -> RedisCache {
        let builder = RedisPool::builder().timeouts(
            Timeouts::default()
                .with_connect(Duration::from_secs(5))
                .with_call(Duration::from_secs(5)),
        );
        let pool = match self {
            Target::Server(server) => builder.open(server.url()),
            Target::Cluster(cluster) => builder.open_cluster(cluster.urls()),
            Target::Url(url) => builder.open(url.as_str()),
        };
        RedisCache::new(RedisGenerations::new(pool.expect("a pool")))
            .with_failure_policy(FailurePolicy::ReturnError)
    }
}

/// How long a port may take to answer one request (the longest, thousands
/// of values, take seconds): a port that hangs fails its test then, rather
/// than holding the run until CI's own limit.
const ANSWER_BOUND: Duration = Duration::from_secs(300);

/// A port's process: one request line in, one answer line out.
pub struct Port {
    pub lang: Lang,
    child: Child,
    input: ChildStdin,
    /// The port's output lines, read by a thread of their own so that an
    /// answer is awaited for [`ANSWER_BOUND`] at most.
    output: Receiver<String>,
}

impl Port {
    pub fn start(lang: Lang, target: &Target<'_>) -> Port {
        Self::start_with(lang, target, &[])
    }

    /// Started with `options` after the target's: `["--ca", file]`, the
    /// certificate a `rediss://` target's server is trusted by.
    pub fn start_with(lang: Lang, target: &Target<'_>, options: &[&str]) -> Port {
        let (program, script) = lang.command();
        let mut child = Command::new(program)
            .arg(script)
            .args(target.args())
            .args(options)
            .current_dir(Path::new(ROOT).join(lang.dir()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start the {} port: {error}", lang.name()));
        let input = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let (lines, output) = mpsc::channel();
        // Ends when the port closes its output (it exited) or the Port is gone.
        thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Port {
            lang,
            child,
            input,
            output,
        }
    }

    pub fn ask(&mut self, request: Value) -> Value {
        self.send(&request);
        self.answer(&request)
    }

    /// Sends `request` without waiting: its answer is [`answer`](Self::answer)'s.
    pub fn send(&mut self, request: &Value) {
        writeln!(self.input, "{request}").expect("a request to the port");
        self.input.flush().expect("flushed");
    }

    /// The answer to `request`, the oldest one sent and not yet answered.
    pub fn answer(&mut self, request: &Value) -> Value {
        let answer = self.answer_or_error(request);
        assert!(
            answer.get("error").is_none(),
            "the {} port failed on {}: {answer}",
            self.lang.name(),
            shown(request)
        );
        answer
    }

    /// The answer to `request`, which may be an error (`{"error": ...}`).
    pub fn answer_or_error(&mut self, request: &Value) -> Value {
        let line = match self.output.recv_timeout(ANSWER_BOUND) {
            Ok(line) => line,
            Err(RecvTimeoutError::Disconnected) => panic!(
                "the {} port exited instead of answering {}",
                self.lang.name(),
                shown(request)
            ),
            Err(RecvTimeoutError::Timeout) => panic!(
                "the {} port answered nothing in {} s to {} (killed)",
                self.lang.name(),
                ANSWER_BOUND.as_secs(),
                shown(request)
            ),
        };
        serde_json::from_str(&line).expect("a JSON answer")
    }
}

/// The start of `request`: requests may hold thousands of values.
fn shown(request: &Value) -> String {
    request.to_string().chars().take(300).collect()
}

impl Drop for Port {
    fn drop(&mut self) {
        // Closing stdin ends the port's loop; kill it if it hangs.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The ports, started against `target`.
pub fn ports(target: &Target<'_>) -> Vec<Port> {
    Lang::ALL
        .iter()
        .map(|&lang| Port::start(lang, target))
        .collect()
}
