//! `memlink scenario`: a scenario as memlink reads it, every default filled in.

use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Scenario file (RON).
    scenario: PathBuf,
}

pub fn exec(a: Args) -> Result<()> {
    let ls = memlink::scenario::load(&a.scenario)?;
    let config = ron::ser::PrettyConfig::default().struct_names(false);
    let body = ron::ser::to_string_pretty(&ls.scenario, config).expect("a loaded scenario serialises");
    println!(
        "// {} as memlink reads it, every default filled in (`memlink scenario`). Saved as a file, it\n\
         // runs as the original does: the same seed gives the same results. A ledger key shows as its\n\
         // fingerprint only; fields that are off by default and not set stay out.\n{body}",
        a.scenario.display()
    );
    Ok(())
}
