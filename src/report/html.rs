//! `report.html`: the report's Markdown as one self-contained HTML page (plots embedded as
//! `data:` URIs, inline CSS, nothing fetched from anywhere).
//!
//! Only the Markdown the reports write is understood: `#`/`##`/`###` headings, `- ` lists,
//! pipe tables (second row `|---|`), paragraphs, `![alt](file)` images on a line of their
//! own, and inline `` `code` `` and `**bold**`.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::{Error, Result};

const CSS: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;\
max-width:1040px;margin:2em auto;padding:0 1.2em;color:#1d1d1f;background:#fff;line-height:1.5}\
h1{font-size:1.8em;border-bottom:2px solid #d0d7de;padding-bottom:.3em}\
h2{font-size:1.35em;margin-top:2em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}\
table{border-collapse:collapse;margin:1em 0;font-size:.92em;display:block;overflow-x:auto}\
th,td{border:1px solid #d0d7de;padding:.3em .7em;text-align:left}\
th{background:#f3f5f7}tr:nth-child(even) td{background:#fafbfc}\
code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;background:#f3f5f7;\
padding:.1em .3em;border-radius:3px;font-size:.92em}\
figure{margin:1em 0 2em}img{max-width:100%;height:auto;border:1px solid #e1e4e8}\
figcaption{color:#57606a;font-size:.9em}";

/// Standard base64 (RFC 4648, with padding).
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Inline Markdown of one line: `code` spans and **bold**, the rest escaped.
fn inline(s: &str) -> String {
    let mut o = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(o, "<code>{}</code>", escape(part));
            continue;
        }
        for (j, t) in part.split("**").enumerate() {
            if j > 0 {
                o.push_str(if j % 2 == 1 { "<strong>" } else { "</strong>" });
            }
            o.push_str(&escape(t));
        }
        if part.split("**").count() % 2 == 0 {
            o.push_str("</strong>");
        }
    }
    o
}

fn cells(row: &str) -> Vec<&str> {
    let t = row.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    t.split('|').map(str::trim).collect()
}

fn is_separator(row: &str) -> bool {
    row.trim().starts_with('|') && row.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// `![alt](target)` alone on a line.
fn image_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim().strip_prefix("![")?;
    let (alt, rest) = rest.split_once("](")?;
    let target = rest.strip_suffix(')')?;
    Some((alt, target))
}

/// The HTML body of `md`; `image` turns an image target into the `src` to use.
pub fn body(md: &str, image: &dyn Fn(&str) -> Result<String>) -> Result<String> {
    let mut o = String::new();
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    let mut para: Vec<&str> = Vec::new();
    let flush = |o: &mut String, para: &mut Vec<&str>| {
        if !para.is_empty() {
            let text: Vec<String> = para.iter().map(|l| inline(l)).collect();
            let _ = writeln!(o, "<p>{}</p>", text.join("\n"));
            para.clear();
        }
    };
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_start();
        if t.is_empty() {
            flush(&mut o, &mut para);
            i += 1;
        } else if let Some(level) =
            (1..=3).find(|&n| t.starts_with(&"#".repeat(n)) && t[n..].starts_with(' '))
        {
            flush(&mut o, &mut para);
            let _ = writeln!(o, "<h{level}>{}</h{level}>", inline(t[level..].trim()));
            i += 1;
        } else if t.starts_with("- ") {
            flush(&mut o, &mut para);
            o.push_str("<ul>\n");
            while i < lines.len() && lines[i].trim_start().starts_with("- ") {
                let _ = writeln!(o, "<li>{}</li>", inline(&lines[i].trim_start()[2..]));
                i += 1;
            }
            o.push_str("</ul>\n");
        } else if t.starts_with('|') && lines.get(i + 1).is_some_and(|n| is_separator(n)) {
            flush(&mut o, &mut para);
            o.push_str("<table>\n<thead><tr>");
            for c in cells(t) {
                let _ = write!(o, "<th>{}</th>", inline(c));
            }
            o.push_str("</tr></thead>\n<tbody>\n");
            i += 2;
            while i < lines.len() && lines[i].trim_start().starts_with('|') {
                o.push_str("<tr>");
                for c in cells(lines[i]) {
                    let _ = write!(o, "<td>{}</td>", inline(c));
                }
                o.push_str("</tr>\n");
                i += 1;
            }
            o.push_str("</tbody>\n</table>\n");
        } else if let Some((alt, target)) = image_line(t) {
            flush(&mut o, &mut para);
            let _ = writeln!(
                o,
                "<figure><img src=\"{}\" alt=\"{}\"><figcaption>{}</figcaption></figure>",
                escape(&image(target)?),
                escape(alt),
                escape(target)
            );
            i += 1;
        } else {
            para.push(t);
            i += 1;
        }
    }
    flush(&mut o, &mut para);
    Ok(o)
}

/// A whole page from `md`, its images read from `dir` and embedded as PNG data URIs.
pub fn page(title: &str, md: &str, dir: &Path) -> Result<String> {
    let embed = |target: &str| -> Result<String> {
        if target.contains("..") || target.contains(':') || target.starts_with('/') {
            return Err(Error::Bag(format!(
                "report.html: image {target:?} is not a local file"
            )));
        }
        let p = dir.join(target);
        let bytes = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
        Ok(format!("data:image/png;base64,{}", base64(&bytes)))
    };
    let body = body(md, &embed)?;
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn report_markdown_becomes_html() {
        let md = "# Title\n\n- bag: `a<b>.mcap`\n- frames: 3\n\n## Latency (ms)\n\n\
                  | stage | p50 |\n|---|---:|\n| **decode** | 1.5 |\n| frame | 2 |\n\n\
                  A paragraph & more.\n\nCaption\n\n![Caption](plot.png)\n";
        let html = body(md, &|t| Ok(format!("data:{t}"))).unwrap();
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<h2>Latency (ms)</h2>"), "{html}");
        assert!(
            html.contains("<li>bag: <code>a&lt;b&gt;.mcap</code></li>"),
            "{html}"
        );
        assert!(html.contains("<th>stage</th><th>p50</th>"), "{html}");
        assert!(
            html.contains("<td><strong>decode</strong></td><td>1.5</td>"),
            "{html}"
        );
        assert_eq!(html.matches("<tr>").count(), 3, "{html}");
        assert!(html.contains("<p>A paragraph &amp; more.</p>"), "{html}");
        assert!(
            html.contains("<img src=\"data:plot.png\" alt=\"Caption\">"),
            "{html}"
        );
        assert!(!html.contains('|'), "{html}");
    }

    #[test]
    fn page_embeds_images_and_fetches_nothing() {
        let dir = std::env::temp_dir().join(format!("gpu_features_html_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("p.png"), b"\x89PNG-ish").unwrap();
        let page = page("T <1>", "# T\n\n![p](p.png)\n", &dir).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<title>T &lt;1&gt;</title>"));
        assert!(page.contains(&format!("data:image/png;base64,{}", base64(b"\x89PNG-ish"))));
        for external in ["http:", "https:", "<link", "<script", "@import", "url("] {
            assert!(!page.contains(external), "{external}");
        }
        // A missing plot or a path outside the directory is an error, not a broken page.
        assert!(page_err(&dir, "missing.png"));
        assert!(page_err(&dir, "../p.png"));
    }

    fn page_err(dir: &Path, target: &str) -> bool {
        page("t", &format!("![x]({target})\n"), dir).is_err()
    }
}
