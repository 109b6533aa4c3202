package kvc

import (
	"kvc.dev/kvc/internal/raw"
)

// Tier is a kvc_tier: a level of KV memory.
type Tier int32

const (
	TierDevice Tier = 0
	TierHost   Tier = 1
	TierDisk   Tier = 2
)

// DiskFlags are the flags of AttachDiskTier.
type DiskFlags int32

const (
	// DiskPersistent keeps the file's blocks: re-attaching the same file with the same layout finds
	// them again (verified before use).
	DiskPersistent DiskFlags = 1
	// DiskNoDirect never tries O_DIRECT.
	DiskNoDirect DiskFlags = 2
)

// OpID identifies the copies of a SwapOut or SwapIn (for OpDone / OpWait).
type OpID uint64

// AttachHostTier gives the pool a host tier of numBlocks block slots, once (kvc_tier_attach_host).
func (p *Pool) AttachHostTier(numBlocks int64) error {
	return p.do("AttachHostTier", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_tier_attach_host(h, numBlocks)
	})
}

// AttachDiskTier gives the pool a disk tier of numBlocks slots in the file at path, below the host
// tier, once (kvc_tier_attach_disk). A path with a NUL byte is rejected with ErrInvalidArg.
func (p *Pool) AttachDiskTier(path string, numBlocks int64, flags DiskFlags) error {
	if err := nulError("AttachDiskTier", "path", path); err != nil {
		return err
	}
	return p.do("AttachDiskTier", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_tier_attach_disk(h, path, numBlocks, int(flags))
	})
}

// MaxDiskIdentityLen is the longest identity AttachDiskTierWithIdentity takes, in bytes.
const MaxDiskIdentityLen = 1024

// AttachDiskTierWithIdentity is AttachDiskTier for KV computed by identity — model and revision,
// KV dtype, and under tensor parallelism rank and world size (kvc_tier_attach_disk_with_identity).
// A DiskPersistent re-attach recovers only the blocks written under the same identity; the others
// count in TierStats.ForeignBlocks. "" is no identity. A path or identity with a NUL byte is
// rejected with ErrInvalidArg here; an identity longer than MaxDiskIdentityLen by the library.
func (p *Pool) AttachDiskTierWithIdentity(path string, numBlocks int64, flags DiskFlags, identity string) error {
	const op = "AttachDiskTierWithIdentity"
	if err := diskStringsError(op, path, identity); err != nil {
		return err
	}
	return p.do(op, func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_tier_attach_disk_with_identity(h, path, numBlocks, int(flags), identity)
	})
}

// DiskKeyMinLen and DiskKeyMaxLen bound the key AttachDiskTierKeyed takes, in bytes.
const (
	DiskKeyMinLen = 16
	DiskKeyMaxLen = 64
)

// AttachDiskTierKeyed is AttachDiskTierWithIdentity with every slot authenticated by a keyed MAC
// (kvc_tier_attach_disk_keyed), so that whoever can write the file but lacks the key cannot make
// it serve chosen KV: a slot whose MAC does not verify is a miss counted in ChecksumFailures, and
// a DiskPersistent re-attach with another key, or none, recovers none of the keyed slots (they
// count in ForeignBlocks). key holds DiskKeyMinLen..DiskKeyMaxLen bytes (a secret from the
// service's secret store); the library keeps its own copy, so the caller may wipe key on return.
// ErrUnsupported when libsodium (Debian libsodium23) cannot be loaded: no tier is attached then,
// authenticated or not. A nil key is ErrNullArg, a length out of range ErrInvalidArg.
func (p *Pool) AttachDiskTierKeyed(path string, numBlocks int64, flags DiskFlags, identity string, key []byte) error {
	const op = "AttachDiskTierKeyed"
	if err := diskStringsError(op, path, identity); err != nil {
		return err
	}
	return p.do(op, func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_tier_attach_disk_keyed(h, path, numBlocks, int(flags), identity, key, int64(len(key)))
	})
}

// diskStringsError refuses a disk path or identity with a NUL byte (C would cut it short).
func diskStringsError(op, path, identity string) error {
	if err := nulError(op, "path", path); err != nil {
		return err
	}
	return nulError(op, "identity", identity)
}

// FlushTiers writes every cached block the disk tier lacks to it — the host tier's, then the
// device's that no sequence uses — and returns the blocks queued (kvc_tier_flush). For a shutdown
// before a restart with DiskPersistent. ErrState without a disk tier.
func (p *Pool) FlushTiers() (int64, error) {
	var n [1]int64
	err := p.do("FlushTiers", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_tier_flush(h, n[:]) })
	return n[0], err
}

// SwapOut moves seq's exclusively owned blocks to the host tier (kvc_swap_out). Until SwapIn, the
// sequence is refused by Append, Fork, Batch.Build and SlotMapping (ErrState).
func (p *Pool) SwapOut(seq uint64) (OpID, error) {
	var op [1]uint64
	err := p.do("SwapOut", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_swap_out(h, seq, op[:]) })
	return OpID(op[0]), err
}

// SwapIn brings a swapped-out sequence back into fresh device blocks (kvc_swap_in).
func (p *Pool) SwapIn(seq uint64) (OpID, error) {
	var op [1]uint64
	err := p.do("SwapIn", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_swap_in(h, seq, op[:]) })
	return OpID(op[0]), err
}

// OpDone reports whether the copies of op have completed (kvc_op_query).
func (p *Pool) OpDone(op OpID) (bool, error) {
	var done [1]int32
	err := p.do("OpDone", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_op_query(h, uint64(op), done[:]) })
	return done[0] != 0, err
}

// OpWait blocks until the copies of op have completed (kvc_op_wait).
func (p *Pool) OpWait(op OpID) error {
	return p.do("OpWait", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_op_wait(h, uint64(op)) })
}

// PreemptRecompute frees seq and returns its confirmed token count, which the caller must prefill
// again (kvc_preempt_recompute).
func (p *Pool) PreemptRecompute(seq uint64) (tokensToRecompute int64, err error) {
	var n [1]int64
	err = p.do("PreemptRecompute", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_preempt_recompute(h, seq, n[:])
	})
	return n[0], err
}

// PreemptionCost is what each way of preempting a sequence would cost.
type PreemptionCost struct {
	SwapBytes       int64 // bytes SwapOut would move (SwapIn, for a swapped-out sequence)
	RecomputeTokens int64 // confirmed tokens a recomputation would prefill again
}

// PreemptionCost reports the cost of swapping seq versus recomputing it (kvc_preemption_cost).
func (p *Pool) PreemptionCost(seq uint64) (PreemptionCost, error) {
	var swap, rec [1]int64
	err := p.do("PreemptionCost", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_preemption_cost(h, seq, swap[:], rec[:])
	})
	return PreemptionCost{SwapBytes: swap[0], RecomputeTokens: rec[0]}, err
}

// TierHits splits a prefix lookup by tier: leading cached tokens on the device, in the host tier
// and in the disk tier.
type TierHits struct{ Device, Host, Disk int64 }

// PrefixLookupTiers is PrefixLookup split by tier, read-only (kvc_prefix_lookup_tiers).
func (p *Pool) PrefixLookupTiers(tokens []int32, keys *Keys) (TierHits, error) {
	var d, hst, dsk [1]int64
	err := p.doKeys("PrefixLookupTiers", keys, func(h raw.Struct_SS_kvc_pool, k raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_prefix_lookup_tiers(h, nonNil(tokens), int64(len(tokens)), k, d[:], hst[:], dsk[:])
	})
	return TierHits{Device: d[0], Host: hst[0], Disk: dsk[0]}, err
}

// PrefetchTiers reads the prompt's disk-tier prefix hits up into the host tier (verified), so that
// a later Alloc of it restores them from host memory instead of waiting for the disk
// (kvc_tier_prefetch). Call it from a goroutine of its own for a queued request. Returns the
// tokens Alloc would now find on the device and in the host tier. ErrState without a disk tier.
func (p *Pool) PrefetchTiers(tokens []int32, keys *Keys) (int64, error) {
	var n [1]int64
	err := p.doKeys("PrefetchTiers", keys, func(h raw.Struct_SS_kvc_pool, k raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_tier_prefetch(h, nonNil(tokens), int64(len(tokens)), k, n[:])
	})
	return n[0], err
}

// TierStats mirrors kvc_tier_stats: the state and traffic of one tier.
type TierStats struct {
	Tier               Tier
	DirectIO           bool // disk: O_DIRECT in use
	Persistent         bool // disk: DiskPersistent
	IOUring            bool // disk: io_uring in use (else pread/pwrite)
	CapacityBlocks     int64
	UsedBlocks         int64
	CachedBlocks       int64
	HeldBlocks         int64 // host: slots held by swapped-out sequences
	BytesUsed          int64
	BlocksIn           int64
	BlocksOut          int64
	BytesIn            int64
	BytesOut           int64
	Transfers          int64
	TransferSeconds    float64
	BandwidthBytesPerS float64
	Hits               int64
	Evictions          int64
	Failures           int64
	ChecksumFailures   int64
	IOErrors           int64
	RecoveredBlocks    int64 // disk: blocks re-indexed from a persistent file at attach
	ForeignBlocks      int64 // disk: slots of another identity or layout at that attach (reused)
	// Of CachedBlocks, those a prefix lookup can reach: every block before it in its prompt is
	// cached in some tier (device, host or disk). Counted by this call, walking every chain once.
	ReachableBlocks int64
}

// TierStats returns the statistics of one tier; an unattached tier reports capacity 0
// (kvc_tier_get_stats).
func (p *Pool) TierStats(tier Tier) (TierStats, error) {
	s := raw.NewKvc_tier_stats()
	defer raw.DeleteKvc_tier_stats(s)
	err := p.do("TierStats", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_tier_get_stats(h, int(tier), s) })
	if err != nil {
		return TierStats{}, err
	}
	return TierStats{
		Tier:               Tier(s.GetTier()),
		DirectIO:           s.GetDirect_io() != 0,
		Persistent:         s.GetPersistent() != 0,
		IOUring:            s.GetIo_uring() != 0,
		CapacityBlocks:     s.GetCapacity_blocks(),
		UsedBlocks:         s.GetUsed_blocks(),
		CachedBlocks:       s.GetCached_blocks(),
		HeldBlocks:         s.GetHeld_blocks(),
		BytesUsed:          s.GetBytes_used(),
		BlocksIn:           s.GetBlocks_in(),
		BlocksOut:          s.GetBlocks_out(),
		BytesIn:            s.GetBytes_in(),
		BytesOut:           s.GetBytes_out(),
		Transfers:          s.GetTransfers(),
		TransferSeconds:    s.GetTransfer_seconds(),
		BandwidthBytesPerS: s.GetBandwidth_bytes_per_s(),
		Hits:               s.GetHits(),
		Evictions:          s.GetEvictions(),
		Failures:           s.GetFailures(),
		ChecksumFailures:   s.GetChecksum_failures(),
		IOErrors:           s.GetIo_errors(),
		RecoveredBlocks:    s.GetRecovered_blocks(),
		ForeignBlocks:      s.GetForeign_blocks(),
		ReachableBlocks:    s.GetReachable_blocks(),
	}, nil
}
