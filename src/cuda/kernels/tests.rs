//! The wrappers against the kernel sources: same kernels, same parameter types in order.

use super::*;
use crate::cuda::driver::sources::SOURCES;
use crate::cuda::driver::KernelArg;

/// Every `extern "C" __global__` kernel of `text`: (name, the C type of each parameter with
/// `const`, `__restrict__` and the parameter name dropped).
fn kernels_in(text: &str) -> Vec<(String, Vec<String>)> {
    const HEAD: &str = "extern \"C\" __global__ void";
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(HEAD) {
        rest = rest[i + HEAD.len()..].trim_start();
        if let Some(bounds) = rest.strip_prefix("__launch_bounds__") {
            rest = &bounds[bounds.find(')').expect("unclosed __launch_bounds__") + 1..];
        }
        let open = rest.find('(').expect("a kernel without a parameter list");
        let name = rest[..open].trim().to_string();
        rest = &rest[open..];
        out.push((name, params_of(&mut rest)));
    }
    out
}

/// The parameter types of the list `rest` starts with (at its '('); moves `rest` past it.
fn params_of(rest: &mut &str) -> Vec<String> {
    let close = rest.find(')').expect("an unclosed parameter list");
    let list = &rest[1..close];
    *rest = &rest[close..];
    list.split(',')
        .map(|p| {
            let words: Vec<&str> = p
                .split_whitespace()
                .filter(|w| *w != "const" && *w != "__restrict__")
                .collect();
            // The last word is the name; a '*' may sit on either side of the space.
            let ty = words[..words.len() - 1].join(" ");
            let star = words.last().unwrap().starts_with('*') || ty.ends_with('*');
            format!(
                "{}{}",
                ty.trim_end_matches('*').trim(),
                if star { "*" } else { "" }
            )
        })
        .collect()
}

fn all_wrappers() -> Vec<(&'static str, &'static str, Vec<String>)> {
    [
        Decode::signatures(),
        Pyramid::signatures(),
        FastHarris::signatures(),
        Compact::signatures(),
        Orient::signatures(),
        Select::signatures(),
        Canny::signatures(),
        Harris::signatures(),
        Describe::signatures(),
        Match::signatures(),
        Lk::signatures(),
        Gftt::signatures(),
    ]
    .concat()
}

#[test]
fn wrappers_match_the_kernel_sources() {
    let wrappers = all_wrappers();
    let mut seen = 0;
    for (file, text) in SOURCES {
        for (name, params) in kernels_in(text) {
            seen += 1;
            let w = wrappers.iter().find(|w| w.0 == name).unwrap_or_else(|| {
                panic!("kernel {name} ({file}) has no wrapper in cuda::kernels")
            });
            assert_eq!(w.1, *file, "kernel {name}: the wrapper names another file");
            assert_eq!(
                w.2, params,
                "kernel {name} ({file}): the wrapper's parameter types differ from the source's"
            );
        }
    }
    assert_eq!(
        seen,
        wrappers.len(),
        "a wrapper for a kernel the sources lack"
    );
    assert_eq!(seen, 35);
}

#[test]
fn signature_parser_reads_pointers_bounds_and_structs() {
    let src =
        "extern \"C\" __global__ void __launch_bounds__(256, 6) a(const u8* __restrict__ p,\n \
               int n, LkPyr q, float4 *r) {}\nextern \"C\" __global__ void b(u32 *x) {}";
    assert_eq!(
        kernels_in(src),
        vec![
            (
                "a".to_string(),
                vec!["u8*".into(), "int".into(), "LkPyr".into(), "float4*".into()]
            ),
            ("b".to_string(), vec!["u32*".into()]),
        ]
    );
    // The Rust side of a few types.
    assert_eq!(<DevPtr<[u32; 2]> as KernelArg>::c_type(), "uint2*");
    assert_eq!(<LkArgs as KernelArg>::c_type(), "LkArgs");
}
