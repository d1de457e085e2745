//! Explains cache keys.
//!
//! ```text
//! cargo run --example explain -- 'library:s1:g4:tbranch-2:search:title=Sand%3A%20Borges'
//! redis-cli --scan --pattern 'library:*' | cargo run --example explain
//! ```
//!
//! With keys as arguments, prints the parts of each. Without arguments, reads
//! keys from standard input, one per line, and prints how many there are per
//! namespace, schema, generation, tenant and operation, then the lines that
//! are not valid keys. Exits with 1 when any key is invalid.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufWriter, Write};
use std::process::ExitCode;

use cache_key::{DecodedCriteria, DecodedKey, DecodedTenant, decode};

const USAGE: &str = "\
usage: explain KEY...      explain each key
       explain < keys.txt  count keys read one per line (as `redis-cli --scan` prints them)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = io::stdout().lock();
    let result = match args.first().map(String::as_str) {
        Some("-h" | "--help") => writeln!(BufWriter::new(out), "{USAGE}").map(|()| true),
        Some(_) => explain_all(&args, out),
        None => summarize(io::stdin().lock(), out),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        // The reader went away (`explain | head`): nothing left to say.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("explain: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the parts of each key; whether they were all valid.
fn explain_all(keys: &[String], out: impl Write) -> io::Result<bool> {
    let mut out = BufWriter::new(out);
    let mut all_valid = true;
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        match decode(key) {
            Ok(decoded) => explain(&mut out, key, &decoded)?,
            Err(err) => {
                all_valid = false;
                writeln!(out, "key         {}", key.escape_debug())?;
                writeln!(out, "invalid     {err}")?;
            }
        }
    }
    out.flush()?;
    Ok(all_valid)
}

fn explain(out: &mut impl Write, key: &str, decoded: &DecodedKey) -> io::Result<()> {
    writeln!(out, "key         {key}")?;
    writeln!(out, "namespace   {}", shown(decoded.namespace()))?;
    writeln!(out, "schema      {}", decoded.schema())?;
    writeln!(out, "generation  {}", decoded.generation())?;
    match decoded.tenant() {
        DecodedTenant::Global => writeln!(out, "tenant      (global: the same for every tenant)")?,
        DecodedTenant::Parts(parts) if parts.len() == 1 => {
            writeln!(out, "tenant      {}", shown(&parts[0]))?
        }
        DecodedTenant::Parts(parts) => {
            writeln!(out, "tenant      {} parts", parts.len())?;
            for (i, part) in parts.iter().enumerate() {
                writeln!(out, "{:<12}{}", format!("  part {}", i + 1), shown(part))?;
            }
        }
    }
    let hash_tag = if decoded.hash_tag() {
        "yes (Redis Cluster slot chosen by the tenant)"
    } else {
        "no"
    };
    writeln!(out, "hash tag    {hash_tag}")?;
    writeln!(out, "operation   {}", shown(decoded.operation()))?;
    match decoded.criteria() {
        DecodedCriteria::None => writeln!(out, "criteria    (none)")?,
        DecodedCriteria::Digest(digest) => writeln!(
            out,
            "criteria    summarized: SHA-256 prefix {digest} (over 48 bytes)"
        )?,
        DecodedCriteria::Pairs(pairs) => {
            writeln!(out, "criteria")?;
            let width = pairs
                .iter()
                .map(|(name, _)| shown(name).chars().count())
                .max();
            for (name, value) in pairs {
                let name = shown(name);
                writeln!(
                    out,
                    "  {name:<width$} = {}",
                    shown(value),
                    width = width.unwrap_or(0)
                )?;
            }
        }
    }
    Ok(())
}

/// Counts of keys by part, in display order.
#[derive(Default)]
struct Counts {
    namespace: BTreeMap<String, usize>,
    schema: BTreeMap<String, usize>,
    generation: BTreeMap<String, usize>,
    tenant: BTreeMap<String, usize>,
    operation: BTreeMap<String, usize>,
}

impl Counts {
    fn add(&mut self, key: &DecodedKey) {
        let namespace = shown(key.namespace());
        let bump = |map: &mut BTreeMap<String, usize>, label: String| {
            *map.entry(label).or_default() += 1;
        };
        bump(&mut self.namespace, namespace.clone());
        bump(&mut self.schema, format!("{namespace}  s{}", key.schema()));
        bump(
            &mut self.generation,
            format!("{namespace}  g{}", key.generation()),
        );
        let tenant = match key.tenant() {
            DecodedTenant::Global => "(global)".to_owned(),
            DecodedTenant::Parts(parts) => parts
                .iter()
                .map(|part| shown(part))
                .collect::<Vec<_>>()
                .join(" / "),
        };
        let tenant = if key.hash_tag() {
            format!("{tenant}  (hash tag)")
        } else {
            tenant
        };
        bump(&mut self.tenant, tenant);
        bump(
            &mut self.operation,
            format!("{namespace}  {}", shown(key.operation())),
        );
    }

    fn print(&self, out: &mut impl Write) -> io::Result<()> {
        for (title, map) in [
            ("namespace", &self.namespace),
            ("schema", &self.schema),
            ("generation", &self.generation),
            ("tenant", &self.tenant),
            ("operation", &self.operation),
        ] {
            writeln!(out, "\nby {title}")?;
            let mut rows: Vec<(&String, &usize)> = map.iter().collect();
            rows.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
            let width = rows.first().map_or(1, |(_, count)| count.to_string().len());
            for (label, count) in rows {
                writeln!(out, "  {count:>width$}  {label}")?;
            }
        }
        Ok(())
    }
}

/// Reads keys one per line and prints counts; whether they were all valid.
fn summarize(input: impl BufRead, out: impl Write) -> io::Result<bool> {
    let mut out = BufWriter::new(out);
    let mut counts = Counts::default();
    let (mut valid, mut invalid) = (0usize, Vec::new());
    for (number, line) in input.split(b'\n').enumerate() {
        let line = line?;
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if line.is_empty() {
            continue;
        }
        let number = number + 1;
        match std::str::from_utf8(line) {
            Err(_) => invalid.push((
                number,
                String::from_utf8_lossy(line).into_owned(),
                "not UTF-8 text".to_owned(),
            )),
            Ok(key) => match decode(key) {
                Ok(decoded) => {
                    valid += 1;
                    counts.add(&decoded);
                }
                Err(err) => invalid.push((number, key.to_owned(), err.to_string())),
            },
        }
    }

    writeln!(
        out,
        "{} keys: {valid} valid, {} invalid",
        valid + invalid.len(),
        invalid.len()
    )?;
    if valid > 0 {
        counts.print(&mut out)?;
    }
    if !invalid.is_empty() {
        writeln!(out, "\ninvalid keys")?;
        for (number, key, err) in &invalid {
            writeln!(out, "  line {number}: {}\n    {err}", key.escape_debug())?;
        }
    }
    out.flush()?;
    Ok(invalid.is_empty())
}

/// `text` as it is when it reads unambiguously, quoted and escaped otherwise
/// (empty, surrounding spaces, control characters, separators of this output).
fn shown(text: &str) -> String {
    let plain = !text.is_empty()
        && text.trim() == text
        && !text.contains(['"', '/', '='])
        && !text.chars().any(char::is_control);
    if plain {
        text.to_owned()
    } else {
        format!("{text:?}")
    }
}
