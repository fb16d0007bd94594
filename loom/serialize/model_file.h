// Model files: a Function's whole graph (every primitive with its op, attributes, inputs and
// outputs; every input, placeholder, parameter and constant with names, uids, shapes, dynamic
// axes and values) in the container of container.h. Loading re-creates each primitive through
// its op (which re-runs shape inference and must agree with the stored shapes), keeps names
// and uids, and gives bit-identical outputs. Nothing in a file is executed: ops are looked up
// by name in the registry (loom/ops/registry.h).
//
// These are free functions rather than Function members because loom/graph sits below
// loom/serialize (DESIGN.md §2): Function cannot call into this layer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/graph/function.h"
#include "loom/serialize/container.h"

namespace loom {

// Writes f's graph to path atomically (temporary file, fsync, rename, fsync of the folder).
// An IOError when the file cannot be written; a StateError when two variables of the graph
// share a uid (a file could not tell them apart).
void save_model(const Function& f, const std::string& path);
// Reads a model file. A DataError naming the file, what is wrong and where for a damaged,
// truncated, foreign or future-version file; an IOError when it cannot be read.
Function load_model(const std::string& path);

// The same in memory; name stands for the file in messages.
std::vector<uint8_t> save_model_to_bytes(const Function& f);
Function load_model_from_bytes(std::span<const uint8_t> bytes,
                               const std::string& name = "<memory>");

// The graph as a Dictionary (the payload of a model file's graph section; a checkpoint holds
// the same) and back; where names the source in messages.
Dictionary model_to_dictionary(const Function& f);
Function model_from_dictionary(const Dictionary& graph, const std::string& where);

// A container of the given kind holding f's metadata and graph sections: a model file, or
// the start of a checkpoint (which adds its training state). A checkpoint's graph is the
// training graph, whose first model_outputs outputs are the model's (0: all of them):
// load_model gives just those, the model a checkpoint deploys.
ContainerWriter model_container(const Function& f, ContentKind kind, size_t model_outputs = 0);

// The graph section of a parsed model or checkpoint file, loaded and validated. With a
// view_owner (the owner of the file's bytes), the parameters' and constants' values are views
// of the file (decode_dictionary_views: read them with memcpy only, never train the graph).
Function graph_of(const ContainerReader& file, std::shared_ptr<const void> view_owner = nullptr);

// Checks that saved (read from `file`) has current's structure: the same primitives in the
// same order, and parameters and constants of the same types and shapes, matched by position
// (the same program builds the same graph; uids may differ between processes). A StateError
// naming the file and the first difference otherwise.
void check_same_graph(const Function& saved, const Function& current, const std::string& file);
// Copies saved's parameter and constant values into current's (check_same_graph first).
void copy_leaf_values(const Function& saved, const Function& current);
// CNTK's Function::restore: f's parameters and constants set from the model file at path,
// which must hold the same graph.
void restore_model(const Function& f, const std::string& path);

// The graph dictionary's schema version this Loom writes and the newest it reads: 2 added
// blocks (as_block), and a graph without blocks is written as version 1, which older Looms
// read.
inline constexpr int64_t kGraphVersion = 2;

}  // namespace loom
