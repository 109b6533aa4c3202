package raw

// The library and header are found through pkg-config: set PKG_CONFIG_PATH to a directory holding
// kvc.pc (an install prefix's lib/pkgconfig, or the build tree's bindings/go/pkgconfig written by
// CMake). pkg-config's -I flags also reach SWIG, which reads include/kvc/kvc.h from there.

// #cgo pkg-config: kvc
import "C"
