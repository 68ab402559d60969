//! The version a payload program says it is. Every payload program is a Go program, and Go writes its build
//! information into the binary (what `go version -m` prints): the main module, every dependency with its version,
//! and the build settings, `-ldflags` among them, which is where Kubernetes and containerd stamp their release
//! version. Read from the file as untrusted bytes: a binary without it, or with an older layout, has no version.

use wmrender_contract::compat::Component;

/// `\xff Go buildinf:`: the start of the build information (Go's debug/buildinfo).
const MAGIC: &[u8] = b"\xff Go buildinf:";
/// Since Go 1.18 the strings follow the 32-byte header inline (flag bit 2); older binaries point into the data.
const INLINE_STRINGS: u8 = 0x2;
/// The module information is framed by 16 bytes on each side.
const SENTINEL: usize = 16;

/// What a Go binary says about its build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoBuild {
    /// `go1.24.4`.
    pub go: String,
    /// The main package's import path (`k8s.io/kubernetes/cmd/kubelet`).
    pub path: Option<String>,
    /// The main module's path and version (`(devel)` when built in its own tree).
    pub main: Option<(String, String)>,
    /// Every dependency: path and the version it was built with (the replacement's, where one is).
    pub deps: Vec<(String, String)>,
    /// `-ldflags`, `GOOS`, … as `go build` recorded them.
    pub settings: Vec<(String, String)>,
}

impl GoBuild {
    /// The build information in `binary`, `None` when it has none this reader understands.
    pub fn read(binary: &[u8]) -> Option<GoBuild> {
        let at = binary.windows(MAGIC.len()).position(|w| w == MAGIC)?;
        let header = binary.get(at..at + 32)?;
        if header[15] & INLINE_STRINGS == 0 {
            return None;
        }
        let mut rest = &binary[at + 32..];
        let go = std::str::from_utf8(bytes(&mut rest)?).ok()?;
        // The sentinels are binary; the text between them is the module information.
        let framed = bytes(&mut rest)?;
        let modinfo = if framed.len() > 2 * SENTINEL {
            std::str::from_utf8(&framed[SENTINEL..framed.len() - SENTINEL]).ok()?
        } else {
            ""
        };
        let mut build = GoBuild { go: go.to_string(), ..GoBuild::default() };
        for line in modinfo.lines() {
            let fields: Vec<&str> = line.split('\t').collect();
            match fields.as_slice() {
                ["path", path] => build.path = Some(path.to_string()),
                ["mod", path, version, ..] => build.main = Some((path.to_string(), version.to_string())),
                ["dep", path, version, ..] => build.deps.push((path.to_string(), version.to_string())),
                // A replacement applies to the line above it (the main module's or a dependency's).
                ["=>", _, version, ..] => {
                    if let Some(last) = build.deps.last_mut() {
                        last.1 = version.to_string();
                    } else if let Some(main) = build.main.as_mut() {
                        main.1 = version.to_string();
                    }
                }
                ["build", setting] => {
                    if let Some((k, v)) = setting.split_once('=') {
                        build.settings.push((k.to_string(), v.trim_matches('"').to_string()));
                    }
                }
                _ => {}
            }
        }
        Some(build)
    }

    /// The value `-ldflags` gave to `-X <variable>=`, if it did.
    fn stamped(&self, variable: &str) -> Option<&str> {
        let ldflags = self.settings.iter().find(|(k, _)| k == "-ldflags")?.1.as_str();
        let key = format!("{variable}=");
        let start = ldflags.find(&key)? + key.len();
        let value = ldflags[start..].split([' ', '"', '\'']).next()?;
        (!value.is_empty()).then_some(value)
    }

    /// The version of module `path`: the main module's or a dependency's.
    fn module(&self, path: &str) -> Option<&str> {
        let main = self.main.iter().filter(|(p, _)| p == path).map(|(_, v)| v.as_str());
        main.chain(self.deps.iter().filter(|(p, _)| p == path).map(|(_, v)| v.as_str())).find(|v| *v != "(devel)")
    }

    /// The release version of `component` (or, for another program, its main module's version).
    pub fn version(&self, component: Option<Component>) -> Option<String> {
        match component {
            Some(Component::Kubelet | Component::KubeProxy | Component::KubeLogRunner) => {
                // Release builds stamp the version; a build from the Go module has it as the module's version.
                // k8s.io/component-base v0.X.Y is Kubernetes 1.X.Y.
                let stamped = self.stamped("k8s.io/component-base/version.gitVersion");
                let from_module = || self.module("k8s.io/kubernetes").map(str::to_string);
                let from_base = || {
                    let v = self.module("k8s.io/component-base")?;
                    v.strip_prefix("v0.").map(|rest| format!("v1.{rest}"))
                };
                stamped.map(str::to_string).or_else(from_module).or_else(from_base)
            }
            Some(Component::Containerd) => self
                .stamped("github.com/containerd/containerd/v2/version.Version")
                .or_else(|| self.stamped("github.com/containerd/containerd/version.Version"))
                .or_else(|| self.module("github.com/containerd/containerd/v2"))
                .or_else(|| self.module("github.com/containerd/containerd"))
                .map(str::to_string),
            // The version of the module the program's package is in (the main module, or the dependency a build
            // from another module took it from).
            None => {
                let package = self.path.as_deref()?;
                let holds = |m: &str| package == m || package.starts_with(&format!("{m}/"));
                let modules = self.main.iter().chain(self.deps.iter());
                let (_, version) = modules.filter(|(m, _)| holds(m)).max_by_key(|(m, _)| m.len())?;
                (version != "(devel)").then(|| version.clone())
            }
        }
    }
}

/// A uvarint-length-prefixed run of bytes, advancing `rest` past it.
fn bytes<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (mut len, mut shift, mut used) = (0usize, 0u32, 0usize);
    for &b in rest.iter().take(10) {
        used += 1;
        len |= ((b & 0x7f) as usize).checked_shl(shift)?;
        if b & 0x80 == 0 {
            let bytes = rest.get(used..used.checked_add(len)?)?;
            *rest = &rest[used + len..];
            return Some(bytes);
        }
        shift += 7;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Build information laid out as Go 1.18+ writes it, inside other bytes.
    fn binary(modinfo: &str) -> Vec<u8> {
        let mut out = vec![0u8; 100];
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[8, INLINE_STRINGS]);
        out.resize(out.len() + 16, 0);
        // Go's sentinels are binary, not text.
        let mut framed =
            vec![0x30, 0x77, 0xaf, 0x0c, 0x92, 0x74, 0x08, 0x02, 0x41, 0xe1, 0xc1, 0x07, 0xe6, 0xd6, 0x18, 0xe6];
        framed.extend_from_slice(modinfo.as_bytes());
        framed.extend_from_slice(&[
            0xf9, 0x32, 0x43, 0x31, 0x86, 0x18, 0x20, 0x72, 0x00, 0x82, 0x42, 0x10, 0x41, 0x16, 0xd8, 0xf2,
        ]);
        for s in [b"go1.26.0".as_slice(), framed.as_slice()] {
            let mut n = s.len();
            while n >= 0x80 {
                out.push((n as u8) | 0x80);
                n >>= 7;
            }
            out.push(n as u8);
            out.extend_from_slice(s);
        }
        out.extend_from_slice(&[0; 64]);
        out
    }

    #[test]
    fn a_kubernetes_release_build_is_stamped() {
        let b = binary(
            "path\tk8s.io/kubernetes/cmd/kubelet\nmod\tk8s.io/kubernetes\t(devel)\t\n\
             build\t-ldflags=\"-X k8s.io/component-base/version.gitVersion=v1.35.2+3c1f2e9 -X k8s.io/component-base/version.gitMinor=35\"\n\
             build\tGOOS=windows\n",
        );
        let build = GoBuild::read(&b).unwrap();
        assert_eq!(build.go, "go1.26.0");
        assert_eq!(build.version(Some(Component::Kubelet)).as_deref(), Some("v1.35.2+3c1f2e9"));
        assert_eq!(build.version(None), None, "(devel) is no version");
    }

    #[test]
    fn a_build_from_the_module_has_the_modules_version() {
        let b = binary(
            "path\twmrender.dev/x\nmod\twmrender.dev/x\t(devel)\t\n\
             dep\tk8s.io/component-base\tv0.0.0\t\n=>\tk8s.io/component-base\tv0.36.3\th1:x=\n\
             dep\tk8s.io/kubernetes\tv1.36.3\th1:y=\n",
        );
        let build = GoBuild::read(&b).unwrap();
        assert_eq!(build.version(Some(Component::Kubelet)).as_deref(), Some("v1.36.3"));
        let runner =
            binary("path\tk8s.io/component-base/logs/kube-log-runner\nmod\tk8s.io/component-base\tv0.34.1\th1:z=\n");
        let runner = GoBuild::read(&runner).unwrap();
        assert_eq!(runner.version(Some(Component::KubeLogRunner)).as_deref(), Some("v1.34.1"));
    }

    #[test]
    fn containerd_and_other_programs() {
        let b = binary(
            "path\tgithub.com/containerd/containerd/cmd/containerd\nmod\tgithub.com/containerd/containerd\t(devel)\t\n\
             build\t-ldflags=-X github.com/containerd/containerd/version.Version=v1.7.27\n",
        );
        assert_eq!(GoBuild::read(&b).unwrap().version(Some(Component::Containerd)).as_deref(), Some("v1.7.27"));
        let cni = binary(
            "path\tgithub.com/containernetworking/plugins/plugins/main/windows/win-bridge\nmod\tgithub.com/containernetworking/plugins\tv1.7.1\th1:q=\n",
        );
        assert_eq!(GoBuild::read(&cni).unwrap().version(None).as_deref(), Some("v1.7.1"));
        let from_dep = binary(
            "path\tgithub.com/containernetworking/plugins/plugins/ipam/host-local\nmod\twmrender.dev/tests\t(devel)\t\n\
             dep\tgithub.com/containernetworking/plugins\tv1.9.1\th1:q=\ndep\tgithub.com/containernetworking/cni\tv1.3.0\th1:r=\n",
        );
        assert_eq!(GoBuild::read(&from_dep).unwrap().version(None).as_deref(), Some("v1.9.1"));
    }

    #[test]
    fn anything_else_has_no_version() {
        assert_eq!(GoBuild::read(b"MZ not a go program"), None);
        let mut cut = binary("mod\tx\tv1.0.0\t\n");
        cut.truncate(130);
        assert_eq!(GoBuild::read(&cut), None, "a length past the end");
        let mut old = binary("mod\tx\tv1.0.0\t\n");
        old[100 + 15] = 0;
        assert_eq!(GoBuild::read(&old), None, "the pointer layout of Go before 1.18");
    }
}
