//! The floor under `wmrender render`'s time that wmrender's own code cannot lower: reading the YAML at all.
//!
//! `benches/render.py` runs this on the input it renders and prints the result beside wmrender's, measured in the
//! same run. Two passes over the same text:
//!
//! - `events`: granit-parser's events, the tokenizer and parser wmrender's reader is built on, with the options
//!   wmrender's reader gives it (comments not emitted) and nothing kept;
//! - `serde-saphyr`: serde-saphyr deserializing into `IgnoredAny`, the parser and serde's layer, building nothing,
//!   with a node and scalar budget that grows with the text as wmrender's does (its fixed default refuses the
//!   100,000-entry input).
//!
//! Usage: `yaml-floor FILE [RUNS] [PASS]`: prints one `NAME SECONDS` line per pass, each the median of RUNS
//! (default 11); PASS (`events` or `serde-saphyr`) runs that pass alone, so that an instruction counter run on this
//! process counts one pass and nothing else of note.

use serde::de::IgnoredAny;
use serde_saphyr::granit_parser::{Options, Parser};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const PASSES: [&str; 2] = ["events", "serde-saphyr"];

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(path), runs, pass) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: yaml-floor FILE [RUNS] [events|serde-saphyr]");
        return ExitCode::from(2);
    };
    let runs = match runs.map(|r| r.parse::<usize>()) {
        None => 11,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("yaml-floor: RUNS must be a whole number above 0");
            return ExitCode::from(2);
        }
    };
    let passes: Vec<&str> = match pass.as_deref() {
        None => PASSES.to_vec(),
        Some(p) if PASSES.contains(&p) => vec![p],
        Some(p) => {
            eprintln!("yaml-floor: unknown pass `{p}` (events or serde-saphyr)");
            return ExitCode::from(2);
        }
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("yaml-floor: cannot read {path}: {e}");
            return ExitCode::from(2);
        }
    };
    for name in passes {
        let result = match name {
            "events" => median(runs, || events(&text)),
            _ => median(runs, || serde_pass(&text)),
        };
        match result {
            Ok(time) => println!("{name} {:.6}", time.as_secs_f64()),
            Err(e) => {
                eprintln!("yaml-floor: {path} is not YAML the parser reads: {e}");
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}

/// granit-parser's events, counted, with the options wmrender's reader (src/inputs/yaml/build.rs) sets.
fn events(text: &str) -> Result<usize, String> {
    let mut options = Options::default();
    options.emit_comments = false;
    let mut parser = Parser::new_from_str_with_options(text, options);
    let mut count = 0;
    while let Some(event) = parser.next_event() {
        event.map_err(|e| e.to_string())?;
        count += 1;
    }
    Ok(count)
}

/// serde-saphyr's pass into `IgnoredAny`, with budgets no smaller than its defaults that grow with the text, as
/// wmrender's reader allows (every node of a file without aliases takes at least one byte of it).
fn serde_pass(text: &str) -> Result<IgnoredAny, serde_saphyr::Error> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_nodes: text.len().max(250_000),
            max_total_scalar_bytes: text.len().max(64 * 1024 * 1024),
        },
    };
    serde_saphyr::from_str_with_options(text, options)
}

/// The median time of `runs` calls of `pass`, or its error.
fn median<T, E: std::fmt::Display>(runs: usize, mut pass: impl FnMut() -> Result<T, E>) -> Result<Duration, String> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        std::hint::black_box(pass().map_err(|e| e.to_string())?);
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[runs / 2])
}
