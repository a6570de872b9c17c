//! Foxglove image annotations of a frame's keypoints (`foxglove_msgs/msg/ImageAnnotations`):
//! what the replay writes beside each frame (`<image>/keypoints/annotations`) and the node
//! publishes with `foxglove_annotations` (`keypoints/annotations`), one encoder for both, so
//! the two give the same bytes for the same frame.
//!
//! The picture: one `POINTS` annotation (every keypoint, coloured by its pyramid level), one
//! `LINE_LIST` with each oriented keypoint's angle (a radius of `size / 2`, same colour), and
//! a "N keypoints" label at the top left. [`KeypointAnnotations`] keeps its message and
//! bytes from frame to frame: once warm, a frame of no more keypoints than before allocates
//! nothing (the node's rule for its hot path).

use std::fmt::Write as _;

use crate::cdr::{self, Color, Point2, PointsAnnotation, TextAnnotation, Time};
use crate::features::Keypoint;

/// One colour per pyramid level (cycled): green, yellow, orange, red, magenta, violet, blue,
/// cyan.
pub fn level_color(octave: i32) -> Color {
    const P: [(f64, f64, f64); 8] = [
        (0.0, 1.0, 0.0),
        (1.0, 1.0, 0.0),
        (1.0, 0.5, 0.0),
        (1.0, 0.0, 0.0),
        (1.0, 0.0, 1.0),
        (0.5, 0.3, 1.0),
        (0.0, 0.6, 1.0),
        (0.0, 1.0, 1.0),
    ];
    let (r, g, b) = P[octave.rem_euclid(8) as usize];
    Color { r, g, b, a: 1.0 }
}

const WHITE: Color = Color {
    r: 1.0,
    g: 1.0,
    b: 1.0,
    a: 1.0,
};
const SHADE: Color = Color {
    r: 0.0,
    g: 0.0,
    b: 0.0,
    a: 0.6,
};

fn empty_points(kind: u8, thickness: f64) -> PointsAnnotation {
    PointsAnnotation {
        timestamp: Time::default(),
        kind,
        points: Vec::new(),
        outline_color: level_color(0),
        outline_colors: Vec::new(),
        fill_color: Color::default(),
        thickness,
    }
}

/// The annotations message of a frame's keypoints, serialized into reused buffers.
pub struct KeypointAnnotations {
    /// Its `points` are always `[dots, lines]` between calls; a frame without an oriented
    /// keypoint is encoded without the (empty) lines, as the message always was.
    msg: cdr::ImageAnnotations,
    bytes: Vec<u8>,
}

impl Default for KeypointAnnotations {
    fn default() -> Self {
        KeypointAnnotations {
            msg: cdr::ImageAnnotations {
                circles: Vec::new(),
                points: vec![
                    empty_points(cdr::POINTS, 4.0),
                    empty_points(cdr::LINE_LIST, 1.0),
                ],
                texts: vec![TextAnnotation {
                    timestamp: Time::default(),
                    position: Point2 { x: 8.0, y: 20.0 },
                    text: String::new(),
                    font_size: 16.0,
                    text_color: WHITE,
                    background_color: SHADE,
                }],
            },
            bytes: Vec::new(),
        }
    }
}

impl KeypointAnnotations {
    /// The serialized `ImageAnnotations` (CDR, encapsulation header first) of `keypoints`,
    /// every annotation stamped `stamp`.
    pub fn encode(&mut self, stamp: Time, keypoints: &[Keypoint]) -> &[u8] {
        let [dots, lines] = &mut self.msg.points[..] else {
            unreachable!("KeypointAnnotations holds the dots and the lines")
        };
        dots.timestamp = stamp;
        dots.points.clear();
        dots.outline_colors.clear();
        for k in keypoints {
            dots.points.push(Point2 {
                x: k.x as f64,
                y: k.y as f64,
            });
            dots.outline_colors.push(level_color(k.octave));
        }
        lines.timestamp = stamp;
        lines.points.clear();
        lines.outline_colors.clear();
        for k in keypoints.iter().filter(|k| k.angle >= 0.0) {
            let a = (k.angle as f64).to_radians();
            let r = k.size as f64 / 2.0;
            let (x, y) = (k.x as f64, k.y as f64);
            lines.points.push(Point2 { x, y });
            lines.points.push(Point2 {
                x: x + r * a.cos(),
                y: y + r * a.sin(),
            });
            let c = level_color(k.octave);
            lines.outline_colors.extend([c, c]);
        }
        let label = &mut self.msg.texts[0];
        label.timestamp = stamp;
        label.text.clear();
        let _ = write!(label.text, "{} keypoints", keypoints.len());
        let parked = if lines.points.is_empty() {
            self.msg.points.pop()
        } else {
            None
        };
        cdr::encode_into(&self.msg, &mut self.bytes);
        self.msg.points.extend(parked);
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kp(x: f32, y: f32, angle: f32, octave: i32) -> Keypoint {
        Keypoint {
            x,
            y,
            response: 1.0,
            size: 31.0,
            angle,
            octave,
        }
    }

    #[test]
    fn the_message_holds_every_keypoint_its_angle_and_a_count() {
        let mut a = KeypointAnnotations::default();
        let stamp = Time { sec: 7, nanosec: 9 };
        let kps = [kp(10.0, 20.0, 0.0, 0), kp(30.5, 40.0, 90.0, 2)];
        let m = cdr::ImageAnnotations::decode(a.encode(stamp, &kps)).unwrap();
        assert_eq!(m.points.len(), 2);
        let (dots, lines) = (&m.points[0], &m.points[1]);
        assert_eq!((dots.kind, lines.kind), (cdr::POINTS, cdr::LINE_LIST));
        assert_eq!(dots.points[1], Point2 { x: 30.5, y: 40.0 });
        assert_eq!(dots.outline_colors[1], level_color(2));
        assert_eq!(lines.points.len(), 4);
        // 90 degrees points down the image (y grows downwards), radius size / 2.
        assert!((lines.points[3].x - 30.5).abs() < 1e-9);
        assert!((lines.points[3].y - 55.5).abs() < 1e-9);
        assert_eq!(lines.points[1], Point2 { x: 25.5, y: 20.0 });
        assert_eq!(m.texts[0].text, "2 keypoints");
        assert!(m.points.iter().all(|p| p.timestamp == stamp));
        assert_eq!(m.texts[0].timestamp, stamp);
    }

    #[test]
    fn a_frame_without_orientation_has_no_lines_and_reuse_changes_nothing() {
        let mut a = KeypointAnnotations::default();
        let t = Time::default();
        let oriented = [kp(1.0, 2.0, 45.0, 1), kp(3.0, 4.0, 10.0, 0)];
        let plain = [kp(5.0, 6.0, -1.0, 0)];
        let first = a.encode(t, &oriented).to_vec();
        let m = cdr::ImageAnnotations::decode(a.encode(t, &plain)).unwrap();
        assert_eq!(m.points.len(), 1, "no LINE_LIST without an angle");
        assert_eq!(m.texts[0].text, "1 keypoints");
        // The same frame again, after another: the same bytes as a fresh encoder gives.
        assert_eq!(a.encode(t, &oriented), &first[..]);
        assert_eq!(
            KeypointAnnotations::default().encode(t, &oriented),
            &first[..]
        );
        assert_eq!(
            KeypointAnnotations::default().encode(t, &[]),
            KeypointAnnotations::default().encode(t, &[]),
        );
    }
}
