//! Command-line definitions. Every flag is documented here; `--help` shows these texts.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "wmrender",
    version,
    about = "Render Windows node configuration for OpenShift the GitOps way",
    long_about = "wmrender compiles a small cluster-inputs file (wmrender.yaml) into Windows MachineSets, \
RuntimeClasses, the BYOH windows-instances ConfigMap and the WMCO install objects, ready for Argo CD or Flux.\n\n\
Exit codes: 0 success; 1 differences found (--check); 2 invalid input or usage; 3 operational failure."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Render the cluster objects into a directory or to stdout.
    #[command(after_help = "Examples:\n  \
wmrender render -f examples/aws/wmrender.yaml -o out\n  \
wmrender render -f wmrender.yaml --stdout | kubectl apply --dry-run=server -f -\n  \
wmrender render -f wmrender.yaml -o rendered --check   # in CI: fail when rendered/ is stale\n  \
wmrender render -f wmrender.yaml -o bundle --only node  # just the node bundle, for sync")]
    Render(RenderArgs),
    /// Check the inputs file without rendering anything.
    #[command(
        after_help = "Examples:\n  wmrender validate -f wmrender.yaml\n  wmrender validate -f wmrender.yaml --output json\n  wmrender validate -f wmrender.yaml --strict   # warnings fail too"
    )]
    Validate(ValidateArgs),
}

#[derive(Args, Debug)]
pub struct InputsArg {
    /// The cluster-inputs file. Paths inside it are relative to this file.
    #[arg(short = 'f', long = "file", value_name = "FILE", default_value = "wmrender.yaml")]
    pub file: PathBuf,
    /// Treat warnings (left-out mirrors, widened NeverContactSource, an unmirrored pause image, ...) as errors.
    #[arg(long)]
    pub strict: bool,
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    #[command(flatten)]
    pub inputs: InputsArg,
    /// Write the output tree (cluster/, manifest.json) here, replacing the previous render atomically.
    #[arg(
        short = 'o',
        long = "output-dir",
        value_name = "DIR",
        required_unless_present = "stdout",
        conflicts_with = "stdout"
    )]
    pub output_dir: Option<PathBuf>,
    /// Print the cluster objects as one `---`-separated YAML stream, in apply order, and nothing else.
    #[arg(long)]
    pub stdout: bool,
    /// Do not write: compare a fresh render with -o DIR, print a unified diff on stderr, exit 1 if DIR is stale.
    #[arg(long, requires = "output_dir", conflicts_with = "stdout")]
    pub check: bool,
    /// Write (or check) only one part: `cluster` (the objects Argo CD / Flux apply) or `node` (the node bundle).
    /// manifest.json then lists only that part.
    #[arg(long, value_enum, value_name = "PART")]
    pub only: Option<OnlyPart>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnlyPart {
    Cluster,
    Node,
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub inputs: InputsArg,
    /// How to print the diagnostics: `human` (on stderr) or `json` (on stdout, for tools).
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub output: OutputFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Human,
    Json,
}
