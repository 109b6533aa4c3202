package dev.kvc;

/**
 * The group of a model layer and the layer's index among that group's layers
 * ({@link Pool#layerGroup}, kvc_pool_layer_group).
 */
public record LayerGroup(int group, int layerInGroup) {}
