//! What `wmrender sync` shows while it runs, on stderr: on a terminal a bar with the node count and the nodes being
//! worked on, off a terminal (CI logs) nothing but one line per node as it finishes; and nothing at all when the
//! user asked for quiet (`--output json` without `-v`).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use wmrender::delivery::inventory::Node;
use wmrender::delivery::node::{NodeReport, Status};

pub struct SyncProgress {
    /// Whether to say anything at all.
    shown: bool,
    /// The bar, on a terminal only.
    bar: Option<ProgressBar>,
    /// Names of the nodes being worked on, in start order, for the bar's message.
    working: Mutex<Vec<String>>,
}

impl SyncProgress {
    pub fn new(shown: bool) -> SyncProgress {
        let bar = (shown && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} nodes  {wide_msg}") {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        SyncProgress { shown, bar, working: Mutex::new(Vec::new()) }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn show_working(&self, working: &[String]) {
        if let Some(bar) = &self.bar {
            bar.set_message(match working {
                [] => String::new(),
                [one] => one.clone(),
                [first, rest @ ..] => format!("{first} and {} more", rest.len()),
            });
        }
    }
}

impl wmrender::delivery::Progress for SyncProgress {
    fn planned(&self, nodes: &[Node]) {
        if let Some(bar) = &self.bar {
            bar.set_length(nodes.len() as u64);
            // Drawn from here on: before, there is no total to show.
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
        }
    }

    fn started(&self, node: &Node) {
        let mut working = self.working.lock().unwrap_or_else(|p| p.into_inner());
        working.push(node.name.clone());
        self.show_working(&working);
    }

    fn note(&self, line: &str) {
        if !self.shown {
            return;
        }
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn finished(&self, report: &NodeReport) {
        let mut working = self.working.lock().unwrap_or_else(|p| p.into_inner());
        working.retain(|n| *n != report.name);
        self.show_working(&working);
        if !self.shown {
            return;
        }
        let line = line(report);
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                bar.inc(1);
            }
            None => eprintln!("{line}"),
        }
    }
}

/// One finished node in a line: `win-a (10.0.0.5): synced: 3 added, 1 changed, 0 removed, 1.2 MB sent`.
fn line(r: &NodeReport) -> String {
    let who = if r.name == r.address { r.name.clone() } else { format!("{} ({})", r.name, r.address) };
    let counts = format!("{} added, {} changed, {} removed", r.added.len(), r.changed.len(), r.removed.len());
    match r.status {
        Status::Synced => {
            let mut s = format!("{who}: synced: {counts}, {} sent", bytes(r.bytes_sent));
            if !r.restarted.is_empty() {
                s.push_str(&format!("; restarted {}", r.restarted.join(", ")));
            }
            if r.reboot_required {
                s.push_str("; REBOOT NEEDED");
            }
            s
        }
        Status::Pending => {
            format!("{who}: pending: {counts}, {} sent; waiting: {}", bytes(r.bytes_sent), r.pending.join("; "))
        }
        Status::Unchanged => format!("{who}: unchanged"),
        Status::WouldChange => {
            format!(
                "{who}: would change: {} to add, {} to change, {} to remove",
                r.added.len(),
                r.changed.len(),
                r.removed.len()
            )
        }
        Status::Failed => format!("{who}: FAILED: {}", r.error.as_deref().unwrap_or("unknown error")),
        Status::Skipped => format!("{who}: skipped (an earlier node failed; --keep-going goes on)"),
    }
}

fn bytes(n: u64) -> String {
    match n {
        0..1_000 => format!("{n} B"),
        1_000..1_000_000 => format!("{:.1} kB", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        _ => format!("{:.2} GB", n as f64 / 1e9),
    }
}
