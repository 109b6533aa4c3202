package dev.kvc;

/**
 * The answer of {@link Pool#admit}: the watermark verdict and, when it is {@link AllocVerdict#OK}
 * (and only then was the sequence created), the number of prompt tokens served from the prefix
 * cache; 0 otherwise.
 */
public record Admission(AllocVerdict verdict, long cachedTokens) {}
