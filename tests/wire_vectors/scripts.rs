//! The `scripts` section of the wire vectors, captured from what the crate
//! sends to a real `redis-server` (`MONITOR`): the instance, counter,
//! clock and lock scripts, and their SHA-1s; blessing writes the file here.

use super::*;

/// One argument list of a `MONITOR` line: `"EVAL" "local..." "1" ...`,
/// unescaped as Redis escapes them (`sdscatrepr`).
fn monitor_args(line: &str) -> Vec<String> {
    let mut args = Vec::new();
    let bytes = line.as_bytes();
    let mut i = line.find("] ").map_or(0, |at| at + 2);
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        i += 1;
        let mut arg = Vec::new();
        while i < bytes.len() && bytes[i] != b'"' {
            if bytes[i] == b'\\' && i + 1 < bytes.len() {
                i += 1;
                match bytes[i] {
                    b'n' => arg.push(b'\n'),
                    b'r' => arg.push(b'\r'),
                    b't' => arg.push(b'\t'),
                    b'a' => arg.push(7),
                    b'b' => arg.push(8),
                    b'x' => {
                        let hex = &line[i + 1..i + 3];
                        arg.push(u8::from_str_radix(hex, 16).expect("a hex escape"));
                        i += 2;
                    }
                    other => arg.push(other),
                }
            } else {
                arg.push(bytes[i]);
            }
            i += 1;
        }
        i += 1;
        args.push(String::from_utf8(arg).expect("UTF-8 arguments"));
    }
    args
}

/// A SHA-1 as Redis names scripts by it (lowercase hex).
fn sha1(text: &str) -> String {
    redis::Script::new(text).get_hash().to_owned()
}

/// Every command the crate sends for a read, a bump and a load with the
/// lock, as `MONITOR` shows them, and the server's run id.
fn capture() -> Option<(Vec<Vec<String>>, String)> {
    use cache_key::cache::QueryCache;
    use cache_key::redis::{LoadLock, RedisCache};

    let server = Server::start(false)?;
    let mut monitor = TcpStream::connect(("127.0.0.1", server.port())).expect("a connection");
    monitor.write_all(b"MONITOR\r\n").expect("MONITOR");
    monitor
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    let mut lines = BufReader::new(monitor.try_clone().expect("a clone"));
    let mut ok = String::new();
    lines.read_line(&mut ok).expect("+OK");
    assert_eq!(ok.trim_end(), "+OK");

    // Per read: the instance learned with its script, so that every script
    // the contract quotes is sent.
    let cache = RedisCache::new(RedisGenerations::new(
        RedisPool::builder()
            .instance_check(cache_key::redis::InstanceCheck::PerRead)
            .open(server.url())
            .expect("a pool"),
    ))
    .with_lock(LoadLock::new(
        Duration::from_secs(5),
        Duration::from_secs(5),
    ));
    let query = Search {
        branch: 2,
        title: "Dune".into(),
    };
    let books = cache
        .get_or_load(&query, || Ok::<_, String>(Vec::new()))
        .expect("a load");
    assert!(books.is_empty());
    cache_key::cache::TypedCache::invalidate(&cache, &Search::tenant_scope(&2).expect("a scope"))
        .expect("a bump");
    // A fill tagged from its value (the clock read before the origin), then
    // a read of it (its tags' counters read as counters are).
    let fiction = Shelf {
        branch: 2,
        term: "fiction".into(),
    };
    let items = vec![item(42, "Borges"), item(7, "Le Guin"), item(1965, "Borges")];
    cache
        .get_or_load(&fiction, || Ok::<_, String>(items.clone()))
        .expect("a load");
    cache.get(&fiction).expect("a read");
    // A command of our own marks the end of the capture.
    let _: Option<String> = redis::cmd("GET")
        .arg("wire-vectors:end")
        .query(&mut server.connect())
        .expect("GET");

    let mut commands = Vec::new();
    loop {
        let mut line = String::new();
        lines.read_line(&mut line).expect("a MONITOR line");
        let args = monitor_args(line.trim_end());
        if args.get(1).is_some_and(|key| key == "wire-vectors:end") {
            break;
        }
        commands.push(args);
    }
    Some((commands, server.instance_id()))
}

#[test]
#[ignore = "starts redis-server processes: cargo test -- --include-ignored"]
fn the_scripts_are_the_ones_the_crate_sends() {
    let Some((commands, instance_id)) = capture() else {
        return;
    };
    let evals: Vec<&Vec<String>> = commands
        .iter()
        .filter(|args| args[0].eq_ignore_ascii_case("EVAL"))
        .collect();
    let instance = evals
        .iter()
        .find(|args| args.len() == 4 && args[2] == "1")
        .expect("the instance script's EVAL")[1]
        .clone();
    let prefix = format!("local epoch = '{instance_id}'");
    let code = evals
        .iter()
        .find(|args| args[1].starts_with(&prefix))
        .expect("the instance's counter script's EVAL")[1]
        .clone();
    let epoch_body = code[prefix.len()..].to_owned();
    let release = evals
        .iter()
        .find(|args| args[1].contains("DEL"))
        .expect("the lock's release script")[1]
        .clone();
    // The clock script, sent with a name in the slot of the tenant's tags.
    let clock_eval = evals
        .iter()
        .find(|args| args[1].contains("TIME") && !args[1].starts_with("local epoch"))
        .expect("the clock script's EVAL");
    let clock = clock_eval[1].clone();
    let tags = &generated()["tags"];
    let fiction = by_name(tags, &["clock"])["shelf, one tenant, hash tag"];
    assert_eq!(
        clock_eval[2..],
        [
            "1".to_owned(),
            fiction["tenant"].as_str().expect("a name").to_owned()
        ],
        "the clock is read in the slot of the vectors' name"
    );
    // The tagged entry's read sends its tags' counters, as the vectors name them.
    let counters = &by_name(tags, &["values"])["two books, one author twice"]["counters"];
    let counters: Vec<&str> = counters
        .as_array()
        .expect("counters")
        .iter()
        .map(|name| name.as_str().expect("a name"))
        .collect();
    let mut read = counters.clone();
    read.push("r");
    assert!(
        commands
            .iter()
            .any(|args| args[0].eq_ignore_ascii_case("EVALSHA")
                && args[2] == counters.len().to_string()
                && args[3..] == read[..]),
        "no read of the tags' counters {counters:?} in {commands:?}"
    );
    // The script every counter command names by SHA-1 is the one loaded.
    let evalsha: Vec<&Vec<String>> = commands
        .iter()
        .filter(|args| args[0].eq_ignore_ascii_case("EVALSHA"))
        .collect();
    assert!(!evalsha.is_empty(), "{commands:?}");
    assert!(
        evalsha.iter().all(|args| args[1] == sha1(&code)),
        "{evalsha:?}"
    );
    let modes: Vec<&str> = evalsha
        .iter()
        .map(|args| args.last().expect("a mode").as_str())
        .collect();
    assert!(modes.contains(&"r") && modes.contains(&"b"), "{modes:?}");

    // An instance id: a run id, then a replication id.
    let example_id =
        "9a1c0ffee0ddba11c0de5ca1ab1e0b5e55ed4e11d15ea5edfee1ab1e0ddba11c0ffee0000decade0";
    let scripts = json!({
        "instance": instance,
        "instance_sha1": sha1(&instance),
        "epoch_prefix": "local epoch = '",
        "epoch_after_id": "'",
        "epoch_body": epoch_body,
        "example": {
            "id": example_id,
            "sha1": sha1(&format!("local epoch = '{example_id}'{epoch_body}")),
        },
        "clock": clock,
        "clock_sha1": sha1(&clock),
        "release": release,
        "release_sha1": sha1(&release),
    });

    if blessing() {
        let mut all = generated();
        if let Ok(text) = std::fs::read_to_string(VECTORS) {
            let file: Value = serde_json::from_str(&text).expect("the old file");
            if file["wire_format"] == all["wire_format"] {
                let changed: Vec<String> = differences(&file, &all)
                    .into_iter()
                    .filter(|line| !line.ends_with("not in the file"))
                    .collect();
                let scripts_changed = file.get("scripts").is_some_and(|old| *old != scripts);
                assert!(
                    changed.is_empty() && !scripts_changed,
                    "refusing to bless: existing vectors changed under wire format {}:\n{}{}\n\
                     Bump WIRE_FORMAT here and in WIRE-FORMAT.md first.",
                    WIRE_FORMAT,
                    changed.join("\n"),
                    if scripts_changed {
                        "\nscripts changed"
                    } else {
                        ""
                    }
                );
            }
        }
        all["scripts"] = scripts;
        let text = serde_json::to_string_pretty(&all).expect("JSON") + "\n";
        std::fs::write(VECTORS, text).expect("write the vectors");
        eprintln!("{BLESS}=1: wrote {VECTORS}");
        return;
    }
    let file = read_file();
    assert_eq!(
        file["scripts"], scripts,
        "the scripts in tests/data/wire-vectors.json are not the ones the crate sends \
         (see this file's header to regenerate)"
    );
}
