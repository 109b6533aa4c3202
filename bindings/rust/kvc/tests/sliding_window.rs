//! `Pool::set_sliding_window` / `Pool::sliding_window` (`kvc_pool_set_sliding_window`,
//! `kvc_pool_get_sliding_window`): blocks before the window leave a growing sequence (table
//! entries -1, blocks back in the pool, full ones still cached), truncate may not cut below the
//! window, and attention on the CPU backend reads only the window (checked against a reference).
mod common;

use common::{assert_close, cpu_config, dense_attention, meta_pool, range};
use kvc::{AttentionParams, Pool};

const BS: i64 = 4;
const POOL_BLOCKS: i64 = 16;
const WINDOW: i32 = 6;
const KV_HEADS: usize = 2;
const Q_HEADS: usize = 4;
const D: usize = 8;

/// The rule of `kvc_append`: an append releases the blocks whose tokens all lie before
/// `f - window + 1`, where `f` is the first position the sequence's previous call added (the
/// previous append's, or for the first append after `kvc_alloc` the alloc's first uncached
/// position). No query of that call's tokens or of later ones sees those keys.
fn released_by(f: i64) -> i64 {
    (f - WINDOW as i64 + 1).max(0) / BS
}

/// Appends tokens 1..n to a 1-token sequence one at a time, checking after each append the
/// table's released (-1) prefix and the blocks that came back to the pool; `on_append` runs after
/// each append with the new token's position.
fn grow_one_by_one(pool: &Pool, seq: u64, n: i64, mut on_append: impl FnMut(i64)) {
    for pos in 1..n {
        let want_new = i32::from(pos % BS == 0);
        assert_eq!(pool.append(seq, &[pos as i32], 0).unwrap(), want_new, "blocks taken at {}", pos);
        on_append(pos);
        // The previous call added position pos-1 first: the append of pos-1, or for pos 1 the
        // alloc of the 1-token prompt (no prefix hit: first uncached position 0).
        let released = released_by(pos - 1);
        let total = pos / BS + 1;
        let table = pool.block_table(seq).unwrap();
        assert_eq!(table.len() as i64, total, "table after position {}: {:?}", pos, table);
        for (i, &b) in table.iter().enumerate() {
            assert_eq!((i as i64) < released, b == -1, "after position {}: table {:?}", pos, table);
        }
        let s = pool.stats().unwrap();
        let held = total - released;
        assert_eq!((s.used_blocks, s.free_blocks), (held, POOL_BLOCKS - held), "after position {}", pos);
    }
}

#[test]
fn set_and_get() {
    let pool = meta_pool(4, 16);
    assert_eq!(pool.sliding_window().unwrap(), 0, "off by default");
    pool.set_sliding_window(WINDOW).unwrap();
    assert_eq!(pool.sliding_window().unwrap(), WINDOW);
    let e = pool.set_sliding_window(-1).unwrap_err();
    assert!(e.is_invalid_arg(), "{}", e);
    assert_eq!(pool.sliding_window().unwrap(), WINDOW, "a refused call changed the window");

    // Only while the pool has no sequences.
    pool.alloc(1, &range(0, 3), None).unwrap();
    let e = pool.set_sliding_window(8).unwrap_err();
    assert!(e.is_state(), "{}", e);
    assert!(e.message().contains("kvc_pool_set_sliding_window"), "{}", e);
    assert!(pool.set_sliding_window(0).unwrap_err().is_state());
    assert_eq!(pool.sliding_window().unwrap(), WINDOW, "a refused call changed the window");
    pool.free(1).unwrap();
    pool.set_sliding_window(0).unwrap();
    assert_eq!(pool.sliding_window().unwrap(), 0);
    pool.check().unwrap();
}

#[test]
fn append_releases_blocks_before_the_window() {
    let pool = meta_pool(4, 16);
    assert!(pool.cached_config().prefix_caching);
    pool.set_sliding_window(WINDOW).unwrap();
    pool.alloc(1, &[0], None).unwrap();
    grow_one_by_one(&pool, 1, 20, |_| {});

    // 20 tokens in 5 blocks (0..4); the append of position 19, after the one of 18, released the
    // blocks wholly before 18 - 6 + 1 = 13: blocks 0, 1, 2. Full, so they stay cached while free.
    assert_eq!(pool.block_table(1).unwrap(), vec![-1, -1, -1, 3, 4]);
    let s = pool.stats().unwrap();
    assert_eq!((s.used_blocks, s.free_blocks, s.cached_free_blocks), (2, 14, 3));
    assert_eq!(pool.num_tokens(1).unwrap(), 20);
    assert!(pool.slot_mapping(1, 11, 1).unwrap_err().is_invalid_arg());
    assert_eq!(pool.slot_mapping(1, 12, 8).unwrap(), (12..20).collect::<Vec<i64>>());

    // Truncating to n, the next token sees n - 5 ..; positions below 12 are gone: n >= 17.
    let e = pool.truncate(1, 16).unwrap_err();
    assert!(e.is_state() && e.message().contains("kvc_truncate"), "{}", e);
    assert_eq!(pool.stats().unwrap(), s, "a refused truncate changed the pool");
    assert_eq!(pool.num_tokens(1).unwrap(), 20);
    assert_eq!(pool.truncate(1, 17).unwrap(), 0, "block 4 keeps position 16");
    assert_eq!(pool.num_tokens(1).unwrap(), 17);
    assert_eq!(pool.block_table(1).unwrap(), vec![-1, -1, -1, 3, 4]);
    pool.check().unwrap();

    pool.free(1).unwrap();
    let s = pool.stats().unwrap();
    assert_eq!((s.used_blocks, s.free_blocks), (0, POOL_BLOCKS));
}

/// Deterministic K (sign +1) / V (sign -1) of position `pos`, head `h`, dim `d`.
fn kv_value(pos: i64, h: usize, d: usize, sign: f32) -> f32 {
    sign * ((pos as f32) * 0.23 + (h as f32) * 0.31 - (d as f32) * 0.17).sin()
}

fn write_position(pool: &Pool, seq: u64, pos: i64) {
    let slots = pool.slot_mapping(seq, pos, 1).unwrap();
    let row =
        |sign| (0..KV_HEADS).flat_map(|h| (0..D).map(move |d| kv_value(pos, h, d, sign))).collect::<Vec<_>>();
    for layer in 0..2 {
        pool.cache_write(layer, &slots, &row(1.0), &row(-1.0), 1.0, 1.0).unwrap();
    }
}

/// Reference attention of one query row (Q_HEADS x D) at position `qpos` over the window.
fn reference(q: &[f32], qpos: i64, window: i32) -> Vec<f32> {
    let first = (qpos - window as i64 + 1).max(0);
    dense_attention(q, Q_HEADS, KV_HEADS, D, first..=qpos, kv_value)
}

#[test]
fn windowed_attention_on_the_cpu_backend() {
    let pool = Pool::new(&cpu_config(4, 16, KV_HEADS as i32, Q_HEADS as i32, D as i32)).unwrap();
    pool.set_sliding_window(WINDOW).unwrap();
    pool.alloc(1, &[0], None).unwrap();
    write_position(&pool, 1, 0);
    // Each token's K/V is written right after its append, before its block can be released.
    grow_one_by_one(&pool, 1, 20, |pos| write_position(&pool, 1, pos));
    let mut batch = pool.batch(2, 32, 8).unwrap();

    // Decode of position 19 sees 14..19, all still held.
    batch.build(&[1], &[1]).unwrap();
    assert_eq!(batch.block_tables().unwrap()[..5], [-1, -1, -1, 3, 4]);
    let row = Q_HEADS * D;
    let q: Vec<f32> = (0..row).map(|i| ((i as f32) * 0.29).cos()).collect();
    let mut out = vec![0.0f32; row];
    for w in [WINDOW, 3] {
        let params = AttentionParams { sliding_window: w, ..AttentionParams::default() };
        batch.attention(1, &q, &mut out, &params, None).unwrap();
        assert_close(&out, &reference(&q, 19, w), &format!("decode, window {}", w));
    }
    // A windowed pool needs 1 <= params.sliding_window <= its window.
    for w in [0, WINDOW + 1] {
        let params = AttentionParams { sliding_window: w, ..AttentionParams::default() };
        let e = batch.attention(1, &q, &mut out, &params, None).unwrap_err();
        assert!(e.is_invalid_arg(), "window {}: {}", w, e);
    }

    // A query at position 11 (q_len 9) would sit in released block 2.
    assert!(batch.build(&[1], &[9]).unwrap_err().is_invalid_arg());
    // Queries at 12..19 are held, but the one at 12 may see only itself.
    batch.build(&[1], &[8]).unwrap();
    let q8: Vec<f32> = (0..8 * row).map(|i| ((i as f32) * 0.41).sin()).collect();
    let mut out8 = vec![0.0f32; q8.len()];
    let wide = AttentionParams { sliding_window: 2, ..AttentionParams::default() };
    assert!(batch.attention(0, &q8, &mut out8, &wide, None).unwrap_err().is_invalid_arg());
    let one = AttentionParams { sliding_window: 1, ..AttentionParams::default() };
    batch.attention(0, &q8, &mut out8, &one, None).unwrap();
    for j in 0..8 {
        let want = reference(&q8[j * row..(j + 1) * row], 12 + j as i64, 1);
        assert_close(&out8[j * row..(j + 1) * row], &want, &format!("window 1, query {}", j));
    }
}

/// A speculative step appends its pending token and its drafts in two calls, then builds one batch
/// with q_len 1 + drafts and launches with the pool's window. The drafts' append releases only what
/// the pending token's query no longer sees, so the launch goes through even at a block boundary.
#[test]
fn two_appends_in_one_step() {
    let pool = Pool::new(&cpu_config(4, 16, KV_HEADS as i32, Q_HEADS as i32, D as i32)).unwrap();
    pool.set_sliding_window(WINDOW).unwrap();
    pool.alloc(1, &[0], None).unwrap();
    write_position(&pool, 1, 0);
    grow_one_by_one(&pool, 1, 20, |pos| write_position(&pool, 1, pos));

    // Pending token 20: the previous call added 19, so blocks before 19 - 5 = 14 go (0..2, as
    // already); position 20 opens a block, the first uncached free one (5: 0..2 are cached).
    assert_eq!(pool.append(1, &[20], 0).unwrap(), 1, "pending append");
    // Drafts 21..23: the previous call added 20, whose query sees 15..20, so only blocks before 15
    // go: nothing new. (By this call's own first position, 21, block 3 = positions 12..15 would
    // go, and the pending token's key 15 with it.)
    assert_eq!(pool.append(1, &[21, 22, 23], 0).unwrap(), 0, "draft append");
    assert_eq!(pool.block_table(1).unwrap(), vec![-1, -1, -1, 3, 4, 5]);
    let s = pool.stats().unwrap();
    assert_eq!((s.used_blocks, s.free_blocks), (3, 13));
    for pos in 20..24 {
        write_position(&pool, 1, pos);
    }

    let mut batch = pool.batch(2, 32, 8).unwrap();
    batch.build(&[1], &[4]).unwrap();
    let row = Q_HEADS * D;
    let q: Vec<f32> = (0..4 * row).map(|i| ((i as f32) * 0.37).cos()).collect();
    let mut out = vec![0.0f32; q.len()];
    let params = AttentionParams { sliding_window: WINDOW, ..AttentionParams::default() };
    batch.attention(1, &q, &mut out, &params, None).unwrap();
    for j in 0..4 {
        let want = reference(&q[j * row..(j + 1) * row], 20 + j as i64, WINDOW);
        assert_close(&out[j * row..(j + 1) * row], &want, &format!("pending + drafts, query {}", j));
    }
    drop(batch);

    // Verification keeps the pending token and one draft: truncate to 22 (f stays 21, the drafts'
    // first position). The next pending token (22) releases the blocks before 21 - 5 = 16: block 3
    // as well.
    assert_eq!(pool.truncate(1, 22).unwrap(), 0);
    assert_eq!(pool.append(1, &[22], 0).unwrap(), 0, "next pending append");
    assert_eq!(pool.block_table(1).unwrap(), vec![-1, -1, -1, -1, 4, 5]);
    let s = pool.stats().unwrap();
    assert_eq!((s.used_blocks, s.free_blocks), (2, 14));
    pool.check().unwrap();
}
