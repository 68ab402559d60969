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
Exit codes: 0 success; 1 differences found (render --check, diff, sync --dry-run); 2 invalid input or usage; \
3 operational failure."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Render the cluster objects and the node bundle into a directory, or the cluster objects to stdout.
    #[command(after_help = "Examples:\n  \
wmrender render -f examples/aws/wmrender.yaml -o out\n  \
wmrender render -f wmrender.yaml --stdout | kubectl apply --dry-run=server -f -\n  \
wmrender render -f wmrender.yaml -o rendered --check   # in CI: fail when rendered/ is stale\n  \
wmrender render -f wmrender.yaml -o bundle --only node  # just the node bundle, for sync")]
    Render(RenderArgs),
    /// Push the rendered node bundle to Windows nodes over SSH and apply it.
    #[command(after_help = "Examples:\n  \
wmrender sync --rendered out --identity ~/.ssh/windows-nodes --dry-run\n  \
wmrender sync --rendered out --inventory nodes.yaml --identity key.pem --payload payload \\\n      \
--agent wmrender-node.exe --pull-secret pull-secret.json --bootstrap-kubeconfig bootstrap-kubeconfig \\\n      \
--kubelet-ca kubelet-ca.crt --bootstrap-ca bootstrap-ca.crt --parallel 8 --max-unavailable 2\n  \
wmrender sync --rendered out --inventory nodes.yaml --identity key.pem --dry-run --prune-payload   # config only; \
show what pruning the payload removes\n  \
wmrender sync --rendered out --identity key.pem --payload payload --kubeconfig kc --reboot   # drained upgrades, \
graceful reboots (docs/reboot.md)\n  \
wmrender sync --rendered out --identity key.pem --kubeconfig kc --csr-timeout 300   # credentials from the cluster, \
CSRs approved, nodes labelled\n  \
wmrender sync --rendered out --identity key.pem --kubeconfig kc --prune-nodes --dry-run   # which nodes that left \
would be deconfigured\n  \
wmrender sync --rendered out --identity key.pem --trusted-ca-bundle ca-bundle.crt   # the cluster's additional CAs, \
by hand\n  \
wmrender sync --rendered out --inventory staging.yaml --identity key.pem --payload payload --allow-undrained-upgrade   \
# nodes with no pods to protect\n\n\
Nodes: the BYOH hosts of the rendered windows-instances ConfigMap (unless the render installs WMCO, which then \
owns them), --inventory, and with --kubeconfig the nodes of the Windows Machines. Exit codes: 0 all synced, \
unchanged or pending; 1 --dry-run found changes; 2 invalid input or usage; 3 a node, the cluster or a join \
failed.")]
    Sync(Box<SyncArgs>),
    /// The Windows programs a node runs (the payload `sync --payload` delivers): pull them out of the WMCO
    /// operator image of the cluster's release, or list a directory assembled by hand.
    #[command(subcommand)]
    Payload(PayloadCommand),
    /// Push the rendered node bundle to an OCI registry as one artifact by digest, and sign it as cosign does.
    #[command(after_help = "Examples:\n  \
wmrender publish --rendered out --to registry.example.com/fleet/windows-bundle:main\n  \
wmrender publish --rendered out --to registry.example.com/fleet/windows-bundle:main --sign-key ci-signing.pem \\\n      \
--bundle-version \"$(git rev-list --count HEAD)\"   # in CI, after review\n  \
wmrender publish --payload payload --to registry.example.com/fleet/windows-payload:v10.21.1   # the programs\n  \
wmrender publish --rendered out --to registry.internal:5000/fleet/windows-bundle:main --registry-config auth.json \\\n      \
--registry-ca internal-ca.pem   # a private registry\n  \
wmrender publish --rendered out --to registry.example.com/fleet/windows-bundle:main --sign-key ci-signing.pem \\\n      \
--bundle-version 40 --downgrade   # roll back on purpose: nodes that applied 41 accept 40\n  \
cosign verify --key ci-signing.pub --insecure-ignore-tlog registry.example.com/fleet/windows-bundle@sha256:<digest>\n\n\
The bundle is node/ of the rendered directory, checked against its manifest.json; it holds no secret. With --payload \
the programs of a payload directory are published instead (checked against its payload.json; nodes whose Node \
names it in wmrender.dev/desired-payload pull it, and its --bundle-version is the payload's own sequence). Each file is \
one layer addressed by its sha256 (titled with its path, as ORAS lays files out), so a registry keeps a file once \
across versions and a one-file change sends that file and a manifest. stdout: registry/repository@sha256:<digest>, \
nothing else. The signature is stored under the tag sha256-<hex>.sig, where `cosign verify` finds it; it carries \
--bundle-version, a number that must grow with every bundle (nodes refuse an older one unless it is signed with \
--downgrade). See docs/pull.md. Exit codes: 0 published; 2 invalid input, key or credentials refused; 3 the \
registry could not be reached or failed.")]
    Publish(PublishArgs),
    /// Reboot nodes gracefully: cordon, drain through the Eviction API, reboot over SSH, wait, uncordon.
    #[command(after_help = "Examples:\n  \
wmrender reboot win-a win-b --kubeconfig ~/.kube/config --rendered out --identity key.pem\n  \
wmrender reboot win-a --kubeconfig kc --rendered out --inventory nodes.yaml --identity key.pem --max-unavailable 2\n  \
wmrender reboot win-a --kubeconfig kc --rendered out --identity key.pem --force --drain-timeout 1200 \
--reboot-timeout 1800   # evict bare pods too; slow PDBs and boots\n\n\
Each node: cordon (a node someone else cordoned stays cordoned), evict its pods as `oc adm drain \
--ignore-daemonsets --delete-emptydir-data` does (PodDisruptionBudgets respected), reboot over SSH, wait for a new \
boot ID and Ready (--reboot-timeout), uncordon. The first node that fails or does not come back stops the rollout. \
Exit codes: 0 all rebooted; 2 invalid input or usage; 3 a node failed or did not come back.")]
    Reboot(Box<RebootArgs>),
    /// Keep the Windows nodes configured as a reconciler: sync's cluster side, run on every change.
    #[command(after_help = "Examples:\n  \
wmrender controller --kubeconfig ~/.kube/config --rendered out --identity key.pem --payload payload   # beside the \
cluster\n  \
wmrender controller --rendered /etc/wmrender/rendered --identity /etc/wmrender/ssh/private-key.pem \\\n      \
--payload /var/lib/wmrender/payload --metrics-address 0.0.0.0:8443 \\\n      \
--metrics-cert /etc/wmrender/metrics-tls/tls.crt --metrics-key /etc/wmrender/metrics-tls/tls.key   # in the cluster, as its rendered Deployment \
runs it (inputs `controller`)\n  \
wmrender controller --kubeconfig kc --rendered out --identity key.pem --once --dry-run   # the fleet, and what it \
would do (wmrender status)\n  \
wmrender controller --kubeconfig kc --rendered out --identity key.pem --pull-from registry.example.com/fleet/bundle \
--max-unavailable 10   # nodes pull each render CI publishes, 10 at a time (docs/pull.md)\n  \
wmrender controller --kubeconfig kc --rendered out --identity key.pem --payload payload \\\n      \
--pull-from registry.example.com/fleet/bundle --pull-payload-from registry.example.com/fleet/payload   # the \
programs too\n\n\
It watches the Windows Machines, Nodes and CSRs and, on every change and at least every --resync, judges each \
Windows instance from the cluster's state alone: an instance without a Node or whose agent applied another bundle \
is synced (as `sync` syncs it: first contact, first boot's reboot, CSRs), a node whose agent reports failing is \
tainted, a configured one untainted, a managed Node no target names any more is drained, deconfigured and deleted. \
Replicas elect one leader through a Lease. See docs/controller.md.")]
    Controller(Box<ControllerArgs>),
    /// The fleet as the controller sees it: each instance, its bundle applied and desired, what would be done next.
    #[command(after_help = "Examples:\n  \
wmrender status --kubeconfig ~/.kube/config --rendered out --identity key.pem\n  \
wmrender status --kubeconfig kc --rendered out --identity key.pem --output json\n\n\
`wmrender controller --once --dry-run`: nothing is changed. Exit codes: 0 every instance configured; 1 something \
would be done; 2 invalid input or usage; 3 the cluster could not be read.")]
    Status(Box<ControllerArgs>),
    /// Review what a render would change (against a rendered directory or a git revision): deletions first.
    #[command(after_help = "Examples:\n  \
wmrender diff -f wmrender.yaml --against rendered            # paste the output into the pull request\n  \
wmrender diff -f wmrender.yaml --base origin/main > review.md   # what merging changes, as GitHub Markdown\n  \
wmrender diff -f wmrender.yaml --base origin/main --fail-on-delete   # a gate: exit 1 if anything is deleted\n  \
wmrender diff -f wmrender.yaml --against rendered --output json\n\n\
Deletions (pruned or renamed objects, Machines scaled away, BYOH hosts dropped) are listed first, then node files \
that need `wmrender sync`. Exit codes: 0 no difference, 1 differences (with --fail-on-delete: only deletions), \
2 invalid input or usage.")]
    Diff(DiffArgs),
    /// Run as a KRM function: a ResourceList on stdin (functionConfig: a ClusterInputs), the rendered objects out.
    #[command(after_help = "Examples:\n  \
kpt fn render --allow-exec pkg            # Kptfile pipeline: - exec: wmrender krm, configPath: wmrender.yaml\n  \
kpt fn eval --allow-exec --exec 'wmrender krm' --fn-config pkg/wmrender.yaml pkg\n  \
kubectl kustomize --enable-alpha-plugins app   # legacy exec generator plugin: examples/kustomize\n  \
kustomize build --enable-alpha-plugins --enable-exec app   # standalone kustomize >= 5.7: exec function\n  \
wmrender krm < resource-list.yaml\n\n\
Paths in the functionConfig (spec.mirrors.files) are relative to its file when kpt names it \
(config.kubernetes.io/path and package-path annotations), else to the working directory. \
See docs/gitops.md for the tool versions each wiring needs.")]
    Krm(KrmArgs),
    /// Write a starting wmrender.yaml from `oc get -o yaml` dumps of a cluster, or from the cluster itself.
    #[command(after_help = "Examples:\n  \
mkdir dump && for o in infrastructure/cluster network.config/cluster network.operator/cluster proxy/cluster; do\n    \
oc get $o -o yaml > dump/$(echo $o | tr / -).yaml; done\n  \
oc get imagedigestmirrorsets,imagetagmirrorsets -o yaml > dump/mirrors.yaml\n  \
oc get machinesets -n openshift-machine-api -o yaml > dump/machinesets.yaml\n  \
wmrender import --from-dir dump --image ami-0123456789abcdef0 --ssh-public-key ~/.ssh/id_ed25519.pub \\\n      \
-o clusters/prod/wmrender.yaml\n  \
wmrender import --kubeconfig ~/.kube/config --image ami-0123456789abcdef0 --ssh-public-key ~/.ssh/id_ed25519.pub \\\n      \
-o clusters/prod/wmrender.yaml\n\n\
The Windows MachineSets copy network, placement and identity settings from the Linux worker MachineSets; \
IDMS/ITMS objects are written under mirrors/ beside the inputs and referenced from spec.mirrors.files.")]
    Import(ImportArgs),
    /// Print a shell completion script.
    #[command(after_help = "Examples:\n  wmrender completions bash > /etc/bash_completion.d/wmrender\n  \
wmrender completions zsh > \"${fpath[1]}/_wmrender\"\n  wmrender completions fish > ~/.config/fish/completions/wmrender.fish")]
    Completions {
        /// bash, zsh, fish, powershell or elvish.
        shell: clap_complete::Shell,
    },
    /// Check the inputs file without rendering anything.
    #[command(
        after_help = "Examples:\n  wmrender validate -f wmrender.yaml\n  wmrender validate -f wmrender.yaml --output json\n  wmrender validate -f wmrender.yaml --strict   # warnings fail too"
    )]
    Validate(ValidateArgs),
}

#[derive(Subcommand, Debug)]
pub enum PayloadCommand {
    /// Extract the payload from an OCI image (the WMCO operator image of the cluster's OpenShift release) into a
    /// directory laid out by node path, with its digest list payload.json.
    #[command(after_help = "Examples:\n  \
wmrender payload pull registry.redhat.io/openshift4-wincw/windows-machine-config-rhel9-operator@sha256:<digest> \\\n      \
-o payload --registry-config pull-secret.json -f wmrender.yaml\n  \
wmrender sync --rendered out --payload payload ...\n\n\
With -f, the image is fetched through the inputs' mirrors (the IDMS/ITMS rules hosts.toml renders: the mirrors in \
order, then the source unless NeverContactSource) and the payload is checked against the inputs' \
kubernetesVersion and platform before anything is written. Every manifest and layer is checked against its digest, \
and every file against the image's /payload/sha256sum where it has one (WMCO 10.21.1 and later). The directory is \
written all at once, or not at all. Exit codes: 0 pulled; 2 the image, reference, credentials or inputs are refused; \
3 no registry could be reached.")]
    Pull(PayloadPullArgs),
    /// Write DIR/payload.json: every file under DIR/C with its sha256, size and the version the program carries.
    #[command(after_help = "Examples:\n  wmrender payload list payload\n  \
wmrender payload list payload -f wmrender.yaml   # and check it against the inputs' kubernetesVersion\n\n\
sync --payload checks the directory against payload.json when it has one (a changed, missing or unlisted file is \
refused), and every payload against the rendered bundle's Kubernetes version. A program that carries no version \
(a test build) gets none in the list: write its `version` in by hand for the check to hold.")]
    List(PayloadListArgs),
}

#[derive(Args, Debug)]
pub struct PayloadPullArgs {
    /// The image, best by digest: registry/repository@sha256:<hex> (a :tag is resolved to its digest).
    #[arg(value_name = "IMAGE")]
    pub image: String,
    /// Write the payload here (created; an empty directory or a payload written before is replaced as a whole).
    #[arg(short = 'o', long = "output-dir", value_name = "DIR")]
    pub output_dir: PathBuf,
    /// The cluster-inputs file: its mirrors, kubernetesVersion and platform (optional).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Registry credentials: a .dockerconfigjson such as the cluster's pull secret
    /// (`oc get secret/pull-secret -n openshift-config -o jsonpath='{.data.\.dockerconfigjson}' | base64 -d`).
    /// Default: $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json, $DOCKER_CONFIG/config.json or
    /// ~/.docker/config.json, the first that exists.
    #[arg(long, visible_alias = "pull-secret", value_name = "FILE")]
    pub registry_config: Option<PathBuf>,
    /// A PEM file of CA certificates to trust for the registries besides the system's (repeatable).
    #[arg(long = "registry-ca", value_name = "FILE")]
    pub registry_ca: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PublishArgs {
    /// The rendered directory (`wmrender render -o DIR`): its node/ bundle is published.
    #[arg(long, value_name = "DIR", required_unless_present = "payload", conflicts_with = "payload")]
    pub rendered: Option<PathBuf>,
    /// A payload directory (`wmrender payload pull` or `payload list` wrote its payload.json): the programs are
    /// published instead, as an artifact of their own.
    #[arg(long, value_name = "DIR")]
    pub payload: Option<PathBuf>,
    /// Where: registry/repository, or registry/repository:tag to tag the bundle as well.
    #[arg(long, value_name = "REPOSITORY")]
    pub to: String,
    /// Registry credentials: a .dockerconfigjson. Default: $REGISTRY_AUTH_FILE,
    /// $XDG_RUNTIME_DIR/containers/auth.json, $DOCKER_CONFIG/config.json or ~/.docker/config.json, the first that
    /// exists.
    #[arg(long, value_name = "FILE")]
    pub registry_config: Option<PathBuf>,
    /// A PEM file of CA certificates to trust for the registry besides the system's (repeatable).
    #[arg(long = "registry-ca", value_name = "FILE")]
    pub registry_ca: Vec<PathBuf>,
    /// Sign the published digest with this ECDSA P-256 private key: PKCS#8 PEM (as `openssl genpkey -algorithm EC
    /// -pkeyopt ec_paramgen_curve:P-256` writes it) or a key `cosign generate-key-pair` wrote (its password from
    /// $COSIGN_PASSWORD, as cosign reads it). Repeatable: while a key is rotated, sign with both.
    #[arg(long = "sign-key", value_name = "FILE", requires = "bundle_version")]
    pub sign_key: Vec<PathBuf>,
    /// The bundle version the signature carries: a number that grows with every bundle (the CI run number,
    /// `git rev-list --count HEAD`). Nodes refuse a bundle older than the one they applied.
    #[arg(long, value_name = "N", requires = "sign_key")]
    pub bundle_version: Option<u64>,
    /// Sign this bundle as a deliberate downgrade: nodes accept it even if they applied a newer version.
    #[arg(long, requires = "sign_key")]
    pub downgrade: bool,
}

#[derive(Args, Debug)]
pub struct PayloadListArgs {
    /// The payload directory (DIR/C/k/kubelet.exe is C:\\k\\kubelet.exe).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The cluster-inputs file: the payload is checked against its kubernetesVersion (optional).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct KrmArgs {
    /// kustomize's legacy exec generator plugin protocol: the path of kustomize's copy of the generator config.
    /// The rendered objects are printed as a YAML stream instead of a ResourceList.
    #[arg(value_name = "CONFIG")]
    pub config: Option<PathBuf>,
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
    /// Write the output tree (cluster/, node/, manifest.json) here, replacing the previous render atomically.
    /// A symbolic link is written through; a directory holding files wmrender did not write is refused.
    /// One of -o DIR and --stdout is needed.
    #[arg(short = 'o', long = "output-dir", value_name = "DIR", conflicts_with = "stdout")]
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
    /// Replace DIR even when files were added to it or edited since wmrender wrote it (they are deleted).
    /// A directory without a wmrender manifest.json is never replaced.
    #[arg(long, conflicts_with_all = ["stdout", "check"])]
    pub force: bool,
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
    /// Also check a payload directory against the inputs' kubernetesVersion (the version skew policy; its
    /// payload.json when it has one).
    #[arg(long, value_name = "DIR")]
    pub payload: Option<PathBuf>,
    /// How to print the diagnostics: `human` (on stderr) or `json` (on stdout, for tools).
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub output: OutputFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Human,
    Json,
}

#[derive(Args, Debug)]
pub struct SyncArgs {
    #[command(flatten)]
    pub access: NodeAccess,
    /// The Windows binaries the services run, laid out by node path (DIR/C/k/kubelet.exe is C:\k\kubelet.exe).
    #[arg(long, value_name = "DIR")]
    pub payload: Option<PathBuf>,
    /// wmrender-node.exe, the agent that applies the bundle on a Windows node (pushed to
    /// C:\k\wmrender\wmrender-node.exe; or put it in the payload at C/k/wmrender/wmrender-node.exe).
    #[arg(long, value_name = "FILE")]
    pub agent: Option<PathBuf>,
    /// Remove payload files (binaries, the agent) that this sync was not given. Without it a sync without
    /// --payload leaves the payload on the node as it is.
    #[arg(long)]
    pub prune_payload: bool,
    /// Remove credentials and CAs that this sync was not given (and push hosts.toml files without mirror
    /// credentials). Without it each credential not given is left on the node as it is.
    #[arg(long)]
    pub prune_credentials: bool,
    /// A .dockerconfigjson: mirror credentials become `authorization` headers in the pushed hosts.toml files.
    #[arg(long, value_name = "FILE")]
    pub pull_secret: Option<PathBuf>,
    /// Pushed to C:\k\bootstrap-kubeconfig (kubelet's TLS bootstrap).
    #[arg(long, value_name = "FILE")]
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// Pushed to C:\k\kubelet-ca.crt (the CA of clients calling kubelet).
    #[arg(long, value_name = "FILE")]
    pub kubelet_ca: Option<PathBuf>,
    /// Pushed to C:\k\bootstrap-ca.crt (the API server CA, for hybrid-overlay).
    #[arg(long, value_name = "FILE")]
    pub bootstrap_ca: Option<PathBuf>,
    /// Pushed to C:\k\tls\certs\tls.crt (windows_exporter's serving certificate).
    #[arg(long, value_name = "FILE")]
    pub exporter_tls_cert: Option<PathBuf>,
    /// Pushed to C:\k\tls\certs\tls.key.
    #[arg(long, value_name = "FILE")]
    pub exporter_tls_key: Option<PathBuf>,
    /// The cluster's additional trusted CAs (PEM), pushed to C:\k\ca-bundle.crt; the agent imports them into the
    /// LocalMachine Root store.
    #[arg(long, value_name = "FILE")]
    pub trusted_ca_bundle: Option<PathBuf>,
    /// Use the cluster: fetch the bootstrap kubeconfig, bootstrap and kubelet CAs, trusted CA bundle and pull secret
    /// (files given above win), sync the Windows Machines' nodes too, then approve the configured nodes' kubelet
    /// CSRs and label them. Writes only CSR approvals, labels and annotations, plus what --reboot, a drained binary
    /// upgrade (cordon, evictions) and --prune-nodes do. Needs the `cluster` build feature (on by default).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// With --kubeconfig: seconds to wait for each configured node's kubelet CSRs and Node (0: one pass, no wait).
    #[arg(long, value_name = "SECS", default_value_t = 600, value_parser = whole_number(0, 86400))]
    pub csr_timeout: u64,
    /// With --kubeconfig: the hosts wmrender configured (each has a login record in the namespace wmrender) that are
    /// no longer targets (inventory, BYOH list) are drained, deconfigured with `wmrender-node deconfigure` over SSH
    /// at the login recorded, and their Node objects deleted. A node whose deconfigure fails keeps its Node.
    /// --dry-run lists them and changes nothing.
    #[arg(long, requires = "kubeconfig")]
    pub prune_nodes: bool,
    /// The most nodes one run may prune: a number, or a percentage of the nodes wmrender configured (rounded up).
    /// When more left, none is pruned (a mistaken commit must not deconfigure the fleet) and sync says why.
    #[arg(long, value_name = "N|P%", default_value = "25%")]
    pub max_prune: wmrender::lifecycle::prune::MaxPrune,
    /// How many nodes to connect to at once (at least 1).
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = at_least_one())]
    pub parallel: usize,
    /// How many nodes may be changed (files replaced, services restarted, drained, rebooted) at once (at least 1;
    /// to change no node, use --dry-run).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = at_least_one())]
    pub max_unavailable: usize,
    /// Go on with the other nodes after a node fails (by default no new node is started).
    #[arg(long)]
    pub keep_going: bool,
    /// Connect and show each node's plan (files to add, change, remove; services to restart) without changing it.
    #[arg(long)]
    pub dry_run: bool,
    /// Reboot, gracefully, the nodes whose apply reports that a reboot is needed (`rebootRequired`), after every
    /// node is synced: cordon, drain, reboot, wait for a new boot and Ready, uncordon; --max-unavailable at a time,
    /// stopping at the first node that does not come back. Needs --kubeconfig.
    #[arg(long)]
    pub reboot: bool,
    /// Replace the binary of a running service (kubelet.exe, containerd.exe, ...) without --kubeconfig, that is
    /// without cordoning and draining the node first: its pods lose their node while the services restart.
    /// Without it such an upgrade is refused unless --kubeconfig is given.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub allow_undrained_upgrade: bool,
    #[command(flatten)]
    pub drain: DrainArgs,
    /// `human`: progress, a line per finished node and a summary table, on stderr. `json`: the report on stdout and
    /// nothing on stderr but errors and the --dry-run plan (unless -v).
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub output: OutputFormat,
    /// With --output json, also print a line per finished node and the summary table on stderr.
    #[arg(short, long)]
    pub verbose: bool,
}

/// Which nodes there are and how to reach them over SSH: shared by `sync` and `reboot`.
#[derive(Args, Debug)]
pub struct NodeAccess {
    /// The directory `wmrender render -o` wrote: sync pushes its node/ bundle; the BYOH hosts of its
    /// windows-instances ConfigMap are nodes (unless the render installs WMCO, which then owns them).
    #[arg(long, value_name = "DIR")]
    pub rendered: PathBuf,
    /// More nodes, and how to reach the others: a YAML file with `nodes: [{address, name, port, user, profile:
    /// windows|posix, root, reachOnly}]` (docs/sync.md, "The inventory").
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// The SSH private key (OpenSSH or PEM RSA, ed25519; no passphrase), e.g. WMCO's cloud-private-key.
    #[arg(long, value_name = "FILE")]
    pub identity: PathBuf,
    /// Host keys are checked strictly against this file (the controller also against the keys in its login
    /// records, where it keeps the keys it learns).
    #[arg(long, value_name = "FILE", default_value_os_t = default_known_hosts())]
    pub known_hosts: PathBuf,
    /// Pin the host key of a node seen for the first time (like OpenSSH's accept-new); a changed key is still refused.
    #[arg(long)]
    pub accept_new: bool,
    /// Seconds to wait for a node's TCP and SSH answer. A silent node is not tried again; a refused or dropped
    /// connection is, up to 3 times.
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = whole_number(1, 3600))]
    pub connect_timeout: u64,
}

/// How a node is drained and waited for, as `oc adm drain --ignore-daemonsets --delete-emptydir-data` drains it:
/// shared by `reboot`, `sync --reboot` and sync's binary upgrades.
#[derive(Args, Debug)]
pub struct DrainArgs {
    /// Also evict pods that declare no controller (nothing recreates them: they are gone for good) and pods whose
    /// DaemonSet no longer exists, as `oc adm drain --force`. Without it such a pod stops the drain before anything
    /// is evicted, and the node is uncordoned again.
    #[arg(long)]
    pub force: bool,
    /// Seconds to evict a node's pods and wait until they are gone. An eviction a PodDisruptionBudget forbids
    /// (429) is tried again with a growing pause until then.
    #[arg(long, value_name = "SECS", default_value_t = 600, value_parser = whole_number(1, 86400))]
    pub drain_timeout: u64,
    /// Seconds to wait for a rebooted node to come back (a new boot ID and Ready), or an upgraded one to be Ready.
    /// A node that does not stops the rollout and stays cordoned.
    #[arg(long, value_name = "SECS", default_value_t = 900, value_parser = whole_number(1, 86400))]
    pub reboot_timeout: u64,
}

#[derive(Args, Debug)]
pub struct RebootArgs {
    /// The Nodes to reboot, by name, in this order. Each must be a node sync knows (a BYOH host of --rendered or
    /// in --inventory): that is where the SSH address comes from.
    #[arg(value_name = "NODE", required = true)]
    pub nodes: Vec<String>,
    /// The cluster the nodes are in: cordon, drain, the wait for the node and uncordon go through it.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: PathBuf,
    #[command(flatten)]
    pub access: NodeAccess,
    /// How many nodes may be cordoned and rebooting at once (at least 1).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = at_least_one())]
    pub max_unavailable: usize,
    #[command(flatten)]
    pub drain: DrainArgs,
    /// `human`: a line per node on stderr. `json`: the report on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub output: OutputFormat,
}

#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// The cluster. Without it, the controller runs as the pod it is in (its ServiceAccount).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub access: NodeAccess,
    /// The binaries the services run (kubelet.exe, containerd.exe, ...), as for sync: path under DIR = node path.
    #[arg(long, value_name = "DIR")]
    pub payload: Option<PathBuf>,
    /// The agent executable (wmrender-node.exe), unless the payload holds it at C/k/wmrender/wmrender-node.exe.
    #[arg(long, value_name = "FILE")]
    pub agent: Option<PathBuf>,
    /// How many instances are synced at once (at least 1).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = at_least_one())]
    pub parallel: usize,
    /// How many nodes may be changed, drained or rebooted at once across the fleet (at least 1); with --pull-from or
    /// --pull-payload-from, how many Nodes may be pointed at what is published and not have applied (or pulled) it
    /// yet.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = at_least_one())]
    pub max_unavailable: usize,
    /// The pull model (docs/pull.md): the repository CI publishes the rendered bundle to (`wmrender publish --to`),
    /// e.g. registry.example.com/fleet/windows-bundle. A configured node whose agent applied another bundle is not
    /// synced but pointed at REPOSITORY@<the rendered bundle's digest> (its `wmrender.dev/desired-bundle`
    /// annotation), in waves of --max-unavailable, and its agent pulls it. SSH stays for first contact and for a
    /// node that fails.
    #[arg(long, value_name = "REPOSITORY")]
    pub pull_from: Option<String>,
    /// The pull model for the programs (docs/pull.md): the repository CI publishes --payload DIR to (`wmrender
    /// publish --payload DIR --to`). A node whose agent runs another payload is not synced but pointed at
    /// REPOSITORY@<the payload's digest> (its `wmrender.dev/desired-payload` annotation), in the same waves of
    /// --max-unavailable, and its agent pulls it; with --pull-from, a node that needs both is pointed at both at
    /// once. DIR must have its payload.json (`wmrender payload list`); first contact still delivers it over SSH.
    #[arg(long, value_name = "REPOSITORY", requires = "payload")]
    pub pull_payload_from: Option<String>,
    #[command(flatten)]
    pub drain: DrainArgs,
    /// Seconds between two full reconciles when nothing changes; the cluster's credentials are fetched again then.
    #[arg(long, value_name = "SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(10..=86400))]
    pub resync: u64,
    /// Serve Prometheus metrics (/metrics) and the probes (/healthz, /readyz) on this address, e.g. 0.0.0.0:8443:
    /// over HTTPS with --metrics-cert and --metrics-key, or plain HTTP with --metrics-plain-http (one is required).
    #[arg(long, value_name = "ADDR")]
    pub metrics_address: Option<std::net::SocketAddr>,
    /// The metrics endpoint's serving certificate (PEM; in the cluster, the service CA's, from the Secret its
    /// Service names). Served with the TLS versions and ciphers of the cluster's APIServer tlsSecurityProfile
    /// (Intermediate when none is set); the certificate and the profile are read again every 10 s.
    #[arg(long, value_name = "FILE", requires_all = ["metrics_key", "metrics_address"])]
    pub metrics_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["metrics_cert", "metrics_address"])]
    pub metrics_key: Option<PathBuf>,
    /// Serve the metrics and probes over plain HTTP (a private address, a test); by default they are served only
    /// over HTTPS.
    #[arg(long, requires = "metrics_address", conflicts_with = "metrics_cert")]
    pub metrics_plain_http: bool,
    /// The namespace of the Lease the replicas elect their leader through.
    #[arg(long, value_name = "NS", default_value = "wmrender")]
    pub lease_namespace: String,
    #[arg(long, value_name = "NAME", default_value = "wmrender-controller")]
    pub lease_name: String,
    /// Seconds a leader's term lasts without a renewal (renewed every third of it).
    #[arg(long, value_name = "SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(3..=600))]
    pub lease_duration: u64,
    /// This replica's name in the Lease and in Events (default: $POD_NAME, else the host's name and process id).
    #[arg(long, value_name = "NAME")]
    pub replica: Option<String>,
    /// Leave the hosts that no target names any more alone (by default they are drained, deconfigured and their Node
    /// deleted, as `sync --prune-nodes` does).
    #[arg(long)]
    pub no_prune: bool,
    /// The most nodes one reconcile may prune: a number, or a percentage of the nodes wmrender configured (rounded
    /// up). When more left at once, none is pruned, and the controller says why (log, Event, status).
    #[arg(long, value_name = "N|P%", default_value = "25%", conflicts_with = "no_prune")]
    pub max_prune: wmrender::lifecycle::prune::MaxPrune,
    /// One reconcile, then exit.
    #[arg(long)]
    pub once: bool,
    /// Decide, report, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// `human`: a table on stderr (with --once). `json`: the fleet on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub output: OutputFormat,
}

/// A count that must be at least 1 (0 nodes at once would never finish).
fn at_least_one() -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    let parse = whole_number(1, u64::from(u32::MAX));
    move |s| parse(s).map(|n| n as usize)
}

/// A whole number from `min` to `max`, said in words when it is not (clap's own ranged parser says `1..=3600`).
fn whole_number(min: u64, max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s| {
        s.parse::<u64>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| format!("expected a whole number from {min} to {max}"))
    }
}

fn default_known_hosts() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(".ssh").join("known_hosts")
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    #[command(flatten)]
    pub inputs: InputsArg,
    /// The rendered directory to compare with (e.g. the committed output).
    #[arg(long, value_name = "DIR", required_unless_present = "base", conflicts_with = "base")]
    pub against: Option<PathBuf>,
    /// Compare with the render of the inputs file as it was at this git revision (e.g. origin/main, the pull
    /// request's base): what merging would change on the cluster.
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// Exit 1 only when something would be deleted (an object pruned or renamed, Machines scaled away, BYOH hosts
    /// dropped); other differences exit 0. For a merge gate.
    #[arg(long)]
    pub fail_on_delete: bool,
    /// `human` (Markdown-friendly text) or `json`.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub output: OutputFormat,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A directory of `oc get -o yaml` dumps: Infrastructure, Network (config and operator), Proxy, IDMS/ITMS and
    /// MachineSets, one or several objects per file, or `kind: List`.
    #[arg(long, value_name = "DIR", required_unless_present = "kubeconfig", conflicts_with = "kubeconfig")]
    pub from_dir: Option<PathBuf>,
    /// Read the same objects from a live cluster instead (read-only: GET requests only).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Where to write the inputs (mirror files go to mirrors/ beside it). (`--output` is the report format in
    /// the other commands, so the long name here is --output-file.)
    #[arg(short = 'o', long = "output-file", value_name = "FILE", default_value = "wmrender.yaml")]
    pub output: PathBuf,
    /// The Windows image: AMI ID (AWS), publisher:offer:sku:version or resource ID (Azure), image path (GCP),
    /// image name (Nutanix), template (vSphere). Required on AWS, Nutanix and vSphere.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// The OpenSSH public key file (e.g. ~/.ssh/id_ed25519.pub) the Windows Machines' user data authorises: the
    /// public half of the key `sync --identity` connects with. Required on every platform import handles (they all
    /// have Machines); no cluster object holds it.
    #[arg(long, value_name = "FILE")]
    pub ssh_public_key: Option<PathBuf>,
    /// Overwrite existing files.
    #[arg(long)]
    pub force: bool,
}
