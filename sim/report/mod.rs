//! Figures: SVG or PNG, drawn with plotters from numbers the studies pass in ([`plot`]: the
//! studies' charts; [`spread`]: how poison spread over the communication graph). It imports
//! nothing but the error type, so any floor may draw.

pub mod plot;
pub mod spread;
