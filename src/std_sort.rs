//! libstdc++'s `std::sort` (GCC's introsort), step for step, for the consumers that sort
//! with it and keep what ties leave first: VINS's `setMask` (the tracker) and ORB-SLAM3's
//! `DistributeOctTree` node order (`select::quadtree`). For VINS, equal keys must end in the
//! order its `setMask` leaves them in on Linux: VINS sorts its tracks by count with
//! `std::sort` and a `>` comparator, which is not stable, and among tracks of one count the
//! one that comes first claims its disc. A stable sort keeps other tracks from the first
//! tie on (issue 44: on a slowly starting sequence that decided between an estimator that
//! initialises and one that diverges).
//!
//! The algorithm, as GCC's `bits/stl_algo.h` and `bits/stl_heap.h` define it: introsort
//! down to runs of 16 with the median of (second, middle, last) moved to the front and an
//! unguarded partition, a heap sort (`make_heap` + `sort_heap`) where the depth limit of
//! `2 * floor(log2 n)` runs out, then one insertion sort over the whole range (guarded on
//! the first 16). `tests/std_sort.rs` compares it with g++'s `std::sort` and with its
//! internal loop at small depth limits (the heap path) on random inputs with many ties.
//!
//! May import: nothing of the crate.

/// Sorts `v` as libstdc++'s `std::sort(v.begin(), v.end(), less)` does.
pub fn sort_by<T: Copy>(v: &mut [T], mut less: impl FnMut(&T, &T) -> bool) {
    let n = v.len();
    if n == 0 {
        return;
    }
    let depth = 2 * (usize::BITS - 1 - n.leading_zeros()) as usize;
    introsort_loop(v, depth, &mut less);
    final_insertion_sort(v, &mut less);
}

const THRESHOLD: usize = 16;

/// `std::__introsort_loop` on `v` with `depth` levels left (public for the tests, which
/// drive g++'s loop with the same small limits to reach the heap sort).
pub fn introsort_loop<T: Copy>(v: &mut [T], depth: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    let (mut last, mut depth) = (v.len(), depth);
    while last > THRESHOLD {
        if depth == 0 {
            make_heap(&mut v[..last], less);
            sort_heap(&mut v[..last], less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(&mut v[..last], less);
        introsort_loop(&mut v[cut..last], depth, less);
        last = cut;
    }
}

/// `std::__unguarded_partition_pivot`: the median of v[1], v[mid], v[last-1] swapped to
/// v[0], then the unguarded partition of v[1..] around it; returns the cut.
fn partition_pivot<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) -> usize {
    let n = v.len();
    let mid = n / 2;
    move_median_to_first(v, 1, mid, n - 1, less);
    let (mut first, mut last) = (1usize, n);
    loop {
        while less(&v[first], &v[0]) {
            first += 1;
        }
        last -= 1;
        while less(&v[0], &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

/// `std::__move_median_to_first(result = 0, a, b, c)`.
fn move_median_to_first<T: Copy>(
    v: &mut [T],
    a: usize,
    b: usize,
    c: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) {
    let m = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(0, m);
}

/// `std::__final_insertion_sort` (public for the tests, as [`introsort_loop`]).
pub fn final_insertion_sort<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    if v.len() > THRESHOLD {
        insertion_sort(&mut v[..THRESHOLD], less);
        for i in THRESHOLD..v.len() {
            unguarded_linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, less);
    }
}

/// `std::__insertion_sort`: an element below the first moves to the front in one shift.
fn insertion_sort<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    for i in 1..v.len() {
        if less(&v[i], &v[0]) {
            v[..=i].rotate_right(1);
        } else {
            unguarded_linear_insert(v, i, less);
        }
    }
}

/// `std::__unguarded_linear_insert`: v[i] moved down past every element it is less than
/// (something not greater stands below it).
fn unguarded_linear_insert<T: Copy>(
    v: &mut [T],
    mut i: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) {
    let val = v[i];
    while less(&val, &v[i - 1]) {
        v[i] = v[i - 1];
        i -= 1;
    }
    v[i] = val;
}

/// `std::__make_heap`.
fn make_heap<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    let len = v.len();
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        let value = v[parent];
        adjust_heap(v, parent, len, value, less);
        if parent == 0 {
            return;
        }
        parent -= 1;
    }
}

/// `std::__sort_heap`: `__pop_heap` from the back.
fn sort_heap<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    let mut last = v.len();
    while last > 1 {
        last -= 1;
        let value = v[last];
        v[last] = v[0];
        adjust_heap(v, 0, last, value, less);
    }
}

/// `std::__adjust_heap`: the hole at `hole` sifted down to a leaf along the larger
/// children, then `value` pushed up from there (`std::__push_heap`).
fn adjust_heap<T: Copy>(
    v: &mut [T],
    mut hole: usize,
    len: usize,
    value: T,
    less: &mut impl FnMut(&T, &T) -> bool,
) {
    let top = hole;
    let mut child = hole;
    while child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v[hole] = v[child];
        hole = child;
    }
    if len & 1 == 0 && len >= 2 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v[hole] = v[child - 1];
        hole = child - 1;
    }
    // __push_heap
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(&v[parent], &value) {
            break;
        }
        v[hole] = v[parent];
        hole = parent;
    }
    v[hole] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sorted by the key whatever the input (the order among ties is what the g++
    /// comparison in tests/std_sort.rs checks).
    #[test]
    fn sorts_by_the_key() {
        let mut seed = 12345u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in [0usize, 1, 2, 5, 16, 17, 33, 150, 400] {
            for depth in [0usize, 1, 64] {
                let mut v: Vec<(u32, usize)> = (0..n).map(|i| ((rnd() % 7) as u32, i)).collect();
                let mut sorted = v.clone();
                introsort_loop(&mut v, depth, &mut |a: &(u32, usize), b: &(u32, usize)| {
                    a.0 > b.0
                });
                final_insertion_sort(&mut v, &mut |a: &(u32, usize), b: &(u32, usize)| a.0 > b.0);
                assert!(
                    v.windows(2).all(|w| w[0].0 >= w[1].0),
                    "n {n} depth {depth}"
                );
                let mut idx: Vec<usize> = v.iter().map(|p| p.1).collect();
                idx.sort();
                assert_eq!(idx, (0..n).collect::<Vec<_>>(), "a permutation");
                sorted.sort_by_key(|p| std::cmp::Reverse(p.0));
                let keys = |x: &[(u32, usize)]| x.iter().map(|p| p.0).collect::<Vec<_>>();
                assert_eq!(keys(&v), keys(&sorted));
            }
        }
    }
}
