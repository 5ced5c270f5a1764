//! One version for the image tag: every `sarena.local/sarena:<tag>` in the
//! manifests, the Dockerfile, the docs and the scripts names the workspace's
//! version (`[workspace.package] version` in Cargo.toml, which is this
//! crate's `CARGO_PKG_VERSION` and what `scripts/build-image.sh` tags).
//! `scripts/bump-version.sh X.Y.Z` rewrites them all at once.
//!
//! A placeholder (`sarena.local/sarena:VERSION`, `sarena.local/sarena:$VERSION`,
//! `sarena.local/sarena:<tag>`) is not a tag and is skipped; any other tag (`latest`, `dev`, an old
//! version) fails with its file and line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::{Path, PathBuf};

/// The image name whose tags are checked.
const IMAGE: &str = "sarena.local/sarena:";

/// One `sarena.local/sarena:<tag>` found in a file.
#[derive(Debug)]
struct Occurrence {
    /// Relative to the repository root.
    file: String,
    /// 1-based.
    line: usize,
    tag: String,
}

/// The repository root (this crate's parent directory).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate lives in the workspace")
        .to_path_buf()
}

/// Every file under `dir` (recursively when `deep`) whose name `keep` accepts,
/// sorted.
fn files(dir: &Path, deep: bool, keep: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if deep {
                out.extend(files(&path, deep, keep));
            }
        } else if keep(path.file_name().unwrap().to_str().unwrap_or("")) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The files the tag may appear in.
fn scanned() -> Vec<PathBuf> {
    let root = repo();
    let mut all = vec![root.join("README.md")];
    all.extend(files(&root.join("deploy"), true, &|n| {
        n.ends_with(".yaml") || n.ends_with(".yml") || n.starts_with("Dockerfile")
    }));
    all.extend(files(&root.join("docs"), false, &|n| n.ends_with(".md")));
    all.extend(files(&root.join("scripts"), false, &|n| n.ends_with(".sh")));
    all.extend(files(&root.join("e2e"), true, &|n| n.ends_with(".sh")));
    all
}

/// The characters a tag (or a placeholder) is made of.
fn tag_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '$' | '{' | '}')
}

/// A placeholder rather than a tag: `VERSION`, `$VERSION`, `${VERSION}`, or
/// nothing a tag is made of (`<tag>`, `'"$NEW"'` in a script that writes it).
fn placeholder(tag: &str) -> bool {
    if tag.is_empty() {
        return true;
    }
    let word = tag
        .trim_start_matches('$')
        .trim_start_matches('{')
        .trim_end_matches('}');
    tag.starts_with('$')
        || (!word.is_empty() && word.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
}

/// The tags of `text` (the content of `file`), placeholders left out.
fn occurrences(file: &str, text: &str) -> Vec<Occurrence> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for (at, _) in line.match_indices(IMAGE) {
            let rest = &line[at + IMAGE.len()..];
            let tag: String = rest.chars().take_while(|c| tag_char(*c)).collect();
            // a sentence's full stop is not part of the tag
            let tag = tag.trim_end_matches('.').to_string();
            if !placeholder(&tag) {
                out.push(Occurrence {
                    file: file.to_string(),
                    line: i + 1,
                    tag,
                });
            }
        }
    }
    out
}

#[test]
fn every_image_tag_is_the_workspace_version() {
    let root = repo();
    let want = env!("CARGO_PKG_VERSION");
    let mut found = Vec::new();
    for path in scanned() {
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let rel = path.strip_prefix(&root).unwrap().display().to_string();
        found.extend(occurrences(&rel, &text));
    }
    let wrong: Vec<String> = found
        .iter()
        .filter(|o| o.tag != want)
        .map(|o| {
            format!(
                "{}:{}: found {IMAGE}{}, wanted {IMAGE}{want}",
                o.file, o.line, o.tag
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "image tags that are not the workspace version ({want}; scripts/bump-version.sh {want} rewrites them):\n{}",
        wrong.join("\n")
    );
    let manifests = found
        .iter()
        .filter(|o| o.file.starts_with("deploy/kubernetes/"))
        .count();
    assert!(
        manifests >= 3,
        "only {manifests} {IMAGE}<tag> under deploy/kubernetes (the daemon's two images and the \
         uninstall's are expected): the scan found nothing to check"
    );
}

#[test]
fn placeholders_are_skipped_and_other_tags_reported() {
    let text = "a sarena.local/sarena:VERSION b\n\
                TAG=${TAG:-sarena.local/sarena:$VERSION}\n\
                image: sarena.local/sarena:0.9.1\n\
                runs sarena.local/sarena:latest.\n\
                see sarena.local/sarena:<tag> and sarena.local/sarena:'\"$NEW\"'\n";
    let got: Vec<(usize, String)> = occurrences("f", text)
        .into_iter()
        .map(|o| (o.line, o.tag))
        .collect();
    assert_eq!(
        got,
        vec![(3, "0.9.1".to_string()), (4, "latest".to_string())]
    );
}
