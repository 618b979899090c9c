//! `memlink effects`: each baseline's published effect in Table 2 against its round-level one.

use super::invalid;
use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Targets CSV (models/calibration-targets.csv).
    targets: PathBuf,
    /// Mark effects that differ by more than this many points.
    #[arg(long, default_value_t = 10.0)]
    threshold: f64,
}

pub fn exec(a: Args) -> Result<()> {
    if !(a.threshold.is_finite() && a.threshold >= 0.0) {
        return Err(invalid("threshold", "a non-negative number of points"));
    }
    let targets = memlink::study::calibrate::read_targets(&a.targets)?;
    let effects = memlink::study::calibrate::effects::effects(&targets);
    print!("{}", memlink::study::calibrate::effects::markdown(&effects, a.threshold));
    Ok(())
}
