//! The `windows-user-data` Secret, in the mode without the operator: the user data every Windows Machine boots
//! with (MachineSets reference it by name), built as WMCO's `GenerateUserData` builds it (pkg/secrets/secrets.go)
//! but from the public key in the inputs. With WMCO the Secret is WMCO's and is not rendered.
//!
//! Layout by platform, as WMCO's `processTags`: on GCP the bare script (the actuator puts it in the instance's
//! `sysprep-specialize-script-ps1` metadata); elsewhere the script inside `<powershell>…</powershell>` followed by
//! `<persist>true</persist>`; on AWS the script also brings EC2Launch v2 up to the version that persists the
//! instance-metadata routes. Only public material goes in: the key line without its comment.

use super::machineset::USER_DATA_SECRET;
use super::object::{
    ClusterObject, FLUX_NO_SUBSTITUTE, Order, annotations, has_substitution_syntax, labels, object_meta,
};
use crate::plan::{MACHINE_API_NAMESPACE, Plan, PlatformPlan};
use k8s_openapi::api::core::v1::Secret;
use std::collections::BTreeMap;

/// The first EC2Launch v2 the OpenShift documentation accepts for Windows Machines (it has
/// `run-task add-routes --persistent`).
const EC2LAUNCH_MINIMUM: &str = "2.0.2107";
const EC2LAUNCH_URL: &str = "https://s3.amazonaws.com/amazon-ec2launch-v2/windows/amd64/latest/AmazonEC2Launch.msi";

/// The PowerShell script alone, before the platform's wrapping.
pub fn script(plan: &Plan) -> Option<String> {
    let key = plan.ssh_public_key.as_ref()?;
    let ctx = minijinja::context! {
        public_key => key.as_str(),
        aws => matches!(plan.platform, PlatformPlan::Aws(_)),
        ec2launch_minimum => EC2LAUNCH_MINIMUM,
        ec2launch_url => EC2LAUNCH_URL,
    };
    Some(super::templates::render("windows-user-data.ps1.j2", ctx))
}

/// The `userData` value: the script as the platform's Machine actuator expects it.
pub fn user_data(plan: &Plan) -> Option<String> {
    let script = script(plan)?;
    Some(match plan.platform {
        PlatformPlan::Gcp(_) => script,
        _ => format!("<powershell>\n{script}</powershell>\n<persist>true</persist>\n"),
    })
}

pub fn render(plan: &Plan) -> Vec<ClusterObject> {
    let Some(user_data) = user_data(plan) else {
        return Vec::new();
    };
    let data = BTreeMap::from([("userData".to_string(), user_data)]);
    let mut notes = annotations(Order::UserData, []);
    if has_substitution_syntax(&data) {
        notes.insert(FLUX_NO_SUBSTITUTE.0.into(), FLUX_NO_SUBSTITUTE.1.into());
    }
    let secret = Secret {
        metadata: object_meta(USER_DATA_SECRET, Some(MACHINE_API_NAMESPACE), labels([]), notes),
        // Text, not base64, so a review of the Git change reads the script; the API server stores it as `data`
        // (WMCO's own Secret has `data.userData`).
        string_data: Some(data),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    vec![ClusterObject::new("Secret", USER_DATA_SECRET, Order::UserData, &secret)]
}
