//! The scripts the docs tell users to run: each exists and each shell script is executable
//! (a user runs `scripts/setup-orb-slam3.sh`, not `bash scripts/...`; a clean clone keeps the
//! mode git records, and one script without it failed the docs' first step on 2026-12-07).

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn shell_scripts(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            shell_scripts(&p, out);
        } else if p.extension().is_some_and(|x| x == "sh") {
            out.push(p);
        }
    }
}

#[cfg(unix)]
#[test]
fn every_shell_script_is_executable() {
    use std::os::unix::fs::PermissionsExt;
    let mut found = Vec::new();
    shell_scripts(&root().join("scripts"), &mut found);
    assert!(found.len() > 10, "{found:?}");
    let not: Vec<_> = found
        .iter()
        .filter(|p| std::fs::metadata(p).unwrap().permissions().mode() & 0o111 == 0)
        .collect();
    assert!(
        not.is_empty(),
        "not executable (chmod +x, then git add): {not:?}"
    );
}

#[test]
fn every_script_the_docs_name_exists() {
    let mut docs = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(p);
        }
    }
    let mut named = 0;
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (i, _) in text.match_indices("scripts/") {
            // The path as far as it goes: letters, digits, `_`, `-`, `/` and `.` (a trailing
            // sentence full stop dropped); only names with an extension (not folders).
            let rest = &text[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "_-/.".contains(c)))
                .unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches('.');
            let is_file = Path::new(path).extension().is_some();
            // Paths under other trees (../shared/orb-slam3/scripts/...) are not ours.
            let ours = i == 0 || !text[..i].ends_with(|c: char| c == '/' || c.is_alphanumeric());
            if is_file && ours && !path.contains('*') {
                named += 1;
                assert!(
                    root().join(path).exists(),
                    "{} names {path}, which does not exist",
                    doc.display()
                );
            }
        }
    }
    assert!(named > 20, "{named} script paths found in the docs");
}
