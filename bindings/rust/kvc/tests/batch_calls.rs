//! `Pool::append_batch` (`kvc_append_batch`) and `Pool::admit` (`kvc_admit`): the batched calls do
//! what the single calls they stand for do; the stop rule; arguments checked before C reads them.
mod common;

use common::{meta_pool, range};
use kvc::{AllocVerdict, Backend, Pool, PoolConfig};

#[test]
fn append_batch_does_what_the_appends_do() {
    let (single, batch) = (meta_pool(4, 16), meta_pool(4, 16));
    for p in [&single, &batch] {
        p.alloc(1, &range(0, 3), None).unwrap();
        p.alloc(2, &range(10, 13), None).unwrap();
        p.fork(2, 3).unwrap(); // 3 shares 2's partial block: the first append into it copies it
    }
    let ids = [1u64, 2, 3, 1];
    let offsets = [0i64, 2, 3, 4, 5];
    let tokens = [50, 51, 60, 70, 52];
    let want: Vec<i32> = (0..ids.len())
        .map(|i| single.append(ids[i], &tokens[offsets[i] as usize..offsets[i + 1] as usize], 1).unwrap())
        .collect();
    let mut got = vec![-7; ids.len()];
    let (done, r) = batch.append_batch(&ids, Some(&offsets), &tokens, 1, None, Some(&mut got));
    r.unwrap();
    assert_eq!(done, 4);
    assert_eq!(got, want);
    assert_eq!(got[1], 2, "entry 1 copies the shared block and takes one more");
    for s in 1..=3 {
        assert_eq!(single.block_table(s).unwrap(), batch.block_table(s).unwrap(), "seq {}", s);
    }
    let (a, b) = (single.take_pending_copies().unwrap(), batch.take_pending_copies().unwrap());
    assert_eq!(b.len(), 1);
    assert_eq!(a, b);
    single.check().unwrap();
    batch.check().unwrap();
}

#[test]
fn append_batch_stops_at_the_first_refusal() {
    let p = meta_pool(4, 16);
    p.alloc(1, &range(0, 3), None).unwrap();
    p.alloc(2, &range(10, 13), None).unwrap();
    let (done, r) = p.append_batch(&[1, 99, 2], None, &[5, 6, 7], 0, None, None);
    let e = r.unwrap_err();
    assert_eq!(done, 1);
    assert!(e.is_unknown_seq(), "{:?}", e);
    assert!(e.message().contains("entry 1 of 3"), "{}", e.message());
    assert_eq!(p.num_tokens(1).unwrap(), 4);
    assert_eq!(p.num_tokens(2).unwrap(), 3);
    // Bad arguments in any entry: nothing changed.
    let (done, r) = p.append_batch(&[1, 2], None, &[5, 6], 0, Some(&[0, -1]), None);
    assert!(r.unwrap_err().is_invalid_arg());
    assert_eq!(done, 0);
    // Slices shorter than the entries imply: refused by the binding.
    let mut two = [0i32; 2];
    for (done, r) in [
        p.append_batch(&[1, 2], Some(&[0, 1]), &[5], 0, None, None),
        p.append_batch(&[1, 2], Some(&[0, 1, 3]), &[5, 6], 0, None, None),
        p.append_batch(&[1, 2], None, &[5], 0, None, None),
        p.append_batch(&[1], None, &[5], 0, Some(&[]), None),
        p.append_batch(&[1], None, &[5], 0, None, Some(&mut two)),
    ] {
        assert_eq!(done, 0);
        assert!(r.unwrap_err().is_invalid_arg());
    }
    assert_eq!(p.num_tokens(1).unwrap(), 4);
    // An empty batch is a no-op.
    let (done, r) = p.append_batch(&[], None, &[], 0, None, None);
    r.unwrap();
    assert_eq!(done, 0);
    p.check().unwrap();
}

#[test]
fn admit_is_can_alloc_then_alloc() {
    let p = Pool::new(&PoolConfig {
        block_size: 4,
        num_blocks: 16,
        watermark: 0.25, // 4 blocks kept free
        backend: Backend::NONE,
        ..PoolConfig::default()
    })
    .unwrap();
    assert_eq!(p.admit(1, &range(0, 20), None).unwrap(), (AllocVerdict::OK, 0));
    let mut hit = range(0, 16);
    hit.push(99);
    assert_eq!(p.admit(2, &hit, None).unwrap(), (AllocVerdict::OK, 16));
    assert_eq!(p.can_alloc(&range(100, 132), None).unwrap(), AllocVerdict::LATER);
    assert_eq!(p.admit(3, &range(100, 132), None).unwrap(), (AllocVerdict::LATER, 0));
    assert!(p.num_tokens(3).unwrap_err().is_unknown_seq());
    assert_eq!(p.admit(4, &range(500, 568), None).unwrap().0, AllocVerdict::NEVER);
    assert!(p.admit(1, &range(0, 4), None).unwrap_err().is_seq_exists());
    p.check().unwrap();
}
