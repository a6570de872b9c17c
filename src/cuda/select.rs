//! Budget + spatial spread for the CUDA backend, on the host: the GPU hands over every
//! candidate (raster order, FAST score, Harris response, angle), and this runs the CPU
//! reference's own selection functions on them, in the CPU's level loop order
//! (`cpu::detect_keypoints`), so the selected set is the CPU's by construction.

use super::fast_harris::Candidate;
use crate::config::Config;
use crate::cpu::{self, select, Corner};
use crate::pipeline::Keypoint;

/// `levels`: (width, height) per level; `ranges`: (count, base) per level into `cands`.
pub fn assemble(
    cfg: &Config,
    levels: &[(usize, usize)],
    ranges: &[(usize, usize)],
    cands: &[Candidate],
) -> Vec<Keypoint> {
    let budget = cfg.select.max_keypoints as usize;
    let per_level = select::features_per_level(budget, levels.len(), cfg.pyramid.scale_factor);
    let mut out = Vec::new();
    for (level, (&(w, h), &(count, base))) in levels.iter().zip(ranges).enumerate() {
        let lc = &cands[base.min(cands.len())..(base + count).min(cands.len())];
        let mut corners: Vec<Corner> = lc
            .iter()
            .map(|c| Corner {
                x: c.x(),
                y: c.y(),
                fast_score: c.fast_score as u8,
                response: c.fast_score as f32,
            })
            .collect();
        // Candidates are in raster order, so (y, x) keys are sorted: binary search.
        let find = |c: &Corner| {
            let key = c.x | c.y << 16;
            &lc[lc.binary_search_by_key(&key, |k| k.xy).expect("candidate")]
        };
        let n = (budget > 0).then_some(per_level[level]);
        cpu::select_level(cfg, &mut corners, n, w, h, |c| find(c).response);
        for c in corners {
            let angle = if cfg.orient.enabled {
                find(&c).angle
            } else {
                -1.0
            };
            out.push(cpu::to_keypoint(cfg, level, &c, angle));
        }
    }
    out
}
