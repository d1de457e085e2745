//! The examples of `ports/README.md`, each run as it is shown there (the
//! test checks the page quotes the file) against a `redis-server` where a
//! Rust `RedisCache` stored the entry it reads.

use std::path::Path;
use std::process::Command;

use cache_key::cache::{QueryCache, TypedCache};
use serde_json::{Value, json};

use super::{
    ROOT, Tag, Target, books, common::redis_server::Server, item, json_of, search, server, shelf,
};

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
    let output = Command::new(program)
        .arg(example)
        .current_dir(Path::new(ROOT).join(dir))
        .env("REDIS_URL", server.url())
        .output()
        .expect("the example runs");
    assert!(
        output.status.success(),
        "{example}: {}",
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
