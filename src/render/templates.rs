//! Text artifacts that read best as text come from minijinja templates under templates/, compiled into the binary.
//! A value enters a template only through the filter of its target language, each backed by the one quoting
//! function of that language: `ps` (a PowerShell single-quoted literal), `ps_array`, `toml` (a TOML basic string).

use minijinja::Environment;
use std::sync::LazyLock;

static TEMPLATES: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    // Trailing newlines kept, block tags eat their own line: templates read like the files they produce.
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .keep_trailing_newline(true)
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .expect("a valid syntax configuration");
    env.set_syntax(syntax);
    // Undefined variables are bugs; failing loudly in tests beats rendering an empty string.
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    // Filters first: templates are checked against them when added.
    env.add_filter("ps", |v: String| super::node::powershell::quote(&v));
    env.add_filter("ps_array", |v: Vec<String>| super::node::powershell::array(&v));
    env.add_filter("toml", |v: String| super::registries::toml_string(&v));
    // Every template of templates/; the snapshot tests render each of them.
    const ALL: &[(&str, &str)] = &[
        ("containerd_conf.toml.j2", include_str!("../../templates/containerd_conf.toml.j2")),
        ("network-conf.ps1.j2", include_str!("../../templates/network-conf.ps1.j2")),
        ("containers-feature.ps1.j2", include_str!("../../templates/containers-feature.ps1.j2")),
        ("firewall.ps1.j2", include_str!("../../templates/firewall.ps1.j2")),
        ("windows-defender-exclusion.ps1.j2", include_str!("../../templates/windows-defender-exclusion.ps1.j2")),
        ("gcp-get-hostname.ps1.j2", include_str!("../../templates/gcp-get-hostname.ps1.j2")),
        ("aws-get-hostname.ps1.j2", include_str!("../../templates/aws-get-hostname.ps1.j2")),
        ("aws-routes.ps1.j2", include_str!("../../templates/aws-routes.ps1.j2")),
        ("remove-hns-networks.ps1.j2", include_str!("../../templates/remove-hns-networks.ps1.j2")),
        ("rename-host.ps1.j2", include_str!("../../templates/rename-host.ps1.j2")),
        ("windows-user-data.ps1.j2", include_str!("../../templates/windows-user-data.ps1.j2")),
    ];
    for (name, text) in ALL {
        env.add_template(name, text).expect("embedded templates parse (covered by tests)");
    }
    env
});

/// Renders an embedded template. Templates and their contexts are ours and covered by snapshot tests, so an error
/// here is a bug in wmrender, not in the inputs.
pub fn render(name: &str, ctx: minijinja::Value) -> String {
    TEMPLATES
        .get_template(name)
        .and_then(|t| t.render(ctx))
        .unwrap_or_else(|e| panic!("template {name} failed to render: {e}"))
}
