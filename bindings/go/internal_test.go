package kvc

// White-box checks of the generated layer: constants agree with the hand-written ones, and the
// last-error functions behave as the binding assumes.

import (
	"runtime"
	"strings"
	"testing"

	"kvc.dev/kvc/internal/raw"
)

func TestStatusValuesMatchHeader(t *testing.T) {
	pairs := []struct {
		mine Status
		gen  raw.Enum_SS_kvc_status
	}{
		{OK, raw.KVC_OK}, {ErrNullArg, raw.KVC_ERR_NULL_ARG}, {ErrInvalidArg, raw.KVC_ERR_INVALID_ARG},
		{ErrOverflow, raw.KVC_ERR_OVERFLOW}, {ErrNoMemory, raw.KVC_ERR_NO_MEMORY},
		{ErrOutOfBlocks, raw.KVC_ERR_OUT_OF_BLOCKS}, {ErrUnknownSeq, raw.KVC_ERR_UNKNOWN_SEQ},
		{ErrSeqExists, raw.KVC_ERR_SEQ_EXISTS}, {ErrBufferTooSmall, raw.KVC_ERR_BUFFER_TOO_SMALL},
		{ErrMaxLen, raw.KVC_ERR_MAX_LEN}, {ErrBusy, raw.KVC_ERR_BUSY}, {ErrUnsupported, raw.KVC_ERR_UNSUPPORTED},
		{ErrDevice, raw.KVC_ERR_DEVICE}, {ErrIO, raw.KVC_ERR_IO}, {ErrVersion, raw.KVC_ERR_VERSION},
		{ErrState, raw.KVC_ERR_STATE}, {ErrInternal, raw.KVC_ERR_INTERNAL},
	}
	for _, p := range pairs {
		if int(p.mine) != int(p.gen) {
			t.Errorf("status %v: binding value %d, header value %d", p.mine, int(p.mine), int(p.gen))
		}
	}
}

func TestEnumValuesMatchHeader(t *testing.T) {
	check := func(name string, mine, gen int) {
		if mine != gen {
			t.Errorf("%s: binding value %d, header value %d", name, mine, gen)
		}
	}
	check("F32", int(DTypeF32), int(raw.KVC_DTYPE_F32))
	check("F16", int(DTypeF16), int(raw.KVC_DTYPE_F16))
	check("BF16", int(DTypeBF16), int(raw.KVC_DTYPE_BF16))
	check("FP8", int(DTypeFP8E4M3), int(raw.KVC_DTYPE_FP8_E4M3))
	check("NONE", int(BackendNone), int(raw.KVC_BACKEND_NONE))
	check("CPU", int(BackendCPU), int(raw.KVC_BACKEND_CPU))
	check("CUDA", int(BackendCUDA), int(raw.KVC_BACKEND_CUDA))
	check("AUTO", int(BackendAuto), int(raw.KVC_BACKEND_AUTO))
	check("ALLOC_OK", int(AllocOK), int(raw.KVC_ALLOC_OK))
	check("ALLOC_LATER", int(AllocLater), int(raw.KVC_ALLOC_LATER))
	check("ALLOC_NEVER", int(AllocNever), int(raw.KVC_ALLOC_NEVER))
	check("STORED", int(EventBlockStored), int(raw.KVC_EVENT_BLOCK_STORED))
	check("REMOVED", int(EventBlockRemoved), int(raw.KVC_EVENT_BLOCK_REMOVED))
	check("CLEARED", int(EventAllBlocksCleared), int(raw.KVC_EVENT_ALL_BLOCKS_CLEARED))
	check("PRIORITY_MIN", PriorityMin, raw.KVC_PRIORITY_MIN)
	check("PRIORITY_MAX", PriorityMax, raw.KVC_PRIORITY_MAX)
	check("PRIORITY_DEFAULT", PriorityDefault, raw.KVC_PRIORITY_DEFAULT)
	check("MAX_SALT_LEN", MaxSaltLen, raw.KVC_MAX_SALT_LEN)
	check("MAX_DISK_IDENTITY_LEN", MaxDiskIdentityLen, raw.KVC_MAX_DISK_IDENTITY_LEN)
	check("DISK_KEY_MIN_LEN", DiskKeyMinLen, raw.KVC_DISK_KEY_MIN_LEN)
	check("DISK_KEY_MAX_LEN", DiskKeyMaxLen, raw.KVC_DISK_KEY_MAX_LEN)
	check("TIER_DEVICE", int(TierDevice), int(raw.KVC_TIER_DEVICE))
	check("TIER_HOST", int(TierHost), int(raw.KVC_TIER_HOST))
	check("TIER_DISK", int(TierDisk), int(raw.KVC_TIER_DISK))
	check("DISK_PERSISTENT", int(DiskPersistent), raw.KVC_DISK_PERSISTENT)
	check("DISK_NO_DIRECT", int(DiskNoDirect), raw.KVC_DISK_NO_DIRECT)
	check("GROUP_FULL", int(GroupFull), int(raw.KVC_GROUP_FULL))
	check("GROUP_SLIDING", int(GroupSliding), int(raw.KVC_GROUP_SLIDING))
	check("GROUP_SSM", int(GroupSSM), int(raw.KVC_GROUP_SSM))
	check("MAX_GROUPS", MaxGroups, raw.KVC_MAX_GROUPS)
}

// The message read by the binding is the one of the failing call on this OS thread, and
// kvc_last_error_copy agrees with kvc_last_error, truncating to the buffer.
func TestLastErrorFunctions(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := raw.Kvc_keys_set_priority(nil, 50); st != raw.KVC_ERR_NULL_ARG {
		t.Fatalf("kvc_keys_set_priority(NULL): status %d, want NULL_ARG", st)
	}
	msg := raw.Kvc_last_error()
	if msg == "" {
		t.Fatal("kvc_last_error is empty after a failing call")
	}
	var n [1]int64
	full := make([]byte, len(msg)+1)
	if st := raw.Kvc_last_error_copy(full, int64(len(full)), n[:]); st != raw.KVC_OK {
		t.Fatalf("kvc_last_error_copy: status %d", st)
	}
	if n[0] != int64(len(msg)) || string(full[:len(msg)]) != msg || full[len(msg)] != 0 {
		t.Errorf("kvc_last_error_copy gave %q (len %d), want %q", full, n[0], msg)
	}
	small := make([]byte, 4)
	if st := raw.Kvc_last_error_copy(small, 4, n[:]); st != raw.KVC_OK {
		t.Fatalf("kvc_last_error_copy (truncating): status %d", st)
	}
	if n[0] != int64(len(msg)) || string(small[:3]) != msg[:3] || small[3] != 0 {
		t.Errorf("truncated copy %q (len %d), want %q + NUL and full length %d", small, n[0], msg[:3], len(msg))
	}
	if st := raw.Kvc_last_error_copy(nil, 8, n[:]); st != raw.KVC_ERR_NULL_ARG {
		t.Errorf("kvc_last_error_copy(NULL, 8): status %d, want NULL_ARG", st)
	}
	// kvc_batch_set_stream has no safe-layer path to a NULL batch: its NULL check is tested here.
	if st := raw.Kvc_batch_set_stream(nil, 0); st != raw.KVC_ERR_NULL_ARG {
		t.Errorf("kvc_batch_set_stream(NULL): status %d, want NULL_ARG", st)
	} else if m := raw.Kvc_last_error(); !strings.Contains(m, "kvc_batch_set_stream") {
		t.Errorf("kvc_batch_set_stream(NULL): message %q does not name the function", m)
	}
	// A successful call does not clear the message.
	before := raw.Kvc_last_error()
	var count [1]int32
	if st := raw.Kvc_cuda_device_count(count[:]); st != raw.KVC_OK {
		t.Fatalf("kvc_cuda_device_count: status %d", st)
	}
	if after := raw.Kvc_last_error(); after != before || after == "" {
		t.Errorf("a successful call changed the message from %q to %q", before, after)
	}
}
