//! Names that must not reach a key: secrets, volatile inputs, request
//! metadata and personal data.
//!
//! Matching works on the words of a name, never on substrings: `session_token`,
//! `sessionToken`, `x_request_id` and `apiKey` are refused, while `authorName`
//! (`author`), `tokenizer_lang` (`tokenizer`) and `session_year` are not.
//! A name's words come from `_`, `-` and case changes, lowercased; a rule
//! matches a word anywhere, a run of words anywhere, or the last word only
//! (where an earlier word merely qualifies it: `auth_method`, `email_verified`).
//!
//! - **Secrets** are written wherever keys are listed or logged.
//! - **Volatile inputs** differ on every request: every key is unique.
//! - **Request metadata** (`etag`, `user_agent`, `x_forwarded_for`...) rarely
//!   changes the answer but differs between clients and requests, so it splits
//!   one query into many keys and the hit ratio falls; conditional-request
//!   headers (`if_none_match`) belong to the HTTP layer, not the query.
//! - **Personal data** (`email`, `phone`, `iban`, `date_of_birth`...) would sit
//!   in every key listing and log of the cache, where privacy rules never
//!   reach: key by the person's id instead.

/// Why a name is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sensitivity {
    /// The value is a secret: keys are listed and logged.
    Secret,
    /// The value differs on every request: every key would be unique.
    Volatile,
    /// Request metadata: it splits one query into many keys.
    RequestMetadata,
    /// Personal data: keys are listed and logged; key by an id.
    Personal,
}

impl Sensitivity {
    /// Why a name holding `word` must not reach a key, for error messages.
    pub fn why(self, word: &str) -> String {
        match self {
            Self::Secret => format!(
                "`{word}` names a secret, and keys are written wherever they are listed or logged"
            ),
            Self::Volatile => format!(
                "`{word}` names a volatile input: a value that differs on every request makes every key unique and the hit ratio zero"
            ),
            Self::RequestMetadata => format!(
                "`{word}` names request metadata: it rarely changes the answer but differs between clients, so it splits one query into many keys and the hit ratio falls"
            ),
            Self::Personal => format!(
                "`{word}` names personal data, and keys are written wherever they are listed or logged: key by the person's id instead (`user_id`)"
            ),
        }
    }
}

/// How to keep a refused criterion out of the key, for error messages.
pub const CRITERION_FIX: &str = "mark it `#[skip]`, or, if it truly selects the answer and is safe to log, write `#[criterion(allow = \"reason\")]`";

/// Why a tag's value must not be sensitive, for error messages.
pub const TAG_IN_CLEAR: &str = "a tag's value is written in clear into the names of generation counters, listed and logged like keys";

/// The id field to tag in place of `field`, whose words `matched` named
/// personal data: `customer_email` gives `customer_id`, `email` `user_id`.
pub fn id_field_instead(field: &str, matched: &str) -> String {
    let words = words(field);
    let matched = words_of_match(matched);
    let owner: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .take_while(|word| !matched.contains(word))
        .collect();
    match owner.as_slice() {
        [] => "user_id".to_owned(),
        owner => format!("{}_id", owner.join("_")),
    }
}

/// The words of a match as [`classify`] reports it (`date_of_birth`).
fn words_of_match(matched: &str) -> Vec<&str> {
    matched.split('_').collect()
}

/// The words of one kind of sensitive name.
struct Rule {
    sensitivity: Sensitivity,
    /// A name holding any of these words.
    anywhere: &'static [&'static str],
    /// A name holding any of these runs of words.
    runs: &'static [&'static [&'static str]],
    /// A name ending with any of these words.
    last: &'static [&'static str],
}

const RULES: &[Rule] = &[
    Rule {
        sensitivity: Sensitivity::Secret,
        anywhere: &[
            "token",
            "tokens",
            "secret",
            "secrets",
            "password",
            "passwords",
            "passwd",
            "cookie",
            "cookies",
            "credential",
            "credentials",
            "authorization",
            "csrf",
            "nonce",
            "apikey",
        ],
        runs: &[
            &["api", "key"],
            &["private", "key"],
            &["session", "id"],
            &["session", "key"],
        ],
        last: &["session", "auth"],
    },
    Rule {
        sensitivity: Sensitivity::Volatile,
        anywhere: &[
            "timestamp",
            "requestid",
            "traceid",
            "spanid",
            "correlationid",
        ],
        runs: &[
            &["request", "id"],
            &["trace", "id"],
            &["span", "id"],
            &["correlation", "id"],
        ],
        last: &["now"],
    },
    Rule {
        sensitivity: Sensitivity::RequestMetadata,
        // `referer`/`referrer` and `cache_control` are headers about the
        // request, never what it asks; `x_real_ip` and `remote_ip` name the
        // client like `client_ip`.
        anywhere: &["etag", "etags", "useragent", "referer", "referrer"],
        runs: &[
            &["if", "none", "match"],
            &["if", "match"],
            &["if", "modified", "since"],
            &["if", "unmodified", "since"],
            &["user", "agent"],
            &["forwarded", "for"],
            &["real", "ip"],
            &["client", "ip"],
            &["remote", "ip"],
            &["remote", "addr"],
            &["remote", "address"],
            &["cache", "control"],
        ],
        last: &[],
    },
    Rule {
        sensitivity: Sensitivity::Personal,
        // `email` and `phone` only as the last word: `email_verified` and
        // `phone_country` are flags and facets, not the person's data.
        anywhere: &[
            "ssn",
            "iban",
            "dob",
            "cvv",
            "cvc",
            "birthdate",
            "passport",
            "msisdn",
        ],
        runs: &[
            &["card", "number"],
            &["credit", "card"],
            &["date", "of", "birth"],
            &["birth", "date"],
            &["phone", "number"],
            &["mobile", "number"],
            &["email", "address"],
            &["social", "security"],
            &["tax", "id"],
            &["national", "id"],
            &["home", "address"],
            &["street", "address"],
        ],
        last: &["email", "emails", "mail", "phone", "phones", "telephone"],
    },
];

use std::collections::BTreeSet;
use std::sync::OnceLock;

use crate::case::words;

/// Whether `name` (a field name or a criterion name) names something that must
/// not reach a key, and the words that matched.
pub fn classify(name: &str) -> Option<(Sensitivity, String)> {
    let words = words(name);
    // Most names hold no word any rule mentions: one lookup a word says so.
    if !words
        .iter()
        .any(|word| rule_words().contains(word.as_str()))
    {
        return None;
    }
    RULES.iter().find_map(|rule| {
        if let Some(word) = words.iter().find(|w| rule.anywhere.contains(&w.as_str())) {
            return Some((rule.sensitivity, word.clone()));
        }
        for run in rule.runs {
            if let Some(found) = words.windows(run.len()).find(|window| window == run) {
                return Some((rule.sensitivity, found.join("_")));
            }
        }
        let last = words.last().filter(|w| rule.last.contains(&w.as_str()))?;
        Some((rule.sensitivity, last.clone()))
    })
}

/// Every word a rule mentions, anywhere, in a run or last: a name holding none
/// of them matches no rule.
fn rule_words() -> &'static BTreeSet<&'static str> {
    static WORDS: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    WORDS.get_or_init(|| {
        RULES
            .iter()
            .flat_map(|rule| {
                let runs = rule.runs.iter().flat_map(|run| run.iter());
                rule.anywhere.iter().chain(runs).chain(rule.last)
            })
            .copied()
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_names_into_words() {
        assert_eq!(words("session_token"), ["session", "token"]);
        assert_eq!(words("sessionToken"), ["session", "token"]);
        assert_eq!(words("HTTPRequestId"), ["http", "request", "id"]);
        assert_eq!(words("x-request-id"), ["x", "request", "id"]);
        assert_eq!(words("apiKey"), ["api", "key"]);
    }

    #[test]
    fn refuses_secrets_and_volatile_inputs_by_word() {
        for name in [
            "session_token",
            "sessionToken",
            "token",
            "api_key",
            "apiKey",
            "apikey",
            "password",
            "passwd",
            "user_session",
            "session",
            "auth",
            "x_auth",
            "authorization",
            "csrf",
            "csrf_token",
            "nonce",
            "private_key",
            "client_secret",
            "cookie",
            "credentials",
            "session_id",
        ] {
            assert_eq!(
                classify(name).map(|c| c.0),
                Some(Sensitivity::Secret),
                "{name}"
            );
        }
        for name in [
            "request_id",
            "x_request_id",
            "requestId",
            "trace_id",
            "span_id",
            "correlation_id",
            "timestamp",
            "now",
            "fetched_now",
            "traceId",
        ] {
            assert_eq!(
                classify(name).map(|c| c.0),
                Some(Sensitivity::Volatile),
                "{name}"
            );
        }
        for name in [
            "etag",
            "if_none_match",
            "ifNoneMatch",
            "if_modified_since",
            "user_agent",
            "userAgent",
            "x_forwarded_for",
            "client_ip",
            "remote_addr",
            "x_real_ip",
            "referer",
            "cache_control",
        ] {
            assert_eq!(
                classify(name).map(|c| c.0),
                Some(Sensitivity::RequestMetadata),
                "{name}"
            );
        }
        for name in [
            "email",
            "user_email",
            "contactEmail",
            "email_address",
            "phone",
            "phone_number",
            "mobile_number",
            "ssn",
            "iban",
            "card_number",
            "credit_card",
            "date_of_birth",
            "dateOfBirth",
            "dob",
            "birth_date",
            "passport_number",
            "tax_id",
            "national_id",
            "home_address",
        ] {
            assert_eq!(
                classify(name).map(|c| c.0),
                Some(Sensitivity::Personal),
                "{name}"
            );
        }
    }

    #[test]
    fn the_id_to_tag_instead_of_personal_data_is_its_owners() {
        assert_eq!(id_field_instead("customer_email", "email"), "customer_id");
        assert_eq!(id_field_instead("contactEmail", "email"), "contact_id");
        assert_eq!(id_field_instead("email", "email"), "user_id");
        assert_eq!(
            id_field_instead("member_date_of_birth", "date_of_birth"),
            "member_id"
        );
    }

    #[test]
    fn accepts_look_alikes_that_are_words_of_their_own() {
        for name in [
            "authorName",
            "author_name",
            "author",
            "tokenizer_lang",
            "session_year",
            "auth_method",
            "now_playing",
            "known",
            "request_type",
            "id",
            "page",
            "title",
            "keyword",
            "secretary",
            "email_verified",
            "phone_country",
            "mail_order",
            "mobile",
            "address_type",
            "ip_range",
            "agent_name",
            "birth_year",
            "card_type",
            "cached",
            "matches",
        ] {
            assert_eq!(classify(name), None, "{name}");
        }
    }
}
