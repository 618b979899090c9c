//! Test kits shipped with the library: the input fuzzer ([`fuzz`]) and the property-test
//! strategies over MAPLE-Guard's items ([`props`]).

pub mod fuzz;
pub mod props;
