//! KV transfer over UCX through the safe API: a round trip over TCP with every imported byte
//! compared with the exporter's, and refusals that change nothing.
mod common;

use common::{cpu_config, range};
use kvc::{xfer_available, Pool, Status, XferAgent, XferConfig, XferFailure};

fn pool() -> Pool {
    Pool::new(&cpu_config(4, 32, 2, 2, 8)).expect("cpu pool")
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn cfg(identity: &str) -> XferConfig {
    XferConfig {
        model_identity: identity.into(),
        transports: "tcp".into(),
        timeout_ms: 10000,
        ..Default::default()
    }
}

#[test]
fn round_trip_copies_every_byte() {
    if !xfer_available() {
        eprintln!("skipped: UCX (libucp.so.0) not available");
        return;
    }
    let (src, dst) = (pool(), pool());
    let ae = XferAgent::new(&src, &cfg("rust-test@1")).unwrap();
    let ai = XferAgent::new(&dst, &cfg("rust-test@1")).unwrap();
    let prompt = range(100, 117); // 4 full blocks of 4 and one token
    src.alloc(1, &prompt, None).unwrap();
    let table = src.block_table(1).unwrap();
    let stride = src.storage_info().unwrap().block_stride as usize;
    let bytes = pattern(9, 4 * stride);
    src.copy_blocks_from_host(&table[..4], &bytes).unwrap();

    let (id, n) = ae.export_seq(1, 0).unwrap();
    assert_eq!(n, 16);
    let desc = ae.descriptor(id).unwrap();
    let op = ai.import(&desc, None).unwrap();
    let (res, r) = ai.wait(op, -1);
    res.unwrap();
    let r = r.unwrap();
    assert_eq!(r.failure, XferFailure::None);
    assert_eq!((r.blocks_pulled, r.blocks_cached, r.cached_tokens), (4, 4, 16));
    assert_eq!(ai.done(op).unwrap_err().status(), Status::INVALID_ARG); // retired

    assert_eq!(dst.alloc(2, &prompt, None).unwrap(), 16);
    let got = dst.copy_blocks_to_host(&dst.block_table(2).unwrap()[..4]).unwrap();
    assert_eq!(got, bytes, "imported bytes differ from the exporter's");
    let s = ai.stats().unwrap();
    assert_eq!((s.imports_ok, s.blocks_pulled, s.bytes_pulled), (1, 4, 4 * stride as i64));
    ae.release_export(id).unwrap();
    assert_eq!(ae.release_export(id).unwrap_err().status(), Status::INVALID_ARG);
    src.check().unwrap();
    dst.check().unwrap();
}

#[test]
fn refusals_change_nothing() {
    if !xfer_available() {
        eprintln!("skipped: UCX (libucp.so.0) not available");
        return;
    }
    let (src, dst) = (pool(), pool());
    let ae = XferAgent::new(&src, &cfg("m")).unwrap();
    let ai = XferAgent::new(&dst, &cfg("m")).unwrap();
    assert_eq!(XferAgent::new(&dst, &cfg("a\0b")).err().unwrap().status(), Status::INVALID_ARG);
    let prompt = range(0, 12);
    src.alloc(1, &prompt, None).unwrap();
    let (id, _) = ae.export_prompt(&prompt, None, 0).unwrap();
    let desc = ae.descriptor(id).unwrap();
    let mut bad = desc.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 1;
    assert_eq!(ai.import(&bad, None).unwrap_err().status(), Status::INVALID_ARG);
    assert_eq!(ai.import(&desc[..desc.len() - 3], None).unwrap_err().status(), Status::INVALID_ARG);
    let other_pool = pool();
    let other = XferAgent::new(&other_pool, &cfg("another-model")).unwrap();
    assert_eq!(other.import(&desc, None).unwrap_err().status(), Status::INVALID_ARG);
    let s = ai.stats().unwrap();
    assert_eq!((s.imports_failed, s.failures[1]), (2, 2));
    // Every reason has its counter, the device-copy one (failures_device) included.
    assert_eq!(s.failures.len(), kvc::sys::KVC_XFER_FAIL_DEVICE as usize + 1);
    assert_eq!(s.failures[kvc::sys::KVC_XFER_FAIL_DEVICE as usize], 0);
    let st = dst.stats().unwrap();
    assert_eq!((st.used_blocks, st.cached_blocks_total), (0, 0));
}
