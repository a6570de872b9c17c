//! The map kept true by a test: every room of `src/` (a top-level folder or file) says in its
//! `//!` docs what it may import (a paragraph starting `May import:` naming rooms in
//! backticks, or `nothing of the crate`), and its files use no other room; and no two files
//! import each other, directly or around a circle (`use crate::...`, `crate::a::b` paths and
//! `super::`, resolved to files). Unit-test modules (`#[cfg(test)] mod tests { ... }` at the
//! end of a file, and `tests.rs` files) may import anything. docs/architecture.md has the
//! table these rules come from.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The rooms: name -> its files.
fn rooms() -> BTreeMap<String, Vec<PathBuf>> {
    let mut rooms = BTreeMap::new();
    for e in std::fs::read_dir(src()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_str().unwrap().to_string();
        if name == "lib" || name == "bin" {
            continue;
        }
        let mut files = Vec::new();
        if p.is_dir() {
            rust_files(&p, &mut files);
        } else {
            files.push(p);
        }
        files.sort();
        rooms.insert(name, files);
    }
    rooms
}

/// The code of a file without comments and without its unit-test module.
fn code(path: &Path) -> String {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names a `crate::` path starts with in `code` (`crate::a::b` and `use crate::{a, b}`).
fn crate_roots(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + 7..];
        let word = |s: &str| -> String {
            s.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        };
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let w = word(part.trim());
                if !w.is_empty() {
                    out.insert(w);
                }
            }
        } else {
            out.insert(word(after));
        }
        rest = after;
    }
    out
}

/// lib.rs's re-exports at the crate root: name -> the room it comes from.
fn root_reexports() -> HashMap<String, String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut out = HashMap::new();
    for stmt in lib.split(';') {
        let s = stmt.trim();
        let Some(rest) = s.strip_prefix("pub use ") else {
            continue;
        };
        let (room, names) = rest.split_once("::").unwrap();
        for n in names.trim_matches(|c| c == '{' || c == '}').split(',') {
            let n = n.trim();
            if !n.is_empty() {
                out.insert(n.to_string(), room.to_string());
            }
        }
    }
    out
}

/// The room's rule: the rooms named in backticks in its `May import:` paragraph.
fn rule(files: &[PathBuf], room: &str) -> Option<BTreeSet<String>> {
    let head = files
        .iter()
        .find(|p| {
            p.file_name().is_some_and(|n| n == "mod.rs")
                && p.parent()
                    .and_then(|d| d.file_name())
                    .is_some_and(|d| d == room)
        })
        .or_else(|| files.first())?;
    let text = std::fs::read_to_string(head).unwrap();
    let docs: Vec<&str> = text
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!").trim())
        .collect();
    let start = docs.iter().position(|l| l.starts_with("May import:"))?;
    let para: Vec<&str> = docs[start..]
        .iter()
        .take_while(|l| !l.is_empty())
        .copied()
        .collect();
    let para = para.join(" ");
    let mut names = BTreeSet::new();
    for (i, part) in para.split('`').enumerate() {
        if i % 2 == 1 {
            let root = part.split("::").next().unwrap_or(part);
            names.insert(root.trim_end_matches(".rs").to_string());
        }
    }
    Some(names)
}

#[test]
fn every_room_imports_only_what_its_docs_allow() {
    let rooms = rooms();
    let reexports = root_reexports();
    let mut problems = Vec::new();
    for (room, files) in &rooms {
        let Some(allowed) = rule(files, room) else {
            problems.push(format!(
                "{room}: no `May import:` paragraph in its //! docs"
            ));
            continue;
        };
        for f in files {
            for name in crate_roots(&code(f)) {
                let target = reexports.get(&name).cloned().unwrap_or(name);
                if &target == room || allowed.contains(&target) || !rooms.contains_key(&target) {
                    continue;
                }
                problems.push(format!(
                    "{}: uses `{target}`, which room `{room}` may not import",
                    f.strip_prefix(src()).unwrap().display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// `src/a/b.rs` -> [a, b]; `src/a/mod.rs` -> [a].
fn module_of(path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    parts
}

#[test]
fn no_import_cycles_between_files() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.retain(|f| !f.strip_prefix(src()).unwrap().starts_with("bin") && !f.ends_with("lib.rs"));
    let edges = import_edges(&files);
    let n = files.len();
    let found = strongly_connected(&edges);
    let cycles: Vec<String> = found
        .iter()
        .map(|c| {
            let mut names: Vec<String> = c
                .iter()
                .map(|&i| files[i].strip_prefix(src()).unwrap().display().to_string())
                .collect();
            names.sort();
            names.join(", ")
        })
        .collect();
    assert!(n > 100, "only {n} files found under src/");
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

/// For each of `files`, the other files it imports (`crate::` and `super::` paths resolved to
/// the longest module that is a file).
fn import_edges(files: &[PathBuf]) -> Vec<BTreeSet<usize>> {
    let by_module: HashMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (module_of(f), i))
        .collect();
    let resolve = |parts: &[String]| -> Option<usize> {
        (1..=parts.len())
            .rev()
            .find_map(|n| by_module.get(&parts[..n]).copied())
    };
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); files.len()];
    for (i, f) in files.iter().enumerate() {
        let text = code(f);
        let me = module_of(f);
        for (kw, base) in [
            ("crate::", Vec::new()),
            ("super::", me[..me.len().saturating_sub(1)].to_vec()),
        ] {
            let mut rest = &text[..];
            while let Some(k) = rest.find(kw) {
                let before = rest[..k].chars().last();
                let after = &rest[k + kw.len()..];
                rest = after;
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let path: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let mut parts = base.clone();
                parts.extend(
                    path.split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                );
                if let Some(t) = resolve(&parts) {
                    if t != i {
                        edges[i].insert(t);
                    }
                }
            }
        }
    }
    edges
}

#[test]
fn the_cycle_search_finds_a_cycle_and_only_it() {
    // 0 -> 1 -> 2 -> 0, and 3 -> 0 outside the cycle.
    let edges = vec![
        BTreeSet::from([1]),
        BTreeSet::from([2]),
        BTreeSet::from([0]),
        BTreeSet::from([0]),
    ];
    let mut found = strongly_connected(&edges);
    assert_eq!(found.len(), 1);
    found[0].sort();
    assert_eq!(found[0], [0, 1, 2]);
}

/// The strongly connected components of more than one file (Tarjan's algorithm): the
/// import cycles.
fn strongly_connected(edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct Scc<'a> {
        edges: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on: Vec<bool>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    impl Scc<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on[v] = true;
            for &w in self.edges[v].clone().iter() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    self.found.push(comp);
                }
            }
        }
    }
    let n = edges.len();
    let mut scc = Scc {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on: vec![false; n],
        next: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if scc.index[v].is_none() {
            scc.visit(v);
        }
    }
    scc.found
}

/// The CUDA host's layers (src/cuda/mod.rs): `driver` knows nothing of the stages or of the
/// typed kernels, and `kernels` knows only the driver; a stage may use both.
#[test]
fn cuda_layers_import_only_downward() {
    let cuda = src().join("cuda");
    // (layer folder, the cuda modules its files may name besides their own layer)
    for (layer, may) in [("driver", vec![]), ("kernels", vec!["driver"])] {
        let mut files = Vec::new();
        rust_files(&cuda.join(layer), &mut files);
        assert!(
            !files.is_empty(),
            "src/cuda/{layer} is gone: update this test"
        );
        for f in files {
            let code = code(&f);
            let at_root = f.file_name().is_some_and(|n| n == "mod.rs");
            // `super::` from the layer's mod.rs is `cuda`; from its other files, the layer.
            let via_super: Vec<&str> = code
                .match_indices("super::")
                .map(|(i, _)| {
                    let rest = &code[i + 7..];
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    &rest[..end]
                })
                .collect();
            let via_crate: Vec<&str> = code
                .match_indices("crate::cuda::")
                .map(|(i, _)| {
                    let rest = &code[i + 13..];
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    &rest[..end]
                })
                .collect();
            let named: Vec<&str> = via_crate
                .into_iter()
                .chain(via_super.into_iter().filter(|_| at_root))
                .collect();
            for m in named {
                assert!(
                    m == layer || may.contains(&m),
                    "{} names cuda::{m}, above its layer (may: {layer}, {may:?})",
                    f.display()
                );
            }
            if !at_root {
                assert!(
                    !code.contains("super::super::"),
                    "{} reaches out of its layer with super::super::",
                    f.display()
                );
            }
        }
    }
}
