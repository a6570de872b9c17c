//! A CDR string read strictly: its bytes (count, then the bytes, as a `uint8[]`) must end in
//! NUL and be UTF-8. Written by the crate's own `serialize_str`.
//! See the [module docs](super).

use serde::de::{Deserializer, Error, Visitor};

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct Text;
    impl Visitor<'_> for Text {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a NUL-terminated UTF-8 string")
        }
        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<String, E> {
            let text = match v.split_last() {
                // Some writers put a zero length for the empty string.
                None => return Ok(String::new()),
                Some((0, text)) => text,
                Some(_) => {
                    return Err(E::custom(
                        "a string is not NUL-terminated (wrong message type?)",
                    ))
                }
            };
            std::str::from_utf8(text)
                .map(str::to_owned)
                .map_err(|_| E::custom("a string is not UTF-8"))
        }
    }
    d.deserialize_bytes(Text)
}
