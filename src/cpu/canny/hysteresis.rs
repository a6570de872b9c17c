//! Canny's last stage: hysteresis by an exact flood fill from the strong pixels through
//! 8-connected weak ones (never a fixed number of passes), then the edge map.

use super::{STRONG, WEAK};
use crate::image::GrayImage;

/// Hysteresis with exact connectivity: a depth-first flood fill from every [`STRONG`]
/// pixel through 8-connected [`WEAK`] ones (promoted to `STRONG` when pushed, so each pixel
/// is pushed once). Only strong pixels with a weak neighbour start a fill (the others
/// cannot reach anything), which gives the same set. Then writes `out` (`w x h`): 255 where `STRONG`, else 0.
pub fn hysteresis(w: usize, h: usize, class: &mut [u8], stack: &mut Vec<u32>, out: &mut GrayImage) {
    let pw = w + 2;
    empty_stack(stack, w * h);
    let mut tmp = Vec::new();
    for y in 1..=h {
        push_seeds(class, pw, y, &mut tmp, stack);
    }
    flood(w, h, class, stack);
    write_edges(w, h, class, out);
}

/// Pushes the padded index of every [`STRONG`] pixel of padded row `y` (`1..=h`) that has a
/// [`WEAK`] 8-neighbour: the only ones the flood fill can grow from (a weak pixel next to a
/// strong one makes that strong pixel a seed, so the fill reaches the same set). `tmp` is
/// a scratch buffer (resized to `2 * pw`).
///
/// Classes are 0, 1 or 2, so bit 0 marks weak pixels and bit 1 strong ones: the test is a
/// few byte-wise ORs / ANDs over the three rows (vectorised), then a scan that skips 8
/// bytes at a time where there is no seed.
#[inline(always)]
pub(super) fn push_seeds(
    class: &[u8],
    pw: usize,
    y: usize,
    tmp: &mut Vec<u8>,
    stack: &mut Vec<u32>,
) {
    let w = pw - 2;
    tmp.resize(2 * pw, 0);
    let (nb, seed) = tmp.split_at_mut(pw);
    let up = &class[(y - 1) * pw..y * pw];
    let mid = &class[y * pw..(y + 1) * pw];
    let down = &class[(y + 1) * pw..(y + 2) * pw];
    // Column ORs of the weak bit.
    for x in 0..pw {
        nb[x] = (up[x] | mid[x] | down[x]) & WEAK;
    }
    // seed[i] = 1 for a seed at padded column i + 1.
    let (l, c, r) = (&nb[..w], &nb[1..w + 1], &nb[2..w + 2]);
    let (m, seed) = (&mid[1..w + 1], &mut seed[..w]);
    for i in 0..w {
        seed[i] = (m[i] >> 1) & (l[i] | c[i] | r[i]);
    }
    let base = y * pw + 1;
    let mut chunks = seed.chunks_exact(8);
    let mut x = 0;
    for ch in &mut chunks {
        // Seeds are 0 or 1: bit 8i of the word is seed i. One branch per set bit rather
        // than one per byte.
        let mut bits = u64::from_le_bytes(ch.try_into().unwrap());
        while bits != 0 {
            stack.push((base + x + bits.trailing_zeros() as usize / 8) as u32);
            bits &= bits - 1;
        }
        x += 8;
    }
    for (i, &b) in chunks.remainder().iter().enumerate() {
        if b != 0 {
            stack.push((base + x + i) as u32);
        }
    }
}

/// The flood fill of [`hysteresis`] from the strong pixels already on `stack`.
pub(super) fn flood(w: usize, h: usize, class: &mut [u8], stack: &mut Vec<u32>) {
    let pw = w + 2;
    assert!(class.len() >= pw * (h + 2));
    let offsets = [
        -(pw as isize) - 1,
        -(pw as isize),
        -(pw as isize) + 1,
        -1,
        1,
        pw as isize - 1,
        pw as isize,
        pw as isize + 1,
    ];
    while let Some(i) = stack.pop() {
        for &o in &offsets {
            // The NONE ring keeps every neighbour index inside `class`.
            let n = (i as isize + o) as usize;
            if class[n] == WEAK {
                class[n] = STRONG;
                stack.push(n as u32);
            }
        }
    }
}

/// Clears the flood-fill stack and gives it room for `cap` pixels (each pixel is pushed at
/// most once, so it never grows mid-frame).
pub(super) fn empty_stack(stack: &mut Vec<u32>, cap: usize) {
    stack.clear();
    if stack.capacity() < cap {
        stack.reserve(cap);
    }
}

/// `out` (reshaped to `w x h`): 255 where the padded `class` is [`STRONG`], else 0.
pub(super) fn write_edges(w: usize, h: usize, class: &[u8], out: &mut GrayImage) {
    out.reshape(w, h);
    edge_rows(class, w, 0, &mut out.data);
}

/// The edge map's rows `y0 ..` into `out` (whole rows of `w`), from the padded `class`.
pub(super) fn edge_rows(class: &[u8], w: usize, y0: usize, out: &mut [u8]) {
    let pw = w + 2;
    for (i, row) in out.chunks_exact_mut(w).enumerate() {
        let y = y0 + i;
        let src = &class[(y + 1) * pw + 1..(y + 1) * pw + 1 + w];
        for (o, &c) in row.iter_mut().zip(src) {
            *o = if c == STRONG { 255 } else { 0 };
        }
    }
}
