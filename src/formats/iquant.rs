//! The i-quant family: grid-codebook formats (IQ1–IQ3) and the non-linear IQ4 formats
//! (spec §4.14–§4.22). Tables in [`crate::formats::tables`].

pub mod iq1_m;
pub mod iq1_s;
pub mod iq2_s;
pub mod iq2_xs;
pub mod iq2_xxs;
pub mod iq3_s;
pub mod iq3_xxs;
pub mod iq4_nl;
pub mod iq4_xs;
