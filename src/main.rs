//! Entry point: parse the command line, run, and map every outcome to one exit code.

mod cli;
mod progress;

use clap::CommandFactory;
use clap::Parser;
use cli::{
    Cli, Command, ControllerArgs, DiffArgs, ImportArgs, KrmArgs, OnlyPart, OutputFormat, PayloadCommand,
    PayloadListArgs, PayloadPullArgs, PublishArgs, RebootArgs, RenderArgs, SyncArgs, ValidateArgs,
};
use std::io::Write;
use std::process::ExitCode;
use wmrender::Part;
use wmrender::cluster::ClusterError;
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
        Command::Sync(args) => sync(*args),
        Command::Payload(PayloadCommand::Pull(args)) => payload_pull(args),
        Command::Payload(PayloadCommand::List(args)) => payload_list(args),
        Command::Publish(args) => publish(args),
        Command::Reboot(args) => reboot(*args),
        Command::Controller(args) => controller(*args, false),
        Command::Status(args) => controller(*args, true),
        Command::Diff(args) => diff(args),
        Command::Krm(args) => krm(args),
        Command::Import(args) => import(args),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "wmrender", &mut std::io::stdout());
            Ok(OK)
        }
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
            eprint!("{}", diags.render_for_stderr());
            INVALID
        }
        Error::Usage(msg) => {
            eprintln!("error: {msg}");
            INVALID
        }
        Error::Unusable(_) | Error::Cluster(ClusterError::Kubeconfig { .. } | ClusterError::NotBuilt(_)) => {
            eprintln!("error: {e}");
            INVALID
        }
        Error::Io { .. } | Error::Operational(_) | Error::Cluster(ClusterError::Api { .. }) => {
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
        eprint!("{}", compiled.warnings.render_for_stderr());
    }
    if args.stdout {
        let stream = wmrender::render::stream(&compiled.artifacts.objects);
        // An empty stream with exit 0 would make Argo CD prune the whole application.
        if stream.is_empty() {
            return Err(Error::Usage(format!(
                "{}: the inputs render no cluster objects; refusing to print an empty stream",
                args.inputs.file.display()
            )));
        }
        let mut out = std::io::stdout().lock();
        out.write_all(stream.as_bytes()).and_then(|()| out.flush()).map_err(|e| Error::io("writing to stdout", e))?;
        return Ok(OK);
    }
    let Some(dir) = args.output_dir else {
        return Err(Error::Usage(
            "say where the render goes: -o DIR (the output tree: cluster/, node/, manifest.json) or --stdout \
             (the cluster objects as one YAML stream)"
                .into(),
        ));
    };
    let files = compiled.output_files(only);
    if args.check {
        let s = wmrender::emit::check::compare(&dir, &files)?;
        if s.is_current() {
            eprintln!("{} is up to date", dir.display());
            return Ok(OK);
        }
        eprint!("{}", s.diff());
        eprintln!("{}: {}", dir.display(), s.summary());
        return Ok(DIFFERENT);
    }
    for note in wmrender::emit::directory::write(&dir, &files, args.force)? {
        eprintln!("note: {note}");
    }
    eprintln!("wrote {} files to {}", files.len(), dir.display());
    Ok(OK)
}

fn validate(args: ValidateArgs) -> Result<u8, Error> {
    let result = wmrender::check_inputs(&args.inputs.file, args.inputs.strict);
    let (diags, code) = match result {
        Ok(checked) => {
            if let Some(dir) = &args.payload {
                let list = wmrender::payload::list::checked(dir)?;
                for note in wmrender::payload::list::fits(&list, checked.kubernetes.minor, dir)? {
                    eprintln!("note: {note}");
                }
            }
            (checked.warnings, OK)
        }
        Err(Error::Invalid(diags)) => (diags, INVALID),
        Err(e) => return Err(e),
    };
    match args.output {
        OutputFormat::Json => print!("{}", diags.render_json()),
        OutputFormat::Human if diags.is_empty() => {
            eprintln!("{}: valid", args.inputs.file.display())
        }
        OutputFormat::Human => eprint!("{}", diags.render_for_stderr()),
    }
    Ok(code)
}

/// The inputs' mirrors, Kubernetes minor and the platform's own programs, for `payload pull -f` and `payload list -f`.
fn payload_inputs(file: Option<&std::path::Path>) -> Result<Option<wmrender::validate::Checked>, Error> {
    file.map(|f| wmrender::check_inputs(f, false)).transpose()
}

fn payload_pull(args: PayloadPullArgs) -> Result<u8, Error> {
    #[cfg(feature = "registry")]
    {
        let checked = payload_inputs(args.file.as_deref())?;
        // What the rendered services run: the programs the payload must hold for these inputs.
        let runs = checked.as_ref().map(|c| {
            let services = wmrender::render::node::services::services(&wmrender::plan::plan(c));
            services.iter().flat_map(|s| s.binaries.iter().map(|b| b.to_string())).collect::<Vec<_>>()
        });
        let opts = wmrender::payload::pull::PullOptions {
            image: args.image,
            out: args.output_dir.clone(),
            registry_config: args.registry_config,
            ca_files: args.registry_ca,
            mirrors: checked.as_ref().map(|c| c.registries.clone()).unwrap_or_default(),
            kubernetes: checked.as_ref().map(|c| c.kubernetes.minor),
            runs,
        };
        let pulled = runtime()?.block_on(wmrender::payload::pull::pull(&opts))?;
        for note in &pulled.notes {
            eprintln!("note: {note}");
        }
        let from = if pulled.from.is_empty() { String::new() } else { format!(" (from the mirror {})", pulled.from) };
        eprintln!(
            "pulled {}{from}: {} files, {} bytes, in {}",
            pulled.image,
            pulled.files,
            pulled.bytes,
            args.output_dir.display()
        );
        Ok(OK)
    }
    #[cfg(not(feature = "registry"))]
    {
        let _ = (args, payload_inputs);
        Err(wmrender::payload::PayloadError::NotBuilt("registry").into())
    }
}

fn publish(args: PublishArgs) -> Result<u8, Error> {
    #[cfg(feature = "registry")]
    {
        use wmrender::publish::{artifact, push, read, signature::SigningKey};
        let signing = match args.bundle_version {
            Some(version) => Some(push::Signing {
                keys: args.sign_key.iter().map(|k| SigningKey::load(k)).collect::<Result<_, _>>()?,
                version,
                downgrade: args.downgrade,
            }),
            None => None,
        };
        let (kind, files) = match (&args.rendered, &args.payload) {
            (Some(dir), _) => (artifact::Kind::NodeBundle, read::node_bundle(dir)?),
            (None, Some(dir)) => (artifact::Kind::Payload, read::payload(dir)?),
            (None, None) => return Err(Error::Usage("give --rendered DIR or --payload DIR".into())),
        };
        let count = files.len();
        let bundle = artifact::artifact(kind, files);
        let opts = push::PublishOptions {
            to: args.to,
            registry_config: args.registry_config,
            ca_files: args.registry_ca,
            signing,
        };
        let published = runtime()?.block_on(push::publish(&bundle, &opts))?;
        let tagged = published.tag.as_ref().map(|t| format!(", tagged {t}")).unwrap_or_default();
        eprintln!(
            "published {count} files{tagged}: {} blobs sent, {} already there; {} bytes of blobs and manifests sent",
            published.blobs_sent, published.blobs_present, published.bytes_sent
        );
        for key in &published.signed_by {
            eprintln!("signed by the key {key} (bundle version {})", args.bundle_version.unwrap_or_default());
        }
        if published.signatures_kept > 0 {
            eprintln!("kept the {} signature(s) already there", published.signatures_kept);
        }
        if let Some(referrer) = &published.referrer {
            eprintln!("stored the signatures as the referrer {referrer} too (the registry has the OCI referrers API)");
        }
        for warning in &published.warnings {
            eprintln!("warning: {warning}");
        }
        println!("{}", published.reference);
        Ok(OK)
    }
    #[cfg(not(feature = "registry"))]
    {
        let _ = args;
        Err(wmrender::payload::PayloadError::NotBuilt("registry").into())
    }
}

fn payload_list(args: PayloadListArgs) -> Result<u8, Error> {
    let checked = payload_inputs(args.file.as_deref())?;
    let list = wmrender::payload::list::remake(&args.dir)?;
    if let Some(c) = &checked {
        for note in wmrender::payload::list::fits(&list, c.kubernetes.minor, &args.dir)? {
            eprintln!("note: {note}");
        }
    }
    wmrender::payload::write::write_list(&args.dir, &list)?;
    let file = args.dir.join(wmrender_contract::payload::PAYLOAD_LIST);
    eprintln!("wrote {} ({} files)", file.display(), list.files.len());
    Ok(OK)
}

/// The lowest layer of the node options, shared by `sync`, `reboot` and `controller`: how nodes are reached.
fn access(args: &cli::NodeAccess) -> wmrender::delivery::Access {
    wmrender::delivery::Access {
        identity: args.identity.clone(),
        known_hosts: args.known_hosts.clone(),
        accept_new: args.accept_new,
        connect_timeout: std::time::Duration::from_secs(args.connect_timeout),
    }
}

fn drain_settings(args: &cli::DrainArgs) -> wmrender::lifecycle::guard::DrainSettings {
    wmrender::lifecycle::guard::DrainSettings {
        force: args.force,
        drain_timeout: std::time::Duration::from_secs(args.drain_timeout),
        reboot_timeout: std::time::Duration::from_secs(args.reboot_timeout),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the async runtime", e))
}

fn sync(args: SyncArgs) -> Result<u8, Error> {
    use wmrender::delivery::{DeliveryOptions, node::Status, secrets::SecretFiles};
    use wmrender::sync;
    // With --output json, stdout is the report and nothing else, and stderr carries only errors unless -v.
    let json = args.output == OutputFormat::Json;
    let chatty = !json || args.verbose;
    let progress = std::sync::Arc::new(progress::SyncProgress::new(chatty));
    let opts = sync::SyncOptions {
        rendered: args.access.rendered.clone(),
        inventory: args.access.inventory.clone(),
        delivery: DeliveryOptions {
            access: access(&args.access),
            payload: args.payload,
            agent: args.agent,
            prune_payload: args.prune_payload,
            prune_credentials: args.prune_credentials,
            max_unavailable: args.max_unavailable,
            dry_run: args.dry_run,
            progress: Some(progress.clone()),
        },
        secrets: SecretFiles {
            pull_secret: args.pull_secret,
            bootstrap_kubeconfig: args.bootstrap_kubeconfig,
            kubelet_ca: args.kubelet_ca,
            bootstrap_ca: args.bootstrap_ca,
            exporter_tls_cert: args.exporter_tls_cert,
            exporter_tls_key: args.exporter_tls_key,
            trusted_ca_bundle: args.trusted_ca_bundle,
            fetched: Default::default(),
        },
        parallel: args.parallel,
        keep_going: args.keep_going,
        kubeconfig: args.kubeconfig.clone(),
        csr_timeout: std::time::Duration::from_secs(args.csr_timeout),
        prune_nodes: args.prune_nodes,
        max_prune: args.max_prune,
        reboot: args.reboot,
        allow_undrained_upgrade: args.allow_undrained_upgrade,
        drain: drain_settings(&args.drain),
    };
    let result = runtime()?.block_on(sync::run(opts));
    progress.finish();
    let report = result?;
    let reports = &report.nodes;
    if chatty {
        eprint!("{}", sync::table(reports));
    }
    // Errors (a node that did not join, a node not pruned) are shown whatever the output format.
    eprint!("{}", report.cluster.lines(std::time::Duration::from_secs(args.csr_timeout), chatty));
    // The plan is what --dry-run is asked for: shown whatever the output format.
    if args.dry_run {
        for r in reports.iter().filter(|r| r.status == Status::WouldChange) {
            // A blank line parts the plan from the table above it.
            eprintln!("{}{} would change:", if chatty { "\n" } else { "" }, r.name);
            for (label, list) in [("add", &r.added), ("change", &r.changed), ("remove", &r.removed)] {
                for path in list {
                    eprintln!("  {label:<7}{path}");
                }
            }
            for path in &r.kept {
                eprintln!("  keep   {path} (not given to this sync; --prune-payload / --prune-credentials remove it)");
            }
            if !r.created.is_empty() {
                eprintln!("  create {}", r.created.join(", "));
            }
            if !r.restarted.is_empty() {
                eprintln!("  restart {}", r.restarted.join(", "));
            }
        }
    }
    if !args.dry_run && chatty {
        // A node waiting for a reboot has no kubelet to ask yet: it joins after the reboot, on the next sync.
        for r in reports.iter().filter(|r| r.reboot_required && r.status != Status::Failed) {
            eprintln!("{}: waits for a reboot; its kubelet CSRs are approved by a sync after it (or by hand)", r.name);
        }
        let changed: Vec<String> = reports
            .iter()
            .filter(|r| matches!(r.status, Status::Synced | Status::Pending) && !r.reboot_required)
            .map(|r| r.node_name())
            .collect();
        if args.kubeconfig.is_none() && !changed.is_empty() {
            eprintln!(
                "\nwithout --kubeconfig, sync approves no certificate: approve each configured node's kubelet CSRs and label it:"
            );
            for name in changed {
                eprint!("{}", wmrender::cluster::manual_steps(&name));
            }
        }
    }
    if json {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|e| Error::Operational(format!("cannot write the report: {e}")))?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{json}").and_then(|()| out.flush()).map_err(|e| Error::io("writing to stdout", e))?;
    }
    Ok(if report.failed() {
        FAILED
    } else if report.would_change() {
        DIFFERENT
    } else {
        OK
    })
}

#[cfg(not(feature = "cluster"))]
fn controller(_: ControllerArgs, status: bool) -> Result<u8, Error> {
    Err(ClusterError::NotBuilt(if status { "status" } else { "controller" }).into())
}

/// `wmrender controller` (and `wmrender status`: one reconcile, nothing changed).
#[cfg(feature = "cluster")]
fn controller(args: ControllerArgs, status: bool) -> Result<u8, Error> {
    use wmrender::controller::{self, Action, ControllerOptions};
    let (once, dry_run) = (args.once || status, args.dry_run || status);
    if args.metrics_address.is_some() && args.metrics_cert.is_none() && !args.metrics_plain_http {
        return Err(Error::Usage(
            "--metrics-address serves over HTTPS: give --metrics-cert and --metrics-key, or --metrics-plain-http"
                .into(),
        ));
    }
    // `--pull-from`, `--pull-payload-from`: a repository without a tag or digest.
    let repository =
        |flag: &str, text: Option<&str>| text.map(|r| controller::pull_from(flag, r)).transpose().map_err(Error::Usage);
    let opts = ControllerOptions {
        rendered: args.access.rendered.clone(),
        inventory: args.access.inventory.clone(),
        delivery: wmrender::delivery::DeliveryOptions {
            access: access(&args.access),
            payload: args.payload,
            agent: args.agent,
            prune_payload: false,
            prune_credentials: false,
            max_unavailable: args.max_unavailable,
            dry_run,
            progress: None,
        },
        parallel: args.parallel,
        drain: drain_settings(&args.drain),
        kubeconfig: args.kubeconfig,
        resync: std::time::Duration::from_secs(args.resync),
        metrics_address: args.metrics_address,
        metrics_tls: args.metrics_cert.zip(args.metrics_key),
        lease_namespace: args.lease_namespace,
        lease_name: args.lease_name,
        lease_duration: std::time::Duration::from_secs(args.lease_duration),
        replica: args.replica.unwrap_or_else(controller::default_replica),
        once,
        prune: (!args.no_prune).then_some(args.max_prune),
        pull_from: repository("--pull-from", args.pull_from.as_deref())?,
        pull_payload_from: repository("--pull-payload-from", args.pull_payload_from.as_deref())?,
    };
    let fleet = runtime()?.block_on(controller::run(opts))?;
    if !once {
        return Ok(OK);
    }
    match args.output {
        OutputFormat::Json => {
            let text = serde_json::to_string_pretty(&fleet)
                .map_err(|e| Error::Operational(format!("cannot write the report: {e}")))?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}").and_then(|()| out.flush()).map_err(|e| Error::io("writing to stdout", e))?;
        }
        OutputFormat::Human => eprint!("{}", controller::table(&fleet)),
    }
    // Settled: every host configured and nothing to do; with --dry-run, anything else is a difference.
    let settled = fleet.iter().all(|l| l.next == Action::Nothing);
    Ok(if settled || !dry_run { OK } else { DIFFERENT })
}

#[cfg(not(feature = "cluster"))]
fn reboot(_: RebootArgs) -> Result<u8, Error> {
    Err(ClusterError::NotBuilt("reboot").into())
}

/// `wmrender reboot`: the nodes named, found as sync finds them, rebooted gracefully through the cluster.
#[cfg(feature = "cluster")]
fn reboot(args: RebootArgs) -> Result<u8, Error> {
    use wmrender::delivery::inventory::Node;
    use wmrender::lifecycle::reboot::{self, Outcome};
    use wmrender::lifecycle::targets;
    let rendered = wmrender::delivery::read_rendered(&args.access.rendered)?;
    // The BYOH hosts and the inventory; a Machine-backed node is named in the inventory to be rebooted this way.
    let known = targets::read(&targets::Sources {
        rendered: &rendered,
        inventory: args.access.inventory.as_deref(),
        machines: None,
        reported: &Default::default(),
    })
    .map_err(wmrender::sync::desired_error)?;
    let mut nodes: Vec<Node> = Vec::new();
    for name in &args.nodes {
        match known.targets.iter().find(|t| &t.reach.name == name) {
            Some(t) if !nodes.iter().any(|m| &m.name == name) => nodes.push(t.reach.clone()),
            Some(_) => {}
            None => {
                return Err(Error::Usage(format!(
                    "{name} is not a node of {} or the inventory (known: {}); the inventory's `name` must be the \
                     Node's name",
                    args.access.rendered.display(),
                    known.targets.iter().map(|t| t.reach.name.as_str()).collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
    let key = wmrender::delivery::ssh::load_identity(&args.access.identity)?;
    let settings = drain_settings(&args.drain);
    let opts = reboot::RebootOptions {
        drain: settings.drain(),
        reboot_timeout: settings.reboot_timeout,
        max_unavailable: args.max_unavailable,
        connect: wmrender::delivery::connect_options(key, &access(&args.access), false, None),
    };
    let reports = runtime()?.block_on(async {
        let cluster = wmrender::cluster::Cluster::connect(&args.kubeconfig).await?;
        Ok::<_, Error>(reboot::rollout(&cluster, &nodes, &opts).await)
    })?;
    for r in &reports {
        let outcome = serde_json::to_value(r.outcome).ok().and_then(|v| v.as_str().map(str::to_string));
        let mut line = format!("{}: {}", r.name, outcome.unwrap_or_default());
        if !r.evicted.is_empty() {
            line.push_str(&format!(", evicted {}", r.evicted.join(" ")));
        }
        if r.cordon_kept {
            line.push_str(", kept cordoned (it was cordoned before)");
        }
        if r.left_cordoned {
            line.push_str(&format!(", left cordoned: `oc adm uncordon {}` once it is healthy", r.name));
        }
        if let Some(e) = &r.error {
            line.push_str(&format!(": {e}"));
        }
        eprintln!("{line}");
    }
    if args.output == OutputFormat::Json {
        let json = serde_json::to_string_pretty(&serde_json::json!({ "nodes": reports }))
            .map_err(|e| Error::Operational(format!("cannot write the report: {e}")))?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{json}").and_then(|()| out.flush()).map_err(|e| Error::io("writing to stdout", e))?;
    }
    Ok(if reports.iter().all(|r| r.outcome == Outcome::Rebooted) { OK } else { FAILED })
}

fn diff(args: DiffArgs) -> Result<u8, Error> {
    let compiled = wmrender::compile(&args.inputs.file, args.inputs.strict)?;
    if !compiled.warnings.is_empty() {
        eprint!("{}", compiled.warnings.render_for_stderr());
    }
    let files = compiled.output_files(None);
    let earlier = match (&args.against, &args.base) {
        (Some(dir), _) => wmrender::emit::check::read_dir(dir)?,
        (None, Some(rev)) => wmrender::emit::git_base::render_at(rev, &args.inputs.file)?,
        (None, None) => return Err(Error::Usage("give --against DIR or --base REF".into())),
    };
    let staleness = wmrender::emit::check::compare_with(earlier.clone(), &files);
    let new = |p: &str| files.iter().find(|f| f.path == p).map(|f| f.bytes.clone());
    let old = |p: &str| earlier.get(p).cloned();
    let review = wmrender::emit::review::review(&staleness, &old, &new);
    let text = match args.output {
        OutputFormat::Json => serde_json::to_string_pretty(&review).unwrap_or_default() + "\n",
        OutputFormat::Human => review.render_text(),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| Error::io("writing to stdout", e))?;
    let different = if args.fail_on_delete { review.deletes_something() } else { !review.is_empty() };
    Ok(if different { DIFFERENT } else { OK })
}

fn krm(args: KrmArgs) -> Result<u8, Error> {
    if let Some(config) = args.config {
        let cwd = std::env::current_dir().map_err(|e| Error::io("finding the working directory", e))?;
        let (stream, warnings) = wmrender::emit::kustomize_plugin::run(&config, &cwd).map_err(Error::Invalid)?;
        eprint!("{}", warnings.render_for_stderr());
        let mut out = std::io::stdout().lock();
        out.write_all(stream.as_bytes()).and_then(|()| out.flush()).map_err(|e| Error::io("writing to stdout", e))?;
        return Ok(OK);
    }
    let mut input = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut input)
        .map_err(|e| Error::io("reading the ResourceList from stdin", e))?;
    let cwd = std::env::current_dir().map_err(|e| Error::io("finding the working directory", e))?;
    let outcome = wmrender::emit::krm::run_bytes(input, &cwd);
    // kustomize shows only a function's stderr, kpt only its results: both get every diagnostic.
    eprint!("{}", outcome.stderr);
    let mut out = std::io::stdout().lock();
    out.write_all(outcome.stdout.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Error::io("writing to stdout", e))?;
    Ok(if outcome.failed { INVALID } else { OK })
}

#[cfg(feature = "cluster")]
fn fetch_for_import(kubeconfig: &std::path::Path) -> Result<Vec<serde_json::Value>, Error> {
    Ok(runtime()?.block_on(wmrender::cluster::import::fetch(kubeconfig))?)
}

#[cfg(not(feature = "cluster"))]
fn fetch_for_import(_: &std::path::Path) -> Result<Vec<serde_json::Value>, Error> {
    Err(ClusterError::NotBuilt("import --kubeconfig").into())
}

fn import(args: ImportArgs) -> Result<u8, Error> {
    let (objects, source) = match (&args.from_dir, &args.kubeconfig) {
        (Some(dir), _) => {
            let name =
                dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| dir.display().to_string());
            (wmrender::import::objects_from_dir(dir)?, name)
        }
        (None, Some(kubeconfig)) => (fetch_for_import(kubeconfig)?, "the cluster".to_string()),
        (None, None) => return Err(Error::Usage("give --from-dir DIR or --kubeconfig PATH".into())),
    };
    let ssh_public_key = match &args.ssh_public_key {
        Some(path) => Some(wmrender::import::read_public_key(path)?),
        None => None,
    };
    let opts = wmrender::import::ImportOptions { source, image: args.image, ssh_public_key };
    let imported = wmrender::import::import(&objects, &opts)?;
    for path in wmrender::import::write(&imported, &args.output, args.force)? {
        eprintln!("wrote {}", path.display());
    }
    // The imported file must at least be valid; say what to fix if not.
    match wmrender::check_inputs(&args.output, false) {
        Ok(checked) => eprint!("{}", checked.warnings.render_for_stderr()),
        Err(Error::Invalid(d)) => {
            eprint!("{}", d.render_for_stderr());
            eprintln!("{} needs the edits above before it renders", args.output.display());
            return Ok(INVALID);
        }
        Err(e) => return Err(e),
    }
    Ok(OK)
}
