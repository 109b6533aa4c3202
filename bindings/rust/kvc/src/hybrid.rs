//! Hybrid models (kvc.h, "Hybrid models"): one pool whose layers form several KV-cache groups
//! (full attention, sliding-window attention, SSM state) sharing one block pool. A sequence has
//! one block table per group; `alloc`, `append`, `fork`, `free` act on all of them at once.
use std::ptr::NonNull;

use kvc_sys as sys;

use crate::config::PoolConfig;
use crate::error::{check, to_len, Error, Result, Status};
use crate::pool::Pool;
use crate::types::GroupKind;

/// Most groups a hybrid pool may have (`KVC_MAX_GROUPS`).
pub const MAX_GROUPS: usize = sys::KVC_MAX_GROUPS as usize;

/// One KV-cache group of a hybrid pool (`kvc_group_config`). `GroupConfig::default()` holds the
/// library's defaults (`kvc_group_config_default`: a FULL group of one layer, one KV head of
/// dimension 128); change the fields you need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// The group's kind.
    pub kind: GroupKind,
    /// Layers of this group, >= 1; the pool's `layer_to_group` names them.
    pub num_layers: i32,
    /// FULL / SLIDING: KV heads, >= 1; SSM: ignored.
    pub num_kv_heads: i32,
    /// FULL / SLIDING: head dimension, >= 1; SSM: ignored.
    pub head_dim: i32,
    /// SLIDING: window in tokens, >= 1; must be 0 for the other kinds.
    pub sliding_window: i32,
    /// SSM: bytes of one layer's state for one sequence, >= 1; 0 otherwise.
    pub state_bytes: i64,
}

fn raw_group_defaults() -> sys::kvc_group_config {
    // SAFETY: kvc_group_config is plain integers: all-zero is a valid value.
    let mut raw: sys::kvc_group_config = unsafe { std::mem::zeroed() };
    // SAFETY: raw is a valid, writable kvc_group_config. Only a NULL pointer can make it fail.
    let status = unsafe { sys::kvc_group_config_default(&mut raw) };
    debug_assert_eq!(status, sys::KVC_OK);
    raw
}

impl Default for GroupConfig {
    fn default() -> GroupConfig {
        let raw = raw_group_defaults();
        GroupConfig {
            kind: GroupKind(raw.kind),
            num_layers: raw.num_layers,
            num_kv_heads: raw.num_kv_heads,
            head_dim: raw.head_dim,
            sliding_window: raw.sliding_window,
            state_bytes: raw.state_bytes,
        }
    }
}

impl GroupConfig {
    /// The C struct, starting from the library's defaults so `struct_size` is set by the library.
    fn to_raw(&self) -> sys::kvc_group_config {
        let mut raw = raw_group_defaults();
        raw.kind = self.kind.0;
        raw.num_layers = self.num_layers;
        raw.num_kv_heads = self.num_kv_heads;
        raw.head_dim = self.head_dim;
        raw.sliding_window = self.sliding_window;
        raw.state_bytes = self.state_bytes;
        raw
    }
}

/// One group of a pool as created (`kvc_group_info`, [`Pool::group_info`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupInfo {
    /// Groups of the pool (1 for a pool from [`Pool::new`]).
    pub num_groups: i32,
    pub kind: GroupKind,
    /// Layers of the group.
    pub num_layers: i32,
    /// FULL / SLIDING; 0 for SSM.
    pub num_kv_heads: i32,
    /// FULL / SLIDING; 0 for SSM.
    pub head_dim: i32,
    /// SLIDING: the window; 0 otherwise.
    pub sliding_window: i32,
    /// SSM: one layer's state; 0 otherwise.
    pub state_bytes: i64,
    /// Bytes of a page this group uses (the rest is padding).
    pub group_bytes: i64,
    /// Bytes of every page of the pool (the storage's block stride).
    pub page_bytes: i64,
    /// Bytes between two layers of this group inside a page.
    pub layer_stride: i64,
}

impl Pool {
    /// Creates a pool for a hybrid model (`kvc_pool_create_hybrid`): `groups.len()` KV-cache
    /// groups sharing one block pool; `layer_to_group[l]` is the group of model layer `l`.
    /// `config`'s shape (num_layers, num_kv_heads, head_dim) is not read: it comes from the groups
    /// ([`Pool::config`] then reports the model's layers and the first attention group's heads).
    pub fn create_hybrid(
        config: &PoolConfig,
        groups: &[GroupConfig],
        layer_to_group: &[i32],
    ) -> Result<Pool> {
        let raw_config = config.to_raw();
        let raw_groups: Vec<sys::kvc_group_config> = groups.iter().map(GroupConfig::to_raw).collect();
        let num_groups = i32::try_from(groups.len()).map_err(|_| {
            Error::new(Status::INVALID_ARG, format!("kvc::Pool::create_hybrid: {} groups", groups.len()))
        })?;
        let num_layers = i32::try_from(layer_to_group.len()).map_err(|_| {
            Error::new(
                Status::INVALID_ARG,
                format!("kvc::Pool::create_hybrid: {} layers", layer_to_group.len()),
            )
        })?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid config and out-pointer; raw_groups holds num_groups entries and
        // layer_to_group num_layers entries (dangling but non-NULL when empty: the library
        // refuses a count of 0 before reading).
        check(unsafe {
            sys::kvc_pool_create_hybrid(
                &raw_config,
                raw_groups.as_ptr(),
                num_groups,
                layer_to_group.as_ptr(),
                num_layers,
                &mut raw,
            )
        })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::INTERNAL, "kvc_pool_create_hybrid returned OK and NULL"))?;
        Pool::from_created(raw, config)
    }

    /// Describes group `group` of the pool (`kvc_pool_get_group_info`); a plain pool has one
    /// group. A group out of range is `Status::INVALID_ARG`.
    pub fn group_info(&self, group: i32) -> Result<GroupInfo> {
        // SAFETY: plain data; zero is valid, struct_size set below.
        let mut raw: sys::kvc_group_info = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::kvc_group_info>() as u32;
        // SAFETY: live pool, valid out-pointer of the declared size.
        check(unsafe { sys::kvc_pool_get_group_info(self.raw(), group, &mut raw) })?;
        Ok(GroupInfo {
            num_groups: raw.num_groups,
            kind: GroupKind(raw.kind),
            num_layers: raw.num_layers,
            num_kv_heads: raw.num_kv_heads,
            head_dim: raw.head_dim,
            sliding_window: raw.sliding_window,
            state_bytes: raw.state_bytes,
            group_bytes: raw.group_bytes,
            page_bytes: raw.page_bytes,
            layer_stride: raw.layer_stride,
        })
    }

    /// The group of model layer `layer` and the layer's index among that group's layers
    /// (`kvc_pool_layer_group`). A layer out of range is `Status::INVALID_ARG`.
    pub fn layer_group(&self, layer: i32) -> Result<(i32, i32)> {
        let (mut group, mut index) = (0, 0);
        // SAFETY: live pool, valid out-pointers.
        check(unsafe { sys::kvc_pool_layer_group(self.raw(), layer, &mut group, &mut index) })?;
        Ok((group, index))
    }

    /// Group `group`'s block table of `seq_id` (`kvc_seq_group_block_table`); released entries
    /// (a SLIDING group's window, an SSM group's older pages) read -1. Group 0 is
    /// [`Pool::block_table`].
    pub fn group_block_table(&self, seq_id: u64, group: i32) -> Result<Vec<i32>> {
        loop {
            let mut len = 0;
            // SAFETY: size query (NULL, 0) with a valid out_len.
            check(unsafe {
                sys::kvc_seq_group_block_table(self.raw(), seq_id, group, std::ptr::null_mut(), 0, &mut len)
            })?;
            let mut table = vec![0i32; to_len(len, "block table length")?];
            // SAFETY: table holds table.len() writable entries.
            let status = unsafe {
                sys::kvc_seq_group_block_table(
                    self.raw(),
                    seq_id,
                    group,
                    table.as_mut_ptr(),
                    table.len() as i64,
                    &mut len,
                )
            };
            // Another thread may grow the sequence between the two calls: ask again.
            if status == sys::KVC_ERR_BUFFER_TOO_SMALL {
                continue;
            }
            check(status)?;
            table.truncate(to_len(len, "block table length")?);
            return Ok(table);
        }
    }
}
