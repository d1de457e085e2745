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
    pub fn apply(self, field: &str) -> String {
        let words = field.split('_').filter(|w| !w.is_empty());
        match self {
            RenameRule::Lower | RenameRule::Snake => field.to_owned(),
            RenameRule::Upper | RenameRule::ScreamingSnake => field.to_ascii_uppercase(),
            RenameRule::Kebab => field.replace('_', "-"),
            RenameRule::ScreamingKebab => field.replace('_', "-").to_ascii_uppercase(),
            RenameRule::Pascal => words.map(capitalize).collect(),
            RenameRule::Camel => words
                .enumerate()
                .map(|(i, w)| if i == 0 { w.to_owned() } else { capitalize(w) })
                .collect(),
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

/// `SearchBooks` → `search_books`, `HTTPQuery` → `http_query`.
pub fn to_snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_uppercase();
            if i > 0 && (prev_lower || (prev_upper && next_lower)) && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_rules() {
        assert_eq!(RenameRule::Camel.apply("year_from"), "yearFrom");
        assert_eq!(RenameRule::Pascal.apply("year_from"), "YearFrom");
        assert_eq!(RenameRule::Kebab.apply("year_from"), "year-from");
        assert_eq!(RenameRule::ScreamingSnake.apply("year_from"), "YEAR_FROM");
        assert_eq!(RenameRule::ScreamingKebab.apply("year_from"), "YEAR-FROM");
        assert_eq!(RenameRule::Camel.apply("page"), "page");
    }

    #[test]
    fn snake_case_of_type_names() {
        assert_eq!(to_snake_case("Search"), "search");
        assert_eq!(to_snake_case("BranchList"), "branch_list");
        assert_eq!(to_snake_case("HTTPQuery"), "http_query");
        assert_eq!(to_snake_case("Top10Books"), "top10_books");
    }
}
