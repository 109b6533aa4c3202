package dev.kvc;

/**
 * What each way of preempting a sequence would cost: bytes a swap would move (a swap-in, for a
 * swapped-out sequence) and confirmed tokens a recomputation would prefill again.
 */
public record PreemptionCost(long swapBytes, long recomputeTokens) {}
