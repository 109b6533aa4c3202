//! Library version, status descriptions, the thread's last error and device discovery.
use std::ffi::CStr;
use std::os::raw::c_char;

use kvc_sys as sys;

use crate::error::{check, to_len, Result};

/// Runtime version of the loaded library as `major * 10000 + minor * 100 + patch`.
pub fn version() -> i32 {
    // SAFETY: no arguments; never fails.
    unsafe { sys::kvc_version() }
}

/// The version this crate was generated against (compare with [`version`] to detect a mismatch).
pub const HEADER_VERSION: i32 = sys::KVC_VERSION_NUMBER as i32;

/// Runtime version as "major.minor.patch".
pub fn version_string() -> &'static str {
    // SAFETY: a static, NUL-terminated string owned by the library, never freed.
    static_str(unsafe { sys::kvc_version_string() })
}

/// The library's description of a status value (`kvc_status_str`); unknown values give a
/// generic text.
pub fn status_str(status: i32) -> &'static str {
    // SAFETY: a static string, never NULL, never freed.
    static_str(unsafe { sys::kvc_status_str(status) })
}

fn static_str(p: *const c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    // SAFETY: the callers pass library-owned static strings.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

/// The message of the most recent failing kvc_* call made by this thread ("" if none), through
/// `kvc_last_error_copy`. Every [`crate::Error`] already carries its own message; this is for
/// callers mixing this crate with direct `kvc-sys` calls.
pub fn last_error() -> Result<String> {
    let mut len: i64 = 0;
    // SAFETY: a size query: NULL buffer with cap 0 is allowed, len is a valid out-pointer.
    check(unsafe { sys::kvc_last_error_copy(std::ptr::null_mut(), 0, &mut len) })?;
    let mut buf = vec![0u8; to_len(len, "message length")? + 1];
    // SAFETY: buf holds buf.len() bytes; the library writes at most that many, NUL included.
    check(unsafe { sys::kvc_last_error_copy(buf.as_mut_ptr() as *mut c_char, buf.len() as i64, &mut len) })?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    buf.truncate(end);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Number of CUDA devices usable by this library (0 without CUDA, driver or GPU).
pub fn cuda_device_count() -> Result<i32> {
    let mut n = 0;
    // SAFETY: n is a valid out-pointer.
    check(unsafe { sys::kvc_cuda_device_count(&mut n) })?;
    Ok(n)
}
