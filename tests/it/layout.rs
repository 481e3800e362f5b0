//! The shape of the source tree, read from its own imports: every file is a module, every
//! path in its code (unit tests aside) an arrow to the module it names. The arrows must
//! never close a loop, between files nor between folders (the top-level modules); the
//! ground floor (`vocab`) stands on `util` alone, the long connection takes parts of the
//! application rather than the application, and the pure layers must not reach for the
//! database or the HTTP documentation.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

/// Module path (`turns::runner`) → the file's text, for every file under `src/`.
fn modules() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(&root).expect("under src");
            let mut parts: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).expect("read file");
            // A file's unit tests (its last item, by the house style) are not part of
            // the structure.
            let code = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            out.insert(parts.join("::"), without_comments_and_strings(code));
        }
    }
    out
}

/// The code of `text` with comments, string and character literals blanked out.
fn without_comments_and_strings(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let word = |k: usize| c[k].is_alphanumeric() || c[k] == '_';
    while i < c.len() {
        let after_word = i > 0 && word(i - 1);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == 'r' && !after_word && matches!(c.get(i + 1), Some('#' | '"')) {
            // A raw string: r"…", r#"…"#, …
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            let open = i + 1 + hashes;
            if c.get(open) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let rest: String = c[open + 1..].iter().collect();
            let len = rest
                .find(&close)
                .map_or(rest.chars().count(), |at| rest[..at].chars().count());
            i = open + 1 + len + 1 + hashes;
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            // An escaped character literal: '\n', '\'', '\u{…}'.
            i += 2;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn comments_and_literals_are_not_code() {
    let code = "let a = \"use crate::x;\"; // use crate::y;\nlet b = r#\"use \"crate::z\"\"#; let q = '\"'; let e = '\\''; crate::w";
    let kept = without_comments_and_strings(code);
    assert!(
        !kept.contains("crate::x") && !kept.contains("crate::y"),
        "{kept}"
    );
    assert!(!kept.contains("crate::z"), "{kept}");
    assert!(kept.ends_with("crate::w"), "{kept}");
}

/// Identifiers and the punctuation a path is made of, in order.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_alphanumeric() || c == '_' {
            let mut word = String::new();
            while let Some(&c) = chars.peek().filter(|c| c.is_alphanumeric() || **c == '_') {
                word.push(c);
                chars.next();
            }
            out.push(word);
        } else if c == ':' {
            chars.next();
            if chars.peek() == Some(&':') {
                chars.next();
                out.push("::".into());
            }
        } else {
            chars.next();
            if matches!(c, '{' | '}' | ',' | ';') {
                out.push(c.to_string());
            } else if !c.is_whitespace() {
                out.push("·".into());
            }
        }
    }
    out
}

/// Every path a file names: those of its `use` trees (expanded, `pub` ones flagged) and
/// those in its code that start from `crate`, `super` or `self`.
fn paths(tokens: &[String]) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let is_use = tokens[i] == "use";
        let starts = matches!(tokens[i].as_str(), "crate" | "super" | "self");
        if is_use || starts {
            let public = is_use && is_pub(tokens, i);
            let from = if is_use { i + 1 } else { i };
            let mut found = Vec::new();
            i = tree(tokens, from, &mut Vec::new(), &mut found);
            out.extend(found.into_iter().map(|p| (public, p)));
        } else {
            i += 1;
        }
    }
    out
}

/// Whether the `use` at `i` is `pub` (or `pub(crate)`, `pub(super)`): a re-export.
fn is_pub(tokens: &[String], i: usize) -> bool {
    let before = &tokens[i.saturating_sub(4)..i];
    before.last().is_some_and(|t| t == "pub")
        || (before.last().is_some_and(|t| t == "·") && before.iter().any(|t| t == "pub"))
}

/// Reads one use tree at `i` under `prefix` into `out`; the index after it.
fn tree(
    tokens: &[String],
    mut i: usize,
    prefix: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let depth = prefix.len();
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                while tokens.get(i).is_some_and(|t| t != "}") {
                    // Whatever is not a path (a glob, say) is stepped over.
                    let next = tree(tokens, i, prefix, out);
                    i = if next == i { i + 1 } else { next };
                    if tokens.get(i).is_some_and(|t| t == ",") {
                        i += 1;
                    }
                }
                prefix.truncate(depth);
                return i + 1;
            }
            Some(word) if word.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                prefix.push(word.to_string());
                i += 1;
                if tokens.get(i).is_some_and(|t| t == "::") {
                    i += 1;
                    continue;
                }
                out.push(prefix.clone());
                prefix.truncate(depth);
                if tokens.get(i).is_some_and(|t| t == "as") {
                    i += 2;
                }
                return i;
            }
            _ => {
                if prefix.len() > depth {
                    out.push(prefix.clone());
                }
                prefix.truncate(depth);
                return i;
            }
        }
    }
}

/// The source tree: its modules, and the names each re-exports with where they live.
struct Tree {
    known: BTreeSet<String>,
    reexports: BTreeMap<(String, String), String>,
}

impl Tree {
    /// The module a path from `module` lands in: the longest prefix that is a file, or
    /// the module an item re-exported there comes from. A path that starts from neither
    /// `crate`, `super` nor `self` is read from `module` itself (a child module, or an
    /// outside crate, which lands on `module` and is no arrow).
    fn resolve(&self, module: &str, path: &[String]) -> Option<String> {
        let mut base: Vec<&str> = if module.is_empty() {
            Vec::new()
        } else {
            module.split("::").collect()
        };
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            _ => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
        }
        let full: Vec<&str> = base
            .into_iter()
            .chain(rest.iter().map(String::as_str))
            .collect();
        let n = (1..=full.len())
            .rev()
            .find(|&n| self.known.contains(&full[..n].join("::")))?;
        let landed = full[..n].join("::");
        match full.get(n) {
            Some(name) => Some(
                self.reexports
                    .get(&(landed.clone(), (*name).to_string()))
                    .cloned()
                    .unwrap_or(landed),
            ),
            None => Some(landed),
        }
    }
}

/// Module → the modules it imports. An arrow to a file's own folder module or one of
/// its ancestors counts only for what that module defines itself: a name it re-exports
/// points to where the name lives.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = modules();
    let paths: BTreeMap<&String, Vec<(bool, Vec<String>)>> = files
        .iter()
        .map(|(m, code)| (m, paths(&tokens(code))))
        .collect();
    let mut tree = Tree {
        known: files.keys().cloned().collect(),
        reexports: BTreeMap::new(),
    };
    // Re-exports of re-exports settle in a few rounds.
    for _ in 0..3 {
        let mut reexports = BTreeMap::new();
        for (module, found) in &paths {
            for (_, path) in found.iter().filter(|(public, _)| *public) {
                let (Some(name), Some(target)) = (path.last(), tree.resolve(module, path)) else {
                    continue;
                };
                if target != **module {
                    reexports.insert(((*module).clone(), name.clone()), target);
                }
            }
        }
        tree.reexports = reexports;
    }
    let mut edges = BTreeMap::new();
    for (module, found) in &paths {
        let targets: BTreeSet<String> = found
            .iter()
            .filter_map(|(_, p)| tree.resolve(module, p))
            .filter(|t| t != *module && !module.starts_with(&format!("{t}::")))
            .collect();
        edges.insert((*module).clone(), targets);
    }
    edges
}

/// A loop of imports, if there is one.
fn find_loop(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == m) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.to_string());
        for next in edges.get(m).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|m| visit(m, edges, &mut done, &mut Vec::new()))
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let edges = graph();
    assert!(
        edges.len() > 50,
        "the tree was read: {} modules",
        edges.len()
    );
    let arrows: usize = edges.values().map(BTreeSet::len).sum();
    assert!(arrows > 100, "imports were read: {arrows}");
    assert!(edges["http"].contains("state"), "a known import is seen");
    if let Some(cycle) = find_loop(&edges) {
        panic!("import loop: {}", cycle.join(" → "));
    }
}

#[test]
fn the_loop_finder_finds_a_loop() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.insert("a".into(), ["b".to_string()].into());
    edges.insert("b".into(), ["c".to_string()].into());
    edges.insert("c".into(), ["a".to_string()].into());
    assert_eq!(find_loop(&edges).expect("a loop"), ["a", "b", "c", "a"]);
    edges.insert("c".into(), BTreeSet::new());
    assert_eq!(find_loop(&edges), None);
}

#[test]
fn use_trees_expand_into_paths() {
    let code =
        "use crate::{a::{b, c::D as E}, e, g::*}; use super::f::G; fn x() { crate::h::i(); }";
    let got: Vec<String> = paths(&tokens(code))
        .iter()
        .map(|(_, p)| p.join("::"))
        .collect();
    assert_eq!(
        got,
        [
            "crate::a::b",
            "crate::a::c::D",
            "crate::e",
            "crate::g",
            "super::f::G",
            "crate::h::i"
        ]
    );
}

#[test]
fn the_application_state_does_not_know_how_it_is_assembled() {
    let edges = graph();
    for (module, targets) in &edges {
        if module.starts_with("http") {
            for banned in ["app::bridge", "app::run", "app"] {
                assert!(!targets.contains(banned), "{module} imports {banned}");
            }
        }
    }
}

#[test]
fn the_context_engine_uses_neither_sqlx_nor_utoipa() {
    let files = modules();
    let context: Vec<_> = files
        .iter()
        .filter(|(m, _)| *m == "context" || m.starts_with("context::"))
        .collect();
    assert!(context.len() >= 5, "context/ was read");
    for (module, code) in context {
        for word in tokens(code) {
            assert!(word != "sqlx" && word != "utoipa", "{module} names {word}");
        }
    }
}

/// The folder (top-level module) `module` lives in: `turns::runner` → `turns`.
fn folder(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

/// Folder → the folders its files import, with one file-level arrow that makes each.
fn folder_graph(
    edges: &BTreeMap<String, BTreeSet<String>>,
) -> BTreeMap<String, BTreeMap<String, (String, String)>> {
    let mut out: BTreeMap<String, BTreeMap<String, (String, String)>> = BTreeMap::new();
    for (module, targets) in edges {
        let from = folder(module);
        let entry = out.entry(from.to_string()).or_default();
        for target in targets {
            let to = folder(target);
            if to != from && !to.is_empty() && !from.is_empty() {
                entry
                    .entry(to.to_string())
                    .or_insert_with(|| (module.clone(), target.clone()));
            }
        }
    }
    out
}

#[test]
fn no_folder_imports_one_that_imports_it_back() {
    let folders = folder_graph(&graph());
    assert!(folders.len() > 10, "folders were read: {}", folders.len());
    let arrows: BTreeMap<String, BTreeSet<String>> = folders
        .iter()
        .map(|(f, to)| (f.clone(), to.keys().cloned().collect()))
        .collect();
    if let Some(cycle) = find_loop(&arrows) {
        let why: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let (m, t) = &folders[&w[0]][&w[1]];
                format!("{} → {} ({m} imports {t})", w[0], w[1])
            })
            .collect();
        panic!("folder loop:\n  {}", why.join("\n  "));
    }
}

#[test]
fn the_ground_floor_stands_on_util_alone() {
    let folders = folder_graph(&graph());
    let below: BTreeSet<&String> = folders["vocab"].keys().collect();
    assert!(
        below.iter().all(|f| *f == "util"),
        "vocab imports {below:?}"
    );
    for user in ["store", "context", "routing"] {
        assert!(
            folders[user].contains_key("vocab"),
            "{user} speaks the vocabulary"
        );
    }
}

#[test]
fn the_long_connection_takes_parts_of_the_app_not_the_app() {
    let folders = folder_graph(&graph());
    for above in ["app", "state", "http", "ops"] {
        assert!(
            !folders["longconn"].contains_key(above),
            "longconn imports {above}"
        );
    }
    assert!(folders["app"].contains_key("longconn"), "the app starts it");
}
