//! Names that must not reach a key: secrets and volatile inputs.
//!
//! Matching works on the words of a name, never on substrings: `session_token`,
//! `sessionToken`, `x_request_id` and `apiKey` are refused, while `authorName`
//! (`author`), `tokenizer_lang` (`tokenizer`) and `session_year` are not.
//!
//! The line, word by word (a name's words come from `_`, `-` and case changes,
//! lowercased):
//! - secret anywhere: `token(s)`, `secret(s)`, `password(s)`, `passwd`,
//!   `cookie(s)`, `credential(s)`, `authorization`, `csrf`, `nonce`, `apikey`,
//!   and the pairs `api key`, `private key`, `session id`, `session key`;
//! - volatile anywhere: `timestamp`, `requestid`, `traceid`, `spanid`,
//!   `correlationid`, and the pairs `request id`, `trace id`, `span id`,
//!   `correlation id`;
//! - secret as the last word only: `session`, `auth` (`user_session`, `x_auth`);
//!   followed by another word they qualify it (`session_year`, `auth_method`);
//! - volatile as the last word only: `now` (`now`, `fetched_now`, but `now_playing`).

/// Why a name is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sensitivity {
    /// The value is a secret: keys are listed and logged.
    Secret,
    /// The value differs on every request: every key would be unique.
    Volatile,
}

const SECRET_WORDS: &[&str] = &[
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
];
const SECRET_PAIRS: &[[&str; 2]] = &[
    ["api", "key"],
    ["private", "key"],
    ["session", "id"],
    ["session", "key"],
];
const SECRET_LAST_WORDS: &[&str] = &["session", "auth"];

const VOLATILE_WORDS: &[&str] = &[
    "timestamp",
    "requestid",
    "traceid",
    "spanid",
    "correlationid",
];
const VOLATILE_PAIRS: &[[&str; 2]] = &[
    ["request", "id"],
    ["trace", "id"],
    ["span", "id"],
    ["correlation", "id"],
];
const VOLATILE_LAST_WORDS: &[&str] = &["now"];

use crate::case::words;

/// Whether `name` (a field name or a criterion name) names a secret or a
/// volatile input, and the words that matched.
pub fn classify(name: &str) -> Option<(Sensitivity, String)> {
    let words = words(name);
    let rules = [
        (
            Sensitivity::Secret,
            SECRET_WORDS,
            SECRET_PAIRS,
            SECRET_LAST_WORDS,
        ),
        (
            Sensitivity::Volatile,
            VOLATILE_WORDS,
            VOLATILE_PAIRS,
            VOLATILE_LAST_WORDS,
        ),
    ];
    for (sensitivity, anywhere, pairs, last) in rules {
        if let Some(word) = words.iter().find(|w| anywhere.contains(&w.as_str())) {
            return Some((sensitivity, word.clone()));
        }
        if let Some(pair) = words
            .windows(2)
            .find(|pair| pairs.iter().any(|p| p[0] == pair[0] && p[1] == pair[1]))
        {
            return Some((sensitivity, pair.join("_")));
        }
        if let Some(word) = words.last().filter(|w| last.contains(&w.as_str())) {
            return Some((sensitivity, word.clone()));
        }
    }
    None
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
        ] {
            assert_eq!(classify(name), None, "{name}");
        }
    }
}
