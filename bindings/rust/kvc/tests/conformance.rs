//! The shared conformance scenario (tests/conformance/scenario.kvc; format in
//! tests/conformance/README.md) run through the safe Rust API. The C suite and the Go, Java and
//! Python bindings run the same file.
use std::collections::HashMap;
use std::path::PathBuf;

use kvc::{AllocVerdict, Backend, Keys, Pool, PoolConfig, Status};

struct Line {
    no: usize,
    op: String,
    keys: HashMap<String, String>,
    used: std::cell::RefCell<Vec<String>>,
}

impl Line {
    fn fail(&self, why: impl std::fmt::Display) -> ! {
        panic!("scenario.kvc:{} ({}): {}", self.no, self.op, why)
    }
    fn get(&self, key: &str) -> Option<&str> {
        let v = self.keys.get(key).map(String::as_str);
        if v.is_some() {
            self.used.borrow_mut().push(key.to_string());
        }
        v
    }
    fn need(&self, key: &str) -> &str {
        self.get(key).unwrap_or_else(|| self.fail(format!("missing {}=", key)))
    }
    fn i64(&self, key: &str) -> Option<i64> {
        self.get(key)
            .map(|v| v.parse().unwrap_or_else(|_| self.fail(format!("{}={} is not an integer", key, v))))
    }
    fn need_i64(&self, key: &str) -> i64 {
        self.i64(key).unwrap_or_else(|| self.fail(format!("missing {}=", key)))
    }
    fn need_u64(&self, key: &str) -> u64 {
        let v = self.need(key);
        v.parse().unwrap_or_else(|_| self.fail(format!("{}={} is not an id", key, v)))
    }
    fn list(&self, key: &str) -> Option<Vec<i64>> {
        let v = self.get(key)?;
        if let Some(range) = v.strip_prefix("range:") {
            let (a, b) = range.split_once(':').unwrap_or_else(|| self.fail(format!("bad range {}", v)));
            let a: i64 = a.parse().unwrap_or_else(|_| self.fail(format!("bad range {}", v)));
            let b: i64 = b.parse().unwrap_or_else(|_| self.fail(format!("bad range {}", v)));
            return Some((a..b).collect());
        }
        Some(
            v.split(',')
                .map(|x| x.parse().unwrap_or_else(|_| self.fail(format!("{}: bad list {}", key, v))))
                .collect(),
        )
    }
    fn tokens(&self) -> Vec<i32> {
        self.list("tokens")
            .unwrap_or_else(|| self.fail("missing tokens="))
            .into_iter()
            .map(|t| t as i32)
            .collect()
    }
    fn expect_i64(&self, key: &str, actual: i64) {
        if let Some(want) = self.i64(key) {
            if want != actual {
                self.fail(format!("{}: expected {}, got {}", key, want, actual));
            }
        }
    }
    fn expect_list(&self, key: &str, actual: &[i64]) {
        if let Some(want) = self.list(key) {
            if want != actual {
                self.fail(format!("{}: expected {:?}, got {:?}", key, want, actual));
            }
        }
    }
    /// Keys from lora/salt/priority/max_cached, or None when the line gives none (the API's
    /// "no keys").
    fn keys(&self) -> Option<Keys> {
        let (lora, salt, priority) = (self.get("lora"), self.get("salt"), self.get("priority"));
        let max_cached = self.i64("max_cached");
        if lora.is_none() && salt.is_none() && priority.is_none() && max_cached.is_none() {
            return None;
        }
        let mut keys = Keys::new().unwrap();
        if let Some(l) = lora {
            keys.set_lora(l.parse().unwrap_or_else(|_| self.fail("bad lora"))).unwrap();
        }
        if let Some(s) = salt {
            keys.set_salt(s).unwrap();
        }
        if let Some(p) = priority {
            keys.set_priority(p.parse().unwrap_or_else(|_| self.fail("bad priority"))).unwrap();
        }
        if let Some(m) = max_cached {
            keys.set_max_cached_tokens(m).unwrap();
        }
        Some(keys)
    }
}

fn parse(text: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let content = raw.split('#').next().unwrap_or("");
        let mut words = content.split_whitespace();
        let op = match words.next() {
            Some(op) => op,
            None => continue,
        };
        let mut line = Line { no: i + 1, op: op.to_string(), keys: HashMap::new(), used: Default::default() };
        for w in words {
            let (k, v) = w.split_once('=').unwrap_or_else(|| line.fail(format!("'{}' is not key=value", w)));
            line.keys.insert(k.to_string(), v.to_string());
        }
        lines.push(line);
    }
    lines
}

/// Runs one line; the outputs are compared inside when the call succeeds.
fn run(pool: &mut Option<Pool>, l: &Line) -> kvc::Result<()> {
    match l.op.as_str() {
        "pool" => {
            let cfg = PoolConfig {
                block_size: l.need_i64("block_size") as i32,
                num_blocks: l.need_i64("num_blocks"),
                watermark: l.need("watermark").parse().unwrap_or_else(|_| l.fail("bad watermark")),
                prefix_caching: l.need_i64("prefix_caching") != 0,
                max_seq_len: l.i64("max_seq_len").unwrap_or(0),
                backend: Backend::NONE,
                ..PoolConfig::default()
            };
            *pool = Some(Pool::new(&cfg)?);
            return Ok(());
        }
        "destroy" => {
            *pool = None;
            return Ok(());
        }
        _ => {}
    }
    let p = pool.as_ref().unwrap_or_else(|| l.fail("no pool"));
    match l.op.as_str() {
        "alloc" => {
            let cached = p.alloc(l.need_u64("seq"), &l.tokens(), l.keys().as_ref())?;
            l.expect_i64("cached", cached);
        }
        "can_alloc" => {
            let verdict = p.can_alloc(&l.tokens(), l.keys().as_ref())?;
            let want = l.need("verdict");
            let want =
                AllocVerdict::from_name(want).unwrap_or_else(|| l.fail(format!("unknown verdict {}", want)));
            if want != verdict {
                l.fail(format!("verdict: expected {}, got {}", want.name(), verdict.name()));
            }
        }
        "lookup" => {
            let cached = p.prefix_lookup(&l.tokens(), l.keys().as_ref())?;
            l.expect_i64("cached", cached);
        }
        "append" => {
            let new_blocks = p.append(l.need_u64("seq"), &l.tokens(), l.i64("lookahead").unwrap_or(0))?;
            l.expect_i64("new_blocks", new_blocks as i64);
        }
        "truncate" => {
            let freed_blocks = p.truncate(l.need_u64("seq"), l.need_i64("num_tokens"))?;
            l.expect_i64("freed_blocks", freed_blocks as i64);
        }
        "set_window" => {
            let window = l.need_i64("window");
            p.set_sliding_window(i32::try_from(window).unwrap_or_else(|_| l.fail("window is not an i32")))?
        }
        "get_window" => l.expect_i64("window", i64::from(p.sliding_window()?)),
        "fork" => p.fork(l.need_u64("parent"), l.need_u64("child"))?,
        "free" => p.free(l.need_u64("seq"))?,
        "table" => {
            let table: Vec<i64> = p.block_table(l.need_u64("seq"))?.into_iter().map(i64::from).collect();
            l.expect_i64("len", table.len() as i64);
            l.expect_list("blocks", &table);
        }
        "num_tokens" => {
            let n = p.num_tokens(l.need_u64("seq"))?;
            l.expect_i64("value", n);
        }
        "slots" => {
            let slots = p.slot_mapping(l.need_u64("seq"), l.need_i64("first"), l.need_i64("count"))?;
            l.expect_list("values", &slots);
        }
        "pending_copies" => {
            let pairs = p.take_pending_copies()?;
            l.expect_i64("count", pairs.len() as i64);
            l.expect_list("src", &pairs.iter().map(|c| c.src as i64).collect::<Vec<_>>());
            l.expect_list("dst", &pairs.iter().map(|c| c.dst as i64).collect::<Vec<_>>());
        }
        "stats" => {
            let s = p.stats()?;
            l.expect_i64("free_blocks", s.free_blocks);
            l.expect_i64("used_blocks", s.used_blocks);
            l.expect_i64("num_seqs", s.num_seqs);
            l.expect_i64("cow_copies", s.cow_copies);
            l.expect_i64("prefix_hit_tokens", s.prefix_hit_tokens);
            l.expect_i64("prefix_query_tokens", s.prefix_query_tokens);
            l.expect_i64("cached_free_blocks", s.cached_free_blocks);
            l.expect_i64("evictions", s.evictions);
            l.expect_i64("allocs", s.allocs);
            l.expect_i64("frees", s.frees);
        }
        "check" => p.check()?,
        "reset" => p.prefix_cache_reset()?,
        other => l.fail(format!("unknown op {}", other)),
    }
    Ok(())
}

#[test]
fn conformance_scenario() {
    let path: PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "..", "..", "..", "tests", "conformance", "scenario.kvc"]
            .iter()
            .collect();
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {}", path.display(), e));
    let mut pool = None;
    let (mut ops, mut errors) = (0, 0);
    for l in parse(&text) {
        let want = match l.get("expect") {
            Some(name) => {
                Status::from_name(name).unwrap_or_else(|| l.fail(format!("unknown status {}", name)))
            }
            None => Status::OK,
        };
        match run(&mut pool, &l) {
            Ok(()) if want == Status::OK => {
                let used = l.used.borrow();
                if let Some(k) = l.keys.keys().find(|k| !used.contains(k)) {
                    l.fail(format!("unknown key {}", k));
                }
            }
            Ok(()) => l.fail(format!("status: expected {}, got OK", want)),
            Err(e) if e.status() == want => {
                assert!(!e.message().is_empty(), "line {}: {} without a message", l.no, want);
            }
            Err(e) => l.fail(format!("status: expected {}, got {}", want, e)),
        }
        ops += 1;
        errors += (want != Status::OK) as usize;
    }
    // The scenario may not shrink to nothing (or lose its error cases) unnoticed.
    assert!(ops >= 100 && errors >= 15, "{} ops, {} expected errors", ops, errors);
}
