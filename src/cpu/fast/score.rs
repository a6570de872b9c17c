//! FAST's scores of a whole step of 32 centres at once, in saturating bytes: for steps with
//! many corners, where one [`super::lane_score`] each costs more.

use super::{ring_lanes, Window, BORDER, LANES};

/// The FAST scores ([`super::lane_score`]) of the step's `LANES` centres at once, for steps with
/// many corners (a low threshold on texture).
///
/// `ring_score`'s `max(0, max over arcs of min d, max over arcs of min -d) - 1` in bytes:
/// `min(max(d, 0))` over an arc is `max(min d, 0)`, so the saturating differences `p - v`
/// and `v - p` give the two polarities' arc minima (runs of 2, 4, 8 then 9) without i16.
#[inline(always)]
pub(super) fn score_lanes(win: &Window) -> [u8; LANES] {
    let v: [u8; LANES] = win[3][BORDER..BORDER + LANES].try_into().unwrap();
    let mut best = [0u8; LANES];
    for bright in [true, false] {
        let mut d = [[0u8; LANES]; 16];
        for (k, dk) in d.iter_mut().enumerate() {
            let p = ring_lanes(win, k);
            for i in 0..LANES {
                dk[i] = if bright {
                    p[i].saturating_sub(v[i])
                } else {
                    v[i].saturating_sub(p[i])
                };
            }
        }
        let m8 = min_run_lanes(&min_run_lanes(&min_run_lanes(&d, 1), 2), 4);
        for k in 0..16 {
            for i in 0..LANES {
                best[i] = best[i].max(m8[k][i].min(d[(k + 8) & 15][i]));
            }
        }
    }
    let mut out = [0u8; LANES];
    for i in 0..LANES {
        out[i] = best[i].saturating_sub(1);
    }
    out
}

/// `min(m[k], m[k + s])` (circularly) for every `k`.
#[inline(always)]
fn min_run_lanes(m: &[[u8; LANES]; 16], s: usize) -> [[u8; LANES]; 16] {
    let mut r = [[0u8; LANES]; 16];
    for k in 0..16 {
        for i in 0..LANES {
            r[k][i] = m[k][i].min(m[(k + s) & 15][i]);
        }
    }
    r
}
