package kvc

import "kvc.dev/kvc/internal/raw"

// HeaderVersion is KVC_VERSION_NUMBER of the kvc.h this package was generated from.
var HeaderVersion = int(raw.KVC_VERSION_NUMBER)

// Version is the loaded library's version as major*10000 + minor*100 + patch (kvc_version).
// Compare it with HeaderVersion to detect a header/library mismatch.
func Version() int { return raw.Kvc_version() }

// VersionString is the loaded library's version as "major.minor.patch" (kvc_version_string).
func VersionString() string { return raw.Kvc_version_string() }

// CUDADeviceCount is the number of CUDA devices usable by the library: 0 without CUDA support,
// driver or GPU (kvc_cuda_device_count).
func CUDADeviceCount() (int, error) {
	var n [1]int32
	err := callC("CUDADeviceCount", func() raw.Enum_SS_kvc_status { return raw.Kvc_cuda_device_count(n[:]) })
	return int(n[0]), err
}
