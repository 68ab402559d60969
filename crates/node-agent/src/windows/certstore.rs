//! The LocalMachine Root certificate store through crypt32: the system store "ROOT" of the local machine (where
//! Windows keeps it in the registry, HKLM\SOFTWARE\Microsoft\SystemCertificates\ROOT), opened per call and closed
//! after it.
//!
//! crypt32 is loaded when the store is first used, not imported: importing it has Windows (and Wine) load and
//! initialise user32 and gdi32 at every start of the agent, about 13 ms under Wine, for a store that a pass with
//! no CA bundle never opens.

use crate::system::{SysError, SysResult};
use sha1::{Digest, Sha1};
use std::ffi::c_void;
use std::sync::OnceLock;
use windows_sys::Win32::Foundation::GetLastError;
use windows_sys::Win32::Security::Cryptography::{
    CERT_CONTEXT, CERT_STORE_ADD_NEW, CERT_STORE_PROV_SYSTEM_W, CERT_SYSTEM_STORE_LOCAL_MACHINE, HCERTSTORE,
    PKCS_7_ASN_ENCODING, X509_ASN_ENCODING,
};
use windows_sys::Win32::System::LibraryLoader::{GetProcAddress, LOAD_LIBRARY_SEARCH_SYSTEM32, LoadLibraryExW};
use windows_sys::core::{BOOL, PCSTR};
use winreg::RegKey;
use winreg::enums::HKEY_LOCAL_MACHINE;
use wmrender_contract::sha256_hex;

/// Where Windows keeps the LocalMachine Root store's certificates (one subkey per SHA-1 thumbprint).
const ROOT_CERTIFICATES_KEY: &str = r"SOFTWARE\Microsoft\SystemCertificates\ROOT\Certificates";

// The signatures windows-sys declares for the crypt32 functions the agent calls.
type OpenStore = unsafe extern "system" fn(PCSTR, u32, usize, u32, *const c_void) -> HCERTSTORE;
type CloseStore = unsafe extern "system" fn(HCERTSTORE, u32) -> BOOL;
type EnumCertificates = unsafe extern "system" fn(HCERTSTORE, *const CERT_CONTEXT) -> *mut CERT_CONTEXT;
type DuplicateCertificate = unsafe extern "system" fn(*const CERT_CONTEXT) -> *mut CERT_CONTEXT;
type CertificateOp = unsafe extern "system" fn(*const CERT_CONTEXT) -> BOOL;
type AddEncodedCertificate =
    unsafe extern "system" fn(HCERTSTORE, u32, *const u8, u32, u32, *mut *mut CERT_CONTEXT) -> BOOL;

struct Crypt32 {
    open_store: OpenStore,
    close_store: CloseStore,
    enum_certificates: EnumCertificates,
    duplicate_certificate: DuplicateCertificate,
    free_certificate: CertificateOp,
    add_encoded_certificate: AddEncodedCertificate,
    delete_certificate: CertificateOp,
}

/// crypt32, loaded from System32 at the first use and kept for the life of the process.
fn crypt32() -> SysResult<&'static Crypt32> {
    static LOADED: OnceLock<Result<Crypt32, String>> = OnceLock::new();
    LOADED.get_or_init(load_crypt32).as_ref().map_err(|e| SysError(e.clone()))
}

fn load_crypt32() -> Result<Crypt32, String> {
    let name: Vec<u16> = "crypt32.dll\0".encode_utf16().collect();
    // SAFETY: a NUL-terminated wide name that outlives the call; the module is never freed, so the function
    // pointers taken from it stay valid.
    let module = unsafe { LoadLibraryExW(name.as_ptr(), std::ptr::null_mut(), LOAD_LIBRARY_SEARCH_SYSTEM32) };
    if module.is_null() {
        return Err(format!("cannot load crypt32.dll: {}", std::io::Error::last_os_error()));
    }
    macro_rules! function {
        ($name:literal as $signature:ty) => {{
            // SAFETY: a loaded module and a NUL-terminated name.
            match unsafe { GetProcAddress(module, concat!($name, "\0").as_ptr()) } {
                // SAFETY: the exported function has the signature of the field it goes to (windows-sys's
                // declaration of it); function pointers are all of one size.
                Some(f) => unsafe { std::mem::transmute::<unsafe extern "system" fn() -> isize, $signature>(f) },
                None => return Err(format!("crypt32.dll has no {}", $name)),
            }
        }};
    }
    Ok(Crypt32 {
        open_store: function!("CertOpenStore" as OpenStore),
        close_store: function!("CertCloseStore" as CloseStore),
        enum_certificates: function!("CertEnumCertificatesInStore" as EnumCertificates),
        duplicate_certificate: function!("CertDuplicateCertificateContext" as DuplicateCertificate),
        free_certificate: function!("CertFreeCertificateContext" as CertificateOp),
        add_encoded_certificate: function!("CertAddEncodedCertificateToStore" as AddEncodedCertificate),
        delete_certificate: function!("CertDeleteCertificateFromStore" as CertificateOp),
    })
}

/// An open store, closed when dropped.
struct Store {
    handle: HCERTSTORE,
    crypt32: &'static Crypt32,
}

impl Store {
    fn open_root() -> SysResult<Store> {
        let crypt32 = crypt32()?;
        let name: Vec<u16> = "ROOT\0".encode_utf16().collect();
        // SAFETY: a constant provider, a NUL-terminated wide name that outlives the call.
        let handle = unsafe {
            (crypt32.open_store)(
                CERT_STORE_PROV_SYSTEM_W,
                0,
                0,
                CERT_SYSTEM_STORE_LOCAL_MACHINE,
                name.as_ptr() as *const c_void,
            )
        };
        if handle.is_null() {
            return Err(last_error("cannot open the LocalMachine Root store"));
        }
        Ok(Store { handle, crypt32 })
    }

    /// Calls `f` with each certificate until it returns true; that certificate's context is handed back
    /// (duplicated, so it outlives the enumeration), or `None`.
    fn find(&self, mut f: impl FnMut(&[u8]) -> bool) -> Option<*const CERT_CONTEXT> {
        let mut previous: *const CERT_CONTEXT = std::ptr::null();
        loop {
            // SAFETY: `previous` is null or the context the last call returned; the call frees it.
            let current = unsafe { (self.crypt32.enum_certificates)(self.handle, previous) };
            if current.is_null() {
                return None;
            }
            // SAFETY: a context from the enumeration points at its encoded bytes.
            let der =
                unsafe { std::slice::from_raw_parts((*current).pbCertEncoded, (*current).cbCertEncoded as usize) };
            if f(der) {
                // SAFETY: duplicate before freeing the enumeration's reference.
                let found = unsafe { (self.crypt32.duplicate_certificate)(current) };
                unsafe { (self.crypt32.free_certificate)(current) };
                return Some(found);
            }
            previous = current;
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: the handle came from CertOpenStore and is closed once.
        unsafe { (self.crypt32.close_store)(self.handle, 0) };
    }
}

fn last_error(what: &str) -> SysError {
    // SAFETY: no arguments.
    let code = unsafe { GetLastError() };
    SysError(format!("{what} (error 0x{code:08x})"))
}

pub fn certificates() -> SysResult<Vec<Vec<u8>>> {
    let store = Store::open_root()?;
    let mut all = Vec::new();
    store.find(|der| {
        all.push(der.to_vec());
        false
    });
    Ok(all)
}

pub fn add(der: &[u8]) -> SysResult<()> {
    let store = Store::open_root()?;
    let length = u32::try_from(der.len()).map_err(|_| SysError("the certificate is too large".into()))?;
    // SAFETY: the bytes outlive the call; no context is asked back.
    let ok = unsafe {
        (store.crypt32.add_encoded_certificate)(
            store.handle,
            X509_ASN_ENCODING | PKCS_7_ASN_ENCODING,
            der.as_ptr(),
            length,
            CERT_STORE_ADD_NEW,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(last_error("the store refused the certificate"));
    }
    Ok(())
}

pub fn remove(sha256: &str) -> SysResult<bool> {
    let der = {
        let store = Store::open_root()?;
        let Some(found) = store.find(|der| sha256_hex(der) == sha256) else { return Ok(false) };
        // SAFETY: `found` is a valid context until the delete below frees it.
        let der =
            unsafe { std::slice::from_raw_parts((*found).pbCertEncoded, (*found).cbCertEncoded as usize) }.to_vec();
        // SAFETY: `found` is a context of this store; the call frees it whatever it returns.
        if unsafe { (store.crypt32.delete_certificate)(found) } == 0 {
            return Err(last_error("the store did not delete the certificate"));
        }
        der
    };
    if !still_there(sha256)? {
        return Ok(true);
    }
    // Wine's crypt32 deletes only from its in-memory copy of a registry-backed store (the context it enumerates
    // belongs to that copy), so the certificate is back the next time the store is opened. The store's physical
    // form is one registry key per certificate, named by its SHA-1 thumbprint: remove that key, and check again.
    let thumbprint: String = Sha1::digest(&der).iter().map(|b| format!("{b:02X}")).collect();
    let key = format!(r"{ROOT_CERTIFICATES_KEY}\{thumbprint}");
    RegKey::predef(HKEY_LOCAL_MACHINE)
        .delete_subkey_all(&key)
        .map_err(|e| SysError(format!("cannot remove HKLM\\{key}: {e}")))?;
    if still_there(sha256)? {
        return Err(SysError("the certificate is still in the store after its deletion".into()));
    }
    Ok(true)
}

fn still_there(sha256: &str) -> SysResult<bool> {
    let store = Store::open_root()?;
    Ok(store.find(|der| sha256_hex(der) == sha256).is_some_and(|found| {
        // SAFETY: a duplicated context this function owns.
        unsafe { (store.crypt32.free_certificate)(found) };
        true
    }))
}
