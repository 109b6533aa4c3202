//! Hybrid pools (`Pool::create_hybrid`, `group_info`, `layer_group`, `group_block_table`,
//! `Batch::set_group`; kvc.h "Hybrid models"): a FULL, a SLIDING and an SSM group sharing one block
//! pool. The block ids are deterministic; the expected tables are those a C run of the same steps
//! prints.
use kvc::{Backend, GroupConfig, GroupKind, Pool, PoolConfig, MAX_GROUPS};

const LAYER_TO_GROUP: [i32; 5] = [0, 1, 2, 1, 0];

fn groups() -> Vec<GroupConfig> {
    vec![
        GroupConfig {
            kind: GroupKind::FULL,
            num_layers: 2,
            num_kv_heads: 2,
            head_dim: 8,
            ..GroupConfig::default()
        },
        GroupConfig {
            kind: GroupKind::SLIDING,
            num_layers: 2,
            num_kv_heads: 2,
            head_dim: 8,
            sliding_window: 6,
            ..GroupConfig::default()
        },
        GroupConfig { kind: GroupKind::SSM, num_layers: 1, state_bytes: 1000, ..GroupConfig::default() },
    ]
}

fn config() -> PoolConfig {
    PoolConfig {
        block_size: 4,
        num_blocks: 64,
        watermark: 0.0,
        backend: Backend::NONE,
        ..PoolConfig::default()
    }
}

fn hybrid_pool() -> Pool {
    Pool::create_hybrid(&config(), &groups(), &LAYER_TO_GROUP).expect("create hybrid pool")
}

fn tokens(a: i32, b: i32) -> Vec<i32> {
    (a..=b).collect()
}

#[test]
fn group_config_defaults() {
    assert_eq!(MAX_GROUPS, 8);
    let g = GroupConfig::default();
    assert_eq!(g.kind, GroupKind::FULL);
    assert_eq!((g.num_layers, g.num_kv_heads, g.head_dim), (1, 1, 128));
    assert_eq!((g.sliding_window, g.state_bytes), (0, 0));
    assert_eq!(GroupKind::SSM.name(), "SSM");
    assert_eq!(GroupKind::from_name("SLIDING"), Some(GroupKind::SLIDING));
}

#[test]
fn group_info_and_layer_group() {
    let pool = hybrid_pool();
    let want = [
        (GroupKind::FULL, 2, 2, 8, 0, 0, 512),
        (GroupKind::SLIDING, 2, 2, 8, 6, 0, 512),
        (GroupKind::SSM, 1, 0, 0, 0, 1000, 1000),
    ];
    for (g, &(kind, layers, heads, dim, window, state, bytes)) in want.iter().enumerate() {
        let info = pool.group_info(g as i32).unwrap();
        assert_eq!(info.num_groups, 3, "group {}", g);
        assert_eq!(info.kind, kind, "group {}", g);
        assert_eq!((info.num_layers, info.num_kv_heads, info.head_dim), (layers, heads, dim), "group {}", g);
        assert_eq!((info.sliding_window, info.state_bytes), (window, state), "group {}", g);
        assert_eq!(info.group_bytes, bytes, "group {}", g);
        assert_eq!(info.page_bytes, 1024, "group {}", g);
    }
    // The model's shape as kvc_pool_get_config reports it: 5 layers, the first group's heads.
    let cfg = pool.config().unwrap();
    assert_eq!((cfg.num_layers, cfg.num_kv_heads, cfg.head_dim), (5, 2, 8));
    assert_eq!(pool.layer_group(3).unwrap(), (1, 1));
    assert_eq!(pool.layer_group(4).unwrap(), (0, 1));
    assert_eq!(pool.layer_group(2).unwrap(), (2, 0));

    let err = pool.group_info(3).unwrap_err();
    assert!(err.is_invalid_arg(), "{}", err);
    assert!(err.message().contains("kvc_pool_get_group_info"), "{}", err);
    let err = pool.group_info(-1).unwrap_err();
    assert!(err.is_invalid_arg(), "{}", err);
    let err = pool.layer_group(5).unwrap_err();
    assert!(err.is_invalid_arg(), "{}", err);
    assert!(err.message().contains("kvc_pool_layer_group"), "{}", err);

    // A plain pool has one group.
    let plain =
        Pool::new(&PoolConfig { num_blocks: 8, backend: Backend::NONE, ..PoolConfig::default() }).unwrap();
    let info = plain.group_info(0).unwrap();
    assert_eq!((info.num_groups, info.kind), (1, GroupKind::FULL));
    assert!(plain.group_info(1).unwrap_err().is_invalid_arg());
}

#[test]
fn bad_hybrid_configs_are_invalid_arg() {
    // A SLIDING group without a window.
    let mut bad = groups();
    bad[1].sliding_window = 0;
    let err = Pool::create_hybrid(&config(), &bad, &LAYER_TO_GROUP).unwrap_err();
    assert!(err.is_invalid_arg(), "{}", err);
    assert!(err.message().contains("kvc_pool_create_hybrid"), "{}", err);
    // An SSM group without state.
    let mut bad = groups();
    bad[2].state_bytes = 0;
    assert!(Pool::create_hybrid(&config(), &bad, &LAYER_TO_GROUP).unwrap_err().is_invalid_arg());
    // A layer naming no group, too few layers, no groups at all.
    assert!(Pool::create_hybrid(&config(), &groups(), &[0, 1, 3, 1, 0]).unwrap_err().is_invalid_arg());
    assert!(Pool::create_hybrid(&config(), &groups(), &[0, 1, 2, 1]).unwrap_err().is_invalid_arg());
    assert!(Pool::create_hybrid(&config(), &[], &[]).unwrap_err().is_invalid_arg());
    assert!(Pool::create_hybrid(&config(), &vec![GroupConfig::default(); MAX_GROUPS + 1], &[0; 9])
        .unwrap_err()
        .is_invalid_arg());
}

#[test]
fn group_block_tables_and_coordinated_prefix_hit() {
    let pool = hybrid_pool();
    assert_eq!(pool.alloc(1, &tokens(1, 18), None).unwrap(), 0);
    assert_eq!(pool.group_block_table(1, 0).unwrap(), vec![0, 1, 2, 3, 4]);
    assert_eq!(pool.group_block_table(1, 1).unwrap(), vec![5, 6, 7, 8, 9]);
    assert_eq!(pool.group_block_table(1, 2).unwrap(), vec![10, 11, 12, 13, 14]);
    assert_eq!(pool.block_table(1).unwrap(), pool.group_block_table(1, 0).unwrap());

    for t in 19..=26 {
        pool.append(1, &[t], 0).unwrap();
    }
    assert_eq!(pool.num_tokens(1).unwrap(), 26);
    assert_eq!(pool.group_block_table(1, 0).unwrap(), vec![0, 1, 2, 3, 4, 15, 18]);
    assert_eq!(pool.group_block_table(1, 1).unwrap(), vec![-1, -1, -1, -1, 9, 16, 19]);
    assert_eq!(pool.group_block_table(1, 2).unwrap(), vec![-1, -1, -1, -1, -1, -1, 20]);

    // Every group can resume after 24 tokens (6 blocks): FULL has them all, SLIDING the blocks
    // its window reads at position 24, SSM the state page of block 5.
    assert_eq!(pool.alloc(2, &tokens(1, 30), None).unwrap(), 24);
    assert_eq!(pool.group_block_table(2, 0).unwrap(), vec![0, 1, 2, 3, 4, 15, 21, 22]);
    assert_eq!(pool.group_block_table(2, 1).unwrap(), vec![-1, -1, -1, -1, 9, 16, 23, 24]);
    assert_eq!(pool.group_block_table(2, 2).unwrap(), vec![-1, -1, -1, -1, -1, 17, 25, 26]);
    pool.check().unwrap();

    let err = pool.group_block_table(1, 3).unwrap_err();
    assert!(err.is_invalid_arg(), "{}", err);
    assert!(err.message().contains("kvc_seq_group_block_table"), "{}", err);
    assert!(pool.group_block_table(99, 0).unwrap_err().is_unknown_seq());

    pool.free(1).unwrap();
    pool.free(2).unwrap();
    pool.check().unwrap();
}

#[test]
fn batch_set_group() {
    let pool = hybrid_pool();
    pool.alloc(1, &tokens(1, 18), None).unwrap();
    let mut batch = pool.batch(4, 64, 16).unwrap();
    batch.set_group(0).unwrap();
    batch.build(&[1], &[18]).unwrap();
    assert_eq!(batch.info().unwrap().num_seqs, 1);
    // Group 2 is the SSM group (no block tables to launch over); 3 is out of range.
    let err = batch.set_group(2).unwrap_err();
    assert!(err.is_invalid_arg(), "{}", err);
    let err = batch.set_group(3).unwrap_err();
    assert!(err.is_invalid_arg(), "{}", err);
    assert!(batch.set_group(-1).unwrap_err().is_invalid_arg());
}
