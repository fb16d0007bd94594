// CNTK's crop ops: cut the two trailing (spatial) axes of an image [..., height, width] to the
// extents of a referent's, as fully convolutional networks align an upsampled map with its
// input. One primitive, Crop(node_input, node_referent) with the offsets as attributes; the
// automatic forms compute the offsets when they are built, from the graph between the two
// inputs (CNTK's TransformerNode: OpDef::spatial_transform), so a saved model holds numbers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "loom/graph/function.h"
#include "loom/ops/op_schema.h"

namespace loom {

// node_input's window of node_referent's height and width whose top-left corner is (offset_y,
// offset_x); node_input's other axes and dynamic axes. The gradient flows to node_input (0
// outside the window); node_referent gives only its extents. ShapeError when the window does
// not fit or an input has fewer than two static axes.
Function crop_manual(const Variable& node_input, const Variable& node_referent, size_t offset_x,
                     size_t offset_y, const std::string& name = "");

// crop_manual at the offsets that align node_input with node_referent: the affine maps of the
// ops from their common ancestor (convolutions and poolings: stride and window centre;
// elementwise ops, dropout, batch normalization: the identity) composed, as CNTK computes them.
// ArgumentError naming the op when a path crosses an op without such a map, when the inputs
// have no common ancestor, or when the maps scale or put the referent outside node_input.
Function crop_automatic(const Variable& node_input, const Variable& node_referent,
                        const std::string& name = "");

// crop_automatic where node_input and node_referent descend from different inputs that are
// aligned (an image and its label map): ancestor_input (an ancestor of node_input) and
// ancestor_referent (of node_referent) count as one node.
Function crop_automatic_with_ancestors(const Variable& node_input, const Variable& node_referent,
                                       const Variable& ancestor_input,
                                       const Variable& ancestor_referent,
                                       const std::string& name = "");

// The schema of Crop (crop_manual's).
std::vector<OpSchema> crop_schemas();

}  // namespace loom
