//! `select.spread: quadtree`: ORB-SLAM3's `DistributeOctTree` (see [`quadtree`]).

use super::{by_rank, retain_best, Corner};

/// A quadtree node: the half-open box `[x0, x1) x [y0, y1)` and the corners inside it.
struct Node {
    x0: u32,
    y0: u32,
    x1: u32,
    y1: u32,
    pts: Vec<Corner>,
}

impl Node {
    /// Splittable while it holds several corners and is larger than a pixel (corners are
    /// distinct pixels, so this always ends).
    fn splittable(&self) -> bool {
        self.pts.len() > 1 && (self.x1 - self.x0 > 1 || self.y1 - self.y0 > 1)
    }

    /// ORB-SLAM3's `DivideNode`: halves rounded up, empty children dropped.
    fn split(self) -> Vec<Node> {
        let mx = self.x0 + (self.x1 - self.x0).div_ceil(2);
        let my = self.y0 + (self.y1 - self.y0).div_ceil(2);
        let mut kids: Vec<Node> = [
            (self.x0, self.y0, mx, my),
            (mx, self.y0, self.x1, my),
            (self.x0, my, mx, self.y1),
            (mx, my, self.x1, self.y1),
        ]
        .into_iter()
        .map(|(x0, y0, x1, y1)| Node {
            x0,
            y0,
            x1,
            y1,
            pts: Vec::new(),
        })
        .collect();
        for c in self.pts {
            let i = (c.x >= mx) as usize + 2 * (c.y >= my) as usize;
            kids[i].pts.push(c);
        }
        kids.retain(|k| !k.pts.is_empty());
        kids
    }
}

/// ORB-SLAM3's `DistributeOctTree`, made deterministic and budget-exact:
///
/// 1. `round(w / h)` (at least 1) root nodes side by side over the level.
/// 2. Every splittable node is split, round after round, until there are at least `n` nodes
///    or nothing can be split. When a full round could overshoot `n` (`nodes + 3 *
///    splittable > n`), nodes are split one at a time, most corners first (ties: top-left
///    node first, where ORB-SLAM3 uses pointer order), stopping as soon as `n` is reached.
/// 3. Each node keeps its best corner (ties by `(y, x)`).
///
/// Differences from ORB-SLAM3: it also stops when a whole round left the node count
/// unchanged (all corners of each node in one child), which can end early; here the loop
/// only ends when nothing is splittable. A final split may leave up to `n + 3` nodes, which
/// ORB-SLAM3 keeps; here the best `n` of them are kept ([`retain_best`]).
pub fn quadtree(corners: &mut Vec<Corner>, n: usize, width: usize, height: usize) {
    if n == 0 || corners.is_empty() {
        corners.clear();
        return;
    }
    // The box must contain every corner, even if the caller's size is off.
    let w = (width as u32).max(corners.iter().map(|c| c.x + 1).max().unwrap_or(1));
    let h = (height as u32).max(corners.iter().map(|c| c.y + 1).max().unwrap_or(1));
    let n_roots = ((w as f32 / h as f32).round() as u32).clamp(1, w);
    let root_w = w as f32 / n_roots as f32;
    let bound = |i: u32| {
        if i == n_roots {
            w
        } else {
            (root_w * i as f32) as u32
        }
    };
    let mut nodes: Vec<Node> = (0..n_roots)
        .map(|i| Node {
            x0: bound(i),
            y0: 0,
            x1: bound(i + 1),
            y1: h,
            pts: Vec::new(),
        })
        .collect();
    for &c in corners.iter() {
        let mut i = ((c.x as f32 / root_w) as u32).min(n_roots - 1) as usize;
        // Float rounding of the boundaries: move to the node that really holds x.
        while c.x < nodes[i].x0 {
            i -= 1;
        }
        while c.x >= nodes[i].x1 {
            i += 1;
        }
        nodes[i].pts.push(c);
    }
    nodes.retain(|nd| !nd.pts.is_empty());

    let mut first_round = true;
    while nodes.len() < n {
        let split_count = nodes.iter().filter(|nd| nd.splittable()).count();
        if split_count == 0 {
            break;
        }
        if first_round || nodes.len() + 3 * split_count <= n {
            // A full round (ORB-SLAM3 always splits all roots once).
            nodes = nodes
                .into_iter()
                .flat_map(|nd| {
                    if nd.splittable() {
                        nd.split()
                    } else {
                        vec![nd]
                    }
                })
                .collect();
        } else {
            // One at a time, most corners first, until the budget is met.
            let mut order: Vec<usize> = (0..nodes.len())
                .filter(|&i| nodes[i].splittable())
                .collect();
            order.sort_by(|&a, &b| {
                let (na, nb) = (&nodes[a], &nodes[b]);
                nb.pts
                    .len()
                    .cmp(&na.pts.len())
                    .then((na.y0, na.x0).cmp(&(nb.y0, nb.x0)))
            });
            let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
            let mut count = slots.len();
            let mut added = Vec::new();
            for i in order {
                if count >= n {
                    break;
                }
                let kids = slots[i].take().expect("split once").split();
                count += kids.len() - 1;
                added.extend(kids);
            }
            nodes = slots.into_iter().flatten().chain(added).collect();
        }
        first_round = false;
    }

    let mut kept: Vec<Corner> = nodes
        .iter()
        .map(|nd| {
            *nd.pts
                .iter()
                .min_by(|a, b| by_rank(a, b))
                .expect("non-empty")
        })
        .collect();
    retain_best(&mut kept, n);
    kept.sort_unstable_by_key(|c| (c.y, c.x));
    *corners = kept;
}
