//! A scheduler's view of libkvc from Rust: two chat requests sharing a system prompt, decode
//! steps with a block boundary, parallel sampling by fork with copy-on-write, admission control,
//! a handled out-of-blocks error, and the pool's statistics; then a warm restart from a persistent
//! disk tier, prefetched from an I/O thread. Exits non-zero on any surprise.
use kvc::{AllocVerdict, Backend, Pool, PoolConfig, Tier, DISK_PERSISTENT};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "libkvc {} (Rust binding built against header {})",
        kvc::version_string(),
        kvc::HEADER_VERSION
    );
    let pool = Pool::new(&PoolConfig {
        block_size: 16,
        num_blocks: 12,
        watermark: 0.0,
        ..PoolConfig::default()
    })?;

    // Two requests with the same 40-token system prompt: the second reuses its two full blocks.
    let system: Vec<i32> = (1000..1040).collect();
    let user_a: Vec<i32> = [&system[..], &[1, 2, 3, 4, 5]].concat();
    let user_b: Vec<i32> = [&system[..], &[9, 8, 7]].concat();
    let cached_a = pool.alloc(1, &user_a, None)?;
    let cached_b = pool.alloc(2, &user_b, None)?;
    println!(
        "request 1: {} prompt tokens, {} cached; table {:?}",
        user_a.len(),
        cached_a,
        pool.block_table(1)?
    );
    println!(
        "request 2: {} prompt tokens, {} cached; table {:?}",
        user_b.len(),
        cached_b,
        pool.block_table(2)?
    );
    check(
        cached_a == 0 && cached_b == 32,
        "the second request hits the system prompt's two full blocks",
    )?;

    // Decode request 1 until its third block is full and a fourth one opens.
    let mut opened = 0;
    for step in 0..4 {
        opened += pool.append(1, &[2000 + step], 0)?;
    }
    println!(
        "request 1 after 4 decode steps: {} tokens, table {:?}",
        pool.num_tokens(1)?,
        pool.block_table(1)?
    );
    check(
        opened == 1 && pool.block_table(1)?.len() == 4,
        "one new block at the 48-token boundary",
    )?;

    // Parallel sampling: fork request 2, both continue; the shared partial block is copied once.
    pool.fork(2, 3)?;
    pool.append(3, &[42], 0)?;
    pool.append(2, &[43], 0)?;
    let copies = pool.take_pending_copies()?;
    println!("fork 2 -> 3, both decode: copy-on-write pairs {:?}", copies);
    check(copies.len() == 1, "exactly one copy-on-write pair")?;
    let slots = pool.slot_mapping(3, pool.num_tokens(3)? - 1, 1)?;
    println!("slot of request 3's newest token: {}", slots[0]);

    // Admission control and a handled out-of-blocks error.
    let long_prompt: Vec<i32> = (0..150).collect();
    let verdict = pool.can_alloc(&long_prompt, None)?;
    println!("can a 150-token prompt be admitted? {}", verdict.name());
    check(
        verdict == AllocVerdict::LATER,
        "150 tokens (10 blocks) fit the pool, not its 6 free blocks",
    )?;
    match pool.alloc(4, &long_prompt, None) {
        Err(e) if e.is_out_of_blocks() => println!("alloc refused as expected: {}", e),
        other => return Err(format!("expected OUT_OF_BLOCKS, got {:?}", other).into()),
    }

    for id in [3, 2, 1] {
        pool.free(id)?;
    }
    let s = pool.stats()?;
    println!(
        "stats: {} blocks free ({} still cached), hit rate {:.2} ({} of {} prompt tokens), {} cow copies",
        s.free_blocks, s.cached_free_blocks, s.prefix_hit_rate, s.prefix_hit_tokens, s.prefix_query_tokens, s.cow_copies
    );
    check(
        s.free_blocks == 12 && s.num_seqs == 0,
        "every block is free again",
    )?;
    pool.check()?;
    warm_restart()?;
    println!("ok");
    Ok(())
}

/// The prefix cache kept across a server restart: a disk tier in a persistent file, attached with
/// the identity of the model computing the KV (another model's blocks are never recovered as hits),
/// flushed before the shutdown; after the restart an I/O thread prefetches a queued request's
/// prefix from disk off the scheduler's path, and the admission restores it from host memory.
fn warm_restart() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("kvc-rust-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("kv.bin");
    let open = || -> Result<Pool, Box<dyn std::error::Error>> {
        let pool = Pool::new(&PoolConfig {
            backend: Backend::CPU, // storage: the tiers move KV bytes
            block_size: 16,
            num_blocks: 64,
            num_layers: 2,
            num_kv_heads: 2,
            num_q_heads: 4,
            head_dim: 64,
            ..PoolConfig::default()
        })?;
        pool.attach_host_tier(16)?;
        pool.attach_disk_tier_with_identity(
            &file,
            256,
            DISK_PERSISTENT,
            "example-model@rev1;kv=f16;tp=0/1",
        )?;
        Ok(pool)
    };
    let system: Vec<i32> = (7..107).collect(); // 100 tokens: 6 full blocks
    let pool = open()?;
    pool.alloc(1, &system, None)?;
    // ... the forward pass writes the prompt's KV (kvc_cache_write) ...
    pool.free(1)?;
    let written = pool.tier_flush()?;
    drop(pool);

    let pool = open()?; // the restart
    let recovered = pool.tier_stats(Tier::Disk)?.recovered_blocks;
    let prefetched = std::thread::scope(|s| s.spawn(|| pool.tier_prefetch(&system, None)).join())
        .map_err(|_| "prefetch thread panicked")??;
    let cached = pool.alloc(2, &system, None)?;
    println!(
        "restart: {} blocks flushed, {} recovered from disk; prefetched {} tokens, admission found {} cached",
        written, recovered, prefetched, cached
    );
    check(
        recovered == written && prefetched == 96 && cached == 96,
        "the warm restart serves the system prompt from disk",
    )?;
    pool.free(2)?;
    drop(pool);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn check(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("unexpected: {}", what))
    }
}
