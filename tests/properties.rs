//! Properties over generated inputs: any valid inputs file renders (no panic, no error), and sizes come out in
//! the canonical form Kubernetes stores (k8s.io/apimachinery `Quantity.String`), so a render never drifts from
//! what the API server keeps.

use proptest::prelude::*;
use wmrender::quantity::Quantity;

const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
const DECIMAL: [&str; 6] = ["k", "M", "G", "T", "P", "E"];

/// A size as a user may write it: a whole number and an optional suffix, small enough to fit Kubernetes' int64.
fn written_size() -> impl Strategy<Value = String> {
    let suffix =
        prop_oneof![Just(""), proptest::sample::select(BINARY.to_vec()), proptest::sample::select(DECIMAL.to_vec())];
    (0u64..5000, proptest::sample::select(vec![0u32, 1, 3, 10]), suffix).prop_map(|(n, shift, suffix)| {
        // Multiples of 1000 and 1024 are where canonicalisation moves suffixes; make them common.
        let n = if shift == 0 { n } else { n.saturating_mul(if shift == 3 { 1000 } else { 1 << shift }) };
        format!("{n}{suffix}")
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn sizes_round_trip_to_the_canonical_form(written in written_size()) {
        let Ok(q) = Quantity::parse(&written) else {
            // Only sizes beyond 2^63 - 1 bytes are refused among these.
            prop_assert!(written.ends_with('E') || written.ends_with("Ei") || written.ends_with("Pi") || written.ends_with('P'));
            return Ok(());
        };
        let canonical = q.canonical();
        let again = Quantity::parse(&canonical).expect("the canonical form reads back");
        // Same value, and canonicalising again changes nothing.
        prop_assert_eq!(again.bytes(), q.bytes());
        prop_assert_eq!(again.canonical(), canonical.clone());
        let digits_end = canonical.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(canonical.len());
        let (mantissa, suffix) = canonical.split_at(digits_end);
        let mantissa: u64 = mantissa.parse().expect("digits");
        let binary_input = BINARY.iter().any(|s| written.ends_with(s));
        if binary_input && q.bytes() >= 1024 {
            // Binary stays binary, with the largest suffix that divides exactly.
            prop_assert!(BINARY.contains(&suffix), "{} -> {}", written, canonical);
            prop_assert!(suffix == "Ei" || !mantissa.is_multiple_of(1024), "{} -> {}", written, canonical);
        } else {
            // Decimal (and binary below 1024 bytes, `0Gi` -> `0`): the largest power of 1000 that divides exactly.
            prop_assert!(suffix.is_empty() || DECIMAL.contains(&suffix), "{} -> {}", written, canonical);
            prop_assert!(mantissa == 0 || suffix == "E" || !mantissa.is_multiple_of(1000), "{} -> {}", written, canonical);
            prop_assert!(mantissa != 0 || canonical == "0");
        }
    }
}

/// One generated inputs file that passes validation.
#[derive(Debug, Clone)]
struct Generated {
    text: String,
    /// What a Nutanix memory size must be rendered as, when the platform is Nutanix.
    nutanix_memory: Option<String>,
}

fn platform_and_sets() -> impl Strategy<Value = (String, Vec<String>, Option<String>, &'static str)> {
    let replicas = prop_oneof![Just("auto".to_string()), (0u32..=i32::MAX as u32).prop_map(|n| n.to_string())];
    let sets = proptest::collection::vec((0usize..3, replicas, any::<bool>()), 0..4);
    let memory = (1u64..64, proptest::sample::select(vec!["Gi", "Mi", "G"]))
        .prop_map(|(n, s)| format!("{}{s}", if s == "Mi" { n * 1024 } else { n * 2 }));
    (0usize..6, sets, memory).prop_map(|(platform, sets, memory)| {
        let version = |v2025: bool| if v2025 { "\"2025\"" } else { "\"2022\"" };
        let mut lines = Vec::new();
        let (block, nutanix, vxlan) = match platform {
            0 => ("    aws:\n      region: us-east-1\n      ami: ami-0123456789abcdef0\n".to_string(), None, ""),
            1 => ("    azure:\n      location: centralus\n".to_string(), None, ""),
            2 => ("    gcp:\n      projectID: acme\n      region: us-central1\n      tags: []\n".to_string(), None, ""),
            3 => (
                format!(
                    "    nutanix:\n      cluster: {{uuid: 0005f1b2-7c3a-4e1d-9a2b-3c4d5e6f7a8b}}\n      image: win\n      subnets:\n      - name: vlan1\n      memorySize: {memory}\n"
                ),
                Some(memory.clone()),
                "",
            ),
            4 => ("    vsphere:\n      server: vcenter.example.com\n      datacenter: dc1\n      datastore: ds1\n      network: VM Network\n      template: win2022\n".to_string(), None, "    hybridOverlayVXLANPort: 9898\n"),
            _ => ("    none: {}\n".to_string(), None, "    hybridOverlayVXLANPort: 9898\n"),
        };
        if platform < 5 {
            for (i, (zone, replicas, v2025)) in sets.iter().enumerate() {
                let mut set = format!("  - replicas: {replicas}\n    windowsVersion: {}\n", version(*v2025));
                match platform {
                    0 => set.push_str(&format!("    zone: us-east-1{}\n    name: set-{i}\n", ["a", "b", "c"][*zone])),
                    1 => set.push_str(&format!("    zone: \"{}\"\n    name: win{i}\n", zone + 1)),
                    2 => set.push_str(&format!("    zone: us-central1-{}\n    name: set-{i}\n", ["a", "b", "c"][*zone])),
                    3 => set.push_str(&format!("    name: set-{i}\n")),
                    _ => set.push_str(&format!("    name: win{i}\n")),
                }
                lines.push(set);
            }
        }
        (block, lines, nutanix, vxlan)
    })
}

fn generated() -> impl Strategy<Value = Generated> {
    (platform_and_sets(), 0usize..3).prop_map(|((block, sets, nutanix_memory, vxlan), hosts)| {
        let mut text = String::from(
            "apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata:\n  name: generated\nspec:\n  infrastructureID: gen-12345\n  apiServerInternalURL: https://api-int.gen.example.com:6443\n  platform:\n",
        );
        text.push_str(&block);
        if !sets.is_empty() {
            text.push_str("  machineSets:\n");
            sets.iter().for_each(|s| text.push_str(s));
        }
        // Platform none needs hosts; elsewhere they are optional. `byoh: []` must render too.
        let hosts = if block.contains("none:") { hosts.max(1) } else { hosts };
        text.push_str("  byoh:\n");
        if hosts == 0 {
            text.truncate(text.len() - 1);
            text.push_str(" []\n");
        }
        for i in 0..hosts {
            text.push_str(&format!("  - address: 10.1.42.{}\n    username: Administrator\n", i + 1));
        }
        text.push_str("  network:\n    hybridClusterNetwork: [10.132.0.0/14]\n");
        text.push_str(vxlan);
        // MachineSets without the operator boot with user data that authorises this key.
        if !block.contains("none:") {
            text.push_str("  sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp\n");
        }
        Generated { text, nutanix_memory }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn valid_inputs_render(g in generated()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wmrender.yaml");
        std::fs::write(&path, &g.text).expect("write");
        let compiled = match wmrender::compile(&path, false) {
            Ok(c) => c,
            Err(e) => return Err(TestCaseError::fail(format!("{e}\n{}", g.text))),
        };
        let files = compiled.output_files(None);
        prop_assert!(!files.is_empty());
        if let Some(memory) = &g.nutanix_memory {
            let canonical = Quantity::parse(memory).expect("generated sizes are valid").canonical();
            let machine_sets: Vec<_> = files.iter().filter(|f| f.path.starts_with("cluster/machineset-")).collect();
            for f in machine_sets {
                let text = String::from_utf8_lossy(&f.bytes);
                let rendered = [format!("memorySize: {canonical}\n"), format!("memorySize: '{canonical}'\n")];
                prop_assert!(rendered.iter().any(|r| text.contains(r.as_str())), "{} not in {}", canonical, text);
            }
        }
    }
}
