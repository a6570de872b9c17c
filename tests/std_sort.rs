//! `std_sort` against g++'s own `std::sort` (libstdc++, the library VINS-Fusion is
//! built with on Linux): the same permutation of equal keys, element for element, on random
//! inputs of VINS's shape (track counts with many ties, up to a few hundred tracks), and
//! g++'s internal `std::__introsort_loop` at small depth limits so that the heap sort runs
//! too. Needs a C++ compiler (`c++`); without one the test says SKIPPED.

use std::process::{Command, Stdio};

use gpu_features::std_sort;

const HARNESS: &str = r#"
#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>
// One case per line: depth (-1: std::sort) n key_0 .. key_{n-1}; prints the indices of the
// sorted pairs, VINS's comparator (a.first > b.first).
int main() {
  long depth; int n;
  while (std::scanf("%ld %d", &depth, &n) == 2) {
    std::vector<std::pair<int, int>> v(n);
    for (int i = 0; i < n; i++) { std::scanf("%d", &v[i].first); v[i].second = i; }
    auto cmp = [](const std::pair<int, int> &a, const std::pair<int, int> &b) { return a.first > b.first; };
    if (depth < 0) {
      std::sort(v.begin(), v.end(), cmp);
    } else if (n > 0) {
      std::__introsort_loop(v.begin(), v.end(), depth, __gnu_cxx::__ops::__iter_comp_iter(cmp));
      std::__final_insertion_sort(v.begin(), v.end(), __gnu_cxx::__ops::__iter_comp_iter(cmp));
    }
    for (auto &p : v) std::printf("%d ", p.second);
    std::printf("\n");
  }
}
"#;

#[test]
fn equals_libstdcxx_std_sort() {
    let dir = std::env::temp_dir().join(format!("gf-std-sort-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("h.cpp"), dir.join("h"));
    std::fs::write(&src, HARNESS).unwrap();
    let built = Command::new("c++")
        .args(["-O1", "-std=c++17", "-o"])
        .arg(&exe)
        .arg(&src)
        .status();
    if !matches!(built, Ok(s) if s.success()) {
        eprintln!("SKIPPED: no C++ compiler to build the libstdc++ harness ({built:?})");
        return;
    }
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut cases: Vec<(i64, Vec<i32>)> = Vec::new();
    for round in 0..600 {
        let n = match round % 6 {
            0 => (rnd() % 20) as usize,
            1 => 16 + (rnd() % 3) as usize,
            _ => (rnd() % 400) as usize,
        };
        // Track counts: mostly small, many ties (as after a few frames); some all equal.
        let span = [1u64, 3, 8, 40, 1000][round % 5];
        let keys: Vec<i32> = (0..n).map(|_| 1 + (rnd() % span) as i32).collect();
        let depth = if round % 3 == 0 {
            (rnd() % 4) as i64
        } else {
            -1
        };
        cases.push((depth, keys));
    }
    // Already sorted, reversed and organ-pipe inputs (the median-of-three's bad cases).
    for n in [17usize, 64, 150, 300] {
        cases.push((-1, (0..n as i32).collect()));
        cases.push((-1, (0..n as i32).rev().collect()));
        cases.push((-1, (0..n as i32).map(|i| i.min(n as i32 - i)).collect()));
    }
    let mut input = String::new();
    for (d, k) in &cases {
        input += &format!("{d} {}", k.len());
        for x in k {
            input += &format!(" {x}");
        }
        input.push('\n');
    }
    // Through a file: written whole before the harness starts, no pipe to fill both ways.
    let input_path = dir.join("cases.txt");
    std::fs::write(&input_path, input).unwrap();
    let out = Command::new(&exe)
        .stdin(Stdio::from(std::fs::File::open(&input_path).unwrap()))
        .output()
        .unwrap();
    assert!(out.status.success());
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), cases.len());
    let mut moved_ties = 0;
    for ((depth, keys), line) in cases.iter().zip(lines) {
        let want: Vec<usize> = line
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect();
        let mut v: Vec<(i32, usize)> = keys.iter().copied().zip(0..).collect();
        let mut less = |a: &(i32, usize), b: &(i32, usize)| a.0 > b.0;
        if *depth < 0 {
            std_sort::sort_by(&mut v, less);
        } else {
            std_sort::introsort_loop(&mut v, *depth as usize, &mut less);
            std_sort::final_insertion_sort(&mut v, &mut less);
        }
        let got: Vec<usize> = v.iter().map(|p| p.1).collect();
        assert_eq!(got, want, "depth {depth}, keys {keys:?}");
        // Count the inputs where the order among ties is not the stable one, so the test
        // is known to exercise what a stable sort would get wrong.
        let mut stable = keys.iter().copied().zip(0..).collect::<Vec<_>>();
        stable.sort_by_key(|p| std::cmp::Reverse(p.0));
        moved_ties += (stable.iter().map(|p| p.1).collect::<Vec<_>>() != got) as usize;
    }
    assert!(
        moved_ties > cases.len() / 2,
        "only {moved_ties} cases differ from a stable sort"
    );
    eprintln!(
        "{} cases equal g++'s std::sort; {moved_ties} of them not in stable order",
        cases.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
