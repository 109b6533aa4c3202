//! The C ABI's own contracts, exercised through the raw `kvc::sys` declarations: NULL handles and
//! out-pointers, destroy(NULL), unknown struct sizes, the "required size" out-param of
//! BUFFER_TOO_SMALL. The safe API never produces these inputs, so they are tested here.
use std::ptr::{null, null_mut};

use kvc::sys;

fn meta_pool() -> *mut sys::kvc_pool {
    // SAFETY: plain data, set by kvc_pool_config_default.
    let mut cfg: sys::kvc_pool_config = unsafe { std::mem::zeroed() };
    let mut pool = null_mut();
    unsafe {
        assert_eq!(sys::kvc_pool_config_default(&mut cfg), sys::KVC_OK);
        cfg.block_size = 4;
        cfg.num_blocks = 8;
        assert_eq!(sys::kvc_pool_create(&cfg, &mut pool), sys::KVC_OK);
    }
    pool
}

#[test]
fn destroying_null_is_a_no_op() {
    unsafe {
        assert_eq!(sys::kvc_pool_destroy(null_mut()), sys::KVC_OK);
        assert_eq!(sys::kvc_keys_destroy(null_mut()), sys::KVC_OK);
        assert_eq!(sys::kvc_batch_destroy(null_mut()), sys::KVC_OK);
    }
}

#[test]
fn null_handles_and_out_pointers() {
    let tokens = [1i32, 2, 3, 4, 5];
    unsafe {
        let mut n = 0i64;
        assert_eq!(sys::kvc_pool_config_default(null_mut()), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_pool_create(null(), &mut null_mut()), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_alloc(null_mut(), 1, tokens.as_ptr(), 5, null(), &mut n), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_free(null_mut(), 1), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_pool_check(null_mut()), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_keys_create(null_mut()), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_keys_set_lora(null_mut(), 1), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_cuda_device_count(null_mut()), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_batch_set_stream(null_mut(), null_mut()), sys::KVC_ERR_NULL_ARG);
        let msg = std::ffi::CStr::from_ptr(sys::kvc_last_error()).to_string_lossy().into_owned();
        assert!(msg.contains("kvc_batch_set_stream"), "{}", msg);
        let pool = meta_pool();
        // Prefix caching is on: tokens may not be NULL.
        assert_eq!(sys::kvc_alloc(pool, 1, null(), 5, null(), &mut n), sys::KVC_ERR_NULL_ARG);
        assert_eq!(
            sys::kvc_alloc(pool, 1, tokens.as_ptr(), 5, null(), null_mut()),
            sys::KVC_OK,
            "out may be NULL"
        );
        assert_eq!(sys::kvc_truncate(null_mut(), 1, 1, &mut 0), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_truncate(pool, 1, 3, null_mut()), sys::KVC_OK, "out_freed_blocks may be NULL");
        assert_eq!(sys::kvc_seq_num_tokens(pool, 1, &mut n), sys::KVC_OK);
        assert_eq!(n, 3);
        assert_eq!(sys::kvc_seq_num_tokens(pool, 1, null_mut()), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_pool_set_sliding_window(null_mut(), 4), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_pool_get_sliding_window(null_mut(), &mut 0), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_pool_get_sliding_window(pool, null_mut()), sys::KVC_ERR_NULL_ARG);
        let msg = std::ffi::CStr::from_ptr(sys::kvc_last_error()).to_string_lossy().into_owned();
        assert!(msg.contains("kvc_pool_get_sliding_window"), "{}", msg);
        assert_eq!(sys::kvc_seq_block_table(pool, 1, null_mut(), 0, null_mut()), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_seq_block_table(pool, 1, null_mut(), 4, &mut n), sys::KVC_ERR_NULL_ARG);
        assert_eq!(sys::kvc_pool_stats(pool, null_mut()), sys::KVC_ERR_NULL_ARG);
        let msg = std::ffi::CStr::from_ptr(sys::kvc_last_error()).to_string_lossy().into_owned();
        assert!(msg.contains("kvc_pool_stats"), "{}", msg);
        assert_eq!(sys::kvc_pool_destroy(pool), sys::KVC_OK);
    }
}

#[test]
fn unknown_struct_sizes_are_refused() {
    unsafe {
        let pool = meta_pool();
        let mut stats: sys::kvc_stats = std::mem::zeroed();
        stats.struct_size = 3;
        assert_eq!(sys::kvc_pool_stats(pool, &mut stats), sys::KVC_ERR_VERSION);
        let mut event: sys::kvc_event = std::mem::zeroed();
        let mut has = 0;
        event.struct_size = 1;
        assert_eq!(sys::kvc_event_pop(pool, &mut event, null_mut(), 0, &mut has), sys::KVC_ERR_VERSION);
        let mut cfg: sys::kvc_pool_config = std::mem::zeroed();
        assert_eq!(sys::kvc_pool_config_default(&mut cfg), sys::KVC_OK);
        cfg.struct_size = 5;
        let mut other = null_mut();
        assert_eq!(sys::kvc_pool_create(&cfg, &mut other), sys::KVC_ERR_VERSION);
        assert!(other.is_null(), "out-params are written only on success");
        assert_eq!(sys::kvc_pool_destroy(pool), sys::KVC_OK);
    }
}

#[test]
fn buffer_too_small_reports_the_required_size() {
    let tokens: Vec<i32> = (0..10).collect();
    unsafe {
        let pool = meta_pool();
        assert_eq!(sys::kvc_alloc(pool, 1, tokens.as_ptr(), 10, null(), null_mut()), sys::KVC_OK);
        let mut len = 0i64;
        let mut table = [0i32; 2];
        assert_eq!(
            sys::kvc_seq_block_table(pool, 1, table.as_mut_ptr(), 2, &mut len),
            sys::KVC_ERR_BUFFER_TOO_SMALL
        );
        assert_eq!(len, 3);
        assert_eq!(
            sys::kvc_seq_block_table(pool, 1, table.as_mut_ptr(), -1, &mut len),
            sys::KVC_ERR_INVALID_ARG
        );
        let mut slots = [0i64; 2];
        assert_eq!(
            sys::kvc_seq_slot_mapping(pool, 1, 0, 3, slots.as_mut_ptr(), 2),
            sys::KVC_ERR_BUFFER_TOO_SMALL
        );
        assert_eq!(sys::kvc_pool_destroy(pool), sys::KVC_OK);
    }
}

#[test]
fn last_error_copy_truncates_and_reports_length() {
    unsafe {
        assert_eq!(sys::kvc_free(null_mut(), 1), sys::KVC_ERR_NULL_ARG);
        let full = std::ffi::CStr::from_ptr(sys::kvc_last_error()).to_bytes().to_vec();
        let mut buf = [0 as std::os::raw::c_char; 6];
        let mut len = 0i64;
        assert_eq!(sys::kvc_last_error_copy(buf.as_mut_ptr(), 6, &mut len), sys::KVC_OK);
        assert_eq!(len as usize, full.len());
        let got: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        assert_eq!(got, &full[..5]);
        // This one failure keeps the message it was asked to copy (by design in lib/error.cpp).
        assert_eq!(sys::kvc_last_error_copy(null_mut(), 4, &mut len), sys::KVC_ERR_NULL_ARG);
        assert_eq!(kvc::last_error().unwrap().as_bytes(), &full[..]);
        assert_eq!(sys::kvc_last_error_copy(buf.as_mut_ptr(), -1, &mut len), sys::KVC_ERR_INVALID_ARG);
    }
    assert!(kvc::last_error().unwrap().contains("kvc_last_error_copy"));
}
