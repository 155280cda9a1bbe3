//! The iquant family.

pub mod iq2_xxs;
pub mod iq2_xs;
pub mod iq3_xxs;
pub mod iq1_s;
pub mod iq4_nl;
pub mod iq3_s;
pub mod iq2_s;
pub mod iq4_xs;
pub mod iq1_m;
