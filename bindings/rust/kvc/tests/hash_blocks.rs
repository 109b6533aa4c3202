//! kvc::hash_blocks against the shared block hash vectors (tests/conformance/hash_vectors.txt,
//! also checked by the C suite, the Go and Java bindings and the Python re-implementation of the
//! spec), and against the hashes a pool's events report.
use std::collections::HashMap;
use std::path::PathBuf;

use kvc::{EventType, Keys, Pool, PoolConfig, Status};

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../tests/conformance/hash_vectors.txt")
}

fn parse_hash(s: &str) -> u128 {
    assert_eq!(s.len(), 32, "hash {}", s);
    u128::from_str_radix(s, 16).unwrap_or_else(|_| panic!("bad hash {}", s))
}

/// tokens=LIST: comma-separated ids or range:A:B.
fn parse_tokens(s: &str) -> Vec<i32> {
    match s.strip_prefix("range:").and_then(|r| r.split_once(':')) {
        Some((a, b)) => (a.parse::<i32>().unwrap()..b.parse::<i32>().unwrap()).collect(),
        None => s.split(',').map(|t| t.parse().unwrap()).collect(),
    }
}

/// The line's keys: LoRA id, salt, multimodal items HASH:OFFSET:LENGTH.
fn keys_for(args: &HashMap<&str, &str>) -> Keys {
    let mut k = Keys::new().unwrap();
    k.set_lora(args.get("lora").map_or(0, |v| v.parse().unwrap())).unwrap();
    k.set_salt(args.get("salt").copied().unwrap_or("")).unwrap();
    for item in args.get("mm").map_or(vec![], |v| v.split(',').collect()) {
        let parts: Vec<&str> = item.split(':').collect();
        k.add_mm(parse_hash(parts[0]), parts[1].parse().unwrap(), parts[2].parse().unwrap()).unwrap();
    }
    k
}

#[test]
fn shared_vectors() {
    let text = std::fs::read_to_string(vectors_path()).unwrap();
    let mut checked = 0;
    for (num, line) in text.lines().enumerate() {
        let body = line.split('#').next().unwrap().trim();
        let mut fields = body.split_whitespace();
        match fields.next() {
            None => continue,
            Some(op) => assert_eq!(op, "vector", "line {}", num + 1),
        }
        let args: HashMap<&str, &str> = fields.map(|f| f.split_once('=').expect("key=value")).collect();
        let want: Vec<u128> = args.get("hashes").map_or(vec![], |v| v.split(',').map(parse_hash).collect());
        assert_eq!(want.len(), args["count"].parse::<usize>().unwrap(), "line {}: count", num + 1);
        let got = kvc::hash_blocks(args["block_size"].parse().unwrap(), &parse_tokens(args["tokens"]), Some(&keys_for(&args)))
            .unwrap();
        assert_eq!(got, want, "line {}", num + 1);
        checked += 1;
    }
    assert!(checked > 0, "no vectors");
}

/// The hashes a pool's BLOCK_STORED events report for a prompt are hash_blocks' (no keys too).
#[test]
fn equals_pool_events() {
    let mut cfg = PoolConfig::default();
    cfg.block_size = 4;
    cfg.num_blocks = 16;
    cfg.watermark = 0.0;
    let pool = Pool::new(&cfg).unwrap();
    let prompt: Vec<i32> = (0..13).collect();
    let want = kvc::hash_blocks(4, &prompt, None).unwrap();
    assert_eq!(want.len(), 3);
    pool.alloc(1, &prompt, None).unwrap();
    for h in want {
        let e = pool.pop_event().unwrap().expect("an event");
        assert_eq!(e.kind, EventType::BLOCK_STORED);
        assert_eq!(e.hash, h);
    }
    let s = pool.stats().unwrap();
    assert_eq!((s.cached_blocks_total, s.cached_free_blocks), (3, 0));
    pool.free(1).unwrap();
    assert_eq!(pool.stats().unwrap().cached_blocks_total, 3);
}

#[test]
fn errors() {
    let e = kvc::hash_blocks(0, &[1, 2, 3, 4], None).unwrap_err();
    assert_eq!(e.status(), Status::INVALID_ARG);
    assert!(kvc::hash_blocks(4, &[], None).unwrap().is_empty());
}
