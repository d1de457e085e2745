//! Every value comes back exactly as it was stored, in every language
//! (WIRE-FORMAT.md, "Exact values"): Rust, Node.js and Python each write
//! 10,000 random values through their cache's `get_or_load` on one real
//! `redis-server`, and each of the three reads every one of them. Floats
//! over their whole range (subnormals, -0.0, NaN and the infinities at
//! their share of random bits), integers near 2^53 and 2^64, text with
//! astral characters and lone surrogates, nested arrays and objects.
//!
//! Every read equals what its writer held (floats bit for bit), or the
//! writer refused the value (returned it, stored nothing, and every reader
//! misses); a refusal is counted, and allowed only where a rule of the
//! contract names the value (`common::exact::refusals`), with that rule.

mod common;

use std::collections::BTreeMap;
use std::time::{Instant, UNIX_EPOCH};

use cache_key::CacheKey;
use cache_key::cache::{QueryCache, TypedCache};
use cache_key::redis::RedisCache;
use cache_key::redis::envelope::{self, Expected};
use common::exact::{Language, Rng, Tree, held, reads_as, refusals, tree};
use common::ports::{Lang, Port, Target, ports_installed};
use common::redis_server::Server;
use serde_json::{Value, json};

/// Values each language writes, each read by all three.
const VALUES: u64 = 10_000;

/// One value of one writer: its own key.
#[derive(CacheKey)]
#[cache_key(namespace = "exact", operation = "values", value = Tree, ttl = "10m")]
struct Exact {
    #[tenant]
    shard: u32,
    #[criterion]
    writer: &'static str,
    #[criterion]
    n: u64,
}

/// The query as the ports take it, without `n` (they add it per value).
fn described(writer: Language) -> Value {
    json!({
        "namespace": "exact", "operation": "values", "schema": 1,
        "tenant": { "type": "int", "value": "7" },
        "criteria": [["writer", { "type": "str", "value": writer.name() }]],
        "value_id": "Tree", "ttl_ms": 600_000,
    })
}

fn query(writer: Language, n: u64) -> Exact {
    Exact {
        shard: 7,
        writer: writer.name(),
        n,
    }
}

fn port(ports: &mut [Port], language: Language) -> &mut Port {
    let lang = match language {
        Language::Node => Lang::Node,
        Language::Python => Lang::Python,
        Language::Rust => unreachable!("Rust is in process"),
    };
    ports
        .iter_mut()
        .find(|port| port.lang == lang)
        .expect("the port")
}

/// The rule the Rust writer refuses `tree` by: the envelope's own check.
fn rust_refusal(tree: &Tree) -> Option<String> {
    let expected = Expected::new(1, "Tree", "exact");
    let error = envelope::encode(&expected, tree, UNIX_EPOCH, None).err()?;
    let cause = std::error::Error::source(&error).map(ToString::to_string);
    // A float JSON cannot hold: the one rule Rust's types leave to check.
    Some(match cause {
        Some(cause) if cause.contains("which JSON cannot hold") => "non_finite".to_owned(),
        other => format!("unexpected: {other:?}"),
    })
}

/// Loads every value of `writer` through its cache's `get_or_load`: per
/// value, `None` when stored, the rule when refused.
fn write(
    writer: Language,
    trees: &[Tree],
    rust: &RedisCache,
    ports: &mut [Port],
) -> Vec<Option<String>> {
    if writer != Language::Rust {
        let values: Vec<Value> = trees.iter().map(Tree::spec).collect();
        let answer = port(ports, writer).ask(json!({
            "op": "fill_exact", "query": described(writer), "criterion": "n", "values": values,
        }));
        return (answer["results"].as_array().expect("results").iter())
            .map(|rule| rule.as_str().map(str::to_owned))
            .collect();
    }
    let degraded = rust.stats().degraded;
    let results: Vec<Option<String>> = in_threads(|n| {
        let tree = &trees[usize::try_from(n).expect("an index")];
        let returned = rust
            .get_or_load(&query(writer, n), || Ok::<_, String>(tree.clone()))
            .expect("Rust answers");
        assert!(
            reads_as(tree, &returned, Language::Rust),
            "Rust returned another value than its origin's"
        );
        rust_refusal(tree)
    });
    let refused = results.iter().filter(|rule| rule.is_some()).count() as u64;
    assert_eq!(
        rust.stats().degraded - degraded,
        refused,
        "Rust reports each refusal, and nothing else"
    );
    results
}

/// `call(n)` for every value's `n`, on 8 threads, in order of `n`.
fn in_threads<T: Send>(call: impl Fn(u64) -> T + Sync) -> Vec<T> {
    const THREADS: u64 = 8;
    let chunk = VALUES.div_ceil(THREADS);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let call = &call;
                scope.spawn(move || {
                    (t * chunk..((t + 1) * chunk).min(VALUES))
                        .map(call)
                        .collect::<Vec<T>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a worker"))
            .collect()
    })
}

/// What each language reads of each of `writer`'s values: `Ok(value)` for a
/// hit, `Err(reason)` for a miss. The three read at once: the ports are
/// sent their requests, Rust reads, then the ports' answers are taken.
fn read_all(
    writer: Language,
    rust: &RedisCache,
    ports: &mut [Port],
) -> Vec<(Language, Vec<Result<Tree, String>>)> {
    let request = json!({
        "op": "read_exact", "query": described(writer), "criterion": "n", "count": VALUES,
    });
    let readers = [Language::Node, Language::Python];
    for reader in readers {
        port(ports, reader).send(&request);
    }
    let mut reads = vec![(
        Language::Rust,
        in_threads(|n| {
            (rust.get(&query(writer, n)).expect("Rust reads")).ok_or_else(|| "miss".to_owned())
        }),
    )];
    for reader in readers {
        let answer = port(ports, reader).answer(&request);
        let values = (answer["results"].as_array().expect("results").iter())
            .map(|read| match read["hit"].as_bool() {
                Some(true) => Tree::from_spec(&read["value"])
                    .ok_or_else(|| format!("not an exact form: {read}")),
                _ => Err(read["reason"].to_string()),
            })
            .collect();
        reads.push((reader, values));
    }
    reads
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn every_value_reads_back_as_written_in_every_language_or_its_writer_refuses_it() {
    if !ports_installed() {
        return;
    }
    let Some(server) = Server::start(false) else {
        return;
    };
    let target = Target::Server(&server);
    // Redis failures are errors here: a miss must be the entry's, not an outage's.
    let rust = target.rust();
    let mut ports = common::ports::ports(&target);
    let mut failures = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (seed, writer) in (1u64..).zip(Language::ALL) {
        let mut rng = Rng::new(seed);
        let trees: Vec<Tree> = (0..VALUES)
            .map(|_| tree(&mut rng, 3, writer != Language::Rust))
            .collect();
        let started = Instant::now();
        let written = write(writer, &trees, &rust, &mut ports);
        println!(
            "{} wrote {VALUES} values in {:.1?}",
            writer.name(),
            started.elapsed()
        );
        for (n, (tree, refused)) in trees.iter().zip(&written).enumerate() {
            let rules = refusals(tree, writer);
            let allowed = match refused {
                None => rules.is_empty(),
                Some(rule) => rules.contains(rule.as_str()),
            };
            if !allowed {
                failures.push(format!(
                    "{} wrote value {n} {}: refused {refused:?}, the rules say {rules:?}",
                    writer.name(),
                    tree.spec()
                ));
            }
            let outcome = refused.as_deref().unwrap_or("stored");
            *counts
                .entry(format!("{} {outcome}", writer.name()))
                .or_default() += 1;
        }
        let started = Instant::now();
        let all = read_all(writer, &rust, &mut ports);
        println!("the three read them in {:.1?}", started.elapsed());
        for (reader, reads) in all {
            for (n, ((tree, refused), got)) in trees.iter().zip(&written).zip(&reads).enumerate() {
                let expected = held(tree, writer);
                let fine = match (refused, got) {
                    (Some(_), Err(_)) => true,
                    (None, Ok(read)) => reads_as(&expected, read, reader),
                    _ => false,
                };
                if !fine {
                    let got = match got {
                        Ok(read) => read.spec().to_string(),
                        Err(reason) => format!("a miss ({reason})"),
                    };
                    failures.push(format!(
                        "{} -> {}, value {n}: wrote {} (refused: {refused:?}), read {got}",
                        writer.name(),
                        reader.name(),
                        expected.spec(),
                    ));
                }
            }
            *counts
                .entry(format!("{} -> {} reads", writer.name(), reader.name()))
                .or_default() += reads.len() as u64;
        }
    }
    println!("{counts:#?}");
    assert!(
        failures.is_empty(),
        "{} failures, the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(10)].join("\n")
    );
}
