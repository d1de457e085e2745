//! The examples of `ports/README.md`, each run as it is shown there (the
//! test checks the page quotes the file) against a `redis-server` where a
//! Rust `RedisCache` stored the entry it reads.

use std::path::Path;
use std::process::Command;

use cache_key::CacheKey;
use cache_key::cache::{QueryCache, TypedCache};
use serde::Serialize;
use serde_json::{Value, json};

use super::{
    ROOT, Tag, Target, books, common::redis_server::Server, item, json_of, search, server, shelf,
};

/// How long an example may run (`timeout`'s duration).
const EXAMPLE_BOUND: &str = "120s";

/// Runs `example` of the port in `dir` against `server`, after checking
/// that ports/README.md shows it as it is; its output lines, as JSON.
fn run_example(
    server: &Server,
    dir: &str,
    program: &str,
    example: &str,
    fence: &str,
) -> Vec<Value> {
    let readme =
        std::fs::read_to_string(Path::new(ROOT).join("ports/README.md")).expect("ports/README.md");
    let text =
        std::fs::read_to_string(Path::new(ROOT).join(dir).join(example)).expect("an example");
    assert!(
        readme.contains(&format!("```{fence}\n{text}```")),
        "ports/README.md must show {dir}/{example} as it is"
    );
    // Bounded (coreutils' `timeout`), so that an example that hangs fails
    // its test instead of holding the suite.
    let output = Command::new("timeout")
        .args([EXAMPLE_BOUND, program, example])
        .current_dir(Path::new(ROOT).join(dir))
        .env("REDIS_URL", server.url())
        .output()
        .expect("the example runs");
    assert!(
        output.status.success(),
        "{example} ({}; 124: still running after {EXAMPLE_BOUND}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect()
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_readme_examples_read_a_rust_entry_and_invalidate_it() {
    let Some(server) = server() else { return };
    let rust = Target::Server(&server).rust();
    let query = search(2, "Dune");
    let examples = [
        ("ports/js", "node", "examples/shared-entry.mjs", "js"),
        (
            "ports/python",
            "python3",
            "examples/shared_entry.py",
            "python",
        ),
    ];
    for (dir, program, example, fence) in examples {
        rust.insert(&query, books("Dune", 1965))
            .expect("Rust stores");
        let lines = run_example(&server, dir, program, example, fence);
        assert_eq!(
            lines[0],
            json_of(&books("Dune", 1965)),
            "{example} reads Rust's entry"
        );
        let reason = lines[1].get("reason").unwrap_or(&lines[1]);
        assert_eq!(reason, &json!("absent"), "{example} misses after its bump");
        assert_eq!(
            rust.get(&query).expect("Rust reads"),
            None,
            "Rust misses after {example}'s bump"
        );
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_readme_tag_examples_read_a_tagged_rust_entry_and_bump_its_tag() {
    let Some(server) = server() else { return };
    let rust = Target::Server(&server).rust();
    let (query, other) = (shelf(2, "fiction"), shelf(2, "le guin"));
    let items = vec![item(42, "Borges", 1), item(7, "Le Guin", 1)];
    let kept = vec![item(7, "Le Guin", 1)];
    // The tags exist (bumped once): an entity's first fill is never served.
    for tag in [
        Tag::Book(42),
        Tag::Book(7),
        Tag::Author("Borges"),
        Tag::Author("Le Guin"),
    ] {
        rust.invalidate(&tag.scope(2)).expect("a bump");
    }
    let examples = [
        ("ports/js", "node", "examples/tagged-entry.mjs", "js"),
        (
            "ports/python",
            "python3",
            "examples/tagged_entry.py",
            "python",
        ),
    ];
    for (dir, program, example, fence) in examples {
        rust.insert(&query, items.clone()).expect("Rust stores");
        rust.insert(&other, kept.clone()).expect("Rust stores");
        let lines = run_example(&server, dir, program, example, fence);
        assert_eq!(lines[0], json_of(&items), "{example} reads Rust's entry");
        assert_eq!(lines[1], json!("absent"), "{example} misses after its bump");
        assert_eq!(
            rust.get(&query).expect("Rust reads"),
            None,
            "Rust misses after {example}'s bump of book 42"
        );
        assert_eq!(
            rust.get(&other).expect("Rust reads"),
            Some(kept.clone()),
            "an answer without book 42 keeps hitting"
        );
    }
}

/// `Find` of the type example, as the Rust service declares it.
#[derive(CacheKey)]
#[cache_key(namespace = "shop", operation = "find", rename_all = "camelCase", value = Vec<String>, ttl = "1m")]
struct Find {
    #[tenant]
    store: u64,
    #[criterion]
    long_text: String,
    #[criterion]
    min_price: Option<f64>,
    #[criterion(rename = "ids")]
    product_ids: Vec<u64>,
}

/// The value the type example writes, as Rust writes it.
#[derive(Serialize)]
struct Stock {
    price: f64,
    stock: u64,
    zero: f64,
    name: &'static str,
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_readme_type_examples_build_rusts_key_and_refuse_what_rust_refuses() {
    let Some(server) = server() else { return };
    let query = Find {
        store: 9_007_199_254_740_993,
        long_text: "red".to_owned(),
        min_price: Some(19.99),
        product_ids: vec![7, 42],
    };
    let key = query.cache_key(1).expect("Rust builds the key");
    let value = serde_json::to_value(Stock {
        price: 19.99,
        stock: 1 << 60,
        zero: -0.0,
        name: "Ünïcödé 😀",
    })
    .expect("JSON");
    let refused = [
        "empty_tenant",
        "not_an_integer",
        "not_an_integer",
        "unknown_criterion",
    ];
    let examples = [
        (
            "ports/js",
            "node",
            "examples/typed-query.mjs",
            "js",
            &[
                "inexact_integer",
                "lone_surrogate",
                "integer_range",
                "non_finite",
            ][..],
        ),
        (
            "ports/python",
            "python3",
            "examples/typed_query.py",
            "python",
            &["lone_surrogate", "integer_range", "non_finite"][..],
        ),
    ];
    for (dir, program, example, fence, rules) in examples {
        let lines = run_example(&server, dir, program, example, fence);
        assert_eq!(lines[0], json!(key.as_str()), "{example} builds Rust's key");
        assert_eq!(
            lines[1..5],
            refused.map(|kind| json!(kind)),
            "{example} refuses as Rust"
        );
        // The value as Rust writes it: -0.0 a negative zero, 2^60 an integer.
        let written = &lines[5];
        assert_eq!(written, &value, "{example} writes the value as Rust");
        assert!(
            written["zero"].as_f64().is_some_and(f64::is_sign_negative),
            "{example}: -0.0 keeps its sign"
        );
        assert_eq!(
            written["stock"].as_u64(),
            Some(1 << 60),
            "{example}: an integer"
        );
        let found: Vec<Value> = lines[6..].to_vec();
        let rules: Vec<Value> = rules.iter().map(|rule| json!(rule)).collect();
        assert_eq!(found, rules, "{example} refuses each value by its rule");
    }
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_readme_outage_examples_answer_from_the_origin_or_fail_when_strict() {
    let Some(mut server) = server() else { return };
    // Redis is gone (SIGKILL); the examples are given its address.
    server.stop();
    let examples = [
        ("ports/js", "node", "examples/outage.mjs", "js"),
        ("ports/python", "python3", "examples/outage.py", "python"),
    ];
    // The origin's answer, one failure reported, then the strict cache's error.
    let answer = json!([{ "title": "Dune", "year": 1965, "subtitle": null }]);
    let expected = [answer, json!(1), json!("backend")];
    for (dir, program, example, fence) in examples {
        let lines = run_example(&server, dir, program, example, fence);
        assert_eq!(lines, expected, "{example} against a server that is gone");
    }
    // A server that accepts connections and answers nothing (SIGSTOP): the
    // Python example's comment says so; its reads time out (redis-py's 5 s).
    let Some(hung) = super::server() else { return };
    hung.pause();
    let lines = run_example(
        &hung,
        "ports/python",
        "python3",
        "examples/outage.py",
        "python",
    );
    hung.resume();
    assert_eq!(lines, expected, "outage.py against a hung server");
}
