//! `Pool::truncate` (`kvc_truncate`): the speculative-decoding rollback — freed block counts, the
//! table and token count after, the rejected drafts' cached block, lookahead dropped, a pending
//! copy into a released block cancelled, and every error status (swapped out included).
mod common;

use common::{cpu_config, meta_pool, range};
use kvc::Pool;

#[test]
fn speculative_rollback_keeps_accepted_tokens() {
    let pool = meta_pool(4, 8);
    // Prompt of 6 tokens (blocks 0, 1), then 7 drafts at positions 6..12 (blocks 2, 3).
    pool.alloc(1, &range(0, 6), None).unwrap();
    let drafts = range(600, 607);
    assert_eq!(pool.append(1, &drafts, 0).unwrap(), 2);
    assert_eq!(pool.block_table(1).unwrap(), vec![0, 1, 2, 3]);
    let slots_before = pool.slot_mapping(1, 0, 9).unwrap();
    let with_drafts = [&range(0, 6)[..], &drafts[..]].concat();
    assert_eq!(pool.prefix_lookup(&with_drafts, None).unwrap(), 12);

    // Three drafts accepted: 9 tokens stay, block 3 (position 12 only) leaves the table.
    assert_eq!(pool.truncate(1, 9).unwrap(), 1);
    assert_eq!(pool.num_tokens(1).unwrap(), 9);
    assert_eq!(pool.block_table(1).unwrap(), vec![0, 1, 2]);
    assert_eq!(pool.slot_mapping(1, 0, 9).unwrap(), slots_before, "kept tokens' slots move");
    assert!(pool.slot_mapping(1, 9, 1).unwrap_err().is_invalid_arg());
    let s = pool.stats().unwrap();
    assert_eq!((s.free_blocks, s.used_blocks), (5, 3));
    // Block 2 still holds exactly the rejected drafts' KV: it stays cached.
    assert_eq!(pool.prefix_lookup(&with_drafts, None).unwrap(), 12);
    pool.check().unwrap();

    // The corrected token goes into block 2: sole holder, so it leaves the cache, no copy.
    assert_eq!(pool.append(1, &[700], 0).unwrap(), 0);
    assert_eq!(pool.stats().unwrap().cow_copies, 0);
    assert_eq!(pool.pending_copy_count().unwrap(), 0);
    assert_eq!(pool.prefix_lookup(&with_drafts, None).unwrap(), 8);
    pool.append(1, &[701, 702], 0).unwrap();
    let corrected = [&range(0, 6)[..], &[600, 601, 602, 700, 701, 702, 9]].concat();
    assert_eq!(pool.prefix_lookup(&corrected, None).unwrap(), 12);
    pool.check().unwrap();
}

#[test]
fn equal_count_drops_only_the_lookahead() {
    let pool = meta_pool(4, 8);
    pool.alloc(1, &range(0, 6), None).unwrap();
    assert_eq!(pool.append(1, &[6], 5).unwrap(), 1, "slots 7..11 reach block 2");
    assert_eq!(pool.slot_mapping(1, 6, 6).unwrap().len(), 6);
    assert_eq!(pool.truncate(1, 7).unwrap(), 1, "block 2 held only reserved slots");
    assert_eq!(pool.num_tokens(1).unwrap(), 7);
    assert_eq!(pool.block_table(1).unwrap(), vec![0, 1]);
    assert!(pool.slot_mapping(1, 7, 1).unwrap_err().is_invalid_arg());
    assert_eq!(pool.truncate(1, 7).unwrap(), 0, "nothing left to drop");
    // Down to a block boundary, then grow again into a fresh block.
    assert_eq!(pool.truncate(1, 4).unwrap(), 1);
    assert_eq!(pool.append(1, &[40], 0).unwrap(), 1);
    assert_eq!(pool.num_tokens(1).unwrap(), 5);
    pool.free(1).unwrap();
    assert_eq!(pool.stats().unwrap().used_blocks, 0);
    pool.check().unwrap();
}

#[test]
fn rollback_past_a_copy_cancels_it() {
    let pool = meta_pool(4, 8);
    pool.alloc(1, &range(0, 6), None).unwrap();
    pool.fork(1, 2).unwrap();
    assert_eq!(pool.append(2, &[60], 0).unwrap(), 1, "copy-on-write of shared block 1");
    assert_eq!(pool.pending_copy_count().unwrap(), 1);
    // The copy's destination leaves the child's table: the pair is cancelled.
    assert_eq!(pool.truncate(2, 4).unwrap(), 1);
    assert_eq!(pool.take_pending_copies().unwrap(), vec![]);
    assert_eq!(pool.block_table(2).unwrap(), vec![0]);
    // Truncating a shared block out of one table does not free it: the parent still holds it.
    assert_eq!(pool.block_table(1).unwrap(), vec![0, 1]);
    assert_eq!(pool.stats().unwrap().used_blocks, 2);
    pool.check().unwrap();
}

#[test]
fn truncate_errors_change_nothing() {
    let pool = meta_pool(4, 8);
    pool.alloc(1, &range(0, 6), None).unwrap();
    pool.append(1, &[6], 2).unwrap();
    let before = (pool.stats().unwrap(), pool.block_table(1).unwrap());
    let e = pool.truncate(1, 8).unwrap_err();
    assert!(e.is_invalid_arg(), "{}", e);
    assert!(e.message().contains("kvc_truncate"), "{}", e);
    assert!(pool.truncate(1, 0).unwrap_err().is_invalid_arg());
    let e = pool.truncate(42, 1).unwrap_err();
    assert!(e.is_unknown_seq() && e.message().contains("42"), "{}", e);
    assert_eq!((pool.stats().unwrap(), pool.block_table(1).unwrap()), before);
    assert_eq!(pool.num_tokens(1).unwrap(), 7);
    assert_eq!(pool.slot_mapping(1, 7, 2).unwrap().len(), 2, "lookahead kept after the errors");
    pool.check().unwrap();
}

#[test]
fn swapped_out_sequence_is_refused() {
    let pool = Pool::new(&cpu_config(4, 8, 2, 2, 8)).unwrap();
    pool.attach_host_tier(8).unwrap();
    pool.alloc(1, &range(0, 10), None).unwrap();
    let op = pool.swap_out(1).unwrap();
    pool.op_wait(op).unwrap();
    let e = pool.truncate(1, 5).unwrap_err();
    assert!(e.is_state(), "{}", e);
    assert_eq!(pool.num_tokens(1).unwrap(), 10);
    pool.op_wait(pool.swap_in(1).unwrap()).unwrap();
    assert_eq!(pool.truncate(1, 5).unwrap(), 1);
    assert_eq!(pool.block_table(1).unwrap().len(), 2);
    pool.check().unwrap();
}
