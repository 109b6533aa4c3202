package dev.kvc;

/** A prefix lookup split by tier: leading cached tokens on the device, in host and on disk. */
public record TierHits(long device, long host, long disk) {}
