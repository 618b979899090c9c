//! The process allocator's settings. The binaries serve the simulator's many small strings and
//! vectors with mimalloc (see `sim/main.rs`); this module holds what they set on it.

/// `mi_option_purge_delay` in mimalloc's `mi_option_t` (`include/mimalloc.h`, the same index in
/// its v2 and v3 sources bundled by `libmimalloc-sys` 0.1.49, pinned in `Cargo.lock`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps freed pages mapped instead of returning them to the operating system 10 ms after they
/// empty (mimalloc's default purge). A run with a store capacity frees and reallocates memory
/// items all the time: with the default purge the kernel zeroes each returned page again when
/// it is reused, which measured 12% of a 10,000-agent run's time (a perf profile,
/// `clear_page_erms`; docs/performance.md, "Scale"). Peak RSS grows a little, since freed pages are no longer
/// given back between peaks (1.19 → 1.24 GB on that run, 416 → 468 MB on the Table-2 grid). Call
/// it first in `main` of a binary whose global allocator is mimalloc; elsewhere it does nothing.
pub fn keep_freed_pages() {
    // SAFETY: `mi_option_set` only stores an option value (mimalloc reads it when it next
    // considers a purge); it takes no pointer and is safe to call at any time from any thread.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}
