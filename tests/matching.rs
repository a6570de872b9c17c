//! Brute-force Hamming matching: the CPU matcher against a plain loop written from the
//! definitions (bit by bit distance, full sort of the neighbours), the ratio / cross-check /
//! max-distance rules on hand-made cases, and the GPU matcher against the CPU one (equal
//! results, sizes up to 10k x 10k and off the block size).
//!
//! Without a usable GPU the GPU tests print `SKIPPED: no CUDA device: <reason>` and return.

use gpu_features::matching::{
    cpu, knn2, match_descriptors, Knn2, Match, MatchParams, Matcher, Neighbor,
};
use gpu_features::{BackendChoice, BackendKind, Descriptor};
use proptest::prelude::*;

mod shared;

// ---------------------------------------------------------------------------------------------
// The oracle: obviously correct, slow.

fn plain_distance(a: &Descriptor, b: &Descriptor) -> u32 {
    let mut d = 0;
    for byte in 0..32 {
        for bit in 0..8 {
            if (a[byte] >> bit) & 1 != (b[byte] >> bit) & 1 {
                d += 1;
            }
        }
    }
    d
}

/// Every train descriptor of `q`, sorted by (distance, index).
fn plain_ranking(q: &Descriptor, train: &[Descriptor]) -> Vec<Neighbor> {
    let mut all: Vec<Neighbor> = train
        .iter()
        .enumerate()
        .map(|(j, t)| Neighbor {
            index: j as u32,
            distance: plain_distance(q, t),
        })
        .collect();
    all.sort_by_key(|n| (n.distance, n.index));
    all
}

fn plain_knn2(query: &[Descriptor], train: &[Descriptor]) -> Vec<Knn2> {
    query
        .iter()
        .map(|q| {
            let r = plain_ranking(q, train);
            Knn2 {
                best: r.first().copied(),
                second: r.get(1).copied(),
            }
        })
        .collect()
}

fn plain_matches(query: &[Descriptor], train: &[Descriptor], p: &MatchParams) -> Vec<Match> {
    let mut out = Vec::new();
    for (i, q) in query.iter().enumerate() {
        let r = plain_ranking(q, train);
        let Some(best) = r.first() else { continue };
        if let Some(max) = p.max_distance {
            if best.distance > max {
                continue;
            }
        }
        if let (Some(ratio), Some(second)) = (p.ratio, r.get(1)) {
            let keep = (best.distance as f32) < ratio * second.distance as f32;
            if !keep {
                continue;
            }
        }
        if p.cross_check {
            // The query nearest to the chosen train descriptor, ties to the lower index.
            let back = plain_ranking(&train[best.index as usize], query);
            if back[0].index != i as u32 {
                continue;
            }
        }
        out.push(Match {
            query: i as u32,
            train: best.index,
            distance: best.distance,
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Inputs.

/// SplitMix64: deterministic descriptors without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn descriptor(&mut self) -> Descriptor {
        let mut d = [0u8; 32];
        for c in d.chunks_mut(8) {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        d
    }
}

/// Uniform random descriptors.
fn random_set(rng: &mut Rng, n: usize) -> Vec<Descriptor> {
    (0..n).map(|_| rng.descriptor()).collect()
}

/// Descriptors close to a few bases (0..=3 flipped bits): many equal distances, exact
/// duplicates, and nearest neighbours that really are near.
fn clustered_set(rng: &mut Rng, bases: &[Descriptor], n: usize) -> Vec<Descriptor> {
    (0..n)
        .map(|_| {
            let mut d = bases[rng.below(bases.len() as u64) as usize];
            for _ in 0..rng.below(4) {
                let bit = rng.below(256) as usize;
                d[bit / 8] ^= 1 << (bit % 8);
            }
            d
        })
        .collect()
}

/// A query set and a train set with planted correspondences: train holds noisy copies (up to
/// 40 flipped bits) of part of the queries, shuffled, plus unrelated descriptors, as in
/// frame-to-frame matching.
fn planted_pair(rng: &mut Rng, n: usize, m: usize) -> (Vec<Descriptor>, Vec<Descriptor>) {
    let query = random_set(rng, n);
    let mut train = random_set(rng, m);
    for t in train.iter_mut() {
        if n > 0 && rng.below(2) == 0 {
            let mut d = query[rng.below(n as u64) as usize];
            for _ in 0..rng.below(41) {
                let bit = rng.below(256) as usize;
                d[bit / 8] ^= 1 << (bit % 8);
            }
            *t = d;
        }
    }
    (query, train)
}

fn param_grid() -> Vec<MatchParams> {
    let mut v = Vec::new();
    for ratio in [None, Some(0.8), Some(0.6), Some(1.0)] {
        for cross_check in [false, true] {
            for max_distance in [None, Some(40)] {
                v.push(MatchParams {
                    ratio,
                    cross_check,
                    max_distance,
                });
            }
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// CPU against the oracle.

#[test]
fn distance_is_the_bit_count() {
    let mut rng = Rng(1);
    for _ in 0..200 {
        let (a, b) = (rng.descriptor(), rng.descriptor());
        assert_eq!(cpu::distance(&a, &b), plain_distance(&a, &b));
    }
    assert_eq!(cpu::distance(&[0; 32], &[0xff; 32]), 256);
    assert_eq!(cpu::distance(&[0x5a; 32], &[0x5a; 32]), 0);
}

#[test]
fn small_and_empty_sets() {
    let mut rng = Rng(2);
    for n in 0..=3 {
        for m in 0..=3 {
            let (q, t) = (random_set(&mut rng, n), random_set(&mut rng, m));
            let k = knn2(&q, &t).unwrap();
            assert_eq!(k, plain_knn2(&q, &t), "{n} x {m}");
            assert_eq!(k.len(), n);
            for x in &k {
                assert_eq!(x.best.is_some(), m >= 1);
                assert_eq!(x.second.is_some(), m >= 2);
            }
            for p in param_grid() {
                assert_eq!(
                    match_descriptors(&q, &t, &p).unwrap(),
                    plain_matches(&q, &t, &p),
                    "{n} x {m} {p:?}"
                );
            }
        }
    }
}

#[test]
fn duplicates_tie_to_the_lower_index() {
    let d = [0x3c; 32];
    let train = vec![d; 5];
    let query = vec![d; 3];
    let k = knn2(&query, &train).unwrap();
    for x in &k {
        assert_eq!(
            x.best,
            Some(Neighbor {
                index: 0,
                distance: 0
            })
        );
        assert_eq!(
            x.second,
            Some(Neighbor {
                index: 1,
                distance: 0
            })
        );
    }
    // Every query's nearest is train 0, whose nearest query is query 0.
    let p = MatchParams {
        ratio: None,
        cross_check: true,
        max_distance: None,
    };
    let m = match_descriptors(&query, &train, &p).unwrap();
    assert_eq!(
        m,
        vec![Match {
            query: 0,
            train: 0,
            distance: 0
        }]
    );
    // Two equally near neighbours are ambiguous: the (strict) ratio test drops them.
    assert!(match_descriptors(&query, &train, &MatchParams::default())
        .unwrap()
        .is_empty());
}

/// `d` with its first `bits` bits flipped.
fn flipped(d: &Descriptor, bits: usize) -> Descriptor {
    let mut o = *d;
    for b in 0..bits {
        o[b / 8] ^= 1 << (b % 8);
    }
    o
}

#[test]
fn ratio_test_is_strict_in_f32() {
    let q = [0u8; 32];
    // Distances 8 and 10: 8 < 0.8 * 10 is false (0.8f32 * 10.0 rounds to exactly 8.0).
    let train = vec![flipped(&q, 10), flipped(&q, 8)];
    let run = |ratio: f32| {
        let p = MatchParams {
            ratio: Some(ratio),
            cross_check: false,
            max_distance: None,
        };
        match_descriptors(&[q], &train, &p).unwrap()
    };
    assert!(run(0.8).is_empty());
    assert_eq!(
        run(0.81),
        vec![Match {
            query: 0,
            train: 1,
            distance: 8
        }]
    );
    // Equal distances never pass a ratio <= 1; ratio > 1 keeps them.
    let tie = vec![flipped(&q, 8), flipped(&q, 8)];
    let p = |r| MatchParams {
        ratio: Some(r),
        cross_check: false,
        max_distance: None,
    };
    assert!(match_descriptors(&[q], &tie, &p(1.0)).unwrap().is_empty());
    assert_eq!(match_descriptors(&[q], &tie, &p(1.01)).unwrap().len(), 1);
    // A single train descriptor has no second neighbour: the ratio test passes.
    assert_eq!(
        match_descriptors(&[q], &tie[..1], &p(0.1)).unwrap().len(),
        1
    );
    // Distance 0 against 0: 0 < r * 0 is false.
    assert!(match_descriptors(&[q], &[q, q], &p(2.0))
        .unwrap()
        .is_empty());
}

#[test]
fn max_distance_is_inclusive() {
    let q = [0u8; 32];
    let train = vec![flipped(&q, 12)];
    let p = |d| MatchParams {
        ratio: None,
        cross_check: false,
        max_distance: Some(d),
    };
    assert_eq!(match_descriptors(&[q], &train, &p(12)).unwrap().len(), 1);
    assert!(match_descriptors(&[q], &train, &p(11)).unwrap().is_empty());
}

#[test]
fn cross_check_keeps_mutual_nearest_only() {
    let base = [0u8; 32];
    // Query 0 and query 1 both prefer train 0; train 0 prefers query 1 (distance 1 < 2).
    let query = vec![flipped(&base, 2), flipped(&base, 1)];
    let train = vec![base, flipped(&base, 100)];
    let p = MatchParams {
        ratio: None,
        cross_check: true,
        max_distance: None,
    };
    assert_eq!(
        match_descriptors(&query, &train, &p).unwrap(),
        vec![Match {
            query: 1,
            train: 0,
            distance: 1
        }]
    );
    let all = match_descriptors(&query, &train, &MatchParams::all()).unwrap();
    assert_eq!(all.len(), 2);
}

#[test]
fn defaults_are_ratio_08_and_cross_check() {
    let p = MatchParams::default();
    assert_eq!(p.ratio, Some(0.8));
    assert!(p.cross_check);
    assert_eq!(p.max_distance, None);
}

#[test]
fn planted_sets_match_the_oracle() {
    let mut rng = Rng(3);
    for &(n, m) in &[(37, 53), (64, 64), (130, 70), (5, 300)] {
        let (q, t) = planted_pair(&mut rng, n, m);
        assert_eq!(knn2(&q, &t).unwrap(), plain_knn2(&q, &t), "{n} x {m}");
        for p in param_grid() {
            let got = match_descriptors(&q, &t, &p).unwrap();
            assert_eq!(got, plain_matches(&q, &t, &p), "{n} x {m} {p:?}");
            assert!(got.windows(2).all(|w| w[0].query < w[1].query));
        }
    }
}

#[test]
fn matcher_cpu_reuses_its_buffers_and_agrees() {
    let mut m = Matcher::new(BackendChoice::Cpu).unwrap();
    assert_eq!(m.backend(), BackendKind::Cpu);
    let mut rng = Rng(4);
    let mut out = Vec::new();
    let mut knn = Vec::new();
    for &(n, mm) in &[(50, 60), (3, 2), (0, 4), (4, 0), (80, 80)] {
        let (q, t) = planted_pair(&mut rng, n, mm);
        for p in param_grid() {
            m.match_into(&q, &t, &p, &mut out).unwrap();
            assert_eq!(out, match_descriptors(&q, &t, &p).unwrap());
        }
        m.knn2_into(&q, &t, &mut knn).unwrap();
        assert_eq!(knn, plain_knn2(&q, &t));
    }
}

fn descriptor_strategy() -> impl Strategy<Value = Descriptor> {
    // Few distinct bytes: many exact duplicates and equal distances.
    prop::array::uniform32(prop::sample::select(vec![0x00u8, 0x01, 0x80, 0xff]))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn prop_cpu_equals_the_oracle(
        query in prop::collection::vec(descriptor_strategy(), 0..24),
        train in prop::collection::vec(descriptor_strategy(), 0..24),
        ratio in prop::option::of(0.3f32..1.3),
        cross_check in any::<bool>(),
        max_distance in prop::option::of(0u32..200),
    ) {
        let p = MatchParams { ratio, cross_check, max_distance };
        prop_assert_eq!(knn2(&query, &train).unwrap(), plain_knn2(&query, &train));
        prop_assert_eq!(
            match_descriptors(&query, &train, &p).unwrap(),
            plain_matches(&query, &train, &p)
        );
    }

    #[test]
    fn prop_clustered_cpu_equals_the_oracle(seed in any::<u64>(), n in 0usize..40, m in 0usize..40) {
        let mut rng = Rng(seed);
        let bases = random_set(&mut rng, 3);
        let (q, t) = (clustered_set(&mut rng, &bases, n), clustered_set(&mut rng, &bases, m));
        prop_assert_eq!(knn2(&q, &t).unwrap(), plain_knn2(&q, &t));
        for p in param_grid() {
            prop_assert_eq!(match_descriptors(&q, &t, &p).unwrap(), plain_matches(&q, &t, &p));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GPU against CPU.

fn gpu_matcher(test: &str) -> Option<Matcher> {
    match Matcher::new(BackendChoice::Cuda) {
        Ok(m) => {
            #[cfg(feature = "cuda")]
            if let Some(c) = m.cuda() {
                let info = &c.gpu().module;
                eprintln!(
                    "{test}: {} ({}, kernels {} in {:.1} ms)",
                    c.gpu().name,
                    info.arch,
                    if info.from_cache {
                        "from cache"
                    } else {
                        "compiled"
                    },
                    info.ms
                );
            }
            Some(m)
        }
        Err(e) => {
            shared::skip_without_gpu(test, &e);
            None
        }
    }
}

/// GPU and CPU matchers on one input: knn2 and every parameter set must agree exactly.
fn check_gpu(gpu: &mut Matcher, cpu: &mut Matcher, q: &[Descriptor], t: &[Descriptor], what: &str) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    gpu.knn2_into(q, t, &mut a).unwrap();
    cpu.knn2_into(q, t, &mut b).unwrap();
    if a != b {
        let i = a.iter().zip(&b).position(|(x, y)| x != y);
        panic!(
            "{what}: knn2 differs (lengths {} / {}), first at query {i:?}: gpu {:?} cpu {:?}",
            a.len(),
            b.len(),
            i.map(|i| a[i]),
            i.map(|i| b[i])
        );
    }
    let (mut ma, mut mb) = (Vec::new(), Vec::new());
    for p in [
        MatchParams::default(),
        MatchParams::all(),
        MatchParams {
            ratio: Some(0.8),
            cross_check: false,
            max_distance: None,
        },
        MatchParams {
            ratio: None,
            cross_check: true,
            max_distance: Some(64),
        },
    ] {
        gpu.match_into(q, t, &p, &mut ma).unwrap();
        cpu.match_into(q, t, &p, &mut mb).unwrap();
        assert!(
            ma == mb,
            "{what} {p:?}: {} GPU matches vs {} CPU",
            ma.len(),
            mb.len()
        );
    }
}

#[test]
fn gpu_equals_cpu_small_and_odd_sizes() {
    let Some(mut gpu) = gpu_matcher("gpu_equals_cpu_small_and_odd_sizes") else {
        return;
    };
    let mut cpu = Matcher::new(BackendChoice::Cpu).unwrap();
    let mut rng = Rng(10);
    let sizes = [
        (0, 0),
        (0, 7),
        (7, 0),
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 2),
        (31, 33),
        (127, 129),
        (128, 128),
        (129, 127),
        (257, 1000),
        (1000, 257),
        (2000, 2000),
        (3001, 777),
        (50, 5000),
        (5000, 3),
    ];
    for &(n, m) in &sizes {
        let (q, t) = planted_pair(&mut rng, n, m);
        check_gpu(&mut gpu, &mut cpu, &q, &t, &format!("planted {n} x {m}"));
        let bases = random_set(&mut rng, 4);
        let (q, t) = (
            clustered_set(&mut rng, &bases, n),
            clustered_set(&mut rng, &bases, m),
        );
        check_gpu(&mut gpu, &mut cpu, &q, &t, &format!("clustered {n} x {m}"));
        // All duplicates: every distance ties.
        let d = rng.descriptor();
        let (q, t) = (vec![d; n], vec![d; m]);
        check_gpu(&mut gpu, &mut cpu, &q, &t, &format!("duplicates {n} x {m}"));
    }
}

#[test]
fn gpu_equals_cpu_10k() {
    let Some(mut gpu) = gpu_matcher("gpu_equals_cpu_10k") else {
        return;
    };
    let mut cpu = Matcher::new(BackendChoice::Cpu).unwrap();
    let mut rng = Rng(11);
    let (q, t) = planted_pair(&mut rng, 10_000, 10_000);
    check_gpu(&mut gpu, &mut cpu, &q, &t, "planted 10000 x 10000");
    let bases = random_set(&mut rng, 16);
    let (q, t) = (
        clustered_set(&mut rng, &bases, 10_000),
        clustered_set(&mut rng, &bases, 9_999),
    );
    check_gpu(&mut gpu, &mut cpu, &q, &t, "clustered 10000 x 9999");
    // Smaller again after the large call: the grown buffers are reused.
    let (q, t) = planted_pair(&mut rng, 333, 4444);
    check_gpu(&mut gpu, &mut cpu, &q, &t, "planted 333 x 4444 after 10k");
}

/// `Matcher::for_pipeline`: the CPU matcher beside a CPU pipeline; beside a CUDA pipeline the
/// GPU matcher in that pipeline's own session (the same `Gpu`: one context, one kernel
/// load), equal to the CPU matcher on the pipeline's own descriptors of two real frames
/// and on planted sets.
#[test]
fn matcher_for_a_pipeline_shares_its_session() {
    use gpu_features::{Config, Features, ImageView, Pipeline};
    let cpu_pipe = Pipeline::new(Config::default(), BackendChoice::Cpu).unwrap();
    let m = Matcher::for_pipeline(&cpu_pipe);
    assert_eq!(m.backend(), BackendKind::Cpu);
    assert_eq!(m.fallback_reason(), None);
    let test = "matcher_for_a_pipeline_shares_its_session";
    let mut pipe = match Pipeline::new(Config::default(), BackendChoice::Cuda) {
        Ok(p) => p,
        Err(e) => return shared::skip_without_gpu(test, &e),
    };
    let mut gpu = Matcher::for_pipeline(&pipe);
    assert_eq!(gpu.fallback_reason(), None);
    #[cfg(feature = "cuda")]
    {
        let session = pipe.gpu_session().expect("a CUDA pipeline's session");
        let c = gpu.cuda().expect("the GPU matcher");
        assert!(std::ptr::eq(c.gpu(), &*session), "a second GPU session");
    }
    let mut descriptors = Vec::new();
    for k in [0, 3] {
        let path = format!(
            "{}/tests/data/seq/cockatoo_0{k}.png",
            env!("CARGO_MANIFEST_DIR")
        );
        let img = gpu_features::cpu::decode::load_gray(std::path::Path::new(&path)).unwrap();
        let view =
            ImageView::new(&img.data, img.width, img.height, img.width, "mono8", false).unwrap();
        let mut f = Features::default();
        pipe.process_into(&view, &mut f).unwrap();
        descriptors.push(f.descriptors);
    }
    assert!(
        descriptors.iter().all(|d| d.len() > 100),
        "descriptors per frame"
    );
    let mut cpu = Matcher::new(BackendChoice::Cpu).unwrap();
    let (q, t) = (&descriptors[1], &descriptors[0]);
    check_gpu(&mut gpu, &mut cpu, q, t, "the pipeline's frames 3 -> 0");
    eprintln!(
        "{test}: {} x {} descriptors, same matches",
        q.len(),
        t.len()
    );
    let (q, t) = planted_pair(&mut Rng(7), 700, 900);
    check_gpu(&mut gpu, &mut cpu, &q, &t, "planted 700 x 900");
}
