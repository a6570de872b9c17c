//! `select.spread: grid`: round robin over `cell_size` squares (see [`super::select`]).

use super::{by_rank, Corner};

pub fn grid(corners: &mut Vec<Corner>, n: usize, cell: usize) {
    let key = |c: &Corner| (c.y as usize / cell, c.x as usize / cell);
    // Cells in raster order, each best first.
    corners.sort_unstable_by(|a, b| key(a).cmp(&key(b)).then(by_rank(a, b)));
    // Rank of each corner within its cell.
    let mut rank = vec![0usize; corners.len()];
    for i in 1..corners.len() {
        if key(&corners[i]) == key(&corners[i - 1]) {
            rank[i] = rank[i - 1] + 1;
        }
    }
    let mut order: Vec<usize> = (0..corners.len()).collect();
    order.sort_unstable_by(|&a, &b| {
        rank[a]
            .cmp(&rank[b])
            .then(by_rank(&corners[a], &corners[b]))
    });
    order.truncate(n);
    let mut kept: Vec<Corner> = order.into_iter().map(|i| corners[i]).collect();
    kept.sort_unstable_by_key(|c| (c.y, c.x));
    *corners = kept;
}
