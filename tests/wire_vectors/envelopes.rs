//! The `envelopes` section of the wire vectors: fields (tags included) to
//! exact bytes, and bytes to a hit or a miss reason, as the crate writes and
//! reads them.

use super::*;

/// A fixed time entries are fresh until: 2026-12-01T00:00:00Z, in ms.
const FRESH: u64 = 1_796_083_200_000;

fn readable<Q: CacheKey>(query: &Q, generation: u64) -> String {
    query
        .readable_key(generation)
        .expect("a readable key")
        .to_string()
}

fn encode_vector<T: Serialize>(
    name: &str,
    schema: u32,
    value_id: &str,
    readable_key: &str,
    value: &T,
) -> Value {
    encode_stamped(name, schema, value_id, readable_key, value, None, None)
}

/// An envelope with a value's tags and when its fill began, and its query's
/// own tags: the vector holds them as the envelope does (`tags`, `since`,
/// `qtags`), when it has them.
fn encode_stamped<T: Serialize>(
    name: &str,
    schema: u32,
    value_id: &str,
    readable_key: &str,
    value: &T,
    stamp: Option<&TagStamp>,
    query_tags: Option<&Tags>,
) -> Value {
    let mut expected = Expected::new(schema, value_id, readable_key);
    if let Some(query_tags) = query_tags {
        expected = expected.with_query_tags(query_tags);
    }
    let bytes = envelope::encode(
        &expected,
        value,
        UNIX_EPOCH + Duration::from_millis(FRESH),
        stamp,
    )
    .expect("an envelope");
    let mut vector = json!({
        "name": name, "schema": schema, "value_id": value_id, "readable_key": readable_key,
        "query_digest": expected.query_digest(), "fresh": FRESH,
        // The value as serde_json writes it, so that a port parses it with
        // its fields in this order.
        "value_json": serde_json::to_string(value).expect("JSON"),
        "bytes": String::from_utf8(bytes).expect("envelopes are UTF-8"),
    });
    if let Some(stamp) = stamp {
        vector["tags"] = stamp_json(stamp)["tags"].clone();
        vector["since"] = stamp_json(stamp)["since"].clone();
    }
    if let Some(query_tags) = query_tags {
        vector["qtags"] = json!(query_tags.as_str().lines().collect::<Vec<_>>());
    }
    vector
}

/// A stamp as the envelope writes it: `{"tags": [...], "since": [t, g]}`.
fn stamp_json(stamp: &TagStamp) -> Value {
    let tags: Vec<&str> = stamp.tags.as_str().lines().collect();
    json!({ "tags": tags, "since": [stamp.since.tenant, stamp.since.global] })
}

fn reason(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::ValueType => "value_type",
        RejectReason::Query => "query",
        RejectReason::Schema => "schema",
        RejectReason::Version => "version",
        RejectReason::Undecodable => "undecodable",
        RejectReason::WrongType => "wrong_type",
        other => panic!("a reason the vectors do not name: {other:?}"),
    }
}

/// What a reader expecting `(schema, value_id, readable_key)` makes of
/// `bytes`, read as any JSON value.
fn decode_vector(
    name: &str,
    schema: u32,
    value_id: &str,
    readable_key: &str,
    bytes: &[u8],
) -> Value {
    let expected = Expected::new(schema, value_id, readable_key);
    let answer = match envelope::decode::<Value>(bytes, &expected) {
        Ok(decoded) => {
            let fresh = decoded
                .fresh_until
                .duration_since(UNIX_EPOCH)
                .expect("after 1970")
                .as_millis();
            let mut hit =
                json!({ "value": decoded.value, "fresh": u64::try_from(fresh).expect("a u64") });
            if let Some(stamp) = &decoded.tags {
                let stamp = stamp_json(stamp);
                hit["tags"] = stamp["tags"].clone();
                hit["since"] = stamp["since"].clone();
            }
            json!({ "hit": hit })
        }
        Err(why) => json!({ "miss": reason(why) }),
    };
    let mut vector = json!({
        "name": name, "schema": schema, "value_id": value_id, "readable_key": readable_key,
    });
    match std::str::from_utf8(bytes) {
        Ok(text) => vector["bytes"] = json!(text),
        Err(_) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            vector["bytes_hex"] = json!(hex);
        }
    }
    vector
        .as_object_mut()
        .expect("an object")
        .extend(answer.as_object().expect("an object").clone());
    vector
}

pub(super) fn envelopes() -> (Vec<Value>, Vec<Value>) {
    let dune = Search {
        branch: 2,
        title: "Dune".into(),
    };
    let dune_key = readable(&dune, 207_360_000_000_018);
    let books = vec![
        Book {
            title: "Dune".into(),
            year: 1965,
            subtitle: None,
        },
        Book {
            title: "Ficciones".into(),
            year: 1944,
            subtitle: Some("Tl\u{f6}n, Uqbar".into()),
        },
    ];
    let long = Lookup {
        account: "t%20x".into(),
        who: "jane.doe@example.com".into(),
        text: "Jane Doe, who asked about the invoice of March and its second reminder".into(),
    };
    let long_key = readable(&long, 15);
    let all_key = readable(&Countries { region: None }, 9);
    let awkward = "quote \" backslash \\ slash / newline \n tab \t nul \u{0} unit \u{1f} del \u{7f} \
                   \u{e9} \u{2028} \u{1f600} </script>";
    let mut encode = vec![
        encode_vector("a page of books", 1, Search::VALUE_ID, &dune_key, &books),
        encode_vector(
            "no books",
            1,
            Search::VALUE_ID,
            &dune_key,
            &Vec::<Book>::new(),
        ),
        encode_vector(
            "a declared value id, a global query",
            1,
            Countries::VALUE_ID,
            &all_key,
            &195u64,
        ),
        encode_vector(
            "the largest integer a double holds",
            1,
            Countries::VALUE_ID,
            &all_key,
            &9_007_199_254_740_991u64,
        ),
        encode_vector(
            "text JSON must escape, summarized key",
            2,
            Lookup::VALUE_ID,
            &long_key,
            &awkward,
        ),
        encode_vector("none", 1, "Option<String>", &all_key, &None::<String>),
        encode_vector(
            "nested, negative and float",
            1,
            "Stats",
            &all_key,
            &json!({ "ok": true, "n": -3, "ratio": 0.25, "tags": ["a", null] }),
        ),
    ];

    let fiction = Shelf {
        branch: 2,
        term: "fiction".into(),
    };
    let fiction_key = readable(&fiction, 218_937_600_000_042);
    let items = vec![item(42, "Borges"), item(7, "Le Guin"), item(1965, "Borges")];
    let mut tags = Tags::new();
    Shelf::write_value_tags(&items, &mut tags).expect("tags");
    tags.dedup();
    let since = TagClock {
        tenant: 218_937_600_000_000,
        global: 218_937_600_000_123,
    };
    let stamp = TagStamp { tags, since };
    let asked_books = ByIds {
        branch: 2,
        ids: vec![42, 7, 42],
        author: Some("Borges, J.L.".into()),
    };
    let mut asked_tags = Tags::new();
    asked_books.write_query_tags(&mut asked_tags).expect("tags");
    encode.extend([
        encode_stamped(
            "tagged: books inside the branch, authors of every branch",
            1,
            Shelf::VALUE_ID,
            &fiction_key,
            &items,
            Some(&stamp),
            None,
        ),
        encode_stamped(
            "an answer without tags has neither tags nor since",
            1,
            Shelf::VALUE_ID,
            &fiction_key,
            &Vec::<Item>::new(),
            Some(&TagStamp {
                tags: Tags::new(),
                since,
            }),
            None,
        ),
        encode_stamped(
            "tagged by its query (qtags, repeats kept) and by its value",
            1,
            Shelf::VALUE_ID,
            &readable(&asked_books, 218_937_600_000_042),
            &items,
            Some(&stamp),
            Some(&asked_tags),
        ),
    ]);

    let good = encode_vector("good", 1, Search::VALUE_ID, &dune_key, &books);
    let good_bytes = good["bytes"].as_str().expect("bytes").to_owned();
    let good_json: Value = serde_json::from_str(&good_bytes).expect("JSON");
    // The good envelope with `field` set to `value` (fields in serde_json's
    // order of a map: sorted, which a reader must accept as well).
    let with = |field: &str, value: Value| {
        let mut entry = good_json.clone();
        entry[field] = value;
        entry.to_string().into_bytes()
    };
    let without = |field: &str| {
        let mut entry = good_json.clone();
        entry.as_object_mut().expect("an object").remove(field);
        entry.to_string().into_bytes()
    };
    let other_digest = Expected::new(1, Search::VALUE_ID, &readable(&dune, 207_360_000_000_017))
        .query_digest()
        .to_owned();
    let expect =
        |name: &str, bytes: &[u8]| decode_vector(name, 1, Search::VALUE_ID, &dune_key, bytes);
    let mut invalid_utf8 = good_bytes.clone().into_bytes();
    let at = good_bytes.find("Dune").expect("a title");
    invalid_utf8[at + 1] = 0xff;
    let decode = vec![
        expect("as written", good_bytes.as_bytes()),
        expect(
            "the query's own tags recorded (qtags): a reader ignores them",
            &with("qtags", json!(["#title=Dune", "@shop=7"])),
        ),
        expect("fields sorted", &with("v", json!(envelope::VERSION))),
        expect(
            "an unknown field is ignored",
            &with("x-writer", json!("node")),
        ),
        expect(
            "white space around",
            format!(" \n{good_bytes}\t ").as_bytes(),
        ),
        expect(
            "fresh in the past is still this entry (freshness is the reader's clock)",
            &with("fresh", json!(1)),
        ),
        expect("version 5", &with("v", json!(5))),
        expect(
            "version 3 (no tags: it would serve a tagged entry after a bump)",
            &with("v", json!(3)),
        ),
        expect("version 2", &with("v", json!(2))),
        expect("version 1", &with("v", json!(1))),
        expect("a newer version with nothing else", br#"{"v":5}"#),
        expect(
            "a newer version, other fields of other types",
            br#"{"v":9,"schema":"one","value":1}"#,
        ),
        expect("another schema", &with("schema", json!(2))),
        expect("another value id", &with("type", json!("u64"))),
        expect(
            "another value id, differing in case",
            &with("type", json!("vec<book>")),
        ),
        expect("another query", &with("query", json!(other_digest))),
        expect(
            "the digest in uppercase",
            &with(
                "query",
                json!(
                    good_json["query"]
                        .as_str()
                        .expect("a digest")
                        .to_uppercase()
                ),
            ),
        ),
        expect("garbage", b"\xff\x00not json"),
        expect("empty", b""),
        expect("a bare value", br#"[{"title":"Dune"}]"#),
        expect("null", b"null"),
        expect("version 3 alone", br#"{"v":3}"#),
        expect("version 4 alone", br#"{"v":4}"#),
        expect("no header, a value", br#"{"v":4,"value":[]}"#),
        expect("no fresh", &without("fresh")),
        expect("no value", &without("value")),
        expect("no schema", &without("schema")),
        expect("no type", &without("type")),
        expect("no v", &without("v")),
        expect("v as text", &with("v", json!("3"))),
        expect("v negative", &with("v", json!(-3))),
        expect("v past u32", &with("v", json!(4_294_967_299u64))),
        expect("v a boolean", &with("v", json!(true))),
        expect("schema as text", &with("schema", json!("1"))),
        expect("schema null", &with("schema", Value::Null)),
        expect("type null", &with("type", Value::Null)),
        expect("type a number", &with("type", json!(3))),
        expect("query null", &with("query", Value::Null)),
        expect("fresh as text", &with("fresh", json!("1796083200000"))),
        expect("fresh negative", &with("fresh", json!(-1))),
        expect("fresh not whole", &with("fresh", json!(1.5))),
        expect(
            "value null (any JSON is a value here)",
            &with("value", Value::Null),
        ),
        expect(
            "text after the envelope",
            format!("{good_bytes}x").as_bytes(),
        ),
        expect(
            "two envelopes",
            format!("{good_bytes}{good_bytes}").as_bytes(),
        ),
        expect("bytes that are not UTF-8 in a string", &invalid_utf8),
        expect(
            "a byte order mark",
            format!("\u{feff}{good_bytes}").as_bytes(),
        ),
    ];

    // Tags: the good envelope with `tags` and `since` set (`None`: left out).
    let tagged = |tags: Option<Value>, since: Option<Value>| {
        let mut entry = good_json.clone();
        for (field, value) in [("tags", tags), ("since", since)] {
            if let Some(value) = value {
                entry[field] = value;
            }
        }
        entry.to_string().into_bytes()
    };
    let since = json!([218_937_600_000_000u64, 218_937_600_000_123u64]);
    let stamped = encode_stamped(
        "stamped",
        1,
        Search::VALUE_ID,
        &dune_key,
        &books,
        Some(&stamp),
        None,
    );
    let stamped_bytes = stamped["bytes"].as_str().expect("bytes").to_owned();
    let both = |name, tags: Value, since: Value| (name, Some(tags), Some(since));
    let book = || json!(["#book=42"]);
    let tag_cases: Vec<(&str, Option<Value>, Option<Value>)> = vec![
        both(
            "tags read as they are, unsorted and repeated",
            json!(["@author=Borges", "#book=7", "#book=7"]),
            since.clone(),
        ),
        both("an empty list of tags", json!([]), since.clone()),
        both(
            "every character a tag may hold",
            json!(["#AZaz09-_.!~*'()%=%C3%A9", "@a=b"]),
            // The largest a double holds exactly (JavaScript reads past it inexactly).
            json!([0, 9_007_199_254_740_991u64]),
        ),
        ("tags without since", Some(book()), None),
        ("since without tags", None, Some(since.clone())),
        both("tags null, since null", Value::Null, Value::Null),
        (
            "tags null, since given",
            Some(Value::Null),
            Some(since.clone()),
        ),
        ("tags given, since null", Some(book()), Some(Value::Null)),
        both("tags a string", json!("#book=42"), since.clone()),
        both("tags an object", json!({ "book": 42 }), since.clone()),
        both("a tag not a string", json!([42]), since.clone()),
        both("a tag null", json!([null]), since.clone()),
        both("an empty tag", json!([""]), since.clone()),
        both("a tag without its mark", json!(["book=42"]), since.clone()),
        both(
            "a tag with another mark",
            json!(["$book=42"]),
            since.clone(),
        ),
        both("a mark alone", json!(["#"]), since.clone()),
        both("a tag without =", json!(["#book"]), since.clone()),
        both("a tag without a name", json!(["#=42"]), since.clone()),
        both("a tag without a value", json!(["#book="]), since.clone()),
        both("a tag with two =", json!(["#a=b=c"]), since.clone()),
        both("a tag with a space", json!(["#bo ok=42"]), since.clone()),
        both(
            "a tag with a line break",
            json!(["#book=4\n#x=1"]),
            since.clone(),
        ),
        both(
            "a tag ending with a line break",
            json!(["#book=42\n"]),
            since.clone(),
        ),
        both("a tag with a raw #", json!(["#book=4#2"]), since.clone()),
        both("a tag with a raw @", json!(["#a@b=1"]), since.clone()),
        both(
            "a tag with a raw comma",
            json!(["#book=4,2"]),
            since.clone(),
        ),
        both(
            "a tag with a raw brace",
            json!(["#book={42}"]),
            since.clone(),
        ),
        both(
            "a tag with non-ASCII text",
            json!(["#book=\u{e9}"]),
            since.clone(),
        ),
        both(
            "one bad tag among good ones",
            json!(["#book=42", "#x"]),
            since.clone(),
        ),
        both("since with one number", book(), json!([1])),
        both("since with three numbers", book(), json!([1, 2, 3])),
        both("since empty", book(), json!([])),
        both("since a number", book(), json!(1)),
        both(
            "since an object",
            book(),
            json!({ "tenant": 1, "global": 2 }),
        ),
        both("since as text", book(), json!(["1", "2"])),
        both("since negative", book(), json!([-1, 2])),
        both("since not whole", book(), json!([1.5, 2])),
        both("since a boolean", book(), json!([true, 2])),
        both("since null inside", book(), json!([null, 2])),
    ];
    let mut decode = decode;
    decode.push(expect("tagged, as written", stamped_bytes.as_bytes()));
    decode.extend(
        tag_cases
            .into_iter()
            .map(|(name, tags, since)| expect(name, &tagged(tags, since))),
    );
    // Past u64: no integer type of serde_json's holds it, so written by hand.
    let past_u64 = String::from_utf8(tagged(Some(book()), Some(json!([1, 2])))).expect("UTF-8");
    decode.push(expect(
        "since past u64",
        past_u64
            .replace("[1,2]", "[18446744073709551616,2]")
            .as_bytes(),
    ));
    let mut tagged_v3: Value = serde_json::from_str(&stamped_bytes).expect("JSON");
    tagged_v3["v"] = json!(3);
    let mut bad_tag_other_schema = tagged_v3.clone();
    bad_tag_other_schema["v"] = json!(envelope::VERSION);
    bad_tag_other_schema["schema"] = json!(2);
    bad_tag_other_schema["tags"] = json!(["book=42"]);
    let mut bad_since_other_type = bad_tag_other_schema.clone();
    bad_since_other_type["schema"] = json!(1);
    bad_since_other_type["type"] = json!("u64");
    bad_since_other_type["since"] = json!("now");
    decode.extend([
        expect(
            "a tagged entry of version 3",
            tagged_v3.to_string().as_bytes(),
        ),
        expect(
            "bad tags under another schema: the schema first",
            bad_tag_other_schema.to_string().as_bytes(),
        ),
        expect(
            "a bad since under another value id: the value id first",
            bad_since_other_type.to_string().as_bytes(),
        ),
    ]);
    (encode, decode)
}
