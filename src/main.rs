//! Entry point: parse the command line, run, and map every outcome to one exit code.

mod cli;

use clap::Parser;
use cli::{Cli, Command, OnlyPart, OutputFormat, RenderArgs, ValidateArgs};
use std::io::Write;
use std::process::ExitCode;
use wmrender::Part;
use wmrender::error::Error;

const OK: u8 = 0;
const DIFFERENT: u8 = 1;
const INVALID: u8 = 2;
const FAILED: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Render(args) => render(args),
        Command::Validate(args) => validate(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => ExitCode::from(report(&e)),
    }
}

/// Prints an error on stderr and returns its exit code.
fn report(e: &Error) -> u8 {
    match e {
        Error::Invalid(diags) => {
            eprint!("{}", diags.render_human());
            INVALID
        }
        Error::Usage(msg) => {
            eprintln!("error: {msg}");
            INVALID
        }
        Error::Io { .. } => {
            eprintln!("error: {e}");
            FAILED
        }
    }
}

fn render(args: RenderArgs) -> Result<u8, Error> {
    let only = args.only.map(|p| match p {
        OnlyPart::Cluster => Part::Cluster,
        OnlyPart::Node => Part::Node,
    });
    if args.stdout && only == Some(Part::Node) {
        return Err(Error::Usage("--stdout prints cluster objects; the node bundle needs -o DIR".into()));
    }
    let compiled = wmrender::compile(&args.inputs.file, args.inputs.strict)?;
    if !compiled.warnings.is_empty() {
        eprint!("{}", compiled.warnings.render_human());
    }
    if args.stdout {
        let stream = wmrender::render::stream(&compiled.artifacts.objects);
        let mut out = std::io::stdout().lock();
        out.write_all(stream.as_bytes()).and_then(|()| out.flush()).map_err(|e| Error::io("writing to stdout", e))?;
        return Ok(OK);
    }
    // clap guarantees -o when --stdout is absent.
    let Some(dir) = args.output_dir else {
        return Err(Error::Usage("give -o DIR or --stdout".into()));
    };
    let files = compiled.output_files(only);
    if args.check {
        let s = wmrender::emit::check::compare(&dir, &files)?;
        if s.is_current() {
            eprintln!("{} is up to date", dir.display());
            return Ok(OK);
        }
        eprint!("{}", s.diff);
        eprintln!("{}: {}", dir.display(), s.summary());
        return Ok(DIFFERENT);
    }
    wmrender::emit::directory::write(&dir, &files)?;
    eprintln!("wrote {} files to {}", files.len(), dir.display());
    Ok(OK)
}

fn validate(args: ValidateArgs) -> Result<u8, Error> {
    let result = wmrender::check_inputs(&args.inputs.file, args.inputs.strict);
    let (diags, code) = match result {
        Ok((_, warnings)) => (warnings, OK),
        Err(Error::Invalid(diags)) => (diags, INVALID),
        Err(e) => return Err(e),
    };
    match args.output {
        OutputFormat::Json => print!("{}", diags.render_json()),
        OutputFormat::Human if diags.is_empty() => {
            eprintln!("{}: valid", args.inputs.file.display())
        }
        OutputFormat::Human => eprint!("{}", diags.render_human()),
    }
    Ok(code)
}
