//! HTTP/1.1 as clients of the API server speak it (hyper, as kube-rs and client-go use it): persistent connections,
//! `Content-Length` or chunked request bodies, JSON answers with `Content-Length`.

use crate::status::Response;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// One request, read off the wire.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// The path without the query, percent-decoded.
    pub path: String,
    /// The raw query string (for the request log).
    pub raw_query: String,
    pub query: BTreeMap<String, String>,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    /// Who the bearer token says sent it (set by the server after authentication).
    pub user: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The body as JSON, or the 400 the API answers for a body it cannot decode.
    pub fn json(&self) -> Result<serde_json::Value, Response> {
        serde_json::from_slice(&self.body)
            .map_err(|e| Response::bad_request(format!("the body of the request could not be decoded: {e}")))
    }

    /// The media type of the body, without parameters.
    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("").split(';').next().unwrap_or("").trim()
    }
}

pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads one request; `Ok(None)` when the client closed the connection between requests.
pub fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = Vec::new();
    if headers.get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
            let mut chunk = vec![0; n + 2]; // the chunk and its CRLF
            reader.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = headers.get("content-length").and_then(|n| n.parse::<usize>().ok()) {
        body = vec![0; n];
        reader.read_exact(&mut body)?;
    }
    let (path, raw_query) = target.split_once('?').unwrap_or((&target, ""));
    let query = raw_query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    Ok(Some(Request {
        method,
        path: percent_decode(path),
        raw_query: raw_query.to_string(),
        query,
        headers,
        body,
        user: String::new(),
    }))
}

pub fn write_response(stream: &mut TcpStream, response: &Response) -> std::io::Result<()> {
    let body = response.body.to_string();
    let reason = match response.code {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    };
    write!(
        stream,
        "HTTP/1.1 {} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        response.code,
        body.len()
    )?;
    stream.flush()
}
