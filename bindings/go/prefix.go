package kvc

import "kvc.dev/kvc/internal/raw"

// PrefixLookup is how many leading tokens of this prompt are cached now, with no side effects
// (kvc_prefix_lookup).
func (p *Pool) PrefixLookup(tokens []int32, keys *Keys) (int64, error) {
	var n [1]int64
	err := p.doKeys("PrefixLookup", keys, func(h raw.Struct_SS_kvc_pool, k raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_prefix_lookup(h, nonNil(tokens), int64(len(tokens)), k, n[:])
	})
	return n[0], err
}

// PrefixPin pins the cached full blocks of this prefix against eviction and returns the tokens
// covered (kvc_prefix_pin). Pins nest. With a sliding window only the blocks a hit at the prefix's
// end reads are pinned (kvc.h).
func (p *Pool) PrefixPin(tokens []int32, keys *Keys) (int64, error) {
	var n [1]int64
	err := p.doKeys("PrefixPin", keys, func(h raw.Struct_SS_kvc_pool, k raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_prefix_pin(h, nonNil(tokens), int64(len(tokens)), k, n[:])
	})
	return n[0], err
}

// PrefixUnpin undoes one PrefixPin of the same prefix and returns the tokens covered
// (kvc_prefix_unpin). With overlapping prefixes pinned, pass the tokens PrefixPin covered.
func (p *Pool) PrefixUnpin(tokens []int32, keys *Keys) (int64, error) {
	var n [1]int64
	err := p.doKeys("PrefixUnpin", keys, func(h raw.Struct_SS_kvc_pool, k raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_prefix_unpin(h, nonNil(tokens), int64(len(tokens)), k, n[:])
	})
	return n[0], err
}

// HashBlocks returns the chained hashes of the prompt's full blocks, block 0 first, exactly as a pool
// with this block size and these keys computes them and reports them in its events
// (kvc_hash_blocks); the partial last block has none. No pool is needed: a KV-aware router predicts
// hits with it. keys may be nil; only its LoRA id, salt and multimodal items count. The bytes
// hashed are specified in the libkvc README ("Block hash specification").
func HashBlocks(blockSize int32, tokens []int32, keys *Keys) ([]Hash128, error) {
	full := int64(0)
	if blockSize > 0 {
		full = int64(len(tokens)) / int64(blockSize)
	}
	hi, lo := make([]uint64, full), make([]uint64, full)
	var n [1]int64
	err := keys.read("HashBlocks", func(k raw.Struct_SS_kvc_keys) error {
		return callC("HashBlocks", func() raw.Enum_SS_kvc_status {
			return raw.Kvc_hash_blocks(int(blockSize), k, nonNil(tokens), int64(len(tokens)), hi, lo, full, n[:])
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]Hash128, n[0])
	for i := range out {
		out[i] = Hash128{Hi: hi[i], Lo: lo[i]}
	}
	return out, nil
}

// ResetPrefixCache drops every cached block (kvc_prefix_cache_reset); ErrBusy while blocks are in
// use or pinned.
func (p *Pool) ResetPrefixCache() error {
	return p.do("ResetPrefixCache", raw.Kvc_prefix_cache_reset)
}

// EventType is a kvc_event_type.
type EventType int32

const (
	EventBlockStored      EventType = 1 // a full block entered the cache (a copy of a cached hash too)
	EventBlockRemoved     EventType = 2 // a cached block left it; other copies of its hash stay
	EventAllBlocksCleared EventType = 3 // ResetPrefixCache
)

// Event is a KV event for KV-aware routers (kvc_event), one per block.
type Event struct {
	Type            EventType
	Hash            Hash128 // the block's chained hash
	ParentHash      Hash128 // previous block's hash (the fixed seed for block 0)
	LoRAID          uint64  // BlockStored: the block's LoRA adapter (0 = none)
	ExtraKeysDigest uint64  // BlockStored: digest of salt/multimodal keys (0 = none)
	BlockID         int32
	Tokens          []int32 // BlockStored: the block's token ids
	SequenceNumber  uint64  // +1 per event produced; a gap means events were dropped
	Tier            Tier    // the tier the block entered or left (host/disk only after SetTierEvents)
}

// SetTierEvents makes KV events report the host and disk tiers too (kvc_pool_set_tier_events): a
// block spilled from the device is BlockRemoved (device) then BlockStored (host) once copied, and
// so on down to disk; BlockID is then the slot in that tier. Off by default; ErrUnsupported when
// the pool has no event ring (EventCapacity 0).
func (p *Pool) SetTierEvents(on bool) error {
	v := 0
	if on {
		v = 1
	}
	return p.do("SetTierEvents", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_pool_set_tier_events(h, v)
	})
}

// PopEvent pops the oldest pending event (kvc_event_pop); ok is false when none is pending.
func (p *Pool) PopEvent() (ev Event, ok bool, err error) {
	e := raw.NewKvc_event()
	defer raw.DeleteKvc_event(e)
	tokens := make([]int32, p.cfg.BlockSize)
	var has [1]int32
	err = p.do("PopEvent", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_event_pop(h, e, tokens, int64(len(tokens)), has[:])
	})
	if err != nil || has[0] == 0 {
		return Event{}, false, err
	}
	n := int(e.GetNum_tokens())
	if n < 0 || n > len(tokens) {
		n = 0
	}
	return Event{
		Type:            EventType(e.GetEvent_type()),
		Hash:            Hash128{e.GetHash_hi(), e.GetHash_lo()},
		ParentHash:      Hash128{e.GetParent_hash_hi(), e.GetParent_hash_lo()},
		LoRAID:          e.GetLora_id(),
		ExtraKeysDigest: e.GetExtra_keys_digest(),
		BlockID:         int32(e.GetBlock_id()),
		Tokens:          tokens[:n],
		SequenceNumber:  e.GetSequence_number(),
		Tier:            Tier(e.GetTier()),
	}, true, nil
}
