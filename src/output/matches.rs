//! The `matches` PointCloud2 layout (node option `match.previous`): the descriptor matches of
//! a frame's keypoints to the previous frame's, in a standard message with the current
//! frame's header, so `message_filters` can pair it with `keypoints` by stamp.
//!
//! One point per match, `height = 1`, `width = n`, little-endian, `is_dense = true`, three
//! INT32 fields (datatype 5, count 1), `point_step = 12`, sorted by `current`:
//!
//! | field    | offset | meaning                                                        |
//! |----------|--------|----------------------------------------------------------------|
//! | current  | 0      | index of the keypoint in this frame's `keypoints` message       |
//! | previous | 4      | index of the keypoint in the previous frame's `keypoints`       |
//! | distance | 8      | Hamming distance of the two descriptors (0..=256)              |

use super::pointcloud::Field;
use crate::matching::Match;

/// `sensor_msgs/PointField` INT32.
pub const INT32: u8 = 5;
pub const POINT_STEP: usize = 12;

pub const FIELDS: [Field; 3] = [
    Field {
        name: "current",
        offset: 0,
        datatype: INT32,
        count: 1,
    },
    Field {
        name: "previous",
        offset: 4,
        datatype: INT32,
        count: 1,
    },
    Field {
        name: "distance",
        offset: 8,
        datatype: INT32,
        count: 1,
    },
];

/// Writes `matches` (query = current frame, train = previous frame) to `out` (cleared
/// first; capacity reused).
pub fn encode(matches: &[Match], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(matches.len() * POINT_STEP);
    for m in matches {
        for v in [m.query, m.train, m.distance] {
            out.extend_from_slice(&(v as i32).to_le_bytes());
        }
    }
}

/// Reads back what [`encode`] wrote; `None` if the buffer is not whole points or holds a
/// negative index.
pub fn decode(data: &[u8]) -> Option<Vec<Match>> {
    if data.len() % POINT_STEP != 0 {
        return None;
    }
    data.chunks_exact(POINT_STEP)
        .map(|p| {
            let v = |i: usize| {
                u32::try_from(i32::from_le_bytes(p[4 * i..4 * i + 4].try_into().unwrap())).ok()
            };
            Some(Match {
                query: v(0)?,
                train: v(1)?,
                distance: v(2)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_layout() {
        let m = vec![
            Match {
                query: 0,
                train: 7,
                distance: 12,
            },
            Match {
                query: 3,
                train: 1,
                distance: 256,
            },
        ];
        let mut buf = Vec::new();
        encode(&m, &mut buf);
        assert_eq!(buf.len(), 24);
        assert_eq!(&buf[12..16], &3i32.to_le_bytes());
        assert_eq!(decode(&buf).unwrap(), m);
        assert!(decode(&buf[..5]).is_none());
        let mut neg = buf.clone();
        neg[4..8].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(decode(&neg).is_none());
        let end = FIELDS.last().map(|f| f.offset as usize + 4);
        assert_eq!(end, Some(POINT_STEP));
    }
}
