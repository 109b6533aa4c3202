// CUDA stream capture and graph replay for the GPU tests, which otherwise see no CUDA headers
// (cuda_graph.cpp is compiled into test_kernels_capi_cuda when libkvc has a CUDA backend, real or
// emulated: KVC_TEST_CUDA_GRAPHS). Each call returns the CUDA error code (0 = success).
#pragma once

namespace kvc_gpu_test {

// cudaStreamBeginCapture in global mode: the strictest one (allocation, synchronization and the
// legacy stream beside a blocking capturing stream are refused anywhere in the process).
int begin_capture(void *stream);
// cudaStreamEndCapture, then cudaGraphInstantiate; *out_exec receives the executable graph.
int end_capture(void *stream, void **out_exec);
int graph_launch(void *exec, void *stream);
void graph_destroy(void *exec);
const char *cuda_error_name(int err);

}  // namespace kvc_gpu_test
