package raw

// The library and header are found through pkg-config: set PKG_CONFIG_PATH to a directory holding
// kvc.pc (an install prefix's lib/pkgconfig, or the build tree's bindings/go/pkgconfig written by
// CMake). raw.go and raw_wrap.c next to this file are SWIG output, checked in (regen.sh).

// #cgo pkg-config: kvc
import "C"
