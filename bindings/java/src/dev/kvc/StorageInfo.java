package dev.kvc;

/**
 * Where a pool's KV storage is and its byte strides (kvc_storage_info):
 * offset(block, layer, kv, head, token, d) = block*blockStride + layer*layerStride + kv*kvStride
 * + head*headStride + token*tokenStride + d*elemBytes.
 */
public record StorageInfo(
        Backend backend,
        DType kvDType,
        int elemBytes,
        int device,
        long baseAddress,
        long totalBytes,
        long blockStride,
        long layerStride,
        long kvStride,
        long headStride,
        long tokenStride) {}
