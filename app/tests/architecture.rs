//! The house rules, checked on the source and the manifests so a change cannot quietly
//! break them (ARCHITECTURE.md explains them):
//!
//! - the crates depend on one another in one direction, domain <- ingest, store <- app <-
//!   server, and the lower ones on no web or database framework they should not know
//!   (Cargo then refuses an import the other way);
//! - no import circle between modules of a crate, at any depth: siblings in one folder
//!   included (a module and its own parent are one piece);
//! - no function in `store` or `ingest` over 120 lines unless its doc comment says why.
//!
//! It reads `use` declarations and `crate::`/`super::` paths in code (comments, strings
//! and `#[cfg(test)] mod tests` blocks aside); that is how this codebase names modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lines a function in store or ingest may have without saying why.
const LONG_FUNCTION: usize = 120;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file (`storage/write/mod.rs` is `storage::write`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments, string and char literals, and its test module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests").or_else(|| text.find("#[cfg(test)]\npub(crate) mod tests")) {
        Some(i) => &text[..i],
        None => text,
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(bytes.len(), |n| i + n);
            i = end;
        } else if rest.starts_with("/*") {
            i = rest.find("*/").map_or(bytes.len(), |n| i + n + 2);
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].chars().take_while(|c| *c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let start = 2 + hashes;
            i = rest[start..].find(&close).map_or(bytes.len(), |n| i + start + n + close.len());
            out.push_str("\"\"");
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if bytes[i] == b'\'' && (rest.starts_with("'\\") || rest.chars().nth(2) == Some('\'')) {
            // A char literal ('{', '\n', '\''), not a lifetime.
            let len = if rest.starts_with("'\\") {
                rest[2..].find('\'').map_or(1, |n| n + 3)
            } else {
                2 + rest[1..].chars().next().map_or(0, char::len_utf8)
            };
            i += len;
            out.push_str("' '");
        } else {
            let ch = rest.chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Every module path named in `code` (in `use` trees and inline paths), resolved from
/// `module`.
fn paths_named(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let resolve = |segments: &[&str]| -> Option<Vec<String>> {
        let mut path: Vec<String> = match segments.first()? {
            &"crate" => Vec::new(),
            &"super" | &"self" => module.to_vec(),
            _ => return None,
        };
        for s in segments {
            match *s {
                "crate" | "self" => {}
                "super" => {
                    path.pop()?;
                }
                other => path.push(other.to_string()),
            }
        }
        Some(path)
    };
    // `use` trees, expanded: from a line that starts a `use` to its semicolon.
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let start = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find(|p| trimmed.starts_with(*p))
            .map(|p| offset + (line.len() - trimmed.len()) + p.len());
        offset += line.len();
        let Some(start) = start else { continue };
        let Some(len) = code[start..].find(';') else { continue };
        let tree: String = code[start..start + len].split_whitespace().collect::<Vec<_>>().join(" ");
        for path in expand(&tree) {
            let segments: Vec<&str> = path.split("::").collect();
            if let Some(p) = resolve(&segments) {
                found.push(p);
            }
        }
    }
    // Inline paths: `crate::a::b`, `super::a`.
    let chars: Vec<char> = code.chars().collect();
    let text: String = chars.iter().collect();
    for anchor in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(pos) = text[from..].find(anchor) {
            let at = from + pos;
            from = at + anchor.len();
            let prev = text[..at].chars().last();
            if prev.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
                continue;
            }
            let tail: String =
                text[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            let segments: Vec<&str> = tail.split("::").filter(|s| !s.is_empty()).collect();
            if let Some(p) = resolve(&segments) {
                found.push(p);
            }
        }
    }
    found
}

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.trim_end_matches("::*").to_string()];
    };
    let prefix = tree[..open].trim();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .flat_map(|p| {
            expand(p).into_iter().map(move |e| {
                if e == "self" {
                    prefix.trim_end_matches("::").to_string()
                } else {
                    format!("{prefix}{e}")
                }
            })
        })
        .collect()
}

/// The module graph of one crate's sources: every file a node (`routes/runs/detail`), an
/// edge to each module its code names (the longest known module a path names), leaving
/// out a module's own ancestors and descendants.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let known: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let module = module_of(src, &file);
        if module.is_empty() {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for path in paths_named(&module, &code) {
            let Some(to) = (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| known.contains(p)) else {
                continue;
            };
            let related = to.starts_with(&module) || module.starts_with(&to);
            if !related {
                edges.entry(module.join("/")).or_default().insert(to.join("/"));
            }
        }
    }
    edges
}

/// The strongly connected components with more than one unit: the import circles.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = edges.keys().chain(edges.values().flatten()).collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for next in edges.get(&n).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> = nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(*n) {
            continue;
        }
        let component: Vec<String> = nodes
            .iter()
            .filter(|m| reachable[*n].contains(**m) && reachable[**m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        done.extend(component.iter().cloned());
        if component.len() > 1 {
            out.push(component);
        }
    }
    out
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join(name).join("src")
}

/// One path that closes each circle, to say where to look.
fn describe(edges: &BTreeMap<String, BTreeSet<String>>, circle: &[String]) -> String {
    circle
        .iter()
        .map(|a| {
            let to: Vec<&String> = edges.get(a).into_iter().flatten().filter(|b| circle.contains(b)).collect();
            format!("{a} -> {to:?}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn no_module_imports_in_a_circle() {
    for krate in CRATES {
        let edges = graph(&crate_src(krate));
        assert!(!edges.is_empty(), "the lint found the modules of {krate}: {edges:?}");
        let found = circles(&edges);
        assert!(
            found.is_empty(),
            "import circles in {krate}: {}",
            found.iter().map(|c| describe(&edges, c)).collect::<Vec<_>>().join("\n")
        );
    }
}

/// The crates, from the bottom layer up.
const CRATES: [&str; 5] = ["domain", "ingest", "store", "app", "server"];

/// The `[dependencies]` (and, with `all`, every other dependency table) a crate's
/// manifest names.
fn dependencies(krate: &str, all: bool) -> BTreeSet<String> {
    let manifest = std::fs::read_to_string(crate_src(krate).parent().unwrap().join("Cargo.toml")).unwrap();
    let mut out = BTreeSet::new();
    let mut section = String::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        let wanted = section == "[dependencies]" || (all && section.ends_with("dependencies]"));
        if wanted && !line.starts_with('#') {
            if let Some(name) = line.split(['=', '.', ' ']).next().filter(|n| !n.is_empty()) {
                out.insert(name.to_string());
            }
        }
    }
    out
}

#[test]
fn the_layers_depend_one_way_and_the_lower_ones_on_no_web_or_database_framework() {
    // What each crate may not use, itself or through a layer below it.
    let not_for: [(&str, &[&str]); 4] = [
        (
            "domain",
            &[
                "ingest",
                "store",
                "app",
                "flightdeck",
                "sqlx",
                "axum",
                "leptos",
                "tokio",
                "tonic",
                "opentelemetry-proto",
            ],
        ),
        ("ingest", &["store", "app", "flightdeck", "sqlx", "axum", "leptos", "tokio"]),
        ("store", &["ingest", "app", "flightdeck", "axum", "leptos"]),
        ("app", &["flightdeck", "ingest", "tonic", "opentelemetry-proto"]),
    ];
    for (krate, forbidden) in not_for {
        let deps = dependencies(krate, false);
        let wrong: Vec<&&str> = forbidden.iter().filter(|f| deps.contains(**f)).collect();
        assert!(wrong.is_empty(), "{krate} must not depend on {wrong:?}");
    }
    // The browser bundle builds app without `ssr`: storage only comes with it.
    let app = std::fs::read_to_string(crate_src("app").parent().unwrap().join("Cargo.toml")).unwrap();
    for layer in ["store"] {
        assert!(app.contains(&format!("{layer} = {{ workspace = true, optional = true }}")), "{layer} optional in app");
        assert!(app.contains(&format!("\"dep:{layer}\"")), "{layer} enabled by app's ssr feature");
    }
}

#[test]
fn functions_in_store_and_ingest_stay_short_or_say_why() {
    let mut files = Vec::new();
    for krate in ["store", "ingest"] {
        rust_files(&crate_src(krate), &mut files);
    }
    let mut long = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = code_of(&text);
        let lines: Vec<&str> = code.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            let is_fn = ["fn ", "pub fn ", "async fn ", "pub async fn ", "pub(crate) fn ", "pub(crate) async fn "]
                .iter()
                .any(|p| t.starts_with(p));
            if !is_fn {
                continue;
            }
            // Its body: from the first `{` to the brace that closes it.
            let (mut depth, mut opened, mut end) = (0i32, false, i);
            'body: for (j, l) in lines.iter().enumerate().skip(i) {
                for c in l.chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        ';' if !opened && depth == 0 => break 'body,
                        _ => {}
                    }
                    if opened && depth == 0 {
                        end = j;
                        break 'body;
                    }
                }
            }
            let length = end.saturating_sub(i) + 1;
            if length > LONG_FUNCTION {
                // The doc comment above it, in the original text (comments were stripped).
                let name = t.split('(').next().unwrap_or(t);
                let doc: String = text
                    .lines()
                    .take_while(|l| !l.trim_start().starts_with(name))
                    .collect::<Vec<_>>()
                    .iter()
                    .rev()
                    .take_while(|l| l.trim_start().starts_with("///") || l.trim_start().starts_with("#["))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" ");
                if !doc.contains("Long because") {
                    long.push(format!("{}: `{name}` has {length} lines", file.display()));
                }
            }
        }
    }
    assert!(long.is_empty(), "split these, or say in the doc comment why not (\"Long because ...\"): {long:#?}");
}

#[test]
fn the_lint_sees_a_circle_when_there_is_one() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    edges.entry("c".into()).or_default().insert("a".into());
    edges.entry("c".into()).or_default().insert("d".into());
    assert_eq!(circles(&edges), vec![vec!["a".to_string(), "b".into(), "c".into()]]);
    let module: Vec<String> = ["storage", "write", "assign"].map(String::from).to_vec();
    let named = paths_named(&module, "use super::super::sql::{Sql, Tx};\nlet x = crate::ingest::record::chunk(a);");
    assert!(named.contains(&["storage", "sql", "Sql"].map(String::from).to_vec()), "{named:?}");
    assert!(named.contains(&["ingest", "record", "chunk"].map(String::from).to_vec()), "{named:?}");
    assert_eq!(expand("a::{b, c::{d, e as f}, self}"), vec!["a::b", "a::c::d", "a::c::e", "a"]);
    assert_eq!(expand("crate::x as y"), vec!["crate::x"]);
    assert_eq!(code_of("let s = \"crate::x\"; // crate::y\nlet c = '{';"), "let s = \"\"; \nlet c = ' ';");
}
