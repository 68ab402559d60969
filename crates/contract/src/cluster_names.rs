//! The names of wmrender's own objects in the cluster, agreed between what `render` writes into `cluster/` and what
//! the commands that talk to the cluster (`sync --kubeconfig`, `controller`) look for: one definition, so that
//! neither reads the other's code for a name.

/// wmrender's namespace without the operator: the exporter's Service and serving certificate, the Azure
/// cloud-node-manager's identity, the controller, and the login records.
pub const NAMESPACE: &str = "wmrender";
/// The Azure cloud-node-manager's ServiceAccount, whose token sync mints.
pub const CLOUD_NODE_MANAGER_SERVICE_ACCOUNT: &str = "cloud-node-manager";
/// windows_exporter's serving certificate, which the service CA writes for the rendered Service.
pub const EXPORTER_TLS_SECRET: &str = "windows-exporter-tls";
/// The controller's ServiceAccount, roles, Deployment and Lease.
pub const CONTROLLER: &str = "wmrender-controller";
