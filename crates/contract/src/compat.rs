//! Which node component versions go with which cluster: one table, one row per Kubernetes minor that wmrender
//! renders for, and the rules that read it. `validate --payload` and `sync --payload` refuse a payload that breaks
//! them before anything reaches a node; `wmrender payload` writes the versions it found into `payload.json`.
//!
//! Sources: Kubernetes' version skew policy (kubernetes.io/releases/version-skew-policy: a kubelet or kube-proxy is
//! never newer than kube-apiserver and at most three minors older); WMCO, whose release 10.y pairs with OpenShift 4.y
//! and builds kubelet, kube-proxy and kube-log-runner from the cluster's own Kubernetes, and ships containerd 1.7
//! (`containerd_conf.toml` is containerd 1.7's "version = 2" file, which containerd 2 still reads); kube-log-runner's
//! rotation flags, which exist from Kubernetes 1.34 on (`-log-file-size`, `-log-file-age`, `-flush-interval`).

use std::fmt;

/// One cluster release: its Kubernetes minor, the OpenShift and WMCO releases that run it (WMCO 10.y pairs with
/// OpenShift 4.y).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    /// `1.<kubernetes>`.
    pub kubernetes: u32,
    pub openshift: &'static str,
    pub wmco: &'static str,
}

/// Every Kubernetes minor wmrender renders for (`kubernetesVersion`), oldest first.
pub const RELEASES: &[Release] = &[
    Release { kubernetes: 30, openshift: "4.17", wmco: "10.17" },
    Release { kubernetes: 31, openshift: "4.18", wmco: "10.18" },
    Release { kubernetes: 32, openshift: "4.19", wmco: "10.19" },
    Release { kubernetes: 33, openshift: "4.20", wmco: "10.20" },
    Release { kubernetes: 34, openshift: "4.21", wmco: "10.21" },
    Release { kubernetes: 35, openshift: "4.22", wmco: "10.22" },
    // WMCO's main branch (11.0.0) builds for Kubernetes 1.36; the OpenShift release it ships with has no name yet.
    Release { kubernetes: 36, openshift: "next", wmco: "11.0" },
];

/// How many minors a kubelet or kube-proxy may be older than kube-apiserver (Kubernetes 1.28 and later).
pub const SKEW: u32 = 3;
/// The oldest containerd line the rendered `containerd_conf.toml` and `hosts.toml` are made for (WMCO's).
pub const CONTAINERD_OLDEST: (u32, u32) = (1, 7);
/// The first Kubernetes minor whose kube-log-runner has the rotation flags wmrender renders.
pub const LOG_RUNNER_ROTATION: u32 = 34;

/// The row of a Kubernetes minor.
pub fn release(kubernetes_minor: u32) -> Option<&'static Release> {
    RELEASES.iter().find(|r| r.kubernetes == kubernetes_minor)
}

/// A payload program the table has a rule for, by the name of its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Component {
    Kubelet,
    KubeProxy,
    KubeLogRunner,
    Containerd,
}

impl Component {
    /// The component a payload file is, by its file name (`kubelet.exe`, `C:\k\kubelet.exe`).
    pub fn of_file(name: &str) -> Option<Component> {
        let base = name.rsplit(['\\', '/']).next().unwrap_or(name).to_ascii_lowercase();
        match base.as_str() {
            "kubelet.exe" => Some(Component::Kubelet),
            "kube-proxy.exe" => Some(Component::KubeProxy),
            "kube-log-runner.exe" => Some(Component::KubeLogRunner),
            "containerd.exe" => Some(Component::Containerd),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Component::Kubelet => "kubelet",
            Component::KubeProxy => "kube-proxy",
            Component::KubeLogRunner => "kube-log-runner",
            Component::Containerd => "containerd",
        }
    }
}

/// A release version as programs report it: `v1.35.2`, `1.7.27`, `v1.35.2+3c1f2e9`, `v2.0.0-rc.1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// The version at the start of `text`, `None` when it does not start with one (`(devel)`, `v0.0.0-master+…` is
    /// parsed as 0.0.0: an unstamped build).
    pub fn parse(text: &str) -> Option<Version> {
        let t = text.strip_prefix('v').unwrap_or(text);
        let end = t.find(['+', '-', ' ']).unwrap_or(t.len());
        let mut parts = t[..end].split('.');
        let number = |p: Option<&str>| p.filter(|p| !p.is_empty() && p.len() <= 9)?.parse::<u32>().ok();
        let (major, minor, patch) = (number(parts.next())?, number(parts.next())?, number(parts.next())?);
        parts.next().is_none().then_some(Version { major, minor, patch })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Why a payload program does not go with the cluster, with what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub component: Component,
    pub found: Version,
    /// What the cluster takes, in words: `Kubernetes 1.32 to 1.35`.
    pub takes: String,
    /// The rule, in words.
    pub because: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is {}; this cluster takes {} ({})", self.component.name(), self.found, self.takes, self.because)
    }
}

/// Whether `component` at `found` may run on a node of a cluster on Kubernetes `1.<cluster>`.
pub fn check(cluster: u32, component: Component, found: Version) -> Result<(), Mismatch> {
    let mismatch = |takes: String, because: &str| Err(Mismatch { component, found, takes, because: because.into() });
    let oldest = cluster.saturating_sub(SKEW);
    let window = |because: &str| {
        if found.major == 1 && (oldest..=cluster).contains(&found.minor) {
            Ok(())
        } else {
            mismatch(format!("Kubernetes 1.{oldest} to 1.{cluster}"), because)
        }
    };
    match component {
        Component::Kubelet | Component::KubeProxy => window(
            "the version skew policy: never newer than the API server, at most 3 minor versions older; use the \
             payload of the cluster's release",
        ),
        Component::KubeLogRunner if cluster >= LOG_RUNNER_ROTATION => {
            let oldest = oldest.max(LOG_RUNNER_ROTATION);
            if found.major == 1 && (oldest..=cluster).contains(&found.minor) {
                Ok(())
            } else {
                mismatch(
                    format!("Kubernetes 1.{oldest} to 1.{cluster}"),
                    "the rendered services pass the rotation flags kube-log-runner has from 1.34 on, and it is never \
                     newer than the cluster",
                )
            }
        }
        Component::KubeLogRunner => {
            window("it comes with kubelet: never newer than the cluster, at most 3 minors older")
        }
        Component::Containerd => {
            if (found.major, found.minor) >= CONTAINERD_OLDEST {
                Ok(())
            } else {
                mismatch(
                    format!("containerd {}.{} or newer", CONTAINERD_OLDEST.0, CONTAINERD_OLDEST.1),
                    "the rendered containerd_conf.toml and hosts.toml are containerd 1.7's",
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    #[test]
    fn versions_as_programs_write_them() {
        assert_eq!(v("v1.35.2"), Version { major: 1, minor: 35, patch: 2 });
        assert_eq!(v("1.7.27"), Version { major: 1, minor: 7, patch: 27 });
        assert_eq!(v("v1.31.1+81c1851"), Version { major: 1, minor: 31, patch: 1 });
        assert_eq!(v("v2.0.0-rc.1"), Version { major: 2, minor: 0, patch: 0 });
        assert_eq!(v("v0.0.0-master+$Format:%H$"), Version { major: 0, minor: 0, patch: 0 });
        for bad in ["(devel)", "", "v1.35", "1.x.2", "v1.2.3.4", "v99999999999.1.1"] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_minor_wmrender_renders_for_has_a_row() {
        for minor in 30..=36 {
            assert!(release(minor).is_some(), "1.{minor}");
        }
        assert!(RELEASES.windows(2).all(|w| w[0].kubernetes + 1 == w[1].kubernetes));
    }

    #[test]
    fn kubelet_within_the_skew_policy() {
        assert!(check(35, Component::Kubelet, v("v1.35.2")).is_ok());
        assert!(check(35, Component::Kubelet, v("v1.32.0")).is_ok());
        let older = check(35, Component::Kubelet, v("v1.31.9")).unwrap_err();
        assert_eq!(older.takes, "Kubernetes 1.32 to 1.35");
        assert!(older.to_string().starts_with("kubelet is 1.31.9; this cluster takes Kubernetes 1.32 to 1.35"));
        assert!(check(35, Component::Kubelet, v("v1.36.0")).is_err(), "newer than the API server");
        assert!(check(35, Component::KubeProxy, v("v2.35.0")).is_err());
        assert!(check(35, Component::Kubelet, v("v0.0.0-master")).is_err(), "an unstamped build");
    }

    #[test]
    fn kube_log_runner_needs_rotation_from_1_34() {
        assert!(check(33, Component::KubeLogRunner, v("v1.30.0")).is_ok());
        assert!(check(35, Component::KubeLogRunner, v("v1.33.5")).is_err());
        assert!(check(35, Component::KubeLogRunner, v("v1.34.0")).is_ok());
    }

    #[test]
    fn containerd_from_1_7() {
        assert!(check(35, Component::Containerd, v("1.7.27")).is_ok());
        assert!(check(35, Component::Containerd, v("v2.1.4")).is_ok());
        assert!(check(35, Component::Containerd, v("1.6.36")).is_err());
    }

    #[test]
    fn components_by_file_name() {
        assert_eq!(Component::of_file(r"C:\k\kubelet.exe"), Some(Component::Kubelet));
        assert_eq!(Component::of_file("C/k/containerd/containerd.exe"), Some(Component::Containerd));
        assert_eq!(Component::of_file(r"C:\k\KUBE-PROXY.EXE"), Some(Component::KubeProxy));
        assert_eq!(Component::of_file(r"C:\k\kubelet.conf"), None);
    }
}
