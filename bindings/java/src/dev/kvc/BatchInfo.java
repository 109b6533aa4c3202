package dev.kvc;

/**
 * Sizes of a batch's last build and the backend-memory addresses of its arrays (kvc_batch_info),
 * valid until the batch is closed.
 */
public record BatchInfo(
        int numSeqs,
        long numTokens,
        int maxBlocksPerSeq,
        int maxQLen,
        long maxSeqLen,
        long numIndices,
        boolean isDecode,
        int rowsUploaded,
        long blockTables,
        long seqLens,
        long queryStartLoc,
        long slotMapping,
        long kvIndptr,
        long kvIndices,
        long kvLastPageLen) {

    static BatchInfo fromNative(kvc_batch_info i) {
        return new BatchInfo(i.getNum_seqs(), i.getNum_tokens(), i.getMax_blocks_per_seq(), i.getMax_q_len(),
                i.getMax_seq_len(), i.getNum_indices(), i.getIs_decode() != 0, i.getRows_uploaded(),
                i.getBlock_tables(), i.getSeq_lens(), i.getQuery_start_loc(), i.getSlot_mapping(),
                i.getKv_indptr(), i.getKv_indices(), i.getKv_last_page_len());
    }
}
