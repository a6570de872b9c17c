//! cargo-fuzz target `config`: the harness is `gpu_features::fuzzing::config` (shared with
//! tests/fuzz_corpus.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gpu_features::fuzzing::config(data);
});
