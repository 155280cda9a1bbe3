//! Scalar helpers shared by the codecs: little-endian loads and the scale encodings of spec §2.
