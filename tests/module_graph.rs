//! No import cycle between the modules of a crate: imports run one way, so
//! each module can be read knowing only the modules it imports.
//!
//! The graph is read from the source text, without a parser dependency. An
//! edge is a path into another module of the crate, in a `use` item
//! (`use crate::a::B`, `use super::*`, `use child::C`) or in code
//! (`crate::a::f()`, `child::f()`). A `mod` declaration is not an edge: a
//! parent that declares a child imports nothing from it. `crate::Name` leads
//! to the module the crate root brings `Name` in from, as the root only hands
//! it on. Each file is one node; an inline `mod` block belongs to its file.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// The `src` folders that must have no import cycle, from the workspace root.
const CRATES: &[&str] = &[
    "cache-key-derive/src",
    "cache-key/src",
    "cache-key/format/src",
    "cache-key-pg/src",
];

/// At most this many cycles are listed for one crate.
const MOST_CYCLES: usize = 50;

#[test]
fn no_import_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut reports = String::new();
    for dir in CRATES {
        let graph = Graph::from_sources(&read_sources(&root.join(dir)));
        let cycles = graph.cycles();
        if !cycles.is_empty() {
            write!(
                reports,
                "{dir} has import cycles:\n{}",
                graph.describe(&cycles)
            )
            .unwrap();
        }
    }
    assert!(reports.is_empty(), "{reports}");
}

/// Every `.rs` file under `dir`: its path from `dir` (with `/`) and its text.
fn read_sources(dir: &Path) -> Vec<(String, String)> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_str().unwrap();
            if path.is_dir() {
                walk(&path, &format!("{prefix}{name}/"), out);
            } else if name.ends_with(".rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((format!("{prefix}{name}"), text));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out);
    assert!(!out.is_empty(), "no .rs file under {}", dir.display());
    out
}

/// A module's path from the crate root: `[]` is the root, `["expand", "key"]`
/// is `expand::key`.
type ModPath = Vec<String>;

/// Where an edge is written: the file, the line and the path.
struct Site {
    file: String,
    line: usize,
    path: String,
}

struct Graph {
    /// The module of each file.
    files: BTreeSet<ModPath>,
    /// `from -> to`, with the first place each edge is written.
    edges: BTreeMap<ModPath, BTreeMap<ModPath, Site>>,
}

impl Graph {
    fn from_sources(sources: &[(String, String)]) -> Graph {
        let parsed: Vec<(ModPath, &str, Vec<Token>)> = sources
            .iter()
            .map(|(file, text)| (module_of_file(file), file.as_str(), tokenize(text)))
            .collect();
        let files: BTreeSet<ModPath> = parsed.iter().map(|(module, _, _)| module.clone()).collect();
        let (_, _, root) = parsed
            .iter()
            .find(|(module, _, _)| module.is_empty())
            .expect("a crate root: lib.rs or main.rs");
        let reexports = root_reexports(root, &files);
        let resolver = Resolver {
            files: &files,
            reexports: &reexports,
        };
        let mut edges: BTreeMap<ModPath, BTreeMap<ModPath, Site>> = BTreeMap::new();
        for (module, file, tokens) in &parsed {
            for (scope, path, line) in paths(module, tokens) {
                let Some(target) = resolver.resolve(&scope, &path) else {
                    continue;
                };
                if target != *module {
                    let site = Site {
                        file: file.to_string(),
                        line,
                        path: path.join("::"),
                    };
                    edges
                        .entry(module.clone())
                        .or_default()
                        .entry(target)
                        .or_insert(site);
                }
            }
        }
        Graph { files, edges }
    }

    /// The elementary cycles (up to [`MOST_CYCLES`]), each starting at its
    /// least module, shortest first.
    fn cycles(&self) -> Vec<Vec<ModPath>> {
        // Extends `path` through modules no less than its start, so each
        // cycle is found once, from its least module.
        fn extend(
            graph: &Graph,
            start: &ModPath,
            path: &mut Vec<ModPath>,
            found: &mut Vec<Vec<ModPath>>,
        ) {
            let Some(next) = graph.edges.get(path.last().unwrap()) else {
                return;
            };
            for to in next.keys().filter(|to| *to >= start) {
                if found.len() == MOST_CYCLES {
                    return;
                }
                if to == start {
                    found.push(path.clone());
                } else if !path.contains(to) {
                    path.push(to.clone());
                    extend(graph, start, path, found);
                    path.pop();
                }
            }
        }
        let mut found = Vec::new();
        for start in &self.files {
            extend(self, start, &mut vec![start.clone()], &mut found);
        }
        found.sort_by_key(Vec::len);
        found
    }

    /// The cycles spelled out, each edge with where it is written.
    fn describe(&self, cycles: &[Vec<ModPath>]) -> String {
        let mut out = String::new();
        for cycle in cycles {
            let names: Vec<String> = cycle.iter().chain(&cycle[..1]).map(name).collect();
            writeln!(out, "  {}", names.join(" -> ")).unwrap();
            for (i, from) in cycle.iter().enumerate() {
                let to = &cycle[(i + 1) % cycle.len()];
                let Site { file, line, path } = &self.edges[from][to];
                let (from, to) = (name(from), name(to));
                writeln!(out, "    {from} -> {to}: {file}:{line} `{path}`").unwrap();
            }
        }
        if cycles.len() == MOST_CYCLES {
            writeln!(out, "  (the first {MOST_CYCLES} cycles)").unwrap();
        }
        out
    }
}

fn name(module: &ModPath) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// `lib.rs` is `[]`, `a.rs` and `a/mod.rs` are `["a"]`, `a/b.rs` is `["a", "b"]`.
fn module_of_file(file: &str) -> ModPath {
    let mut parts: ModPath = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if let [only] = parts.as_slice()
        && (only == "lib" || only == "main")
    {
        parts.clear();
    }
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts
}

struct Resolver<'g> {
    files: &'g BTreeSet<ModPath>,
    reexports: &'g BTreeMap<String, ModPath>,
}

impl Resolver<'_> {
    /// The file module a path written in `scope` points into, or `None` for a
    /// path outside the crate (another crate, a local item).
    fn resolve(&self, scope: &[String], path: &[String]) -> Option<ModPath> {
        let (mut base, mut rest): (ModPath, &[String]) = match path.first()?.as_str() {
            "crate" | "$crate" => (Vec::new(), &path[1..]),
            "self" | "super" => (scope.to_vec(), path),
            _ if self.is_file(&[scope, &path[..1]].concat()) => (scope.to_vec(), path),
            _ => return None,
        };
        while let Some(step) = rest.first().filter(|s| *s == "self" || *s == "super") {
            if step == "super" {
                base.pop();
            }
            rest = &rest[1..];
        }
        if base.is_empty()
            && let Some(name) = rest.first()
            && !self.is_file(std::slice::from_ref(name))
            && let Some(module) = self.reexports.get(name)
        {
            return Some(module.clone());
        }
        // The longest prefix that is a file: inline modules and items belong to it.
        let mut module = [base, rest.to_vec()].concat();
        while !self.is_file(&module) {
            module.pop();
        }
        Some(module)
    }

    fn is_file(&self, module: &[String]) -> bool {
        self.files.contains(module)
    }
}

/// The names the crate root's own `use` items bring in from the crate's
/// modules (`pub use crate::a::B;`, `use a::{B as C};`), each with its module.
fn root_reexports(tokens: &[Token], files: &BTreeSet<ModPath>) -> BTreeMap<String, ModPath> {
    let resolver = Resolver {
        files,
        reexports: &BTreeMap::new(),
    };
    let mut names = BTreeMap::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i].kind {
            Kind::Open('{') => depth += 1,
            Kind::Close('}') => depth = depth.saturating_sub(1),
            Kind::Ident(word) if word == "use" && depth == 0 => {
                let (leaves, next) = use_tree(tokens, i + 1);
                for leaf in leaves {
                    let Some(module) = resolver.resolve(&[], &leaf.path) else {
                        continue;
                    };
                    match leaf.binds {
                        Binds::Name(name) => {
                            names.insert(name, module);
                        }
                        Binds::Glob => panic!(
                            "the crate root imports `{}::*`: name the items, so that `crate::Name` can be traced to its module",
                            leaf.path.join("::")
                        ),
                    }
                }
                i = next;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    names
}

/// Every path in `tokens` that may lead into a module of the crate, with the
/// scope it is written in (the file's module and the inline `mod` blocks
/// around it) and its line.
fn paths(module: &ModPath, tokens: &[Token]) -> Vec<(ModPath, Vec<String>, usize)> {
    let mut found = Vec::new();
    // The inline `mod` blocks around the current token, with the depth each opened at.
    let mut inline: Vec<(&str, usize)> = Vec::new();
    let scope = |inline: &[(&str, usize)]| -> ModPath {
        let inline = inline.iter().map(|(name, _)| name.to_string());
        module.iter().cloned().chain(inline).collect()
    };
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i].kind {
            Kind::Open('{') => depth += 1,
            Kind::Close('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|&(_, open)| open == depth) {
                    inline.pop();
                }
            }
            Kind::Ident(word) if word == "mod" => {
                if let (Some(Kind::Ident(name)), Some(Kind::Open('{'))) =
                    (kind_at(tokens, i + 1), kind_at(tokens, i + 2))
                {
                    inline.push((name, depth));
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Kind::Ident(word) if word == "use" => {
                let (leaves, next) = use_tree(tokens, i + 1);
                let scope = scope(&inline);
                found.extend(
                    leaves
                        .into_iter()
                        .map(|leaf| (scope.clone(), leaf.path, leaf.line)),
                );
                i = next;
                continue;
            }
            Kind::Ident(_) if starts_path(tokens, i) => {
                let mut path = Vec::new();
                let mut j = i;
                while let Some(Kind::Ident(segment)) = kind_at(tokens, j) {
                    path.push(segment.clone());
                    if kind_at(tokens, j + 1) != Some(&Kind::PathSep) {
                        break;
                    }
                    j += 2;
                }
                found.push((scope(&inline), path, tokens[i].line));
                i = j;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// Whether the identifier at `i` starts a path of two or more segments in
/// code: not after `::`, not a `quote!` interpolation (`#name::`), not a
/// visibility (`pub(in crate::a)`).
fn starts_path(tokens: &[Token], i: usize) -> bool {
    let before = |n: usize| i.checked_sub(n).and_then(|at| kind_at(tokens, at));
    let visibility = matches!(before(1), Some(Kind::Ident(word)) if word == "in")
        && before(2) == Some(&Kind::Open('('));
    kind_at(tokens, i + 1) == Some(&Kind::PathSep)
        && !matches!(before(1), Some(Kind::PathSep | Kind::Punct('#')))
        && !visibility
}

fn kind_at(tokens: &[Token], i: usize) -> Option<&Kind> {
    tokens.get(i).map(|token| &token.kind)
}

/// What a leaf of a `use` tree brings into scope.
enum Binds {
    Name(String),
    Glob,
}

/// One leaf of a `use` tree: `use a::{b::C, d as E, self}` has `a::b::C`,
/// `a::d` (bound as `E`) and `a`.
struct Leaf {
    path: Vec<String>,
    binds: Binds,
    line: usize,
}

/// The leaves of the `use` tree that starts at `start`, and the index of the
/// first token after it. A tree that does not start with a path of this crate
/// (`use ::other::X`, `use #path as name` inside `quote!`) has none.
fn use_tree(tokens: &[Token], start: usize) -> (Vec<Leaf>, usize) {
    fn tree(tokens: &[Token], i: &mut usize, prefix: &[String], leaves: &mut Vec<Leaf>) {
        let mut path = prefix.to_vec();
        while let Some(Kind::Ident(segment)) = kind_at(tokens, *i) {
            path.push(segment.clone());
            *i += 1;
            if kind_at(tokens, *i) != Some(&Kind::PathSep) {
                let line = tokens[*i - 1].line;
                let mut binds = segment.clone();
                if let (Some(Kind::Ident(word)), Some(Kind::Ident(alias))) =
                    (kind_at(tokens, *i), kind_at(tokens, *i + 1))
                    && word == "as"
                {
                    binds = alias.clone();
                    *i += 2;
                }
                if path.last().is_some_and(|last| last == "self") {
                    path.pop();
                    if binds == "self" {
                        binds = path.last().cloned().unwrap_or_default();
                    }
                }
                let binds = Binds::Name(binds);
                leaves.push(Leaf { path, binds, line });
                return;
            }
            *i += 1;
        }
        let line = tokens.get(*i).map_or(0, |token| token.line);
        match kind_at(tokens, *i) {
            Some(Kind::Punct('*')) => {
                *i += 1;
                let binds = Binds::Glob;
                leaves.push(Leaf { path, binds, line });
            }
            Some(Kind::Open('{')) => {
                *i += 1;
                while !matches!(kind_at(tokens, *i), Some(Kind::Close('}')) | None) {
                    tree(tokens, i, &path, leaves);
                    if kind_at(tokens, *i) != Some(&Kind::Punct(',')) {
                        break;
                    }
                    *i += 1;
                }
                *i += 1;
            }
            _ => {}
        }
    }
    let mut leaves = Vec::new();
    let mut i = start;
    if let Some(Kind::Ident(_) | Kind::Open('{')) = kind_at(tokens, i) {
        tree(tokens, &mut i, &[], &mut leaves);
    }
    (leaves, i)
}

#[derive(Debug, PartialEq)]
enum Kind {
    /// An identifier or keyword (`r#` dropped; `$crate` kept whole).
    Ident(String),
    /// `::`
    PathSep,
    Open(char),
    Close(char),
    /// Any other punctuation. Literals, lifetimes and comments leave no token.
    Punct(char),
}

struct Token {
    kind: Kind,
    line: usize,
}

/// The tokens the graph needs: identifiers, `::`, brackets and punctuation,
/// each with its line.
fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let is_ident = |c: char| c == '_' || c.is_alphanumeric();
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0, 1);
    // Moves `i` past the closing `quote` of a literal opened at `i`.
    let skip_quoted = |i: &mut usize, line: &mut usize, quote: char| {
        *i += 1;
        while *i < chars.len() && chars[*i] != quote {
            *i += usize::from(chars[*i] == '\\');
            *line += usize::from(at(*i) == '\n');
            *i += 1;
        }
        *i += 1;
    };
    while i < chars.len() {
        let c = chars[i];
        let mut push = |kind: Kind| tokens.push(Token { kind, line });
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            _ if c.is_whitespace() => i += 1,
            '/' if at(i + 1) == '/' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => {
                let mut nesting = 0;
                while i < chars.len() {
                    match (chars[i], at(i + 1)) {
                        ('/', '*') => {
                            nesting += 1;
                            i += 2;
                        }
                        ('*', '/') => {
                            nesting -= 1;
                            i += 2;
                            if nesting == 0 {
                                break;
                            }
                        }
                        (c, _) => {
                            line += usize::from(c == '\n');
                            i += 1;
                        }
                    }
                }
            }
            '"' => skip_quoted(&mut i, &mut line, '"'),
            // A char literal (`'x'`, `'\n'`); otherwise a lifetime's quote, skipped alone.
            '\'' if at(i + 1) == '\\' || at(i + 2) == '\'' => skip_quoted(&mut i, &mut line, '\''),
            '\'' => i += 1,
            ':' if at(i + 1) == ':' => {
                push(Kind::PathSep);
                i += 2;
            }
            '$' if chars[i + 1..].starts_with(&['c', 'r', 'a', 't', 'e'])
                && !is_ident(at(i + 6)) =>
            {
                push(Kind::Ident("$crate".to_owned()));
                i += 6;
            }
            _ if c.is_ascii_digit() => {
                while is_ident(at(i)) || (at(i) == '.' && at(i + 1).is_ascii_digit()) {
                    i += 1;
                }
            }
            _ if is_ident(c) => {
                let start = i;
                while is_ident(at(i)) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let raw = matches!(word.as_str(), "r" | "br" | "cr");
                if raw && (at(i) == '"' || (at(i) == '#' && matches!(at(i + 1), '#' | '"'))) {
                    // `r"..."`, `r#"..."#`: ends at the quote with as many `#`.
                    let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
                    let close: Vec<char> = std::iter::once('"')
                        .chain(std::iter::repeat_n('#', hashes))
                        .collect();
                    i += hashes + 1;
                    while i < chars.len() && !chars[i..].starts_with(&close) {
                        line += usize::from(chars[i] == '\n');
                        i += 1;
                    }
                    i += close.len();
                } else if word == "r" && at(i) == '#' {
                    // A raw identifier: `r#type` is `type`.
                    let start = i + 1;
                    i = start;
                    while is_ident(at(i)) {
                        i += 1;
                    }
                    push(Kind::Ident(chars[start..i].iter().collect()));
                } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                    skip_quoted(&mut i, &mut line, '"');
                } else if word == "b" && at(i) == '\'' {
                    skip_quoted(&mut i, &mut line, '\'');
                } else {
                    push(Kind::Ident(word));
                }
            }
            '{' | '(' | '[' => {
                push(Kind::Open(c));
                i += 1;
            }
            '}' | ')' | ']' => {
                push(Kind::Close(c));
                i += 1;
            }
            _ => {
                push(Kind::Punct(c));
                i += 1;
            }
        }
    }
    tokens
}

/// The reader itself, on made-up crates.
mod reader {
    use super::*;

    fn graph(files: &[(&str, &str)]) -> Graph {
        let sources: Vec<(String, String)> = files
            .iter()
            .map(|(file, text)| (file.to_string(), text.to_string()))
            .collect();
        Graph::from_sources(&sources)
    }

    fn edges(graph: &Graph) -> Vec<String> {
        let edge = |(from, to): (&ModPath, &BTreeMap<ModPath, Site>)| {
            let to: Vec<_> = to
                .keys()
                .map(|to| format!("{} -> {}", name(from), name(to)))
                .collect();
            to
        };
        graph.edges.iter().flat_map(edge).collect()
    }

    #[test]
    fn a_cycle_is_spelled_out_with_where_each_import_is() {
        let graph = graph(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("a.rs", "use crate::b::B;\n"),
            ("b.rs", "pub struct B;\nfn f() { crate::c::g(); }\n"),
            ("c.rs", "use crate::{\n    a::{self, A},\n};\n"),
        ]);
        let cycles = graph.cycles();
        assert_eq!(cycles.len(), 1);
        let text = graph.describe(&cycles);
        assert!(text.starts_with("  a -> b -> c -> a\n"), "{text}");
        assert!(
            text.contains("    b -> c: b.rs:2 `crate::c::g`\n"),
            "{text}"
        );
        assert!(text.contains("    c -> a: c.rs:2 `crate::a`\n"), "{text}");
    }

    #[test]
    fn every_cycle_is_listed_from_its_least_module() {
        let graph = graph(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("a.rs", "use crate::b;\n"),
            ("b.rs", "use crate::a;\nuse crate::c;\n"),
            ("c.rs", "use crate::a;\n"),
        ]);
        let names: Vec<Vec<String>> = graph
            .cycles()
            .iter()
            .map(|cycle| cycle.iter().map(name).collect())
            .collect();
        assert_eq!(names, [vec!["a", "b"], vec!["a", "b", "c"]]);
    }

    #[test]
    fn a_mod_declaration_is_not_an_import() {
        for parent in ["expand.rs", "expand/mod.rs"] {
            let graph = graph(&[
                ("lib.rs", "mod expand;\n"),
                (parent, "mod key;\npub fn local() {}\n"),
                (
                    "expand/key.rs",
                    "use super::*;\nuse super::super::expand::local;\n",
                ),
            ]);
            assert_eq!(edges(&graph), ["expand::key -> expand"]);
            assert!(graph.cycles().is_empty());
        }
    }

    #[test]
    fn a_child_named_in_code_or_in_a_use_is_an_import() {
        let graph = graph(&[
            (
                "lib.rs",
                "mod expand;\nmod value;\nfn f() { value::derive(); }\n",
            ),
            ("value.rs", "pub fn derive() {}\n"),
            (
                "expand/mod.rs",
                "mod key;\nuse self::key::write;\npub fn local() {}\n",
            ),
            ("expand/key.rs", "use super::local;\n"),
        ]);
        assert_eq!(
            edges(&graph),
            [
                "crate -> value",
                "expand -> expand::key",
                "expand::key -> expand"
            ]
        );
        let text = graph.describe(&graph.cycles());
        assert!(
            text.starts_with("  expand -> expand::key -> expand\n"),
            "{text}"
        );
    }

    #[test]
    fn a_name_of_the_root_leads_to_the_module_it_comes_from() {
        let graph = graph(&[
            (
                "lib.rs",
                "mod key;\nmod error;\npub use crate::key::{Key as CacheKeyValue};\npub use error::KeyError;\npub trait Root {}\n",
            ),
            (
                "key.rs",
                "use crate::KeyError;\nfn f() -> crate::CacheKeyValue { todo!() }\n",
            ),
            ("error.rs", "use crate::Root;\n"),
        ]);
        assert_eq!(
            edges(&graph),
            [
                "crate -> error",
                "crate -> key",
                "error -> crate",
                "key -> error"
            ]
        );
        let text = graph.describe(&graph.cycles());
        assert!(text.starts_with("  crate -> error -> crate\n"), "{text}");
    }

    #[test]
    fn comments_literals_and_quoted_code_are_not_imports() {
        let graph = graph(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            (
                "a.rs",
                concat!(
                    "// use crate::b;\n/* crate::b::x /* nested */ crate::b::y */\n",
                    "const S: &str = \"crate::b::z\";\nconst R: &str = r#\"use crate::b;\"#;\n",
                    "fn f<'a>(c: char, s: &'a str) -> bool { c == '\"' || s == \"\\\"\" }\n",
                    "fn g() { quote!(use #path as __cache_key; #b::x; ::crate_b::y); }\n",
                    "pub(in crate::b) fn h() {}\n",
                ),
            ),
            ("b.rs", "use crate::a;\n"),
        ]);
        assert_eq!(edges(&graph), ["b -> a"]);
    }

    #[test]
    fn an_inline_module_belongs_to_its_file() {
        let graph = graph(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            (
                "a.rs",
                "mod tests {\n    use super::*;\n    mod deeper { use super::super::f; }\n}\nfn f() {}\nfn g() { crate::b::h(); }\n",
            ),
            ("b.rs", "pub fn h() {}\n"),
        ]);
        assert_eq!(edges(&graph), ["a -> b"]);
        assert_eq!(
            graph.edges[&module_of_file("a.rs")][&module_of_file("b.rs")].line,
            6
        );
    }
}
