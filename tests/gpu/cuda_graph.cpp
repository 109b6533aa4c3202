// See cuda_graph.hpp. Linked against the CUDA runtime libkvc links (cudart_static, or the emulator's
// runtime in a KVC_CUDA=EMULATE build).
#include "gpu/cuda_graph.hpp"

#include <cuda_runtime.h>

namespace kvc_gpu_test {

int begin_capture(void *stream) {
    return int(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeGlobal));
}

int end_capture(void *stream, void **out_exec) {
    *out_exec = nullptr;
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
    if (err != cudaSuccess) return int(err);
    cudaGraphExec_t exec = nullptr;
    err = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);  // the executable graph is independent of it
    if (err == cudaSuccess) *out_exec = exec;
    return int(err);
}

int graph_launch(void *exec, void *stream) {
    return int(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), static_cast<cudaStream_t>(stream)));
}

void graph_destroy(void *exec) {
    if (exec) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
}

const char *cuda_error_name(int err) { return cudaGetErrorName(cudaError_t(err)); }

}  // namespace kvc_gpu_test
