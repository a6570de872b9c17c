//! The kernel sources as one NVRTC translation unit: `kernels/*.cu` embedded at build time,
//! and the parts generated from data the CPU reference owns (the ORB test pattern). Both the
//! compiler (`context.rs`) and the tests read it; it imports no other CUDA module.

use crate::cpu::orb_pattern::ORB_PATTERN;

/// The kernel sources, in translation-unit order (the header first).
pub const SOURCES: &[(&str, &str)] = &[
    ("common.cuh", include_str!("../../../kernels/common.cuh")),
    ("decode.cu", include_str!("../../../kernels/decode.cu")),
    ("pyramid.cu", include_str!("../../../kernels/pyramid.cu")),
    (
        "fast_harris.cu",
        include_str!("../../../kernels/fast_harris.cu"),
    ),
    ("compact.cu", include_str!("../../../kernels/compact.cu")),
    ("orient.cu", include_str!("../../../kernels/orient.cu")),
    ("select.cu", include_str!("../../../kernels/select.cu")),
    ("canny.cu", include_str!("../../../kernels/canny.cu")),
    ("harris.cu", include_str!("../../../kernels/harris.cu")),
    ("describe.cu", include_str!("../../../kernels/describe.cu")),
    ("match.cu", include_str!("../../../kernels/match.cu")),
    ("lk.cu", include_str!("../../../kernels/lk.cu")),
    ("gftt.cu", include_str!("../../../kernels/gftt.cu")),
];

/// One translation unit: the files concatenated with `#line` markers (so NVRTC errors name
/// the right file and line), their `#include "..."` lines dropped.
pub fn translation_unit() -> String {
    let mut s = String::new();
    for (i, (name, text)) in SOURCES.iter().enumerate() {
        if i == 1 {
            // Data shared with the CPU reference, generated after the header.
            s.push_str("#line 1 \"orb_pattern (src/cpu/orb_pattern.rs)\"\n");
            s.push_str(&pattern_source());
        }
        s.push_str(&format!("#line 1 \"{name}\"\n"));
        for line in text.lines() {
            let t = line.trim_start();
            if t.starts_with("#include \"") || t.starts_with("#pragma once") {
                s.push('\n');
            } else {
                s.push_str(line);
                s.push('\n');
            }
        }
    }
    s
}

/// `ORB_PATTERN` as CUDA source, put after the header in the translation unit:
/// the table lives once, in src/cpu/orb_pattern.rs.
pub fn pattern_source() -> String {
    // describe.cu's DESC_R (18) bounds a rotated sample's offset by 13 * sqrt(2).
    assert!(
        ORB_PATTERN.iter().flatten().all(|v| v.abs() <= 13),
        "ORB pattern coordinate outside [-13, 13]"
    );
    let nums: Vec<String> = ORB_PATTERN
        .iter()
        .flatten()
        .map(|v| v.to_string())
        .collect();
    format!(
        "__device__ __align__(4) const signed char ORB_PATTERN[1024] = {{{}}};\n",
        nums.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Note "programmatic dependent launch" (kernels/common.cuh): a kernel launched while the
    /// one before it drains must wait for it before it touches memory, so every kernel's
    /// body starts with `wait_for_previous_kernel();`.
    #[test]
    fn every_kernel_first_waits_for_the_previous_one() {
        let mut kernels = 0;
        for (file, src) in SOURCES {
            for (at, _) in src.match_indices("__global__") {
                let body = at + src[at..].find('{').expect("a kernel body");
                let first = src[body + 1..].trim_start();
                let name = src[at..body].split('(').next().unwrap_or_default();
                assert!(
                    first.starts_with("wait_for_previous_kernel();"),
                    "{file}: {name} does not start with wait_for_previous_kernel()"
                );
                kernels += 1;
            }
        }
        assert!(kernels >= 25, "only {kernels} kernels found");
    }
}
