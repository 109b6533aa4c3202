package dev.kvc;

/**
 * One group of a pool as created (kvc_group_info; {@link Pool#groupInfo}).
 *
 * @param numGroups    groups of the pool (1 for a pool from {@link Pool#create})
 * @param kind         the group's kind
 * @param numLayers    layers of the group
 * @param numKvHeads   FULL / SLIDING; 0 for SSM
 * @param headDim      FULL / SLIDING; 0 for SSM
 * @param slidingWindow SLIDING: the window; 0 otherwise
 * @param stateBytes   SSM: one layer's state; 0 otherwise
 * @param groupBytes   bytes of a page this group uses (the rest is padding)
 * @param pageBytes    bytes of every page of the pool (the storage's block stride)
 * @param layerStride  bytes between two layers of this group inside a page
 */
public record GroupInfo(
        int numGroups,
        GroupKind kind,
        int numLayers,
        int numKvHeads,
        int headDim,
        int slidingWindow,
        long stateBytes,
        long groupBytes,
        long pageBytes,
        long layerStride) {}
