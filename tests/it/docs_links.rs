//! Every relative link in README.md and docs/*.md leads somewhere: the file (or folder)
//! exists, and an anchor — `#…` on the same page or `page.md#…` — is the slug of one of
//! that page's headings, made the way GitHub makes it. External links are not fetched.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

/// A heading's anchor as GitHub makes it: the heading's text (code spans, links and
/// emphasis reduced to their text) in lower case, every character that is not a letter,
/// a digit, a space, `-` or `_` dropped, each space made `-`.
fn slug(heading: &str) -> String {
    text_of(heading)
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Markdown inline text reduced to what it shows: `[text](target)` is `text`, backticks
/// and `*` go.
fn text_of(md: &str) -> String {
    let mut out = String::new();
    let mut rest = md;
    while let Some(at) = rest.find("](") {
        let Some(close) = rest[at..].find(')') else {
            break;
        };
        out.push_str(&rest[..at]);
        rest = &rest[at + close + 1..];
    }
    out.push_str(rest);
    out.chars()
        .filter(|c| !matches!(c, '[' | '`' | '*'))
        .collect()
}

/// `text` with the lines of fenced code blocks blanked (kept as empty lines, so line
/// numbers stay), and code spans blanked within the rest.
fn prose(text: &str) -> String {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let opens = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f));
        match (fence, opens) {
            (None, Some(f)) => {
                fence = Some(f);
                lines.push(String::new());
            }
            (Some(f), Some(g)) if f == g && trimmed.trim_end() == g => {
                fence = None;
                lines.push(String::new());
            }
            (Some(_), _) => lines.push(String::new()),
            (None, None) => lines.push(line.to_string()),
        }
    }
    let joined = lines.join("\n");
    // Code spans: what is between a backtick and the next one shows as code, not links.
    // A blank line ends a paragraph, and any code span a stray backtick left open.
    let mut out = String::with_capacity(joined.len());
    let mut in_code = false;
    let mut last = ' ';
    for c in joined.chars() {
        if c == '\n' && last == '\n' {
            in_code = false;
        }
        last = c;
        if c == '`' {
            in_code = !in_code;
            out.push(c);
        } else if in_code && c != '\n' {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// The anchors of a page's headings, in order, with GitHub's `-1`, `-2`… for repeats.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    let plain: Vec<String> = prose_keeping_code_spans(text);
    for line in plain {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let heading = line[hashes..].trim().trim_end_matches('#').trim();
        let base = slug(heading);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The lines of `text` outside fenced code blocks (code spans kept: headings need their
/// text).
fn prose_keeping_code_spans(text: &str) -> Vec<String> {
    let blanked = prose(text);
    text.lines()
        .zip(blanked.lines())
        .map(|(line, b)| {
            if b.is_empty() {
                String::new()
            } else {
                line.to_string()
            }
        })
        .collect()
}

/// Every link target in `text` (outside code) with its line number.
fn links(text: &str) -> Vec<(usize, String)> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = prose[from..].find("](") {
        let start = from + at + 2;
        let end = prose[start..]
            .find(|c: char| c == ')' || c.is_whitespace())
            .map_or(prose.len(), |e| start + e);
        let line = prose[..start].matches('\n').count() + 1;
        out.push((line, prose[start..end].to_string()));
        from = end;
    }
    out
}

/// Every broken relative link of the pages `files` (paths under `root`), one line each:
/// `page:line: target: why`.
fn broken_links(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut pages: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    let mut anchors_of = |path: &Path| -> Option<Vec<String>> {
        let key = path.canonicalize().ok()?;
        if !pages.contains_key(&key) {
            let text = std::fs::read_to_string(&key).ok()?;
            pages.insert(key.clone(), anchors(&text));
        }
        pages.get(&key).cloned()
    };
    let mut broken = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("page is readable");
        let name = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap_or(root).join(path)
            };
            let why = if !dest.exists() {
                Some(format!(
                    "no file {}",
                    dest.strip_prefix(root).unwrap_or(&dest).display()
                ))
            } else if let Some(anchor) =
                anchor.filter(|_| dest.extension().is_some_and(|e| e == "md"))
            {
                let known = anchors_of(&dest).unwrap_or_default();
                (!known.iter().any(|a| a == anchor)).then(|| {
                    format!(
                        "no heading with the anchor #{anchor} (it has: {})",
                        known.join(", ")
                    )
                })
            } else {
                None
            };
            if let Some(why) = why {
                broken.push(format!("{name}:{line}: {target}: {why}"));
            }
        }
    }
    broken
}

/// README.md and every docs/*.md.
fn the_pages(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn every_relative_link_and_anchor_in_the_readme_and_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = the_pages(root);
    assert!(files.len() > 5, "docs/ was read: {files:?}");
    let links: usize = files
        .iter()
        .map(|f| links(&std::fs::read_to_string(f).expect("read")).len())
        .sum();
    assert!(links > 50, "links were found: {links}");
    let broken = broken_links(root, &files);
    assert!(
        broken.is_empty(),
        "{} broken links:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn slugs_are_made_as_github_makes_them() {
    assert_eq!(slug("Quick start"), "quick-start");
    assert_eq!(
        slug("Why did the bot not answer? — `GET /explain/message/{message_id}`"),
        "why-did-the-bot-not-answer--get-explainmessagemessage_id"
    );
    assert_eq!(
        slug("Egress: what the bridge connects to, and proxies"),
        "egress-what-the-bridge-connects-to-and-proxies"
    );
    assert_eq!(
        slug("SQLite: the webhook's commits go first"),
        "sqlite-the-webhooks-commits-go-first"
    );
    assert_eq!(slug("The [manual](docs/x.md) **here**"), "the-manual-here");
    assert_eq!(slug("长连接 (long connection)"), "长连接-long-connection");
    assert_eq!(
        anchors("# A\n## B\n```sh\n# not a heading\n```\n## B\n### B\n#no\n"),
        ["a", "b", "b-1", "b-2"]
    );
}

#[test]
fn broken_links_are_listed_each_with_its_place_and_why() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    std::fs::create_dir(root.join("docs")).expect("docs");
    std::fs::write(
        root.join("README.md"),
        "# Top\n\nSee [a](docs/a.md#second-1), [b](docs/b.md), [c](#nowhere),\n\
         [d](https://example.com/x), `[e](missing.md)` and [f](#top).\n",
    )
    .expect("write");
    std::fs::write(
        root.join("docs/a.md"),
        "# A\n## Second\n## Second\n```\n[g](gone.md)\n```\n[h](../README.md#top) [i](a.md#third)\n",
    )
    .expect("write");
    let files = the_pages(root);
    assert_eq!(
        broken_links(root, &files),
        [
            "README.md:3: docs/b.md: no file docs/b.md",
            "README.md:3: #nowhere: no heading with the anchor #nowhere (it has: top)",
            "docs/a.md:7: a.md#third: no heading with the anchor #third (it has: a, second, second-1)",
        ]
    );
}
