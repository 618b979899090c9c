//! The synthetic embedder's similarity model, measured: cosine of each paper workload's task
//! queries to memories about the same task (related), to memories about tasks that share
//! content words with it (siblings) and to memories about unrelated tasks, at a range of
//! template-word weights (the model's contrast, `similarity.boilerplate`). The same table is
//! in reports/fidelity.md.
//!
//! Run: `cargo run --release --example similarity` (a few seconds).

fn main() {
    print!("{}", memlink::study::fidelity::similarity_table());
}
