//! Name conventions: `rename_all` for criterion names, and the default
//! operation name (the struct's name in snake_case).

/// A `rename_all = "..."` rule, applied to field names (written in snake_case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenameRule {
    Lower,
    Upper,
    Pascal,
    Camel,
    Snake,
    ScreamingSnake,
    Kebab,
    ScreamingKebab,
}

/// Every rule, with the spelling used in the attribute.
pub const RULES: &[(&str, RenameRule)] = &[
    ("lowercase", RenameRule::Lower),
    ("UPPERCASE", RenameRule::Upper),
    ("PascalCase", RenameRule::Pascal),
    ("camelCase", RenameRule::Camel),
    ("snake_case", RenameRule::Snake),
    ("SCREAMING_SNAKE_CASE", RenameRule::ScreamingSnake),
    ("kebab-case", RenameRule::Kebab),
    ("SCREAMING-KEBAB-CASE", RenameRule::ScreamingKebab),
];

impl RenameRule {
    pub fn from_str(rule: &str) -> Option<Self> {
        RULES
            .iter()
            .find(|(name, _)| *name == rule)
            .map(|&(_, rule)| rule)
    }

    /// Applies the rule to a snake_case field name.
    pub fn apply_to_field(self, field: &str) -> String {
        match self {
            // A field name is already lowercase snake_case: keep it byte for
            // byte, as serde does.
            RenameRule::Lower | RenameRule::Snake => field.to_owned(),
            RenameRule::Upper => field.to_ascii_uppercase(),
            _ => self.join(&words(field)),
        }
    }

    /// Applies the rule to a PascalCase variant name.
    pub fn apply_to_variant(self, variant: &str) -> String {
        match self {
            RenameRule::Pascal => variant.to_owned(),
            _ => self.join(&words(variant)),
        }
    }

    fn join(self, words: &[String]) -> String {
        match self {
            RenameRule::Lower => words.concat(),
            RenameRule::Upper => words.concat().to_uppercase(),
            RenameRule::Pascal => words.iter().map(|w| capitalize(w)).collect(),
            RenameRule::Camel => words
                .iter()
                .enumerate()
                .map(|(i, w)| if i == 0 { w.clone() } else { capitalize(w) })
                .collect(),
            RenameRule::Snake => words.join("_"),
            RenameRule::ScreamingSnake => words.join("_").to_uppercase(),
            RenameRule::Kebab => words.join("-"),
            RenameRule::ScreamingKebab => words.join("-").to_uppercase(),
        }
    }
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The lowercased words of an identifier-like name: split at `_`, `-`, `.`,
/// spaces, and case changes (`apiKey` → `api key`, `HTTPRequestId` → `http request id`).
pub fn words(name: &str) -> Vec<String> {
    // Snake case, as most field names are: the words are between the `_`s.
    if name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return name
            .split('_')
            .filter(|word| !word.is_empty())
            .map(str::to_owned)
            .collect();
    }
    let chars: Vec<char> = name.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        let starts_word = c.is_uppercase()
            && i > 0
            && (chars[i - 1].is_lowercase()
                || chars[i - 1].is_ascii_digit()
                || (chars[i - 1].is_uppercase()
                    && chars.get(i + 1).is_some_and(|n| n.is_lowercase())));
        if starts_word && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// `SearchBooks` → `search_books`, `HTTPQuery` → `http_query`.
pub fn to_snake_case(name: &str) -> String {
    words(name).join("_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_rules() {
        assert_eq!(RenameRule::Camel.apply_to_field("year_from"), "yearFrom");
        assert_eq!(RenameRule::Pascal.apply_to_field("year_from"), "YearFrom");
        assert_eq!(RenameRule::Kebab.apply_to_field("year_from"), "year-from");
        assert_eq!(
            RenameRule::ScreamingSnake.apply_to_field("year_from"),
            "YEAR_FROM"
        );
        assert_eq!(
            RenameRule::ScreamingKebab.apply_to_field("year_from"),
            "YEAR-FROM"
        );
        assert_eq!(RenameRule::Camel.apply_to_field("page"), "page");
        assert_eq!(RenameRule::Snake.apply_to_variant("TitleAsc"), "title_asc");
        assert_eq!(RenameRule::Lower.apply_to_variant("TitleAsc"), "titleasc");
        assert_eq!(RenameRule::Camel.apply_to_variant("TitleAsc"), "titleAsc");
        assert_eq!(
            RenameRule::ScreamingKebab.apply_to_variant("TitleAsc"),
            "TITLE-ASC"
        );
    }

    #[test]
    fn snake_case_of_type_names() {
        assert_eq!(to_snake_case("Search"), "search");
        assert_eq!(to_snake_case("BranchList"), "branch_list");
        assert_eq!(to_snake_case("HTTPQuery"), "http_query");
        assert_eq!(to_snake_case("Top10Books"), "top10_books");
        assert_eq!(to_snake_case("search"), "search");
    }
}
