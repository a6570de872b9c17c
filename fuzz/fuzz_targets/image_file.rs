//! cargo-fuzz target `image_file`: the harness is `gpu_features::fuzzing::image_file` (shared with
//! tests/fuzz_corpus.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gpu_features::fuzzing::image_file(data);
});
