package kvc

import "kvc.dev/kvc/internal/raw"

// Status is a libkvc status code (kvc_status). The non-zero values are the sentinels to use with
// errors.Is; a Status is itself an error so that it can be one.
type Status int32

// The libkvc status codes, with the values of kvc.h (a test checks them against the generated layer).
const (
	OK                Status = 0
	ErrNullArg        Status = 1
	ErrInvalidArg     Status = 2
	ErrOverflow       Status = 3
	ErrNoMemory       Status = 4
	ErrOutOfBlocks    Status = 5
	ErrUnknownSeq     Status = 6
	ErrSeqExists      Status = 7
	ErrBufferTooSmall Status = 8
	ErrMaxLen         Status = 9
	ErrBusy           Status = 10
	ErrUnsupported    Status = 11
	ErrDevice         Status = 12
	ErrIO             Status = 13
	ErrVersion        Status = 14
	ErrState          Status = 15
	ErrInternal       Status = 16
)

// String is the library's static description of the status (kvc_status_str).
func (s Status) String() string { return raw.Kvc_status_str(int(s)) }

// Error makes a Status usable as a sentinel error value.
func (s Status) Error() string { return "kvc: " + s.String() }
