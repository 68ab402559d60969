//! API errors as the API server returns them: a `Status` object (kind Status, status Failure, reason, code,
//! details), with the messages of k8s.io/apimachinery/pkg/api/errors so a client that matches on them behaves as it
//! would against a real server.

use serde_json::{Value, json};

/// One HTTP answer: a code and a JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    pub code: u16,
    pub body: Value,
}

impl Response {
    pub fn ok(body: Value) -> Response {
        Response { code: 200, body }
    }

    pub fn created(body: Value) -> Response {
        Response { code: 201, body }
    }

    /// A `Status` failure. `resource` is `plural` or `plural.group`, as the API names it in messages.
    pub fn failure(code: u16, reason: &str, message: String, resource: &str, name: &str) -> Response {
        let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
        let mut details = json!({ "kind": kind });
        if !name.is_empty() {
            details["name"] = name.into();
        }
        if !group.is_empty() {
            details["group"] = group.into();
        }
        Response {
            code,
            body: json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "details": details, "code": code,
            }),
        }
    }

    pub fn success(resource: &str, name: &str) -> Response {
        let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
        Response::ok(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": { "name": name, "group": group, "kind": kind },
        }))
    }

    pub fn not_found(resource: &str, name: &str) -> Response {
        Response::failure(404, "NotFound", format!("{resource} \"{name}\" not found"), resource, name)
    }

    pub fn already_exists(resource: &str, name: &str) -> Response {
        Response::failure(409, "AlreadyExists", format!("{resource} \"{name}\" already exists"), resource, name)
    }

    pub fn conflict(resource: &str, name: &str) -> Response {
        Response::failure(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply \
                 your changes to the latest version and try again"
            ),
            resource,
            name,
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Response {
        Response::failure(400, "BadRequest", message.into(), "", "")
    }

    /// 422: the object fails validation.
    pub fn invalid(resource: &str, name: &str, message: impl Into<String>) -> Response {
        let message = format!("{resource} \"{name}\" is invalid: {}", message.into());
        Response::failure(422, "Invalid", message, resource, name)
    }

    pub fn unauthorized() -> Response {
        Response::failure(401, "Unauthorized", "Unauthorized".into(), "", "")
    }

    pub fn method_not_allowed(method: &str) -> Response {
        Response::failure(405, "MethodNotAllowed", format!("the server does not allow this method ({method})"), "", "")
    }

    pub fn unsupported_media_type(content_type: &str) -> Response {
        Response::failure(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type:?}; server-side apply is not part of this stand-in)"
            ),
            "",
            "",
        )
    }

    pub fn too_many_requests(message: impl Into<String>) -> Response {
        Response::failure(429, "TooManyRequests", message.into(), "", "")
    }
}
