//! One Pool shared by many threads (it is Sync), per-thread error messages, and the Send/Sync
//! surface of the crate's types.
mod common;

use common::{meta_pool, range};
use kvc::{Batch, Keys, Pool};

fn assert_send<T: Send>() {}
fn assert_sync<T: Sync>() {}

/// Compiles only when T is *not* Sync: with a Sync T both impls apply and inference fails.
trait AmbiguousIfSync<A> {
    fn check() {}
}
impl<T: ?Sized> AmbiguousIfSync<()> for T {}
impl<T: ?Sized + Sync> AmbiguousIfSync<u8> for T {}

#[test]
fn thread_safety_markers() {
    assert_send::<Pool>();
    assert_sync::<Pool>();
    assert_send::<Keys>();
    assert_send::<Batch<'static>>();
    assert_send::<kvc::Error>();
    assert_sync::<kvc::Error>();
    <Keys as AmbiguousIfSync<_>>::check();
    <Batch<'static> as AmbiguousIfSync<_>>::check();
}

#[test]
fn many_threads_share_one_pool() {
    const THREADS: u64 = 8;
    const ROUNDS: u64 = 500;
    let pool = meta_pool(4, 512);
    // A shared system prompt: every thread's requests hit its two full blocks.
    pool.alloc(u64::MAX, &range(0, 9), None).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let pool = &pool;
            s.spawn(move || {
                let mut keys = Keys::new().unwrap();
                keys.set_priority(10 + t as i32).unwrap();
                for r in 0..ROUNDS {
                    let id = t * 1_000_000 + r * 2;
                    let mut prompt = range(0, 8);
                    prompt.extend([1000 + t as i32, r as i32]);
                    let cached = pool.alloc(id, &prompt, Some(&keys)).unwrap();
                    assert_eq!(cached, 8, "the shared prefix is hit");
                    pool.append(id, &[1, 2, 3], 0).unwrap();
                    pool.fork(id, id + 1).unwrap();
                    pool.append(id + 1, &[7], 1).unwrap();
                    assert_eq!(pool.num_tokens(id + 1).unwrap(), 14);
                    let table = pool.block_table(id).unwrap();
                    assert_eq!(table.len(), 4);
                    assert_eq!(pool.slot_mapping(id, 12, 1).unwrap()[0], table[3] as i64 * 4);
                    pool.stats().unwrap();
                    // An error on this thread reports this thread's call, whatever the others do.
                    let missing = (1u64 << 40) + id; // never allocated by any thread
                    let e = pool.free(missing).unwrap_err();
                    assert!(e.is_unknown_seq());
                    assert!(e.message().contains(&missing.to_string()), "{} lacks {}", e, missing);
                    pool.free(id + 1).unwrap();
                    pool.free(id).unwrap();
                }
            });
        }
    });
    let s = pool.stats().unwrap();
    assert_eq!(s.num_seqs, 1);
    assert_eq!(s.allocs, 1 + (THREADS * ROUNDS) as i64);
    assert_eq!(s.frees, 2 * (THREADS * ROUNDS) as i64);
    assert_eq!(s.forks, (THREADS * ROUNDS) as i64);
    assert_eq!(s.prefix_hit_tokens, 8 * (THREADS * ROUNDS) as i64);
    assert_eq!(s.cow_copies, (THREADS * ROUNDS) as i64);
    // Every pair's destination (the child's copied block) was freed with the child: a pair into a
    // block released by its last holder is cancelled (kvc_take_pending_copies).
    assert_eq!(pool.take_pending_copies().unwrap().len(), 0);
    pool.check().unwrap();
}

#[test]
fn pool_moves_between_threads_and_batches_follow() {
    let pool = std::thread::spawn(|| {
        let pool = meta_pool(4, 16);
        pool.alloc(1, &range(0, 5), None).unwrap();
        pool
    })
    .join()
    .unwrap();
    std::thread::scope(|s| {
        let mut batch = Batch::new(&pool, 1, 8, 4).unwrap();
        s.spawn(move || {
            batch.build(&[1], &[1]).unwrap();
            assert_eq!(batch.info().unwrap().max_seq_len, 5);
        });
    });
    let shared = std::sync::Arc::new(pool);
    let other = std::sync::Arc::clone(&shared);
    std::thread::spawn(move || other.append(1, &[9], 0).unwrap()).join().unwrap();
    assert_eq!(shared.num_tokens(1).unwrap(), 6);
}
