//! KV storage, cache writes, copy-on-write copies, batch metadata and attention through the safe
//! API on the CPU backend (host slices), plus the unsafe `*_raw` variants with host addresses
//! (valid on the CPU backend, whose backend memory is host memory).
mod common;

use common::{assert_close, cpu_config, dense_attention, meta_pool, range};
use kvc::{AttentionParams, Backend, Batch, Dtype, Pool, Status};

const BS: i32 = 4;
const KV_HEADS: usize = 2;
const Q_HEADS: usize = 4;
const D: usize = 8;

fn cpu_pool() -> Pool {
    Pool::new(&cpu_config(BS, 16, KV_HEADS as i32, Q_HEADS as i32, D as i32)).expect("CPU pool")
}

/// Deterministic K (sign +1) / V (sign -1) of `seq`'s token `pos`, head `h`, dim `d`.
fn kv_value(seq: u64, pos: i64, h: usize, d: usize, sign: f32) -> f32 {
    sign * (((seq as f32) * 0.37 + (pos as f32) * 0.11 + (h as f32) * 0.05 - (d as f32) * 0.07).sin())
}

fn kv_rows(seq: u64, positions: std::ops::Range<i64>, sign: f32) -> Vec<f32> {
    let mut out = Vec::new();
    for pos in positions {
        for h in 0..KV_HEADS {
            for d in 0..D {
                out.push(kv_value(seq, pos, h, d, sign));
            }
        }
    }
    out
}

/// Writes K/V of every confirmed token of `seq` into `layer`.
fn write_seq(pool: &Pool, layer: i32, seq: u64) {
    let n = pool.num_tokens(seq).unwrap();
    let slots = pool.slot_mapping(seq, 0, n).unwrap();
    pool.cache_write(layer, &slots, &kv_rows(seq, 0..n, 1.0), &kv_rows(seq, 0..n, -1.0), 1.0, 1.0).unwrap();
}

fn f32_at(bytes: &[u8], offset: usize) -> f32 {
    f32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap())
}

#[test]
fn storage_info_describes_the_layout() {
    let pool = cpu_pool();
    let info = pool.storage_info().unwrap();
    assert_eq!(info.backend, Backend::CPU);
    assert_eq!(info.kv_dtype, Dtype::F32);
    assert_eq!(info.elem_bytes, 4);
    assert_eq!(info.device, -1);
    assert_ne!(info.base_address, 0);
    let token = (D * 4) as i64;
    assert_eq!(info.token_stride, token);
    assert_eq!(info.head_stride, token * BS as i64);
    assert_eq!(info.kv_stride, info.head_stride * KV_HEADS as i64);
    assert_eq!(info.layer_stride, 2 * info.kv_stride);
    assert_eq!(info.block_stride, 2 * info.layer_stride);
    assert_eq!(info.total_bytes, 16 * info.block_stride);
}

#[test]
fn block_copies_round_trip() {
    let pool = cpu_pool();
    let stride = pool.storage_info().unwrap().block_stride as usize;
    let data: Vec<u8> = (0..2 * stride).map(|i| (i * 7 % 251) as u8).collect();
    pool.copy_blocks_from_host(&[3, 5], &data).unwrap();
    assert_eq!(pool.copy_blocks_to_host(&[3, 5]).unwrap(), data);
    assert_eq!(pool.copy_blocks_to_host(&[5]).unwrap(), &data[stride..]);
    assert_eq!(pool.copy_blocks_to_host(&[]).unwrap(), Vec::<u8>::new());
    let e = pool.copy_blocks_from_host(&[3], &data).unwrap_err();
    assert!(e.is_invalid_arg(), "{}", e);
    let e = pool.copy_blocks_to_host(&[99]).unwrap_err();
    assert!(e.is_invalid_arg(), "{}", e);
    assert!(e.message().contains("99"), "{}", e);
}

#[test]
fn cache_write_lands_at_the_layout_offsets() {
    let pool = cpu_pool();
    pool.alloc(1, &range(0, 6), None).unwrap();
    let mut slots = pool.slot_mapping(1, 0, 6).unwrap();
    let k = kv_rows(1, 0..6, 1.0);
    let v = kv_rows(1, 0..6, -1.0);
    slots[2] = -1; // padding: skipped
    pool.cache_write(1, &slots, &k, &v, 1.0, 1.0).unwrap();
    let info = pool.storage_info().unwrap();
    let table = pool.block_table(1).unwrap();
    let host = pool.copy_blocks_to_host(&table).unwrap();
    for pos in 0..6usize {
        for h in 0..KV_HEADS {
            for d in 0..D {
                let base = (pos / BS as usize) as i64 * info.block_stride
                    + info.layer_stride
                    + h as i64 * info.head_stride
                    + (pos % BS as usize) as i64 * info.token_stride
                    + (d * 4) as i64;
                let (got_k, got_v) =
                    (f32_at(&host, base as usize), f32_at(&host, (base + info.kv_stride) as usize));
                let i = (pos * KV_HEADS + h) * D + d;
                if pos == 2 {
                    assert_eq!((got_k, got_v), (0.0, 0.0), "padding slot was written");
                } else {
                    assert_eq!((got_k, got_v), (k[i], v[i]), "pos {} head {} dim {}", pos, h, d);
                }
            }
        }
    }
    // Wrong slice lengths are refused before C reads anything.
    let e = pool.cache_write(0, &slots, &k[1..], &v, 1.0, 1.0).unwrap_err();
    assert!(e.is_invalid_arg(), "{}", e);
    let e = pool.cache_write(9, &slots, &k, &v, 1.0, 1.0).unwrap_err();
    assert!(e.is_invalid_arg(), "{}", e);
}

/// Sequence 1 (6 tokens, KV written) forked into 2, which appends into the shared partial block:
/// one copy-on-write pair. Returns the pool and the pair's (src, dst).
fn pool_with_pending_pair() -> (Pool, i32, i32) {
    let pool = cpu_pool();
    pool.alloc(1, &range(0, 6), None).unwrap();
    write_seq(&pool, 0, 1);
    write_seq(&pool, 1, 1);
    pool.fork(1, 2).unwrap();
    pool.append(2, &[6], 0).unwrap();
    assert_eq!(pool.pending_copy_count().unwrap(), 1);
    let (src, dst) = (pool.block_table(1).unwrap()[1], pool.block_table(2).unwrap()[1]);
    assert_ne!(src, dst);
    (pool, src, dst)
}

#[test]
fn copy_on_write_copies_the_block() {
    let (pool, src, dst) = pool_with_pending_pair();
    assert_eq!(pool.copy_pending().unwrap(), 1);
    assert_eq!(pool.pending_copy_count().unwrap(), 0);
    assert_eq!(pool.copy_blocks_to_host(&[dst]).unwrap(), pool.copy_blocks_to_host(&[src]).unwrap());
    assert_eq!(pool.copy_pending().unwrap(), 0);
}

#[test]
fn storage_access_copies_the_pending_pair_first() {
    // A read (or write) of the storage completes the copy-on-write pairs queued before it, so a
    // copy can never pick up a later write nor a read see a block before its copy.
    let (pool, src, dst) = pool_with_pending_pair();
    let child = pool.copy_blocks_to_host(&[dst]).unwrap();
    assert_eq!(pool.pending_copy_count().unwrap(), 0);
    assert_eq!(child, pool.copy_blocks_to_host(&[src]).unwrap());
    assert_eq!(pool.copy_pending().unwrap(), 0);
}

/// Reference attention for query token `q` (row of Q_HEADS x D) of `seq` that sees positions
/// `0..=last` of that sequence's K/V.
fn reference(seq: u64, q: &[f32], last: i64) -> Vec<f32> {
    dense_attention(q, Q_HEADS, KV_HEADS, D, 0..=last, |p, h, d, sign| kv_value(seq, p, h, d, sign))
}

fn query(n: usize, salt: f32) -> Vec<f32> {
    (0..n * Q_HEADS * D).map(|i| ((i as f32) * 0.13 + salt).cos()).collect()
}

#[test]
fn batch_metadata_and_decode_attention() {
    let pool = cpu_pool();
    pool.alloc(1, &range(0, 5), None).unwrap();
    pool.alloc(2, &range(100, 107), None).unwrap();
    for seq in [1, 2] {
        write_seq(&pool, 1, seq);
    }
    let mut batch = Batch::new(&pool, 4, 64, 4).unwrap();
    assert!(batch.info().unwrap_err().is_state());
    batch.build(&[1, 2], &[1, 1]).unwrap();
    let info = batch.info().unwrap();
    assert_eq!((info.num_seqs, info.num_tokens, info.max_blocks_per_seq), (2, 2, 4));
    assert!(info.is_decode);
    assert_eq!((info.max_q_len, info.max_seq_len), (1, 7));
    assert_eq!(info.num_indices, 4);
    assert_ne!(info.block_tables, 0);
    let mut want_tables = Vec::new();
    for seq in [1, 2] {
        let mut row = pool.block_table(seq).unwrap();
        row.resize(4, -1);
        want_tables.extend(row);
    }
    assert_eq!(batch.block_tables().unwrap(), want_tables);
    let want_slots: Vec<i64> =
        [(1, 4), (2, 6)].iter().map(|&(s, p)| pool.slot_mapping(s, p, 1).unwrap()[0]).collect();
    assert_eq!(batch.slot_mapping().unwrap(), want_slots);

    let q = query(2, 0.5);
    let mut out = vec![0.0f32; q.len()];
    batch.attention(1, &q, &mut out, &AttentionParams::default(), None).unwrap();
    let row = Q_HEADS * D;
    assert_close(&out[..row], &reference(1, &q[..row], 4), "seq 1");
    assert_close(&out[row..], &reference(2, &q[row..], 6), "seq 2");

    // The raw variant with host addresses (CPU backend) computes the same.
    let mut out_raw = vec![0.0f32; q.len()];
    let params = AttentionParams { q_dtype: Dtype::F32, ..AttentionParams::default() };
    // SAFETY: CPU backend; q and out_raw hold num_tokens x Q_HEADS x D f32 values and outlive the
    // synchronous CPU launch; no ALiBi, default stream.
    unsafe {
        batch.attention_raw(1, q.as_ptr() as u64, out_raw.as_mut_ptr() as u64, &params, 0, 0).unwrap();
    }
    assert_eq!(out, out_raw);

    // Wrong lengths and slopes are refused before C reads anything.
    let e = batch.attention(1, &q[1..], &mut out, &AttentionParams::default(), None).unwrap_err();
    assert!(e.is_invalid_arg(), "{}", e);
    let e = batch.attention(1, &q, &mut out, &AttentionParams::default(), Some(&[0.5])).unwrap_err();
    assert!(e.is_invalid_arg(), "{}", e);
    // ALiBi with zero slopes changes nothing.
    let mut out_alibi = vec![0.0f32; q.len()];
    batch.attention(1, &q, &mut out_alibi, &AttentionParams::default(), Some(&[0.0; Q_HEADS])).unwrap();
    assert_close(&out_alibi, &out, "zero ALiBi");
}

#[test]
fn prefill_attention_is_causal() {
    let pool = cpu_pool();
    pool.alloc(1, &range(0, 6), None).unwrap();
    write_seq(&pool, 0, 1);
    let mut batch = pool.batch(2, 16, 4).unwrap();
    batch.build(&[1], &[6]).unwrap();
    let info = batch.info().unwrap();
    assert!(!info.is_decode);
    assert_eq!((info.num_tokens, info.max_q_len), (6, 6));
    assert_eq!(batch.slot_mapping().unwrap(), pool.slot_mapping(1, 0, 6).unwrap());
    let q = query(6, 1.5);
    let mut out = vec![0.0f32; q.len()];
    batch.attention(0, &q, &mut out, &AttentionParams::default(), None).unwrap();
    let row = Q_HEADS * D;
    for j in 0..6 {
        let want = reference(1, &q[j * row..(j + 1) * row], j as i64);
        assert_close(&out[j * row..(j + 1) * row], &want, &format!("query token {}", j));
    }
}

#[test]
fn raw_cache_write_and_stream_copy() {
    let pool = cpu_pool();
    pool.alloc(1, &range(0, 3), None).unwrap();
    let slots = pool.slot_mapping(1, 0, 3).unwrap();
    let (k, v) = (kv_rows(1, 0..3, 1.0), kv_rows(1, 0..3, -1.0));
    // SAFETY: CPU backend: host addresses are backend memory; every buffer holds 3 tokens of
    // this pool's shape and outlives the synchronous call; stream 0.
    unsafe {
        pool.cache_write_raw(
            0,
            slots.as_ptr() as u64,
            3,
            k.as_ptr() as u64,
            v.as_ptr() as u64,
            Dtype::F32,
            1.0,
            1.0,
            0,
        )
        .unwrap();
    }
    let by_raw = pool.copy_blocks_to_host(&pool.block_table(1).unwrap()).unwrap();
    pool.alloc(2, &range(50, 53), None).unwrap();
    let slots2 = pool.slot_mapping(2, 0, 3).unwrap();
    pool.cache_write(0, &slots2, &k, &v, 1.0, 1.0).unwrap();
    assert_eq!(pool.copy_blocks_to_host(&pool.block_table(2).unwrap()).unwrap(), by_raw);
    // SAFETY: stream 0 is the default stream (ignored on CPU).
    assert_eq!(unsafe { pool.copy_pending_on_stream(0) }.unwrap(), 0);
}

#[test]
fn batch_stream_is_ignored_on_cpu() {
    let pool = cpu_pool();
    pool.alloc(1, &range(0, 9), None).unwrap();
    pool.alloc(2, &range(20, 23), None).unwrap();
    let mut plain = pool.batch(2, 16, 4).unwrap();
    let mut streamed = pool.batch(2, 16, 4).unwrap();
    // SAFETY: CPU backend: the stream is stored, never handed to CUDA or dereferenced.
    unsafe { streamed.set_stream(0xdead_b000) }.unwrap();
    for q in [[9i64, 3], [1, 1]] {
        plain.build(&[1, 2], &q).unwrap();
        streamed.build(&[1, 2], &q).unwrap();
        assert_eq!(streamed.slot_mapping().unwrap(), plain.slot_mapping().unwrap());
        assert_eq!(streamed.block_tables().unwrap(), plain.block_tables().unwrap());
        let (a, b) = (plain.info().unwrap(), streamed.info().unwrap());
        assert_eq!(
            (a.num_tokens, a.num_indices, a.rows_uploaded),
            (b.num_tokens, b.num_indices, b.rows_uploaded)
        );
    }
    // Decode attention over the streamed batch: the reference, and the same as the plain batch.
    let q = query(2, 0.25);
    let (mut out_plain, mut out_streamed) = (vec![0.0f32; q.len()], vec![0.0f32; q.len()]);
    write_seq(&pool, 1, 1);
    write_seq(&pool, 1, 2);
    plain.attention(1, &q, &mut out_plain, &AttentionParams::default(), None).unwrap();
    streamed.attention(1, &q, &mut out_streamed, &AttentionParams::default(), None).unwrap();
    let row = Q_HEADS * D;
    assert_close(&out_streamed[..row], &reference(1, &q[..row], 8), "sequence 1");
    assert_close(&out_streamed[row..], &reference(2, &q[row..], 2), "sequence 2");
    assert_eq!(out_plain, out_streamed);
    // SAFETY: 0 is the default stream.
    unsafe { streamed.set_stream(0) }.unwrap();
    streamed.build(&[2], &[1]).unwrap();
    assert_eq!(streamed.slot_mapping().unwrap(), pool.slot_mapping(2, 2, 1).unwrap());
}

#[test]
fn metadata_only_pool_has_no_storage() {
    let pool = meta_pool(4, 8);
    pool.alloc(1, &range(0, 4), None).unwrap();
    assert!(pool.storage_info().unwrap_err().is_state());
    let e = pool.cache_write(0, &[0], &[0.0f32; 2], &[0.0f32; 2], 1.0, 1.0).unwrap_err();
    assert_eq!(e.status(), Status::STATE, "{}", e);
    assert!(pool.copy_pending().unwrap_err().is_state());
    assert!(pool.copy_blocks_to_host(&[0]).unwrap_err().is_state());
    let mut batch = pool.batch(1, 8, 2).unwrap();
    batch.build(&[1], &[1]).unwrap();
    let e = batch
        .attention(0, &[0.0f32; 128], &mut [0.0f32; 128], &AttentionParams::default(), None)
        .unwrap_err();
    assert!(e.is_state(), "{}", e);
}

#[test]
fn batch_errors() {
    let pool = cpu_pool();
    pool.alloc(1, &range(0, 5), None).unwrap();
    assert!(Batch::new(&pool, 0, 8, 4).unwrap_err().is_invalid_arg());
    let mut batch = Batch::new(&pool, 2, 8, 4).unwrap();
    assert!(batch.slot_mapping().unwrap_err().is_state());
    assert!(batch.block_tables().unwrap_err().is_state());
    let e = batch.build(&[1, 7], &[1, 1]).unwrap_err();
    assert!(e.is_unknown_seq(), "{}", e);
    assert!(e.message().contains('7'), "{}", e);
    assert!(batch.build(&[1], &[1, 1]).unwrap_err().is_invalid_arg());
    assert!(batch.build(&[1, 1], &[1, 1]).unwrap_err().is_invalid_arg());
    assert!(batch.build(&[1], &[6]).unwrap_err().is_invalid_arg(), "q_len above the sequence length");
    assert!(batch.build(&[1], &[0]).unwrap_err().is_invalid_arg());
    assert!(batch.build(&[], &[]).unwrap_err().is_invalid_arg());
    // Still usable after failures; a table wider than the capacity is BUFFER_TOO_SMALL.
    batch.build(&[1], &[5]).unwrap();
    pool.append(1, &range(5, 20), 0).unwrap();
    assert!(batch.build(&[1], &[1]).unwrap_err().is_buffer_too_small());
    assert_eq!(batch.info().unwrap().num_tokens, 5, "the previous step's metadata stays intact");
    assert_eq!(batch.pool().num_tokens(1).unwrap(), 20);
}
