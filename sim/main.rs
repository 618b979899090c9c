//! The `memlink` command line: installs the allocator, parses the command line (`cli`, one
//! module per command), runs the command and maps its outcome to an exit code: 0 done, 2 the
//! user's input (a file or an option), 1 anything else.

mod cli;

use clap::Parser;
use std::process::ExitCode;

// The simulator allocates many small strings and vectors per memory item; mimalloc serves
// them several times faster than the system allocator (see benches/paper_run.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Output into a closed pipe (`memlink scenario s.ron | head`) ends the process quietly, as it
    // does for other Unix tools, instead of a panic from `println!`.
    // SAFETY: setting a signal's disposition to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    memlink::allocator::keep_freed_pages();
    match cli::Cli::parse().exec() {
        Ok(()) => ExitCode::SUCCESS,
        Err((e, code)) => {
            eprintln!("error: {e}");
            ExitCode::from(code)
        }
    }
}
