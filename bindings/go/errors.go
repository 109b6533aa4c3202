package kvc

import (
	"errors"
	"runtime"
	"strings"

	"kvc.dev/kvc/internal/raw"
)

// Error is the error returned by every failing call: the library status, the library's message for
// the failing call (kvc_last_error of the calling OS thread) and the Go operation that failed.
type Error struct {
	Status  Status
	Message string
	Op      string
	closed  bool
}

// ErrClosed is matched (errors.Is) by the error returned when a closed Pool, Keys or Batch is used.
// Such an error has status ErrState.
var ErrClosed = errors.New("kvc: use of a closed object")

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Status.String()
	}
	return "kvc: " + e.Op + ": " + msg
}

// Is reports whether target is this error's status sentinel (errors.Is(err, kvc.ErrOutOfBlocks)) or
// ErrClosed for a use-after-close error.
func (e *Error) Is(target error) bool {
	if s, ok := target.(Status); ok {
		return s == e.Status
	}
	return e.closed && target == ErrClosed
}

func closedError(op string) error {
	return &Error{Status: ErrState, Message: "object is closed", Op: op, closed: true}
}

// argError reports bad input caught by the binding before the C call (for example a host buffer
// shorter than the shape requires), with the status the library would use.
func argError(op string, status Status, msg string) error {
	return &Error{Status: status, Message: msg, Op: op}
}

// nulError refuses a string argument holding a NUL byte (C would silently truncate it) with
// ErrInvalidArg naming op and what; nil otherwise.
func nulError(op, what, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return argError(op, ErrInvalidArg, what+" contains a NUL byte")
	}
	return nil
}

// callC runs one C call pinned to the current OS thread and, when it fails, reads that thread's
// last-error message before unpinning (see the package comment).
func callC(op string, f func() raw.Enum_SS_kvc_status) error {
	runtime.LockOSThread()
	st := f()
	if st == 0 {
		runtime.UnlockOSThread()
		return nil
	}
	msg := raw.Kvc_last_error()
	runtime.UnlockOSThread()
	return &Error{Status: Status(st), Message: msg, Op: op}
}

// nonNil gives nil slices a non-nil empty backing array, so that the library sees a valid pointer
// with a zero count: for this package a nil slice and an empty slice mean the same thing.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
