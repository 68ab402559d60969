//! Files that are neither regular files, directories nor symbolic links: a named pipe, a socket, a device. Found in
//! a directory wmrender compares or replaces, they are reported by their kind and never opened: reading a named
//! pipe waits for a writer that may never come.

use std::fs::FileType;

/// What a special file is, in words; `None` for a regular file, a directory or a symbolic link.
pub fn kind(ft: &FileType) -> Option<&'static str> {
    if ft.is_file() || ft.is_dir() || ft.is_symlink() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return Some("a named pipe");
        }
        if ft.is_socket() {
            return Some("a socket");
        }
        if ft.is_block_device() || ft.is_char_device() {
            return Some("a device");
        }
    }
    Some("a special file")
}

/// Reads a file that should be a regular one; a special file (even behind a symbolic link) is refused unopened,
/// with an error whose words say what it is.
pub fn read_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    if let Some(kind) = kind(&std::fs::metadata(path)?.file_type()) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("it is {kind}, not a file")));
    }
    std::fs::read(path)
}
