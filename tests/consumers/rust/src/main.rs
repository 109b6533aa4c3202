//! The smallest useful program against the `kvc` crate: a prefix hit between two requests that
//! share a 32-token prompt, checked exactly, and the library's version against the header's.
use kvc::{Pool, PoolConfig};

fn main() {
    let pool = Pool::new(&PoolConfig { block_size: 16, num_blocks: 8, ..PoolConfig::default() })
        .expect("pool");
    let prompt: Vec<i32> = (1..=40).collect();
    assert_eq!(pool.alloc(1, &prompt, None).expect("alloc 1"), 0);
    // Two full blocks of the shared prompt are reused; the partial third block never is.
    assert_eq!(pool.alloc(2, &prompt, None).expect("alloc 2"), 32);
    assert_eq!(kvc::version(), kvc::HEADER_VERSION, "library and header versions differ");
    println!(
        "kvc-consumer ok: libkvc {}, 32 of 40 prompt tokens cached, header {}",
        kvc::version_string(),
        option_env!("KVC_CONSUMER_HEADER").unwrap_or("?")
    );
}
