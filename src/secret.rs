//! Bytes that must never be shown: credentials read from files or fetched from the cluster at sync time. They go
//! into the bytes pushed to a node and nowhere else; `Debug` prints only their length, so a stray `{:?}` cannot
//! leak one.

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: Vec<u8>) -> Secret {
        Secret(bytes)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}
