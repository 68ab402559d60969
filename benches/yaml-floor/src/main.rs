//! The floor under `wmrender render`'s time that wmrender's own code cannot lower: reading the YAML at all.
//!
//! `benches/render.py` runs this on the input it renders and prints the result beside `cp -r` of that render's
//! output, measured in the same run, so a speed goal stated against `cp -r` can be checked against what the
//! parser alone already costs. Two passes over the same text, each the median of RUNS:
//!
//! - `events`: granit-parser's events, the tokenizer and parser serde-saphyr is built on, with nothing kept;
//! - `serde-saphyr`: serde-saphyr deserializing into `IgnoredAny`, the parser and serde's layer, building nothing.
//!
//! Usage: `yaml-floor FILE [RUNS]`; prints one `NAME SECONDS` line per pass.

use serde::de::IgnoredAny;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(path), runs) = (args.next(), args.next()) else {
        eprintln!("usage: yaml-floor FILE [RUNS]");
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
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("yaml-floor: cannot read {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let events = median(runs, || {
        serde_saphyr::granit_parser::Parser::new_from_str(&text).try_fold(0usize, |n, event| event.map(|_| n + 1))
    });
    let serde = median(runs, || serde_saphyr::from_str::<IgnoredAny>(&text));
    for (name, result) in [("events", events), ("serde-saphyr", serde)] {
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
