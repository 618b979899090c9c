//! Figures ([`plot`]): SVG or PNG, drawn with plotters from numbers the studies pass in. It
//! imports nothing but the error type, so any floor may draw.

pub mod plot;
