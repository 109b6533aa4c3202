package kvc

import (
	"runtime"
	"sync"

	"kvc.dev/kvc/internal/raw"
)

// Keys is a kvc_keys: what besides token ids identifies a block's KV content (LoRA adapter, cache
// salt, multimodal items), the retention priority and the prefix hit cap. Pass nil where no keys are needed. Safe for
// concurrent use: setters are serialised against the pool calls reading the keys.
type Keys struct {
	mu sync.RWMutex
	h  raw.Struct_SS_kvc_keys // nil once closed
}

// Priority bounds of SetPriority.
const (
	PriorityMin     = 0
	PriorityMax     = 100
	PriorityDefault = 50
	MaxSaltLen      = 256
)

// NewKeys creates an empty key set (kvc_keys_create). Close it when done.
func NewKeys() (*Keys, error) {
	var out [1]uintptr
	if err := callC("NewKeys", func() raw.Enum_SS_kvc_status { return raw.Kvc_keys_create(out[:]) }); err != nil {
		return nil, err
	}
	k := &Keys{h: raw.SwigcptrStruct_SS_kvc_keys(out[0])}
	runtime.SetFinalizer(k, (*Keys).Close)
	return k, nil
}

// Close destroys the key set (kvc_keys_destroy). Calling it again does nothing.
func (k *Keys) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.h == nil {
		return nil
	}
	raw.Kvc_keys_destroy(k.h)
	k.h = nil
	runtime.SetFinalizer(k, nil)
	return nil
}

// read runs f with the keys' handle under their read lock, so setters cannot change them during
// the call; nil keys pass a nil handle (no keys).
func (k *Keys) read(op string, f func(h raw.Struct_SS_kvc_keys) error) error {
	if k == nil {
		return f(nil)
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.h == nil {
		return closedError(op)
	}
	return f(k.h)
}

func (k *Keys) set(op string, f func(h raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.h == nil {
		return closedError(op)
	}
	return callC(op, func() raw.Enum_SS_kvc_status { return f(k.h) })
}

// Clear resets the keys to empty so they can serve another request (kvc_keys_clear).
func (k *Keys) Clear() error { return k.set("Keys.Clear", raw.Kvc_keys_clear) }

// SetLoRA sets the LoRA adapter id; 0 means none (kvc_keys_set_lora).
func (k *Keys) SetLoRA(loraID uint64) error {
	return k.set("Keys.SetLoRA", func(h raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status { return raw.Kvc_keys_set_lora(h, loraID) })
}

// SetSalt sets the cache salt (tenant isolation); "" means none (kvc_keys_set_salt). A salt with a
// NUL byte is rejected with ErrInvalidArg (C would silently truncate it).
func (k *Keys) SetSalt(salt string) error {
	if err := nulError("Keys.SetSalt", "salt", salt); err != nil {
		return err
	}
	return k.set("Keys.SetSalt", func(h raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status { return raw.Kvc_keys_set_salt(h, salt) })
}

// AddMultimodal adds a multimodal item: a 128-bit content hash covering prompt tokens
// [offset, offset+length), in increasing non-overlapping order (kvc_keys_add_mm).
func (k *Keys) AddMultimodal(hash Hash128, offset, length int64) error {
	return k.set("Keys.AddMultimodal", func(h raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_keys_add_mm(h, hash.Hi, hash.Lo, offset, length)
	})
}

// SetPriority sets the retention priority in [PriorityMin, PriorityMax] (kvc_keys_set_priority).
func (k *Keys) SetPriority(priority int32) error {
	return k.set("Keys.SetPriority", func(h raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_keys_set_priority(h, int(priority))
	})
}

// SetMaxCachedTokens caps the prefix hit of requests using these keys at maxTokens tokens, rounded
// down to a block boundary (kvc_keys_set_max_cached_tokens): CanAlloc, Alloc, PrefixLookup and
// PrefixLookupTiers take the longest hit of at most that many tokens (with a sliding window, the
// largest valid one below the cap) and the rest of the prompt is computed. For a model served
// from several pools, whose prefill must start at one position in all of them: look up each pool
// under the cap, lower the cap to the result until it stops changing, then allocate in every pool
// under it. -1 removes the cap (the default; Clear resets it). PrefixPin and PrefixUnpin ignore
// it. Values below -1 give ErrInvalidArg.
func (k *Keys) SetMaxCachedTokens(maxTokens int64) error {
	return k.set("Keys.SetMaxCachedTokens", func(h raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_keys_set_max_cached_tokens(h, maxTokens)
	})
}

// Hash128 is a 128-bit hash (block hashes, multimodal content hashes).
type Hash128 struct{ Hi, Lo uint64 }
