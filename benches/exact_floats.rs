//! What reading floats exactly costs a hit's decode: `envelope::decode` of
//! pages of priced items (a title, a price and a rating, both `f64` from
//! arithmetic, as a shop's search would cache them) of about 700 bytes and
//! 73 KB, the sizes of BENCHMARKS.md's Redis tier. Built as it is, serde_json
//! reads floats with `float_roundtrip` (the very double written); built by
//! `benches/exact_floats.sh` without it, with serde_json's fast path (up to
//! one ulp off): the two builds' counts, side by side, are the cost.
//!
//! `BENCH_FIXED_LOOP=decode/<small|large>:N` decodes N times and exits (for
//! `benches/instructions.sh`); otherwise each value's decode is timed, the
//! thread's CPU time over 7 rounds of blocks, and the median printed.

#[path = "common/cpu_time.rs"]
mod cpu_time;

use std::hint::black_box;
use std::time::{Duration, SystemTime};

use cache_key::redis::envelope::{self, Expected};
use cpu_time::ThreadCpuTime;
use criterion::measurement::Measurement;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Priced {
    title: String,
    price: f64,
    rating: f64,
}

/// `items` priced items: prices in cents over 100, ratings quotients, each
/// written in its shortest form (`19.99`, `4.285714285714286`).
fn page(items: usize) -> Vec<Priced> {
    (0..items)
        .map(|i| Priced {
            title: format!("Item {i}"),
            price: (i * 137 % 100_000) as f64 * 0.01,
            rating: (i % 50) as f64 / 7.0 + 1.0,
        })
        .collect()
}

fn main() {
    let expected = Expected::new(1, "Vec<Priced>", "shop:s1:g4:t2:find:q=red");
    let fresh = SystemTime::now() + Duration::from_secs(600);
    let values = [("small", page(12)), ("large", page(1240))];
    let stored: Vec<(&str, Vec<u8>, Vec<Priced>)> = values
        .into_iter()
        .map(|(name, value)| {
            let bytes = envelope::encode(&expected, &value, fresh, None).unwrap();
            (name, bytes, value)
        })
        .collect();
    let decode = |bytes: &[u8]| envelope::decode::<Vec<Priced>>(bytes, &expected).unwrap();
    if let Ok(spec) = std::env::var("BENCH_FIXED_LOOP") {
        let (name, calls) = spec
            .rsplit_once(':')
            .expect("BENCH_FIXED_LOOP is decode/<size>:N");
        let calls: u64 = calls.parse().expect("N");
        let (_, bytes, _) = (stored.iter())
            .find(|(size, _, _)| name == format!("decode/{size}"))
            .expect("decode/small or decode/large");
        for _ in 0..calls {
            black_box(decode(black_box(bytes)));
        }
        return;
    }
    for (name, bytes, value) in &stored {
        // Read back as written, whichever path the build parses floats with
        // (the fast path's one-ulp misses are counted, not hidden).
        let read = decode(bytes).value;
        let off = (read.iter().zip(value))
            .filter(|(a, b)| {
                a.price.to_bits() != b.price.to_bits() || a.rating.to_bits() != b.rating.to_bits()
            })
            .count();
        let block = if *name == "small" { 2_000 } else { 20 };
        let mut medians = Vec::new();
        for _ in 0..7 {
            let started = ThreadCpuTime.start();
            for _ in 0..block {
                black_box(decode(black_box(bytes)));
            }
            medians.push(ThreadCpuTime.end(started) as f64 / block as f64);
        }
        medians.sort_by(f64::total_cmp);
        println!(
            "decode/{name}: {} bytes, {} items, {off} read off by an ulp; {:.0} ns per decode (median of 7, range {:.0}-{:.0})",
            bytes.len(),
            value.len(),
            medians[3],
            medians[0],
            medians[6]
        );
    }
}
