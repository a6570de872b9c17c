//! cargo-fuzz target `frame`: the harness is `gpu_features::fuzzing::frame` (shared with
//! tests/fuzz_corpus.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gpu_features::fuzzing::frame(data);
});
