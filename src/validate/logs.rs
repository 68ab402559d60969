//! `nodeLogs`: how the node services' log files are rotated. Sizes are Kubernetes quantities (`100M`, `50Mi`),
//! ages and intervals whole numbers with a unit (`5s`, `30m`, `12h`, `7d`); each is checked where it is written.

use super::Decoded;
use crate::diagnostics::Diagnostics;
use crate::duration::Duration;
use crate::inputs::schema::ClusterInputs;
use crate::quantity::Quantity;

/// Below this a log file holds too little to read before it is rotated away.
pub const SMALLEST_SIZE: u64 = 1_000_000;
/// The first Kubernetes minor whose kube-log-runner rotates (`-log-file-size`, `-log-file-age`, `-flush-interval`).
pub const ROTATING_LOG_RUNNER: u32 = 34;

pub fn check(inputs: &ClusterInputs, decoded: &Decoded, d: &mut Diagnostics) {
    let Some(logs) = &inputs.spec.node_logs else { return };
    let mut size_bytes = None;
    if let Some(v) = logs.max_size.as_ref().filter(|v| decoded.get(v).is_some()) {
        match Quantity::parse(v) {
            Err(why) => d.push(
                v.error(format!("`{}` is not a size: {why}", v.value.escape_debug()))
                    .expected("a whole number with a suffix, such as 100M or 50Mi (0: no rotation)"),
            ),
            Ok(q) if q.bytes() > 0 && q.bytes() < SMALLEST_SIZE => d.push(
                v.warning(format!("log files rotated every {} bytes hold only a few lines each", q.bytes()))
                    .expected("at least 1M"),
            ),
            Ok(q) => size_bytes = Some(q.bytes()),
        }
    }
    for v in [&logs.max_age, &logs.flush_interval].into_iter().flatten().filter(|v| decoded.get(v).is_some()) {
        if let Err(why) = Duration::parse(v) {
            d.push(
                v.error(format!("`{}` is not a duration: {why}", v.value.escape_debug()))
                    .expected("a whole number with a unit: s, m, h or d, such as 5s, 30m, 12h or 7d"),
            );
        }
    }
    if size_bytes == Some(0)
        && let Some(age) = &logs.max_age
    {
        d.push(
            age.warning("`maxAge` removes rotated files, and `maxSize: 0` rotates none")
                .expected("a `maxSize` above 0, or no `maxAge`"),
        );
    }
    let minor = inputs
        .spec
        .kubernetes_version
        .as_ref()
        .and_then(|v| super::checked::KubernetesVersion::parse(v))
        .map(|v| v.minor);
    if let (Some(minor), Some(first)) =
        (minor, logs.max_size.as_ref().or(logs.max_age.as_ref()).or(logs.flush_interval.as_ref()))
        && minor < ROTATING_LOG_RUNNER
    {
        d.push(first.warning(format!(
            "kube-log-runner of Kubernetes 1.{minor} cannot rotate: kubelet's and kube-proxy's logs are not rotated \
             (hybrid-overlay-node's and csi-proxy's are)"
        )).expected(format!("kubernetesVersion 1.{ROTATING_LOG_RUNNER} or newer")));
    }
}
