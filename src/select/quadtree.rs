//! `select.spread: quadtree`: ORB-SLAM3 v1.0's `DistributeOctTree`, step for step (see
//! [`quadtree`]).

use std::cell::RefCell;

use super::Corner;
use crate::std_sort;

/// Where the quadtree works and in which order its candidates come: the area ORB-SLAM3's
/// `ComputeKeyPointsOctTree` distributes over and the FAST cells it detected in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuadtreeArea {
    /// Level size.
    pub width: usize,
    pub height: usize,
    /// `detector.border` (ORB-SLAM3's `EDGE_THRESHOLD`): the box is `[border - 3,
    /// size - border + 3)` on both axes, the span of the FAST cells.
    pub border: u32,
    /// The FAST cell side when the candidates were detected per cell
    /// (`detector.low_threshold_retry`): ORB-SLAM3 collects them cell by cell, raster order
    /// inside each, and that order decides ties. `None`: raster order over the level.
    pub cell: Option<u32>,
}

/// A node: the box `[x0, x1) x [y0, y1)` in box-relative pixels (ORB-SLAM3's `UL`/`BR`)
/// and its corners, `buf[start..start + len]` in arrival order.
struct Node {
    x0: i32,
    y0: i32,
    x1: i32,
    y1: i32,
    start: u32,
    len: u32,
    /// ORB-SLAM3's `bNoMore`: set when a node is made with one corner.
    no_more: bool,
    alive: bool,
}

/// The nodes and their list order (ORB-SLAM3 keeps a `std::list` it pushes children to the
/// front of): `order` is the list at the start of a pass, `front` the nodes pushed during
/// it, in push order. A split partitions its node's corners in place (stably, children n1..n4
/// one after the other), so every node's corners stay one run of `buf`. One per thread,
/// reused from call to call (its buffers only grow), so a warm quadtree allocates nothing.
#[derive(Default)]
struct Tree {
    nodes: Vec<Node>,
    order: Vec<usize>,
    front: Vec<usize>,
    buf: Vec<Corner>,
    scratch: Vec<Corner>,
    /// [`Tree::settle`]'s next list.
    next: Vec<usize>,
    /// The nodes a round could split further, and the ones being split.
    expand: Vec<usize>,
    pending: Vec<usize>,
    /// [`bucket_stable`]'s counts and positions.
    counts: Vec<u32>,
    at: Vec<usize>,
    /// Box-relative origin.
    lo: u32,
}

thread_local! {
    static TREE: RefCell<Tree> = RefCell::new(Tree::default());
}

impl Tree {
    fn push(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// `DivideNode` of node `id`, its children pushed to the front in ORB-SLAM3's order
    /// (n1..n4, empty ones dropped) and the node erased; the children with more than one
    /// corner are appended to `expand` in push order. Returns the number of children.
    fn split(&mut self, id: usize, expand: &mut Vec<usize>) -> usize {
        let Node {
            x0,
            y0,
            x1,
            y1,
            start,
            len,
            ..
        } = self.nodes[id];
        // ceil(static_cast<float>(w) / 2)
        let hx = ((x1 - x0) as f32 / 2.0).ceil() as i32;
        let hy = ((y1 - y0) as f32 / 2.0).ceil() as i32;
        let (mx, my) = (x0 + hx, y0 + hy);
        let (s, e) = (start as usize, (start + len) as usize);
        let lo = self.lo as i32;
        let kid = |c: &Corner| {
            let (rx, ry) = (c.x as i32 - lo, c.y as i32 - lo);
            (rx >= mx) as usize + 2 * (ry >= my) as usize
        };
        // A stable partition of the run into the four children (n1, n2, n3, n4 order).
        let mut counts = [0u32; 4];
        for c in &self.buf[s..e] {
            counts[kid(c)] += 1;
        }
        let mut at = [
            0u32,
            counts[0],
            counts[0] + counts[1],
            counts[0] + counts[1] + counts[2],
        ];
        let first = at;
        self.scratch.clear();
        self.scratch.resize(e - s, self.buf[s]);
        for c in &self.buf[s..e] {
            let k = kid(c);
            self.scratch[at[k] as usize] = *c;
            at[k] += 1;
        }
        self.buf[s..e].copy_from_slice(&self.scratch);
        self.nodes[id].alive = false;
        let boxes = [
            (x0, y0, mx, my),
            (mx, y0, x1, my),
            (x0, my, mx, y1),
            (mx, my, x1, y1),
        ];
        let mut added = 0;
        for (k, (x0, y0, x1, y1)) in boxes.into_iter().enumerate() {
            if counts[k] == 0 {
                continue;
            }
            let many = counts[k] > 1;
            let child = self.push(Node {
                x0,
                y0,
                x1,
                y1,
                start: start + first[k],
                len: counts[k],
                no_more: !many,
                alive: true,
            });
            self.front.push(child);
            if many {
                expand.push(child);
            }
            added += 1;
        }
        added
    }

    /// The list after a pass: the pushed nodes (last pushed first), then what is left of
    /// the list the pass started from.
    fn settle(&mut self) {
        self.next.clear();
        self.next.extend(self.front.drain(..).rev());
        let nodes = &self.nodes;
        self.next
            .extend(self.order.iter().copied().filter(|&i| nodes[i].alive));
        std::mem::swap(&mut self.order, &mut self.next);
    }
}

/// `v` into `out` in ascending `key` order, stably, for small integer keys below `n` (a
/// counting sort); `counts[k]`: how many corners key `k` has. `at` is scratch.
fn bucket_stable(
    v: &[Corner],
    n: usize,
    key: impl Fn(&Corner) -> usize,
    out: &mut Vec<Corner>,
    counts: &mut Vec<u32>,
    at: &mut Vec<usize>,
) {
    counts.clear();
    counts.resize(n, 0);
    for c in v {
        counts[key(c)] += 1;
    }
    at.clear();
    let mut sum = 0usize;
    for &c in counts.iter() {
        at.push(sum);
        sum += c as usize;
    }
    out.clear();
    out.extend_from_slice(v);
    for c in v {
        let k = key(c);
        out[at[k]] = *c;
        at[k] += 1;
    }
}

/// ORB-SLAM3's `vToDistributeKeys` order: cell by cell (row-major) when the corners were
/// detected per FAST cell (`cell`), raster order inside a cell; raster order otherwise.
/// `lo` and `(w, h)`: the box.
fn arrival_order(
    corners: &mut Vec<Corner>,
    cell: Option<u32>,
    lo: i64,
    w: i64,
    h: i64,
    t: &mut Tree,
) {
    if corners
        .windows(2)
        .any(|p| (p[0].y, p[0].x) > (p[1].y, p[1].x))
    {
        corners.sort_unstable_by_key(|c| (c.y, c.x));
    }
    if let Some(cell) = cell {
        // Cell by cell from raster order (a stable bucket sort by cell keeps raster order
        // inside each).
        let cell = cell.max(1) as i64;
        let (cols, rows) = ((w / cell).max(1), (h / cell).max(1));
        let (cw, ch) = ((w + cols - 1) / cols, (h + rows - 1) / rows);
        // A cell's FAST window starts at lo + j * cw; its detections at 3 px inside it.
        let at = |v: u32, side: i64, count: i64| ((v as i64 - lo - 3) / side).clamp(0, count - 1);
        let key = |c: &Corner| (at(c.y, ch, rows) * cols + at(c.x, cw, cols)) as usize;
        let n = (rows * cols) as usize;
        bucket_stable(corners, n, key, &mut t.scratch, &mut t.counts, &mut t.at);
        // Copied back, not swapped: each buffer keeps its own capacity (a swap moved the
        // caller's capacity into this thread's tree and back in another order, so a
        // level's buffer could grow again on a later frame).
        corners.clear();
        corners.extend_from_slice(&t.scratch);
    }
}

impl Tree {
    /// Step 1: `round(w / h)` roots side by side over the `w x h` box at `lo`, each with its
    /// corners (in arrival order) as one run; the empty ones left out of the list.
    fn roots(&mut self, corners: &[Corner], lo: i64, w: i64, h: i64) {
        let n_ini = ((w as f32 / h as f32).round() as i32).max(1);
        let hx = w as f32 / n_ini as f32;
        let root_of =
            |c: &Corner| (((c.x as i64 - lo) as f32 / hx) as usize).min(n_ini as usize - 1);
        let n = n_ini as usize;
        bucket_stable(
            corners,
            n,
            root_of,
            &mut self.buf,
            &mut self.counts,
            &mut self.at,
        );
        self.nodes.clear();
        self.order.clear();
        self.front.clear();
        self.lo = lo as u32;
        let mut start = 0u32;
        for i in 0..n {
            let len = self.counts[i];
            let i = i as i32;
            let id = self.push(Node {
                x0: (hx * i as f32) as i32,
                y0: 0,
                x1: (hx * (i + 1) as f32) as i32,
                y1: h as i32,
                start,
                len,
                no_more: len == 1,
                alive: len > 0,
            });
            start += len;
            if len > 0 {
                self.order.push(id);
            }
        }
    }

    /// Step 2: rounds of splits until `n` nodes, a round that adds none, or the one-at-a-time
    /// splits of the biggest nodes that reach `n`.
    fn distribute(&mut self, n: usize) {
        let mut expand = std::mem::take(&mut self.expand);
        loop {
            let prev = self.order.len();
            expand.clear();
            for i in 0..self.order.len() {
                let id = self.order[i];
                if !self.nodes[id].no_more {
                    self.split(id, &mut expand);
                }
            }
            self.settle();
            let size = self.order.len();
            if size >= n || size == prev {
                break;
            }
            if size + expand.len() * 3 > n {
                self.split_biggest(n, size, &mut expand);
                break;
            }
        }
        self.expand = expand;
    }

    /// The last round could overshoot `n` (from `count` nodes): `expand`, sorted by
    /// (corners, left edge) with libstdc++'s `std::sort`, split from the back until `n`,
    /// then their children likewise, until `n` or a pass that adds nothing.
    fn split_biggest(&mut self, n: usize, mut count: usize, expand: &mut Vec<usize>) {
        let mut pending = std::mem::take(&mut self.pending);
        loop {
            let prev = count;
            std::mem::swap(&mut pending, expand);
            expand.clear();
            let nodes = &self.nodes;
            std_sort::sort_by(&mut pending, |&a, &b| {
                let (na, nb) = (&nodes[a], &nodes[b]);
                (na.len, na.x0) < (nb.len, nb.x0)
            });
            for &id in pending.iter().rev() {
                count += self.split(id, expand);
                count -= 1;
                if count >= n {
                    break;
                }
            }
            self.settle();
            if count >= n || count == prev {
                break;
            }
        }
        self.pending = pending;
    }

    /// Step 3: each node's first corner of the largest response, in list order, into `out`.
    fn best_per_node(&self, out: &mut Vec<Corner>) {
        out.clear();
        out.extend(self.order.iter().map(|&i| {
            let nd = &self.nodes[i];
            let pts = &self.buf[nd.start as usize..(nd.start + nd.len) as usize];
            let mut best = pts[0];
            for c in &pts[1..] {
                if c.response > best.response {
                    best = *c;
                }
            }
            best
        }));
    }
}

/// ORB-SLAM3 v1.0's `ORBextractor::DistributeOctTree` on one level, reproduced step for step
/// (its output set, count and order), for a budget of `n`:
///
/// 1. The box is `[border - 3, size - border + 3)` ([`QuadtreeArea`]); `round(w / h)` root
///    nodes (at least 1) of width `hX = w / nIni` (`f32`), their edges `int(hX * i)`; a
///    corner goes to root `int(x / hX)`. Empty roots are dropped.
/// 2. Rounds: every node with more than one corner is split in four (halves rounded up,
///    empty children dropped), the children pushed to the front of the list. The loop ends
///    when there are at least `n` nodes or a round added none. If a full round could
///    overshoot (`nodes + 3 * expandable > n`), the last round's children with more than
///    one corner are sorted by (corners, left edge) with libstdc++'s `std::sort` (not
///    stable: [`std_sort`]) and split from the back, stopping as soon as `n` is reached,
///    repeatedly until `n` is reached or a pass adds nothing. ORB-SLAM3 may so keep up to
///    `n + 2` nodes, and fewer than `n` when the corners run out.
/// 3. Each node, in list order, keeps its first corner of the largest response, in the
///    order the corners arrived: cell by cell (row-major), raster order inside a cell.
///
/// The result is in that node order (ORB-SLAM3's keypoint order within a level). Corners
/// outside the box (none from the detector) are dropped.
pub fn quadtree(corners: &mut Vec<Corner>, n: usize, area: QuadtreeArea) {
    let b = area.border.max(3) as i64;
    let lo = b - 3;
    let (w, h) = (
        area.width as i64 - b + 3 - lo,
        area.height as i64 - b + 3 - lo,
    );
    // The detector never yields a corner outside the box (they lie inside the border);
    // any other caller's are dropped, as ORB-SLAM3 has no node for them.
    let inside = |v: u32, len: i64| (lo..lo + len).contains(&(v as i64));
    corners.retain(|c| inside(c.x, w) && inside(c.y, h));
    if corners.is_empty() || w <= 0 || h <= 0 {
        corners.clear();
        return;
    }
    TREE.with(|t| {
        let t = &mut *t.borrow_mut();
        arrival_order(corners, area.cell, lo, w, h, t);
        t.roots(corners, lo, w, h);
        t.distribute(n);
        t.best_per_node(corners);
    });
}
