//! Which serde format `RedisCache` stores values in: size and encode/decode
//! time of a realistic cached value (a search's page of 20 books: id,
//! title, author, year, an optional subtitle) in serde_json and in four
//! binary formats (postcard, MessagePack by `rmp-serde` with structs as
//! arrays and as maps, bincode 2 through serde, CBOR by `ciborium`).
//!
//! Then what `RedisCache`'s envelope check costs per hit: building the
//! query's readable key and decoding the envelope (header checks, then the
//! value) against decoding the bare value alone.
//!
//! Sizes are exact and printed before the timings. Times are the benchmark
//! thread's **CPU time** (`benches/common/cpu_time.rs`), as the machine is
//! shared. Every format's round trip is checked before anything is timed.
//!
//! Run with `cargo bench -p cache-key-benches --bench value_encoding`; see BENCHMARKS.md,
//! "Redis values".

#[path = "common/cpu_time.rs"]
mod cpu_time;

use std::hint::black_box;
use std::time::Duration;

use cache_key::CacheKey;
use cache_key::redis::envelope::{self, Expected};
use cpu_time::ThreadCpuTime;
use criterion::Criterion;
use serde::{Deserialize, Serialize};

/// The seed's two-criteria search (as in `benches/keys.rs`).
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
struct Search<'a> {
    #[tenant]
    branch: &'a str,
    #[criterion]
    title: &'a str,
    #[criterion]
    author: Option<&'a str>,
}

const GENERATION: u64 = 4;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Book {
    id: u64,
    title: String,
    author: String,
    year: u16,
    subtitle: Option<String>,
}

/// `Book` as a later release might declare it: `author` before `title`.
#[derive(Debug, Deserialize)]
struct BookReordered {
    #[allow(dead_code)]
    id: u64,
    author: String,
    title: String,
}

/// A page of 20 books as a library search returns it: ids in the millions,
/// titles of 10 to 40 bytes (some not ASCII), half with a subtitle.
fn page() -> Vec<Book> {
    const TITLES: [&str; 5] = [
        "The Book of Sand",
        "Cien años de soledad",
        "Dune Messiah",
        "The Left Hand of Darkness",
        "Der Zauberberg",
    ];
    const AUTHORS: [&str; 5] = [
        "Jorge Luis Borges",
        "Gabriel García Márquez",
        "Frank Herbert",
        "Ursula K. Le Guin",
        "Thomas Mann",
    ];
    (0..20u16)
        .map(|i| {
            let n = usize::from(i);
            Book {
                id: 4_100_000 + u64::from(i) * 7_919,
                title: format!("{}, volume {}", TITLES[n % 5], i + 1),
                author: AUTHORS[(n * 3) % 5].to_owned(),
                year: 1924 + i * 4,
                subtitle: (i % 2 == 0).then(|| "and other stories".to_owned()),
            }
        })
        .collect()
}

type Encode = fn(&Vec<Book>) -> Vec<u8>;
type Decode = fn(&[u8]) -> Vec<Book>;

const BINCODE: bincode::config::Configuration = bincode::config::standard();

/// Each format's name, encoder and decoder.
const FORMATS: [(&str, Encode, Decode); 6] = [
    (
        "serde_json",
        |v| serde_json::to_vec(v).unwrap(),
        |b| serde_json::from_slice(b).unwrap(),
    ),
    (
        "postcard",
        |v| postcard::to_allocvec(v).unwrap(),
        |b| postcard::from_bytes(b).unwrap(),
    ),
    (
        "rmp_serde_arrays",
        |v| rmp_serde::to_vec(v).unwrap(),
        |b| rmp_serde::from_slice(b).unwrap(),
    ),
    (
        "rmp_serde_maps",
        |v| rmp_serde::to_vec_named(v).unwrap(),
        |b| rmp_serde::from_slice(b).unwrap(),
    ),
    (
        "bincode2_serde",
        |v| bincode::serde::encode_to_vec(v, BINCODE).unwrap(),
        |b| bincode::serde::decode_from_slice(b, BINCODE).unwrap().0,
    ),
    (
        "ciborium",
        |v| {
            let mut out = Vec::new();
            ciborium::into_writer(v, &mut out).unwrap();
            out
        },
        |b| ciborium::from_reader(b).unwrap(),
    ),
];

fn main() {
    let mut criterion = Criterion::default()
        .with_measurement(ThreadCpuTime)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
        .configure_from_args();
    let value = page();

    println!("size of the page of 20 books, in bytes:");
    for (name, encode, decode) in FORMATS {
        let bytes = encode(&value);
        assert_eq!(decode(&bytes), value, "{name} round trip");
        println!("  {name:<18} {}", bytes.len());
    }

    // A value type whose fields changed order between two releases: a
    // format that names fields reads it right, a positional one reads the
    // title as the author without an error (the type's name is unchanged,
    // so the envelope's type check cannot see it).
    let book = &value[..1];
    let by_name: Vec<BookReordered> =
        serde_json::from_slice(&serde_json::to_vec(book).unwrap()).unwrap();
    assert_eq!(
        (&by_name[0].author, &by_name[0].title),
        (&book[0].author, &book[0].title)
    );
    let by_position: Result<Vec<BookReordered>, _> =
        postcard::from_bytes(&postcard::to_allocvec(book).unwrap());
    println!(
        "a reordered struct read back: serde_json author {:?}; postcard {:?}",
        by_name[0].author,
        by_position.map(|books| books[0].author.clone()),
    );

    let mut group = criterion.benchmark_group("value_encoding");
    for (name, encode, decode) in FORMATS {
        let bytes = encode(&value);
        group.bench_function(format!("{name}/encode"), |b| {
            b.iter(|| black_box(encode(black_box(&value))))
        });
        group.bench_function(format!("{name}/decode"), |b| {
            b.iter(|| black_box(decode(black_box(&bytes))))
        });
    }
    group.finish();

    let query = Search {
        branch: "branch-2",
        title: "Sand",
        author: Some("Borges"),
    };
    // What a cache writes for a query declaring `value = Vec<Book>`.
    let value_id = "Vec<Book>";
    let readable = query.readable_key(GENERATION).unwrap();
    let expected = Expected::new(1, value_id, readable.as_str());
    let fresh_until = std::time::SystemTime::now() + Duration::from_secs(600);
    let stored = envelope::encode(&expected, &value, fresh_until, None).unwrap();
    let bare = serde_json::to_vec(&value).unwrap();
    println!(
        "envelope: {} bytes, of which the bare value {}",
        stored.len(),
        bare.len()
    );
    assert_eq!(
        envelope::decode::<Vec<Book>>(&stored, &expected).map(|decoded| decoded.value),
        Ok(value.clone())
    );

    let mut group = criterion.benchmark_group("redis_hit_decode");
    group.bench_function("bare_value", |b| {
        b.iter(|| black_box(serde_json::from_slice::<Vec<Book>>(black_box(&bare)).unwrap()))
    });
    group.bench_function("envelope_checked", |b| {
        b.iter(|| {
            let expected = Expected::new(1, value_id, readable.as_str());
            black_box(envelope::decode::<Vec<Book>>(black_box(&stored), &expected).unwrap())
        })
    });
    group.bench_function("readable_key", |b| {
        b.iter(|| black_box(black_box(&query).readable_key(GENERATION).unwrap()))
    });
    group.bench_function("envelope_checked_with_readable_key", |b| {
        b.iter(|| {
            let readable = black_box(&query).readable_key(GENERATION).unwrap();
            let expected = Expected::new(1, value_id, readable.as_str());
            black_box(envelope::decode::<Vec<Book>>(black_box(&stored), &expected).unwrap())
        })
    });
    group.finish();
    criterion.final_summary();
}
