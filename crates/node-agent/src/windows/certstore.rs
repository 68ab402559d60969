//! The LocalMachine Root certificate store through crypt32: the system store "ROOT" of the local machine (where
//! Windows keeps it in the registry, HKLM\SOFTWARE\Microsoft\SystemCertificates\ROOT), opened per call and closed
//! after it.

use crate::system::{SysError, SysResult};
use sha1::{Digest, Sha1};
use std::ffi::c_void;
use windows_sys::Win32::Foundation::GetLastError;
use windows_sys::Win32::Security::Cryptography::{
    CERT_CONTEXT, CERT_STORE_ADD_NEW, CERT_STORE_PROV_SYSTEM_W, CERT_SYSTEM_STORE_LOCAL_MACHINE,
    CertAddEncodedCertificateToStore, CertCloseStore, CertDeleteCertificateFromStore, CertDuplicateCertificateContext,
    CertEnumCertificatesInStore, CertFreeCertificateContext, CertOpenStore, HCERTSTORE, PKCS_7_ASN_ENCODING,
    X509_ASN_ENCODING,
};
use winreg::RegKey;
use winreg::enums::HKEY_LOCAL_MACHINE;
use wmrender_contract::sha256_hex;

/// Where Windows keeps the LocalMachine Root store's certificates (one subkey per SHA-1 thumbprint).
const ROOT_CERTIFICATES_KEY: &str = r"SOFTWARE\Microsoft\SystemCertificates\ROOT\Certificates";

/// An open store, closed when dropped.
struct Store(HCERTSTORE);

impl Store {
    fn open_root() -> SysResult<Store> {
        let name: Vec<u16> = "ROOT\0".encode_utf16().collect();
        // SAFETY: a constant provider, a NUL-terminated wide name that outlives the call.
        let handle = unsafe {
            CertOpenStore(
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
        Ok(Store(handle))
    }

    /// Calls `f` with each certificate until it returns true; that certificate's context is handed back
    /// (duplicated, so it outlives the enumeration), or `None`.
    fn find(&self, mut f: impl FnMut(&[u8]) -> bool) -> Option<*const CERT_CONTEXT> {
        let mut previous: *const CERT_CONTEXT = std::ptr::null();
        loop {
            // SAFETY: `previous` is null or the context the last call returned; the call frees it.
            let current = unsafe { CertEnumCertificatesInStore(self.0, previous) };
            if current.is_null() {
                return None;
            }
            // SAFETY: a context from the enumeration points at its encoded bytes.
            let der =
                unsafe { std::slice::from_raw_parts((*current).pbCertEncoded, (*current).cbCertEncoded as usize) };
            if f(der) {
                // SAFETY: duplicate before freeing the enumeration's reference.
                let found = unsafe { CertDuplicateCertificateContext(current) };
                unsafe { CertFreeCertificateContext(current) };
                return Some(found);
            }
            previous = current;
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: the handle came from CertOpenStore and is closed once.
        unsafe { CertCloseStore(self.0, 0) };
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
        CertAddEncodedCertificateToStore(
            store.0,
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
        if unsafe { CertDeleteCertificateFromStore(found) } == 0 {
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
        unsafe { CertFreeCertificateContext(found) };
        true
    }))
}
